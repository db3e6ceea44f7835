// Planning is the registry's build phase: every node's resolution is recorded with
// its role, the registry is sealed, and strict mode refuses a plan that leaves the
// selected accelerator.
#include <gtest/gtest.h>

#include "plan/test_kernels.h"
#include "switchyard/bucket_plan.h"
#include "switchyard/dispatch.h"
#include "switchyard/example_graphs.h"
#include "switchyard/kernel_mask.h"
#include "switchyard/plan.h"

namespace switchyard {
namespace {

using testing::finalize;
using testing::ramp;
using testing::register_basic;

Graph ffn_up_graph() {
  GraphBuilder b;
  ValueId x = b.input("x", DType::kF32, {4, 8});
  ValueId w = b.constant_f32("w", {16, 8}, ramp(128, 3));
  b.output(b.relu(b.matmul(x, w, "fc", "ffn_up"), "act"));
  return std::move(b).build().value();
}

// cpu serves every op; the accelerator serves everything but matmul, as a
// backend with a missing quantized kernel would. The relu after the matmul then
// also runs on the cpu, where its input already is: a choice by cost, recorded
// as by design, not as a slow path.
TableSnapshot accelerator_without_matmul() {
  KernelBindingTable t;
  register_basic(t, BackendId::kCuda, "cuda");
  register_basic(t, BackendId::kCpu, "cpu");
  t.remove_if([](const KernelBindingTable::Slot& s, const BindingEntry&) {
    return s.backend == BackendId::kCuda && s.key == BindingKey(OpKind::kMatmul);
  });
  return finalize(std::move(t));
}

PlanOptions accelerator_first(Registry& registry) {
  PlanOptions options;
  options.policy.preferred = {BackendId::kCuda};
  options.policy.fallbacks = {BackendId::kCpu};
  options.registry = &registry;
  return options;
}

TEST(PlannerRegistry, RecordsEveryNodeWithItsRoleAndSeals) {
  KernelBindingTable t;
  register_basic(t, BackendId::kCpu, "cpu");
  Registry registry({.sink = [](std::string_view) {}});
  PlanOptions options;
  options.registry = &registry;
  Result<ExecutionPlan> plan = plan_graph(ffn_up_graph(), finalize(std::move(t)), options);
  ASSERT_TRUE(plan.is_ok()) << plan.status().to_string();
  EXPECT_TRUE(registry.is_sealed());
  const std::vector<RegistryEntry> rows = registry.entries();
  ASSERT_EQ(rows.size(), 2u);
  bool saw_role = false, saw_name = false;
  for (const RegistryEntry& row : rows) {
    EXPECT_TRUE(row.hit) << row.to_string();
    EXPECT_EQ(row.backend, BackendId::kCpu);
    EXPECT_EQ(row.phase, Phase::kBuild);
    saw_role |= row.role == "ffn_up" && row.op == BindingKey(OpKind::kMatmul);
    saw_name |= row.role == "act";  // no role: the node's name stands in
  }
  EXPECT_TRUE(saw_role);
  EXPECT_TRUE(saw_name);
}

TEST(PlannerRegistry, FallingOffTheAcceleratorIsAViolationThatStrictModeRefuses) {
  Registry lax({.sink = [](std::string_view) {}});
  Result<ExecutionPlan> plan =
      plan_graph(ffn_up_graph(), accelerator_without_matmul(), accelerator_first(lax));
  ASSERT_TRUE(plan.is_ok()) << plan.status().to_string();
  const SealReport report = lax.seal();
  ASSERT_EQ(report.misses.size(), 2u);
  ASSERT_EQ(report.violations.size(), 1u);
  EXPECT_EQ(report.violations[0].backend, BackendId::kCuda);
  EXPECT_EQ(report.violations[0].role, "ffn_up");
  EXPECT_EQ(report.violations[0].fallback, "matmul_f32__cpu");

  Registry strict({.strict = StrictPolicy::all(), .sink = [](std::string_view) {}});
  Result<ExecutionPlan> refused =
      plan_graph(ffn_up_graph(), accelerator_without_matmul(), accelerator_first(strict));
  ASSERT_FALSE(refused.is_ok());
  EXPECT_EQ(refused.status().code(), StatusCode::kFailedPrecondition);
  const auto* failure = refused.status().payload<StrictKernelFailure>();
  ASSERT_NE(failure, nullptr);
  ASSERT_EQ(failure->report.strict_violations().size(), 1u);
  EXPECT_EQ(failure->report.strict_violations()[0].role, "ffn_up");

  // A strict list that covers only attention lets the matmul fallback through.
  Registry attention_only(
      {.strict = StrictPolicy::only({OpFamily::kAttention}), .sink = [](std::string_view) {}});
  EXPECT_TRUE(
      plan_graph(ffn_up_graph(), accelerator_without_matmul(), accelerator_first(attention_only))
          .is_ok());
}

TEST(PlannerRegistry, MaskingAFusedKernelChangesThePlanAndUnmaskingRestoresIt) {
  Result<Graph> mlp = mlp_graph(16, 32);
  ASSERT_TRUE(mlp.is_ok());
  PlanOptions options;
  options.buckets = example_buckets();
  options.record_in_registry = false;
  Result<ExecutionPlan> fused = plan_graph(*mlp, current_table(), options);
  ASSERT_TRUE(fused.is_ok()) << fused.status().to_string();
  ASSERT_FALSE(fused->report().fusions.empty()) << "the CPU table serves linear";

  Result<KernelMask> mask = KernelMask::parse("cpu:linear:*");
  ASSERT_TRUE(mask.is_ok());
  ASSERT_TRUE(set_kernel_mask(*mask).is_ok());
  Result<ExecutionPlan> decomposed = plan_graph(*mlp, current_table(), options);
  ASSERT_TRUE(clear_kernel_mask().is_ok());
  ASSERT_TRUE(decomposed.is_ok()) << decomposed.status().to_string();
  EXPECT_TRUE(decomposed->report().fusions.empty());
  EXPECT_GT(decomposed->report().buckets[0].nodes.size(), fused->report().buckets[0].nodes.size());

  Result<ExecutionPlan> restored = plan_graph(*mlp, current_table(), options);
  ASSERT_TRUE(restored.is_ok());
  EXPECT_EQ(restored->report().fusions.size(), fused->report().fusions.size());
}

TEST(PlannerRegistry, MaskingTheOnlyKernelFailsPlanningAndTheRegistryNamesIt) {
  Result<KernelMask> mask = KernelMask::parse("cpu:relu:*");
  ASSERT_TRUE(mask.is_ok());
  ASSERT_TRUE(set_kernel_mask(*mask).is_ok());
  Registry registry({.sink = [](std::string_view) {}});
  PlanOptions options;
  options.registry = &registry;
  Result<ExecutionPlan> plan = plan_graph(ffn_up_graph(), current_table(), options);
  ASSERT_TRUE(clear_kernel_mask().is_ok());
  ASSERT_FALSE(plan.is_ok());
  EXPECT_EQ(plan.status().code(), StatusCode::kNotFound);
  const SealReport report = registry.seal();
  ASSERT_EQ(report.misses.size(), 1u);
  EXPECT_EQ(report.misses[0].role, "act");
  EXPECT_EQ(report.misses[0].fallback, "no kernel");
}

}  // namespace
}  // namespace switchyard

namespace switchyard {
namespace {

// Note [Run-phase lookups]: a bucket planned at run time (sizes outside every
// planned bucket) goes to the registry's run phase. A node that then falls off the
// selected backend is a run-phase slow-path row named by role, on the host as on
// an accelerator; its shape was predicted at load, so it is no surprise.
TEST(PlannerRegistry, AnUnplannedBucketThatLeavesTheSelectedBackendIsARunPhaseMiss) {
  for (const BackendId selected : {BackendId::kCpu, BackendId::kCuda}) {
    SCOPED_TRACE(name(selected));
    const BackendId other = selected == BackendId::kCpu ? BackendId::kCuda : BackendId::kCpu;
    KernelBindingTable t;
    // The selected backend's only matmul takes one row.
    t.register_kernel(OpKind::kMatmul, testing::f32s(3), selected, &testing::matmul_variant<7>,
                      {.name = "matmul_one_row",
                       .precision = testing::audited(),
                       .admits = +[](std::span<const Shape> s) { return s[0].outer() == 1; }});
    register_basic(t, selected, std::string(name(selected)));
    t.remove_if([&](const KernelBindingTable::Slot& slot, const BindingEntry& e) {
      return slot.backend == selected && slot.key == BindingKey(OpKind::kMatmul) &&
             e.name != "matmul_one_row";
    });
    register_basic(t, other, std::string(name(other)));
    const TableSnapshot table = finalize(std::move(t));

    GraphBuilder b;
    const std::int64_t tokens = b.symbol("tokens");
    ValueId x = b.input("x", DType::kF32, {tokens, 8});
    ValueId w = b.constant_f32("w", {16, 8}, ramp(128, 3));
    b.output(b.relu(b.matmul(x, w, "fc", "ffn_up"), "act"));
    const Graph g = std::move(b).build().value();

    Registry registry({.sink = [](std::string_view) {}});
    PlanOptions options;
    options.policy.preferred = {selected};
    options.policy.fallbacks = {other};
    options.registry = &registry;
    options.buckets = {{"decode", {{"tokens", 1, 1}}}};
    Result<ExecutionPlan> plan = plan_graph(g, table, options);
    ASSERT_TRUE(plan.is_ok()) << plan.status().to_string();
    EXPECT_TRUE(registry.is_sealed());
    EXPECT_TRUE(registry.surprises().empty());

    const std::int64_t three[] = {3};
    Result<std::unique_ptr<BucketPlan>> bucket = plan_bucket_for_sizes(*plan, three);
    ASSERT_TRUE(bucket.is_ok()) << bucket.status().to_string();
    auto run_rows = [&] {
      std::vector<RegistryEntry> rows;
      for (const RegistryEntry& e : registry.entries()) {
        // (The relu after it follows it off the backend by cost: a by-design row.)
        if (e.phase == Phase::kRun && e.is_slow_path()) rows.push_back(e);
      }
      return rows;
    };
    std::vector<RegistryEntry> rows = run_rows();
    ASSERT_EQ(rows.size(), 1u);
    EXPECT_EQ(rows[0].backend, selected);
    EXPECT_EQ(rows[0].role, "ffn_up");
    EXPECT_EQ(rows[0].fallback, std::string("matmul_f32__") + std::string(name(other)));
    EXPECT_TRUE(registry.surprises().empty()) << "the load predicted (backend, matmul, f32)";
    // The same sizes again count on the same row.
    ASSERT_TRUE(plan_bucket_for_sizes(*plan, three).is_ok());
    rows = run_rows();
    ASSERT_EQ(rows.size(), 1u);
    EXPECT_EQ(rows[0].count, 2u);
  }
}

TEST(PlannerShapeAdmission, ASiblingThatDoesNotAdmitTheShapeIsRejectedWhateverItsCost) {
  KernelBindingTable t;
  // A matvec-like sibling, far cheaper, registered first, admitting one row only.
  t.register_kernel(OpKind::kMatmul, testing::f32s(3), BackendId::kCpu, &testing::matmul_variant<7>,
                    {.name = "matmul_one_row",
                     .precision = testing::audited(),
                     .cost =
                         +[](const CostInputs&) {
                           return CostEstimate{1, 1, 0, true};
                         },
                     .admits = +[](std::span<const Shape> s) { return s[0].outer() == 1; }});
  testing::register_basic(t, BackendId::kCpu, "cpu");
  const TableSnapshot table = testing::finalize(std::move(t));
  PlanOptions options;
  options.record_in_registry = false;
  for (std::int64_t rows : {1, 4}) {
    GraphBuilder b;
    ValueId x = b.input("x", DType::kF32, {rows, 8});
    ValueId w = b.constant_f32("w", {16, 8}, testing::ramp(128, 3));
    b.output(b.matmul(x, w, "fc"));
    Result<ExecutionPlan> plan = plan_graph(std::move(b).build().value(), table, options);
    ASSERT_TRUE(plan.is_ok()) << plan.status().to_string();
    const NodeReport& n = plan->report().buckets[0].nodes[0];
    if (rows == 1) {
      EXPECT_EQ(n.chosen.kernel, "matmul_one_row");
    } else {
      EXPECT_EQ(n.chosen.kernel, "matmul_f32__cpu");
      ASSERT_FALSE(n.rejected.empty());
      EXPECT_EQ(n.rejected[0].kernel, "matmul_one_row");
      EXPECT_EQ(n.rejected[0].reason, RejectReason::kShapeNotAdmitted);
    }
  }
}

}  // namespace
}  // namespace switchyard
