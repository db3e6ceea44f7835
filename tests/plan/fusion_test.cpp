#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "plan/test_kernels.h"
#include "switchyard/plan.h"

namespace switchyard {
namespace {

using namespace switchyard::testing;
using ::testing::ElementsAre;
using ::testing::HasSubstr;

// x [4, 8] -> linear(8 -> 6) -> ffn(6, 12) -> rms_norm * w
Graph fusible_graph() {
  GraphBuilder b;
  ValueId x = b.input("x", DType::kF32, {4, 8});
  ValueId w = b.constant_f32("w", {6, 8}, ramp(48, 1));
  ValueId bias = b.constant_f32("bias", {6}, ramp(6, 2));
  ValueId h = b.add(b.matmul(x, w, "fc"), b.broadcast(bias, {4, 6}), "fc_bias");
  ValueId wg = b.constant_f32("wg", {12, 6}, ramp(72, 3));
  ValueId wu = b.constant_f32("wu", {12, 6}, ramp(72, 4));
  ValueId wd = b.constant_f32("wd", {6, 12}, ramp(72, 5));
  ValueId gate = b.matmul(h, wg, "gate");
  ValueId up = b.matmul(h, wu, "up");
  ValueId act = b.mul(b.silu(gate, "gate_act"), up, "gated");
  ValueId down = b.matmul(act, wd, "down", "ffn_down");
  ValueId nw = b.constant_f32("norm_w", {6}, ramp(6, 6));
  ValueId y = b.mul(b.broadcast(nw, {4, 6}), b.rms_norm(down, 1e-5f, "norm"), "norm_w_mul");
  b.output(y);
  return std::move(b).build().value();
}

TEST(Fusion, RewritesPatternsWhenFusedKernelsExist) {
  KernelBindingTable t;
  register_basic(t, BackendId::kCpu, "test");
  register_fused(t, BackendId::kCpu, "test");
  Result<ExecutionPlan> plan = plan_graph(fusible_graph(), finalize(std::move(t)));
  ASSERT_TRUE(plan.is_ok()) << plan.status().to_string();
  const auto& fusions = plan->report().fusions;
  ASSERT_EQ(fusions.size(), 3u);
  EXPECT_EQ(fusions[0].rule, "ffn_swiglu");
  EXPECT_EQ(fusions[0].fused_node, "down");
  EXPECT_THAT(fusions[0].replaced, ElementsAre("gate", "up", "gate_act", "gated", "down"));
  EXPECT_EQ(fusions[1].rule, "linear");
  EXPECT_THAT(fusions[1].replaced, ElementsAre("fc", "fc_bias"));
  EXPECT_EQ(fusions[2].rule, "rms_norm_mul");  // the weight on the left still matches
  const Graph& g = plan->graph();
  ASSERT_EQ(g.nodes().size(), 3u);
  EXPECT_EQ(g.node(0).op, OpKind::kLinear);
  EXPECT_EQ(g.node(1).op, OpKind::kFfnSwiglu);
  EXPECT_EQ(g.node(1).role, "ffn_down");
  EXPECT_EQ(g.node(2).op, OpKind::kRmsNormMul);
  EXPECT_FLOAT_EQ(g.node(2).params.eps, 1e-5f);
  // The fused linear reads the [6] bias, not its broadcast view.
  EXPECT_EQ(g.value(g.node(0).inputs[2]).shape, (Shape{6}));
}

TEST(Fusion, SubgraphStaysDecomposedWithoutAFusedKernel) {
  KernelBindingTable t;
  register_basic(t, BackendId::kCpu, "test");
  Result<ExecutionPlan> plan = plan_graph(fusible_graph(), finalize(std::move(t)));
  ASSERT_TRUE(plan.is_ok()) << plan.status().to_string();
  EXPECT_TRUE(plan->report().fusions.empty());
  EXPECT_EQ(plan->graph().nodes().size(), 9u);
  ASSERT_EQ(plan->report().skipped_fusions.size(), 3u);
  EXPECT_THAT(plan->report().skipped_fusions[0].reason, HasSubstr("no candidate backend binds"));
}

TEST(Fusion, FusedKernelOnlyOnAnotherBackendDoesNotFuse) {
  KernelBindingTable t;
  register_basic(t, BackendId::kCpu, "cpu");
  register_fused(t, BackendId::kCuda, "cuda");
  // cuda is not a candidate: the fused kernels there do not count.
  Result<ExecutionPlan> plan = plan_graph(fusible_graph(), finalize(std::move(t)));
  ASSERT_TRUE(plan.is_ok());
  EXPECT_TRUE(plan->report().fusions.empty());
}

TEST(Fusion, IntermediateUsedElsewhereBlocksFusion) {
  KernelBindingTable t;
  register_basic(t, BackendId::kCpu, "test");
  register_fused(t, BackendId::kCpu, "test");
  GraphBuilder b;
  ValueId x = b.input("x", DType::kF32, {2, 4});
  ValueId w = b.constant_f32("w", {4, 4}, ramp(16, 1));
  ValueId bias = b.constant_f32("bias", {4}, ramp(4, 2));
  ValueId h = b.matmul(x, w, "fc");
  ValueId y = b.add(h, b.broadcast(bias, {2, 4}), "fc_bias");
  b.output(y);
  b.output(b.relu(h, "also_reads_h"));
  Result<ExecutionPlan> plan = plan_graph(std::move(b).build().value(), finalize(std::move(t)));
  ASSERT_TRUE(plan.is_ok());
  EXPECT_TRUE(plan->report().fusions.empty());
  ASSERT_EQ(plan->report().skipped_fusions.size(), 1u);
  EXPECT_THAT(plan->report().skipped_fusions[0].reason, HasSubstr("outside the pattern"));
}

// x -> fc (matmul) -> fc_bias (+ broadcast bias): the linear pattern; then an
// unrelated relu "other", added last.
struct LinearAndOther {
  GraphBuilder b;
  ValueId x = b.input("x", DType::kF32, {2, 4});
  ValueId fc = b.matmul(x, b.constant_f32("w", {4, 4}, ramp(16, 1)), "fc");
  ValueId fc_bias =
      b.add(fc, b.broadcast(b.constant_f32("bias", {4}, ramp(4, 2)), {2, 4}), "fc_bias");
  ValueId other = b.relu(x, "other");
  LinearAndOther() {
    b.output(fc_bias);
    b.output(other);
  }
};

TableSnapshot fusing_table() {
  KernelBindingTable t;
  register_basic(t, BackendId::kCpu, "test");
  register_fused(t, BackendId::kCpu, "test");
  return finalize(std::move(t));
}

// Node names in the order bucket 0 runs them (the report follows the steps).
std::vector<std::string> run_order(const ExecutionPlan& plan) {
  std::vector<std::string> names;
  for (const NodeReport& n : plan.report().buckets[0].nodes) names.push_back(n.name);
  return names;
}

TEST(Fusion, ControlEdgeIntoARegionMovesToTheFusedNode) {
  LinearAndOther plain;
  Result<ExecutionPlan> unordered = plan_graph(std::move(plain.b).build().value(), fusing_table());
  ASSERT_TRUE(unordered.is_ok()) << unordered.status().to_string();
  EXPECT_THAT(run_order(*unordered), ElementsAre("fc_bias", "other"));

  // The inner matmul waits for "other": after fusion the fused node does.
  LinearAndOther f;
  f.b.run_after(f.fc, f.other);
  Result<ExecutionPlan> plan = plan_graph(std::move(f.b).build().value(), fusing_table());
  ASSERT_TRUE(plan.is_ok()) << plan.status().to_string();
  ASSERT_EQ(plan->report().fusions.size(), 1u);
  EXPECT_EQ(plan->report().fusions[0].rule, "linear");
  EXPECT_THAT(run_order(*plan), ElementsAre("other", "fc_bias"));
  const Graph& g = plan->graph();
  const Node& fused = g.node(g.find_node("fc_bias"));
  EXPECT_EQ(fused.op, OpKind::kLinear);
  ASSERT_EQ(fused.after.size(), 1u);
  EXPECT_EQ(g.value(fused.after[0]).name, "other");
}

TEST(Fusion, ControlEdgeInsideARegionVanishesWithIt) {
  LinearAndOther f;
  f.b.run_after(f.fc_bias, f.fc);  // already implied by the data edge
  Result<ExecutionPlan> plan = plan_graph(std::move(f.b).build().value(), fusing_table());
  ASSERT_TRUE(plan.is_ok()) << plan.status().to_string();
  ASSERT_EQ(plan->report().fusions.size(), 1u);
  const Graph& g = plan->graph();
  EXPECT_TRUE(g.node(g.find_node("fc_bias")).after.empty());
}

TEST(Fusion, ControlEdgeOutOfAnInnerNodeBlocksFusion) {
  LinearAndOther f;
  f.b.run_after(f.other, f.fc);  // "other" must follow the inner matmul
  Result<ExecutionPlan> plan = plan_graph(std::move(f.b).build().value(), fusing_table());
  ASSERT_TRUE(plan.is_ok()) << plan.status().to_string();
  EXPECT_TRUE(plan->report().fusions.empty());
  ASSERT_EQ(plan->report().skipped_fusions.size(), 1u);
  EXPECT_THAT(plan->report().skipped_fusions[0].reason, HasSubstr("inner node 'fc'"));
  EXPECT_THAT(plan->report().skipped_fusions[0].reason, HasSubstr("control edge"));
  EXPECT_THAT(run_order(*plan), ElementsAre("fc", "fc_bias", "other"));
}

TEST(Fusion, ControlEdgeOutOfTheOutputNodeStaysOnTheFusedNode) {
  // "other" follows the region's output node, whose value the fused node keeps.
  LinearAndOther f;
  f.b.run_after(f.other, f.fc_bias);
  Result<ExecutionPlan> plan = plan_graph(std::move(f.b).build().value(), fusing_table());
  ASSERT_TRUE(plan.is_ok()) << plan.status().to_string();
  ASSERT_EQ(plan->report().fusions.size(), 1u);
  EXPECT_THAT(run_order(*plan), ElementsAre("fc_bias", "other"));
  const Graph& g = plan->graph();
  const Node& other = g.node(g.find_node("other"));
  ASSERT_EQ(other.after.size(), 1u);
  EXPECT_EQ(g.value(other.after[0]).producer, g.find_node("fc_bias"));
}

TEST(Fusion, FusionCanBeTurnedOff) {
  KernelBindingTable t;
  register_basic(t, BackendId::kCpu, "test");
  register_fused(t, BackendId::kCpu, "test");
  PlanOptions options;
  options.enable_fusion = false;
  Result<ExecutionPlan> plan = plan_graph(fusible_graph(), finalize(std::move(t)), options);
  ASSERT_TRUE(plan.is_ok());
  EXPECT_EQ(plan->graph().nodes().size(), 9u);
}

Status add_relu_fused(const KernelCall& call) {
  SWITCHYARD_RETURN_IF_ERROR(need_contiguous_f32(call, 2));
  float* out = call.outputs[0].first_as<float>();
  for (std::int64_t i = 0; i < call.outputs[0].numel(); ++i) {
    out[i] = relu_f(at(call.inputs[0], i) + at(call.inputs[1], i));
  }
  return Status::ok();
}

TEST(Fusion, RuntimeFusedRecipesGoThroughTheirIds) {
  KernelBindingTable t;
  register_basic(t, BackendId::kCpu, "test");
  FusedRegion region{2, {{OpKind::kAdd, {-1, -2}}, {OpKind::kRelu, {0}}}, {1}};
  Result<FusedOpId> id = t.register_runtime_fused("add_relu", region);
  ASSERT_TRUE(id.is_ok());
  // Registering the same structure again gives the same id (dedup).
  EXPECT_EQ(t.register_runtime_fused("add_relu_again", region)->value, id->value);
  t.register_kernel(*id, f32s(3), BackendId::kCpu, &add_relu_fused,
                    opts("add_relu_f32__cpu_test", OpKind::kRelu));
  GraphBuilder b;
  ValueId x = b.input("x", DType::kF32, {2, 4});
  ValueId y = b.input("y", DType::kF32, {2, 4});
  b.output(b.relu(b.add(x, y, "sum"), "act"));
  Result<ExecutionPlan> plan = plan_graph(std::move(b).build().value(), finalize(std::move(t)));
  ASSERT_TRUE(plan.is_ok()) << plan.status().to_string();
  ASSERT_EQ(plan->report().fusions.size(), 1u);
  EXPECT_EQ(plan->report().fusions[0].rule, "runtime:add_relu");
  ASSERT_EQ(plan->graph().nodes().size(), 1u);
  EXPECT_EQ(plan->graph().node(0).fused_key, id->value);
  const NodeReport& n = plan->report().buckets[0].nodes[0];
  EXPECT_EQ(n.op, "fused:add_relu");
  EXPECT_EQ(n.chosen.kernel, "add_relu_f32__cpu_test");
}

TEST(Fusion, RuntimeRecipeBoundAtOtherDtypesIsSkippedWithAReason) {
  KernelBindingTable t;
  register_basic(t, BackendId::kCpu, "test");
  FusedRegion region{2, {{OpKind::kAdd, {-1, -2}}, {OpKind::kRelu, {0}}}, {1}};
  FusedOpId id = t.register_runtime_fused("add_relu", region).value();
  t.register_kernel(id, {DType::kF16, DType::kF16, DType::kF16}, BackendId::kCpu, &add_relu_fused,
                    opts("add_relu_f16__cpu_test", OpKind::kRelu));
  GraphBuilder b;
  ValueId x = b.input("x", DType::kF32, {4});
  ValueId y = b.input("y", DType::kF32, {4});
  b.output(b.relu(b.add(x, y, "sum"), "act"));
  Result<ExecutionPlan> plan = plan_graph(std::move(b).build().value(), finalize(std::move(t)));
  ASSERT_TRUE(plan.is_ok());
  EXPECT_TRUE(plan->report().fusions.empty());
  ASSERT_EQ(plan->report().skipped_fusions.size(), 1u);
  EXPECT_THAT(plan->report().skipped_fusions[0].reason,
              HasSubstr("binds it only at (f16,f16,f16)"));
}

}  // namespace
}  // namespace switchyard
