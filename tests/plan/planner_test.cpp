#include "switchyard/plan.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <limits>

#include "backends/cpu/elementwise/elementwise.h"
#include "backends/cpu/gemm/dense_reference.h"
#include "plan/test_kernels.h"
#include "switchyard/bucket_plan.h"
#include "switchyard/calibration.h"

namespace switchyard {
namespace {

using namespace switchyard::testing;
using ::testing::HasSubstr;

// A cost function that makes a kernel look `kFactor` times cheaper or dearer than
// the default matmul estimate.
template <int kNum, int kDen>
CostEstimate scaled_matmul_cost(const CostInputs& in) {
  CostEstimate e = default_cost_for(OpKind::kMatmul)(in);
  e.flops = e.flops * kNum / kDen;
  e.bytes = e.bytes * kNum / kDen;
  return e;
}

// Admits only M == 1 (a matvec sibling).
CostEstimate matvec_only_cost(const CostInputs& in) {
  if (in.shapes[0].outer() != 1) return not_admitted_cost();
  return scaled_matmul_cost<1, 10>(in);
}

Graph matmul_graph(std::int64_t m = 4) {
  GraphBuilder b;
  ValueId x = b.input("x", DType::kF32, {m, 8});
  ValueId w = b.constant_f32("w", {16, 8}, ramp(128, 3));
  b.output(b.matmul(x, w, "fc", "ffn_up"));
  return std::move(b).build().value();
}

const NodeReport& node_report(const ExecutionPlan& plan, std::string_view name,
                              std::size_t bucket = 0) {
  for (const NodeReport& n : plan.report().buckets[bucket].nodes) {
    if (n.name == name) return n;
  }
  static NodeReport none;
  ADD_FAILURE() << "no node " << name;
  return none;
}

TEST(CandidateBackends, PreferredThenFallbacksThenPins) {
  PlacementPolicy policy;
  policy.preferred = {BackendId::kCuda, BackendId::kCpu};
  policy.fallbacks = {BackendId::kCpu, BackendId::kVulkan};
  Node n;
  n.name = "fc";
  EXPECT_THAT(candidate_backends_for(n, policy),
              ::testing::ElementsAre(BackendId::kCuda, BackendId::kCpu, BackendId::kVulkan));
  policy.pinned.push_back({"fc", BackendId::kVulkan});
  EXPECT_THAT(candidate_backends_for(n, policy), ::testing::ElementsAre(BackendId::kVulkan));
  n.name = "other";
  EXPECT_EQ(candidate_backends_for(n, policy).size(), 3u);
}

TEST(RoutePicking, ChoosesCheapestSiblingAndKeepsRunnersUp) {
  KernelBindingTable t;
  t.register_kernel(OpKind::kMatmul, f32s(3), BackendId::kCpu, &matmul_variant<1>,
                    opts("matmul_slow", OpKind::kMatmul));
  KernelOptions fast = opts("matmul_fast", OpKind::kMatmul);
  fast.cost = &scaled_matmul_cost<1, 4>;
  t.register_kernel(OpKind::kMatmul, f32s(3), BackendId::kCpu, &matmul_variant<2>, fast);
  Result<ExecutionPlan> plan = plan_graph(matmul_graph(), finalize(std::move(t)));
  ASSERT_TRUE(plan.is_ok()) << plan.status().to_string();
  const NodeReport& n = node_report(*plan, "fc");
  EXPECT_EQ(n.chosen.kernel, "matmul_fast");
  EXPECT_EQ(n.chosen.sibling, 1);
  ASSERT_EQ(n.runners_up.size(), 1u);
  EXPECT_EQ(n.runners_up[0].kernel, "matmul_slow");
  EXPECT_LT(n.chosen.total_ns, n.runners_up[0].total_ns);
  EXPECT_EQ(n.role, "ffn_up");
}

TEST(RoutePicking, TieBreaksByBackendOrderThenSiblingOrder) {
  KernelBindingTable t;
  for (BackendId b : {BackendId::kCpu, BackendId::kCuda}) {
    const std::string s(name(b));
    t.register_kernel(OpKind::kMatmul, f32s(3), b, &matmul_variant<3>,
                      opts("matmul_a__" + s, OpKind::kMatmul));
    t.register_kernel(OpKind::kMatmul, f32s(3), b, &matmul_variant<4>,
                      opts("matmul_b__" + s, OpKind::kMatmul));
  }
  PlanOptions options;
  // The input lives on the host; a free link makes the two backends a true tie.
  options.transfer = {std::numeric_limits<double>::infinity(), 0};
  options.policy.preferred = {BackendId::kCuda, BackendId::kCpu};
  TableSnapshot table = finalize(std::move(t));
  Result<ExecutionPlan> plan = plan_graph(matmul_graph(), table, options);
  ASSERT_TRUE(plan.is_ok()) << plan.status().to_string();
  const NodeReport& n = node_report(*plan, "fc");
  EXPECT_EQ(n.chosen.kernel, "matmul_a__cuda");
  ASSERT_EQ(n.runners_up.size(), 3u);
  EXPECT_EQ(n.runners_up[0].kernel, "matmul_b__cuda");
  EXPECT_EQ(n.runners_up[1].kernel, "matmul_a__cpu");
  options.policy.preferred = {BackendId::kCpu, BackendId::kCuda};
  Result<ExecutionPlan> flipped = plan_graph(matmul_graph(), table, options);
  ASSERT_TRUE(flipped.is_ok());
  EXPECT_EQ(node_report(*flipped, "fc").chosen.kernel, "matmul_a__cpu");
}

TEST(RoutePicking, TransferCostKeepsWorkWhereTheDataIs) {
  KernelBindingTable t;
  t.register_kernel(OpKind::kMatmul, f32s(3), BackendId::kCpu, &matmul_variant<5>,
                    opts("matmul__cpu", OpKind::kMatmul));
  t.register_kernel(OpKind::kMatmul, f32s(3), BackendId::kCuda, &matmul_variant<6>,
                    opts("matmul__cuda", OpKind::kMatmul));
  PlanOptions options;
  options.policy.preferred = {BackendId::kCuda, BackendId::kCpu};
  // The device is 10x faster, but the input must cross a 5 us link first.
  options.backend_caps[static_cast<std::size_t>(BackendId::kCuda)] = {500.0, 200.0, 20.0};
  Result<ExecutionPlan> plan = plan_graph(matmul_graph(), finalize(std::move(t)), options);
  ASSERT_TRUE(plan.is_ok());
  const NodeReport& n = node_report(*plan, "fc");
  EXPECT_EQ(n.chosen.backend, BackendId::kCpu);
  ASSERT_EQ(n.runners_up.size(), 1u);
  EXPECT_EQ(n.runners_up[0].backend, BackendId::kCuda);
  EXPECT_GT(n.runners_up[0].transfer_ns, 0.0);
  EXPECT_LT(n.runners_up[0].kernel_ns, n.chosen.kernel_ns);
  EXPECT_FALSE(n.fallback);  // cpu is in the preferred list
}

TEST(RoutePicking, RejectionsCarryReasons) {
  KernelBindingTable t;
  t.register_kernel(OpKind::kMatmul, f32s(3), BackendId::kCpu, &matmul_variant<7>,
                    opts("matmul_unaudited", OpKind::kMatmul, {}, PrecisionGuarantee{}));
  t.register_kernel(
      OpKind::kMatmul, f32s(3), BackendId::kCpu, &matmul_variant<8>,
      opts("matmul_loose", OpKind::kMatmul, {},
           PrecisionGuarantee::bounded(false, false, std::nullopt, 1e-2, std::nullopt)));
  t.register_kernel(OpKind::kMatmul, f32s(3), BackendId::kCpu, &matmul_variant<9>,
                    opts("matmul_bcast_only", OpKind::kMatmul, {.requires_broadcast = true}));
  KernelOptions matvec = opts("matmul_matvec", OpKind::kMatmul);
  matvec.cost = &matvec_only_cost;
  t.register_kernel(OpKind::kMatmul, f32s(3), BackendId::kCpu, &matmul_variant<10>, matvec);
  t.register_kernel(OpKind::kMatmul, f32s(3), BackendId::kCpu, &matmul_variant<11>,
                    opts("matmul_ok", OpKind::kMatmul));
  Graph g = matmul_graph(4);
  g.set_precision_floor(PrecisionFloor::relative(1e-3));
  PlanOptions options;
  options.policy.fallbacks = {BackendId::kCuda};
  Result<ExecutionPlan> plan = plan_graph(g, finalize(std::move(t)), options);
  ASSERT_TRUE(plan.is_ok()) << plan.status().to_string();
  const NodeReport& n = node_report(*plan, "fc");
  EXPECT_EQ(n.chosen.kernel, "matmul_ok");
  std::map<std::string, RejectReason> reasons;
  for (const RejectedCandidate& r : n.rejected) reasons[r.kernel] = r.reason;
  EXPECT_EQ(reasons["matmul_unaudited"], RejectReason::kPrecisionUnaudited);
  EXPECT_EQ(reasons["matmul_loose"], RejectReason::kPrecisionBelowFloor);
  EXPECT_EQ(reasons["matmul_bcast_only"], RejectReason::kRequiresBroadcast);
  EXPECT_EQ(reasons["matmul_matvec"], RejectReason::kShapeNotAdmitted);
  EXPECT_EQ(reasons[""], RejectReason::kNotBound);  // nothing on the cuda fallback
  EXPECT_EQ(n.rejected.size(), 5u);
}

// Note [Precision trades]: a sibling that computes in a narrower type is refused
// by default however cheap it looks, modelled or measured; admitted, it competes
// on cost and still meets the floor.
TEST(RoutePicking, APrecisionTradeIsTakenOnlyWhenThePlanAdmitsIt) {
  KernelBindingTable t;
  t.register_kernel(OpKind::kMatmul, f32s(3), BackendId::kCpu, &matmul_variant<40>,
                    opts("matmul_exact", OpKind::kMatmul));
  KernelOptions fast =
      opts("matmul_narrow", OpKind::kMatmul, {.trades_precision = true},
           PrecisionGuarantee::bounded(true, true, std::nullopt, 4e-3, std::nullopt));
  fast.cost = &scaled_matmul_cost<1, 10>;
  t.register_kernel(OpKind::kMatmul, f32s(3), BackendId::kCpu, &matmul_variant<41>, fast);
  const TableSnapshot table = finalize(std::move(t));
  const auto chosen = [&](const PlanOptions& options, const Graph& g) {
    Result<ExecutionPlan> plan = plan_graph(g, table, options);
    EXPECT_TRUE(plan.is_ok()) << plan.status().to_string();
    return plan.is_ok() ? node_report(*plan, "fc") : NodeReport{};
  };
  const Graph g = matmul_graph(4);

  PlanOptions options;
  options.record_in_registry = false;
  Result<ExecutionPlan> plan = plan_graph(g, table, options);
  ASSERT_TRUE(plan.is_ok()) << plan.status().to_string();
  NodeReport n = node_report(*plan, "fc");
  EXPECT_EQ(n.chosen.kernel, "matmul_exact");
  ASSERT_EQ(n.rejected.size(), 1u);
  EXPECT_EQ(n.rejected[0].kernel, "matmul_narrow");
  EXPECT_EQ(n.rejected[0].reason, RejectReason::kPrecisionTrade);
  EXPECT_THAT(explain_text(plan->report()), HasSubstr("precision_trade"));

  // Measured a thousand times faster, it is still refused.
  CalibrationProfile profile;
  for (const BindingEntry& e :
       table->lookup_alternatives(OpKind::kMatmul, f32s(3), BackendId::kCpu)) {
    const double ns = e.name == "matmul_narrow" ? 1.0 : 1e3;
    profile.add(
        {e.name, BackendId::kCpu, e.revision_hash,
         fit_cost(std::vector<CostSample>{{1, 0, ns}, {1e9, 0, ns}, {2e9, 0, ns}}).value()});
  }
  options.calibration = std::make_shared<const CalibrationProfile>(std::move(profile));
  EXPECT_EQ(chosen(options, g).chosen.kernel, "matmul_exact");

  // Admitted, it wins on cost; a floor it does not meet still refuses it.
  options.admit_precision_trades = true;
  n = chosen(options, g);
  EXPECT_EQ(n.chosen.kernel, "matmul_narrow");
  EXPECT_TRUE(n.rejected.empty());
  Graph strict = matmul_graph(4);
  strict.set_precision_floor(PrecisionFloor::relative(1e-3));
  n = chosen(options, strict);
  EXPECT_EQ(n.chosen.kernel, "matmul_exact");
  ASSERT_EQ(n.rejected.size(), 1u);
  EXPECT_EQ(n.rejected[0].reason, RejectReason::kPrecisionBelowFloor);
}

TEST(RoutePicking, ShapeBucketsPlanEachShapeSeparately) {
  KernelBindingTable t;
  t.register_kernel(OpKind::kMatmul, f32s(3), BackendId::kCpu, &matmul_variant<12>,
                    opts("matmul_gemm", OpKind::kMatmul));
  KernelOptions matvec = opts("matmul_matvec", OpKind::kMatmul);
  matvec.cost = &matvec_only_cost;
  t.register_kernel(OpKind::kMatmul, f32s(3), BackendId::kCpu, &matmul_variant<13>, matvec);
  GraphBuilder b;
  const std::int64_t tok = b.symbol("tokens");
  ValueId x = b.input("x", DType::kF32, {tok, 8});
  ValueId w = b.constant_f32("w", {16, 8}, ramp(128, 3));
  b.output(b.matmul(x, w, "fc"));
  Graph g = std::move(b).build().value();
  PlanOptions options;
  options.buckets = {{"decode", {{"tokens", 1, 1}}}, {"prefill", {{"tokens", 2, 64}}}};
  Result<ExecutionPlan> plan = plan_graph(g, finalize(std::move(t)), options);
  ASSERT_TRUE(plan.is_ok()) << plan.status().to_string();
  EXPECT_EQ(node_report(*plan, "fc", 0).chosen.kernel, "matmul_matvec");
  EXPECT_EQ(node_report(*plan, "fc", 1).chosen.kernel, "matmul_gemm");
  EXPECT_EQ(plan->report().buckets[1].sizes[0].second, 64);

  // Symbols need buckets, and buckets must name real symbols with sane ranges.
  EXPECT_EQ(plan_graph(g, plan->table()).status().code(), StatusCode::kInvalidArgument);
  options.buckets = {{"bad", {{"tokens", 5, 2}}}};
  EXPECT_EQ(plan_graph(g, plan->table(), options).status().code(), StatusCode::kInvalidArgument);
  options.buckets = {{"bad", {{"tokens", 1, 2}, {"nope", 1, 1}}}};
  EXPECT_THAT(std::string(plan_graph(g, plan->table(), options).status().message()),
              HasSubstr("no symbol 'nope'"));
}

TEST(RoutePicking, MissingKernelFailsWithTheTableDiagnosticAndAReport) {
  KernelBindingTable t;
  register_basic(t, BackendId::kCpu, "test");
  GraphBuilder b;
  ValueId x = b.input("x", DType::kF32, {4});
  b.output(b.op(OpKind::kTanh, {x}, "squash"));
  Result<ExecutionPlan> plan = plan_graph(std::move(b).build().value(), finalize(std::move(t)));
  ASSERT_FALSE(plan.is_ok());
  EXPECT_EQ(plan.status().code(), StatusCode::kNotFound);
  const PlanFailure* failure = plan.status().payload<PlanFailure>();
  ASSERT_NE(failure, nullptr);
  const NoBackendForOp* miss = failure->cause.payload<NoBackendForOp>();
  ASSERT_NE(miss, nullptr);
  EXPECT_EQ(miss->key, BindingKey(OpKind::kTanh));
  ASSERT_EQ(failure->report.buckets.size(), 1u);
  EXPECT_FALSE(failure->report.buckets[0].nodes[0].resolved);
  ASSERT_EQ(failure->report.violations.size(), 1u);
  EXPECT_THAT(failure->report.violations[0], HasSubstr("squash"));
}

// --- dtype reconciliation -------------------------------------------------------

Graph bf16_add_graph() {
  GraphBuilder b;
  ValueId x = b.input("x", DType::kBF16, {2, 3});
  ValueId y = b.input("y", DType::kBF16, {2, 3});
  b.output(b.add(x, y, "sum"));
  return std::move(b).build().value();
}

TEST(DtypeReconciliation, InsertsLosslessCastsWhenThePromotedKeyIsServed) {
  KernelBindingTable t;
  register_basic(t, BackendId::kCpu, "test");
  t.register_kernel(OpKind::kCast, {DType::kBF16, DType::kF32}, BackendId::kCpu,
                    cpu::cast_kernel(DType::kBF16, DType::kF32, cpu::Variant::kRef),
                    opts("cast_bf16_f32", OpKind::kCast));
  t.register_kernel(OpKind::kCast, {DType::kF32, DType::kBF16}, BackendId::kCpu,
                    cpu::cast_kernel(DType::kF32, DType::kBF16, cpu::Variant::kRef),
                    opts("cast_f32_bf16", OpKind::kCast));
  Result<ExecutionPlan> plan = plan_graph(bf16_add_graph(), finalize(std::move(t)));
  ASSERT_TRUE(plan.is_ok()) << plan.status().to_string();
  const auto& casts = plan->report().casts;
  ASSERT_EQ(casts.size(), 3u);
  EXPECT_EQ(casts[0].operand, 0);
  EXPECT_EQ(casts[0].from, DType::kBF16);
  EXPECT_EQ(casts[0].to, DType::kF32);
  EXPECT_EQ(casts[1].operand, 1);
  EXPECT_EQ(casts[2].operand, -1);  // the result rounds once, back to bf16
  EXPECT_EQ(casts[2].to, DType::kBF16);
  EXPECT_EQ(plan->graph().nodes().size(), 4u);
  EXPECT_EQ(node_report(*plan, "sum").signature, "f32,f32->f32");
  EXPECT_EQ(node_report(*plan, "sum.cast_in0").role, "cast");
  const std::string text = explain_text(plan->report());
  EXPECT_THAT(text, HasSubstr("'sum.cast_in0': bf16 -> f32 for node 'sum' operand 0"));
  EXPECT_THAT(text, HasSubstr("'sum.cast_out': f32 -> bf16 for node 'sum' output"));
}

TEST(DtypeReconciliation, PrefersTheFewestCasts) {
  // bf16 x bf16 -> bf16 is not served. Widening everything reaches the f32 key
  // (three casts); widening the activations and the result reaches the mixed key
  // (f32, bf16 -> f32) with two: the planner takes the two.
  KernelBindingTable t;
  t.register_kernel(OpKind::kMatmul, {DType::kF32, DType::kBF16, DType::kF32}, BackendId::kCpu,
                    &matmul_variant<14>, opts("matmul_f32_bf16", OpKind::kMatmul));
  t.register_kernel(OpKind::kMatmul, f32s(3), BackendId::kCpu, &matmul_variant<15>,
                    opts("matmul_f32", OpKind::kMatmul));
  t.register_kernel(OpKind::kCast, {DType::kBF16, DType::kF32}, BackendId::kCpu,
                    cpu::cast_kernel(DType::kBF16, DType::kF32, cpu::Variant::kRef),
                    opts("cast_bf16_f32", OpKind::kCast));
  t.register_kernel(OpKind::kCast, {DType::kF32, DType::kBF16}, BackendId::kCpu,
                    cpu::cast_kernel(DType::kF32, DType::kBF16, cpu::Variant::kRef),
                    opts("cast_f32_bf16", OpKind::kCast));
  GraphBuilder b;
  ValueId x = b.input("x", DType::kBF16, {2, 8});
  ValueId w = b.input("w", DType::kBF16, {4, 8});
  b.output(b.matmul(x, w, "mm"));
  Result<ExecutionPlan> plan = plan_graph(std::move(b).build().value(), finalize(std::move(t)));
  ASSERT_TRUE(plan.is_ok()) << plan.status().to_string();
  const auto& casts = plan->report().casts;
  ASSERT_EQ(casts.size(), 2u);
  EXPECT_EQ(casts[0].operand, 0);
  EXPECT_EQ(casts[1].operand, -1);
  EXPECT_EQ(node_report(*plan, "mm").chosen.kernel, "matmul_f32_bf16");
  EXPECT_EQ(node_report(*plan, "mm").signature, "f32,bf16->f32");
}

TEST(DtypeReconciliation, FailsWhenTheCastItselfIsMissing) {
  KernelBindingTable t;
  t.register_kernel(OpKind::kMatmul, f32s(3), BackendId::kCpu, &matmul_variant<16>,
                    opts("matmul_f32", OpKind::kMatmul));
  t.register_kernel(OpKind::kCast, {DType::kBF16, DType::kF32}, BackendId::kCpu,
                    cpu::cast_kernel(DType::kBF16, DType::kF32, cpu::Variant::kRef),
                    opts("cast_bf16_f32", OpKind::kCast));
  GraphBuilder b;
  ValueId x = b.input("x", DType::kBF16, {2, 8});
  ValueId w = b.input("w", DType::kBF16, {4, 8});
  // Widening works for the inputs, but the bf16 result needs f32 -> bf16.
  b.output(b.matmul(x, w, "mm"));
  Result<ExecutionPlan> plan = plan_graph(std::move(b).build().value(), finalize(std::move(t)));
  ASSERT_FALSE(plan.is_ok());
  EXPECT_NE(plan.status().payload<PlanFailure>()->cause.payload<NoBackendForOp>(), nullptr);
  EXPECT_THAT(std::string(plan.status().message()), HasSubstr("no f32 promotion"));
}

TEST(DtypeReconciliation, WithoutCastKernelsTheNodeFailsWithTheMiss) {
  KernelBindingTable t;
  register_basic(t, BackendId::kCpu, "test");
  Result<ExecutionPlan> plan = plan_graph(bf16_add_graph(), finalize(std::move(t)));
  ASSERT_FALSE(plan.is_ok());
  const PlanFailure* failure = plan.status().payload<PlanFailure>();
  ASSERT_NE(failure, nullptr);
  EXPECT_TRUE(failure->report.casts.empty());
  const NoBackendForOp* miss = failure->cause.payload<NoBackendForOp>();
  ASSERT_NE(miss, nullptr);
  EXPECT_EQ(miss->dtypes, (DTypeList{DType::kBF16, DType::kBF16, DType::kBF16}));
  EXPECT_THAT(std::string(plan.status().message()), HasSubstr("registered combinations"));
}

// --- buffers and copies -------------------------------------------------------------

// --- control edges ---------------------------------------------------------------

// The graph nodes of bucket 0's kernel steps, in the order the executor runs them.
std::vector<std::string> step_order(const ExecutionPlan& plan) {
  std::vector<std::string> names;
  for (const PlannedStep& s : plan.bucket(0).steps) {
    if (s.node >= 0) names.push_back(plan.graph().node(s.node).name);
  }
  return names;
}

std::ptrdiff_t position(const std::vector<std::string>& names, std::string_view name) {
  auto it = std::find(names.begin(), names.end(), name);
  EXPECT_NE(it, names.end()) << name;
  return it - names.begin();
}

// "reader" is added first, so without an edge it runs first.
Graph reader_writer_graph(bool edge) {
  GraphBuilder b;
  ValueId x = b.input("x", DType::kF32, {2, 4});
  ValueId w = b.constant_f32("w", {4, 4}, ramp(16, 7));
  ValueId reader = b.relu(x, "reader");
  ValueId writer = b.matmul(x, w, "writer");
  if (edge) b.run_after(reader, writer);
  b.output(reader);
  b.output(writer);
  return std::move(b).build().value();
}

TableSnapshot basic_table() {
  KernelBindingTable t;
  register_basic(t, BackendId::kCpu, "test");
  return finalize(std::move(t));
}

TEST(PlannerControlEdges, StepsFollowControlEdges) {
  Result<ExecutionPlan> plain = plan_graph(reader_writer_graph(false), basic_table());
  ASSERT_TRUE(plain.is_ok()) << plain.status().to_string();
  EXPECT_EQ(step_order(*plain), (std::vector<std::string>{"reader", "writer"}));

  Result<ExecutionPlan> plan = plan_graph(reader_writer_graph(true), basic_table());
  ASSERT_TRUE(plan.is_ok()) << plan.status().to_string();
  EXPECT_EQ(step_order(*plan), (std::vector<std::string>{"writer", "reader"}));
  // The report lists nodes in the order they run.
  ASSERT_EQ(plan->report().buckets[0].nodes.size(), 2u);
  EXPECT_EQ(plan->report().buckets[0].nodes[0].name, "writer");
}

TEST(PlannerControlEdges, CycleThroughAControlEdgeIsRefusedAtPlanTime) {
  Graph g = reader_writer_graph(true);
  // "writer" after "reader" as well: the two edges close a cycle.
  const ValueId reader = g.node(g.find_node("reader")).output;
  g.mutable_node(g.find_node("writer")).after.push_back(reader);
  Result<ExecutionPlan> plan = plan_graph(g, basic_table());
  ASSERT_FALSE(plan.is_ok());
  EXPECT_EQ(plan.status().code(), StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(plan.status().message()), HasSubstr("cycle"));
  EXPECT_THAT(std::string(plan.status().message()), HasSubstr("control edge"));
}

TEST(PlannerControlEdges, DanglingControlEdgeIsRefusedAtPlanTime) {
  Graph g = reader_writer_graph(false);
  g.mutable_node(0).after.push_back(ValueId{99});
  Result<ExecutionPlan> plan = plan_graph(g, basic_table());
  ASSERT_FALSE(plan.is_ok());
  EXPECT_EQ(plan.status().code(), StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(plan.status().message()), HasSubstr("dangling control edge"));
}

TEST(PlannerControlEdges, CastInsertionKeepsControlEdges) {
  KernelBindingTable t;
  register_basic(t, BackendId::kCpu, "test");
  t.register_kernel(OpKind::kCast, {DType::kBF16, DType::kF32}, BackendId::kCpu,
                    cpu::cast_kernel(DType::kBF16, DType::kF32, cpu::Variant::kRef),
                    opts("cast_bf16_f32", OpKind::kCast));
  t.register_kernel(OpKind::kCast, {DType::kF32, DType::kBF16}, BackendId::kCpu,
                    cpu::cast_kernel(DType::kF32, DType::kBF16, cpu::Variant::kRef),
                    opts("cast_f32_bf16", OpKind::kCast));
  // Added late, sum, early; ordered early -> sum -> late by control edges alone.
  GraphBuilder b;
  ValueId x = b.input("x", DType::kBF16, {2, 3});
  ValueId y = b.input("y", DType::kBF16, {2, 3});
  ValueId z = b.input("z", DType::kF32, {2, 3});
  ValueId late = b.relu(z, "late");
  ValueId sum = b.add(x, y, "sum");  // bf16: served through casts
  ValueId early = b.relu(z, "early");
  b.run_after(late, sum);
  b.run_after(sum, early);
  for (ValueId v : {late, sum, early}) b.output(v);
  Result<ExecutionPlan> plan = plan_graph(std::move(b).build().value(), finalize(std::move(t)));
  ASSERT_TRUE(plan.is_ok()) << plan.status().to_string();
  ASSERT_EQ(plan->report().casts.size(), 3u);
  const std::vector<std::string> order = step_order(*plan);
  EXPECT_LT(position(order, "early"), position(order, "sum")) << ::testing::PrintToString(order);
  // "late" waited for sum's result, which the output cast now produces.
  EXPECT_LT(position(order, "sum"), position(order, "sum.cast_out"));
  EXPECT_LT(position(order, "sum.cast_out"), position(order, "late"));
  const Graph& g = plan->graph();
  const Node& late_node = g.node(g.find_node("late"));
  ASSERT_EQ(late_node.after.size(), 1u);
  EXPECT_EQ(g.value(late_node.after[0]).producer, g.find_node("sum.cast_out"));
}

TEST(BufferPlan, ChainReusesMemoryByLiveness) {
  KernelBindingTable t;
  register_basic(t, BackendId::kCpu, "test");
  GraphBuilder b;
  ValueId v = b.input("x", DType::kF32, {256});
  for (int i = 0; i < 8; ++i) v = b.relu(v, "r" + std::to_string(i));
  b.output(v);
  Result<ExecutionPlan> plan = plan_graph(std::move(b).build().value(), finalize(std::move(t)));
  ASSERT_TRUE(plan.is_ok());
  // Seven intermediates of 1 KiB; at most two are live at once.
  const auto& bucket = plan->bucket(0);
  EXPECT_EQ(bucket.buffers.size(), 7u);
  EXPECT_EQ(bucket.arena_bytes[static_cast<std::size_t>(BackendId::kCpu)], 2 * 1024);
  EXPECT_EQ(plan->report().buckets[0].per_backend[0].peak_bytes, 2 * 1024);
  // Live buffers never overlap.
  for (std::size_t i = 0; i < bucket.buffers.size(); ++i) {
    for (std::size_t j = i + 1; j < bucket.buffers.size(); ++j) {
      const auto& a = bucket.buffers[i];
      const auto& c = bucket.buffers[j];
      const bool live_together = !(a.last_step < c.first_step || c.last_step < a.first_step);
      const bool overlap = a.offset < c.offset + c.bytes && c.offset < a.offset + a.bytes;
      EXPECT_FALSE(live_together && overlap) << i << " and " << j;
    }
  }
}

TEST(BufferPlan, CrossingBackendsInsertsCopies) {
  KernelBindingTable t;
  register_basic(t, BackendId::kCpu, "cpu");
  register_basic(t, BackendId::kCuda, "cuda");
  GraphBuilder b;
  ValueId x = b.input("x", DType::kF32, {4, 8});
  ValueId w = b.constant_f32("w", {8, 8}, ramp(64, 1));
  ValueId h = b.matmul(x, w, "fc");
  b.output(b.relu(h, "act"));
  PlanOptions options;
  options.policy.preferred = {BackendId::kCpu};
  options.policy.fallbacks = {BackendId::kCuda};
  options.policy.pinned = {{"fc", BackendId::kCuda}};
  Result<ExecutionPlan> plan =
      plan_graph(std::move(b).build().value(), finalize(std::move(t)), options);
  ASSERT_TRUE(plan.is_ok()) << plan.status().to_string();
  // x goes up; relu stays where its input is (moving it down costs more than the
  // kernel), and the graph output comes back down. The weight is uploaded once.
  EXPECT_EQ(plan->report().buckets[0].copies, 2);
  const auto& steps = plan->bucket(0).steps;
  ASSERT_EQ(steps.size(), 4u);
  EXPECT_EQ(steps[0].kind, StepKind::kCopy);
  EXPECT_EQ(steps[1].backend, BackendId::kCuda);
  EXPECT_EQ(steps[2].kind, StepKind::kKernel);
  EXPECT_EQ(steps[2].backend, BackendId::kCuda);
  EXPECT_EQ(steps[3].kind, StepKind::kCopy);
  EXPECT_EQ(steps[3].backend, BackendId::kCpu);
  EXPECT_GT(node_report(*plan, "act").runners_up[0].transfer_ns, 0.0);
  int uploads = 0;
  for (const auto& buf : plan->bucket(0).buffers) uploads += buf.upload.valid() ? 1 : 0;
  EXPECT_EQ(uploads, 1);
  EXPECT_TRUE(node_report(*plan, "fc").fallback);
  EXPECT_THAT(plan->report().violations[0], HasSubstr("fallback backend cuda"));
}

}  // namespace
}  // namespace switchyard
