// Routing regret: the chosen kernel is judged against the fastest sibling of its
// node by measurement, a profile that measured the slow sibling steers the plan
// away from it and the second plan's judgement reuses the first's timings, and a
// sibling that fails while timed is a clear error.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <memory>
#include <string>
#include <vector>

#include "plan/test_kernels.h"
#include "switchyard/calibration.h"
#include "switchyard/graph.h"
#include "switchyard/plan.h"
#include "switchyard/regret.h"

namespace switchyard {
namespace {

using namespace switchyard::testing;
using ::testing::HasSubstr;

// add, after spinning for 200 us: a sibling several times slower than the plain one
// at any size the test uses.
Status slow_add(const KernelCall& call) {
  const auto until = std::chrono::steady_clock::now() + std::chrono::microseconds(200);
  while (std::chrono::steady_clock::now() < until) {
  }
  return binary_kernel<0>(call);
}

// The slow sibling first and modelled at a tenth of the plain one's cost, so the
// modelled plan takes it; `failing` replaces the plain one with a kernel that
// always fails.
TableSnapshot add_table(bool failing) {
  KernelBindingTable t;
  KernelOptions slow = opts("add_f32__cpu_slow", OpKind::kAdd);
  slow.cost = [](const CostInputs& in) {
    CostEstimate e = default_cost_for(OpKind::kAdd)(in);
    e.bytes /= 10;
    return e;
  };
  t.register_kernel(OpKind::kAdd, f32s(3), BackendId::kCpu, &slow_add, std::move(slow));
  t.register_kernel(OpKind::kAdd, f32s(3), BackendId::kCpu,
                    failing ? &failing_kernel : &binary_kernel<0>,
                    opts("add_f32__cpu_plain", OpKind::kAdd));
  return finalize(std::move(t));
}

Graph add_graph() {
  GraphBuilder b;
  const std::int64_t n = b.symbol("n");
  ValueId x = b.input("x", DType::kF32, {n, 64});
  ValueId y = b.input("y", DType::kF32, {n, 64});
  b.output(b.add(x, y, "sum"));
  return std::move(b).build().value();
}

PlanOptions two_buckets() {
  PlanOptions options;
  options.buckets = {{"one", {{"n", 1, 1}}}, {"many", {{"n", 2, 16}}}};
  options.record_in_registry = false;
  return options;
}

TEST(Regret, TheChosenKernelIsJudgedAgainstTheFastestSibling) {
  Result<ExecutionPlan> plan = plan_graph(add_graph(), add_table(false), two_buckets());
  ASSERT_TRUE(plan.is_ok()) << plan.status().to_string();
  RegretTimings timings;
  Result<RegretReport> r = measure_regret(*plan, {.threads = 1, .budget_s = 0.005}, timings);
  ASSERT_TRUE(r.is_ok()) << r.status().to_string();
  ASSERT_EQ(r->nodes.size(), 2u);  // one node, two buckets
  for (const RegretNode& n : r->nodes) {
    SCOPED_TRACE(n.bucket);
    EXPECT_EQ(n.node, "sum");
    ASSERT_EQ(n.candidates.size(), 2u);
    EXPECT_EQ(n.candidates[0].kernel, "add_f32__cpu_slow");  // the chosen one first
    EXPECT_EQ(n.candidates[n.fastest].kernel, "add_f32__cpu_plain");
    EXPECT_GT(n.candidates[0].measured_ns, 200e3);
    EXPECT_FALSE(n.candidates[0].ranked_by_profile);
    EXPECT_GT(n.regret(), 1.0);  // more than twice the fastest
    // Each kernel timed twice: the spread of its two medians is known and far
    // below a regret of more than 100 %.
    for (const RegretCandidate& c : n.candidates) {
      EXPECT_GE(c.spread, 0.0) << c.kernel;
      EXPECT_TRUE(std::isfinite(c.spread)) << c.kernel;
    }
    EXPECT_DOUBLE_EQ(n.noise(), std::max(n.candidates[0].spread, n.candidates[n.fastest].spread));
    EXPECT_TRUE(n.beyond_noise());
  }
  EXPECT_EQ(r->nodes[1].shapes, "[16, 64] x [16, 64] -> [16, 64]");  // the bucket's maximum
  EXPECT_DOUBLE_EQ(r->total_regret("one"), r->nodes[0].regret());
  EXPECT_NEAR(r->total_regret(), r->chosen_ns() / r->fastest_ns() - 1.0, 1e-12);
  EXPECT_DOUBLE_EQ(r->worst_regret(), std::max(r->nodes[0].regret(), r->nodes[1].regret()));
  EXPECT_DOUBLE_EQ(r->worst_regret_beyond_noise(), r->worst_regret());
  EXPECT_EQ(timings.size(), 4u);  // two kernels at two shapes
}

// Note [Regret within the noise]: a node whose regret its own timings' spread
// could explain counts in the worst regret but not in the worst beyond noise.
TEST(Regret, ANodeWithinItsTimingsSpreadIsNotCountedBeyondNoise) {
  const auto node = [](double chosen_ns, double fastest_ns, double spread) {
    RegretNode n{.bucket = "b", .node = "n", .op = "add", .shapes = "[1]"};
    n.candidates = {{.kernel = "chosen", .measured_ns = chosen_ns, .spread = spread},
                    {.kernel = "fastest", .measured_ns = fastest_ns, .spread = spread / 2}};
    n.fastest = chosen_ns > fastest_ns ? 1 : 0;
    return n;
  };
  RegretReport r;
  r.nodes.push_back(node(120, 100, 0.30));  // +20 %, its timings 30 % apart
  r.nodes.push_back(node(110, 100, 0.05));  // +10 %, its timings 5 % apart
  r.nodes.push_back(node(100, 100, 0.00));  // the fastest taken
  EXPECT_NEAR(r.nodes[0].regret(), 0.20, 1e-12);
  EXPECT_FALSE(r.nodes[0].beyond_noise());
  EXPECT_TRUE(r.nodes[1].beyond_noise());
  EXPECT_FALSE(r.nodes[2].beyond_noise());
  EXPECT_NEAR(r.worst_regret(), 0.20, 1e-12);
  EXPECT_NEAR(r.worst_regret_beyond_noise(), 0.10, 1e-12);
}

TEST(Regret, AProfileSteersThePlanAndTheTimingsAreShared) {
  const TableSnapshot table = add_table(false);
  Result<ExecutionPlan> modelled = plan_graph(add_graph(), table, two_buckets());
  ASSERT_TRUE(modelled.is_ok());
  RegretTimings timings;
  Result<RegretReport> before = measure_regret(*modelled, {.budget_s = 0.005}, timings);
  ASSERT_TRUE(before.is_ok());

  // A profile that measured the slow sibling as slow.
  CalibrationProfile p;
  for (const BindingEntry& e : table->lookup_alternatives(OpKind::kAdd, f32s(3), BackendId::kCpu)) {
    const double ns = e.name == "add_f32__cpu_slow" ? 2e5 : 1e3;
    p.add({e.name, BackendId::kCpu, e.revision_hash,
           fit_cost(std::vector<CostSample>{{1, 0, ns}, {1e6, 0, ns}, {1e7, 0, ns}}).value()});
  }
  PlanOptions options = two_buckets();
  options.calibration = std::make_shared<const CalibrationProfile>(std::move(p));
  Result<ExecutionPlan> measured = plan_graph(add_graph(), table, options);
  ASSERT_TRUE(measured.is_ok());
  const std::size_t timed = timings.size();
  Result<RegretReport> after = measure_regret(*measured, {.budget_s = 0.005}, timings);
  ASSERT_TRUE(after.is_ok()) << after.status().to_string();
  EXPECT_EQ(timings.size(), timed);  // judged by the same numbers, nothing timed again
  for (const RegretNode& n : after->nodes) {
    EXPECT_EQ(n.candidates[0].kernel, "add_f32__cpu_plain");
    EXPECT_TRUE(n.candidates[0].ranked_by_profile);
    EXPECT_EQ(n.fastest, 0u);
    EXPECT_DOUBLE_EQ(n.regret(), 0.0);
  }
  EXPECT_DOUBLE_EQ(after->total_regret(), 0.0);
  EXPECT_GT(before->total_regret(), 1.0);
}

TEST(Regret, ASiblingThatFailsIsAnErrorNamingIt) {
  Result<ExecutionPlan> plan = plan_graph(add_graph(), add_table(true), two_buckets());
  ASSERT_TRUE(plan.is_ok()) << plan.status().to_string();
  RegretTimings timings;
  Result<RegretReport> r = measure_regret(*plan, {.budget_s = 0.001}, timings);
  ASSERT_FALSE(r.is_ok());
  EXPECT_EQ(r.status().code(), StatusCode::kDataLoss);
  EXPECT_THAT(r.status().message(), HasSubstr("one / sum: add_f32__cpu_plain"));
  EXPECT_THAT(r.status().message(), HasSubstr("failed on purpose"));
}

}  // namespace
}  // namespace switchyard
