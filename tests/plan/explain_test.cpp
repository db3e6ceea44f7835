#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "backends/cpu/elementwise/elementwise.h"
#include "backends/cpu/gemm/dense_reference.h"
#include "plan/test_kernels.h"
#include "switchyard/example_graphs.h"
#include "switchyard/plan.h"

namespace switchyard {
namespace {

using namespace switchyard::testing;
using ::testing::HasSubstr;
using ::testing::Not;

Status rope_stub(const KernelCall&) { return Status::ok(); }
Status attention_stub(const KernelCall&) { return Status::ok(); }

// Every op of the example transformer block, fused forms included, on the CPU.
TableSnapshot block_table(bool fused) {
  KernelBindingTable t;
  register_basic(t, BackendId::kCpu, "test");
  if (fused) register_fused(t, BackendId::kCpu, "test");
  t.register_kernel(OpKind::kRope, {DType::kF32, DType::kI32, DType::kF32}, BackendId::kCpu,
                    &rope_stub, opts("rope_f32__cpu_test", OpKind::kRope));
  t.register_kernel(OpKind::kAttention, f32s(4), BackendId::kCpu, &attention_stub,
                    opts("attention_f32__cpu_test", OpKind::kAttention));
  return finalize(std::move(t));
}

TEST(ExampleGraphs, TransformerBlockPlansWithFusions) {
  Result<Graph> block = transformer_block_graph({});
  ASSERT_TRUE(block.is_ok()) << block.status().to_string();
  EXPECT_EQ(block->nodes().size(), 18u);
  PlanOptions options;
  options.buckets = example_buckets(128);
  Result<ExecutionPlan> plan = plan_graph(*block, block_table(true), options);
  ASSERT_TRUE(plan.is_ok()) << plan.status().to_string();
  // Two rms_norm_mul and one ffn_swiglu: 18 - 2 - 4 = 12 nodes.
  EXPECT_EQ(plan->report().fusions.size(), 3u);
  EXPECT_EQ(plan->graph().nodes().size(), 12u);
  ASSERT_EQ(plan->report().buckets.size(), 2u);
  EXPECT_EQ(plan->report().buckets[1].sizes[0].second, 128);
  EXPECT_TRUE(plan->report().violations.empty());
  EXPECT_FALSE(transformer_block_graph({.model_dim = 60, .heads = 8}).is_ok());
}

TEST(ExampleGraphs, MlpPlansOnTheBuiltinTable) {
  Result<Graph> mlp = mlp_graph(16, 32);
  ASSERT_TRUE(mlp.is_ok());
  PlanOptions options;
  options.buckets = example_buckets();
  Result<ExecutionPlan> plan = plan_graph(*mlp, current_table(), options);
  ASSERT_TRUE(plan.is_ok()) << plan.status().to_string();
  // Five nodes, less one for each matmul + add that fused into a linear kernel.
  EXPECT_EQ(plan->report().buckets[0].nodes.size(), 5u - plan->report().fusions.size());
}

TEST(Explain, TextShowsChoicesRejectionsCastsAndFusions) {
  KernelBindingTable t;
  register_basic(t, BackendId::kCpu, "test");
  register_fused(t, BackendId::kCpu, "test");
  t.register_kernel(OpKind::kMatmul, f32s(3), BackendId::kCpu, &matmul_variant<1>,
                    opts("matmul_unaudited", OpKind::kMatmul, {}, PrecisionGuarantee{}));
  t.register_kernel(OpKind::kCast, {DType::kBF16, DType::kF32}, BackendId::kCpu,
                    cpu::cast_kernel(DType::kBF16, DType::kF32, cpu::Variant::kRef),
                    opts("cast_bf16_f32", OpKind::kCast));
  GraphBuilder b;
  ValueId x = b.input("x", DType::kF32, {2, 8});
  ValueId w = b.constant_f32("w", {4, 8}, ramp(32, 1));
  ValueId bias = b.constant_f32("bias", {4}, ramp(4, 2));
  ValueId lin = b.add(b.matmul(x, w, "fc"), b.broadcast(bias, {2, 4}), "fc_bias");
  ValueId other = b.input("other", DType::kBF16, {2, 8});
  ValueId m = b.matmul(b.relu(b.cast(other, DType::kF32, "widen"), "act"), w, "proj");
  b.require_precision(m, PrecisionFloor::relative(1e-3));
  b.output(lin);
  b.output(m);
  Graph g = std::move(b).build().value();
  Result<ExecutionPlan> plan = plan_graph(g, finalize(std::move(t)));
  ASSERT_TRUE(plan.is_ok()) << plan.status().to_string();
  const std::string text = explain_text(plan->report());
  EXPECT_THAT(text, HasSubstr("linear -> node 'fc_bias' (replaces fc, fc_bias)"));
  EXPECT_THAT(text, HasSubstr("chosen     linear_f32__test [test] on cpu"));
  EXPECT_THAT(text, HasSubstr("floor=rel<=0.001"));
  EXPECT_THAT(text, HasSubstr("rejected   matmul_unaudited on cpu: precision_unaudited"));
  EXPECT_THAT(text, HasSubstr("precision bounded bit-stable"));
  const std::string summary = explain_summary(plan->report());
  EXPECT_THAT(summary, HasSubstr("1 fusion(s), 0 cast(s)"));
  EXPECT_THAT(summary, HasSubstr("cpu"));
  EXPECT_THAT(summary, HasSubstr("no violations"));
}

TEST(Explain, RunnersUpAndFailuresAreListed) {
  KernelBindingTable t;
  register_basic(t, BackendId::kCpu, "test");
  t.register_kernel(OpKind::kMatmul, f32s(3), BackendId::kCpu, &matmul_variant<2>,
                    opts("matmul_second", OpKind::kMatmul));
  GraphBuilder b;
  ValueId x = b.input("x", DType::kF32, {2, 8});
  ValueId w = b.constant_f32("w", {4, 8}, ramp(32, 1));
  b.output(b.op(OpKind::kTanh, {b.matmul(x, w, "fc")}, "squash"));
  Result<ExecutionPlan> plan = plan_graph(std::move(b).build().value(), finalize(std::move(t)));
  ASSERT_FALSE(plan.is_ok());
  const PlanReport& report = plan.status().payload<PlanFailure>()->report;
  const std::string text = explain_text(report);
  EXPECT_THAT(text, HasSubstr("runner-up  matmul_second [test] on cpu, sibling 1"));
  EXPECT_THAT(text, HasSubstr("NO ROUTE"));
  EXPECT_THAT(text, HasSubstr("no kernel for tanh(f32,f32)@cpu"));
  EXPECT_THAT(explain_summary(report), HasSubstr("1 violation(s)"));
  EXPECT_THAT(explain_summary(report), Not(HasSubstr("no violations")));
}

}  // namespace
}  // namespace switchyard
