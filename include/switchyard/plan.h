// Planner: maps a Graph onto the kernel binding table and produces an
// ExecutionPlan the executor runs without a single table lookup.
//
// Overview
//   plan_graph runs these passes, every one asking `candidate_backends_for` which
//   backends a node may use:
//     1. validation and topological order;
//     2. fusion: pattern rules (matmul + broadcast add -> linear; gate/up matmuls,
//        silu, mul and the down matmul -> ffn_swiglu; rms_norm then a broadcast
//        weight multiply -> rms_norm_mul) and every runtime-fused recipe the table
//        holds rewrite a subgraph into one node when a candidate backend binds the
//        fused key at the node's exact dtypes; otherwise the subgraph stays;
//     3. dtype reconciliation: a node whose exact key no candidate serves gets its
//        f16/bf16 operands promoted to f32 with inserted casts, only when the
//        promoted key and the casts are served on one candidate backend (the fewest
//        casts win); otherwise planning fails with the table's NoBackendForOp miss;
//     4. route picking, per shape bucket: every sibling on every candidate backend
//        (lookup_alternatives) passes hard filters (layout capabilities, the
//        precision floor against audited claims, shape admission) and is ranked by
//        estimated time: kernel + moving inputs from other backends + casts.
//        Tie-break: lower cost, then the backend's rank in the policy, then sibling
//        order. Runners-up and every rejection (reason enum + text) are kept;
//     5. per bucket: copy steps where data crosses backends and a buffer plan with
//        liveness-based reuse (peak bytes per backend).
//
//   Shape admission has no field in the binding table: a kernel's cost function
//   declares a shape it cannot take by returning an infinite estimate
//   (`not_admitted_cost()`); such a sibling is rejected with kShapeNotAdmitted.
//   A sibling with no cost estimate is never rejected for it but ranks after every
//   sibling that has one.
//
//   The plan records the table generation it was made against. The executor
//   refuses a plan whose generation is not the published one (re-plan instead):
//   silently re-planning mid-run would change kernels, numerics and buffers under a
//   caller that did not ask for it.
//
// Example
//   PlanOptions options;
//   options.buckets = {{"decode", {{"tokens", 1, 1}}}, {"prefill", {{"tokens", 2, 512}}}};
//   SWITCHYARD_ASSIGN_OR_RETURN(ExecutionPlan plan, plan_graph(graph, current_table(), options));
//   fmt::print("{}", explain_text(plan.report()));
#pragma once

#include <array>
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "switchyard/binding_table.h"
#include "switchyard/calibration.h"
#include "switchyard/cost.h"
#include "switchyard/dispatch.h"
#include "switchyard/graph.h"
#include "switchyard/registry.h"

namespace switchyard {

// Where nodes may run. Candidates are `preferred` in order, then `fallbacks` in
// order (duplicates dropped); a pinned node's only candidate is its pin.
struct PlacementPolicy {
  std::vector<BackendId> preferred = {kHostBackend};
  std::vector<BackendId> fallbacks;
  struct Pin {
    std::string node;
    BackendId backend;
  };
  std::vector<Pin> pinned;
};

// The one helper every pass uses to ask where a node may run.
[[nodiscard]] std::vector<BackendId> candidate_backends_for(const Node& node,
                                                            const PlacementPolicy& policy);

// A range of sizes for one symbolic dimension, inclusive.
struct SymbolRange {
  std::string symbol;
  std::int64_t min = 1;
  std::int64_t max = 1;
};
// One planned family of shapes: buffers are sized and costs estimated at each
// symbol's max; any run whose sizes all fall in the ranges uses this bucket.
struct ShapeBucket {
  std::string name;
  std::vector<SymbolRange> ranges;
};

// Moving bytes between two backends.
struct TransferCaps {
  double gbps = 25.0;
  double latency_ns = 5000.0;
};

struct PlanOptions {
  PlacementPolicy policy;
  bool enable_fusion = true;
  bool enable_casts = true;
  // Per backend, indexed by BackendId.
  std::array<BackendCaps, kBackendCount> backend_caps{};
  TransferCaps transfer;
  // Empty: one bucket named "default"; the graph must then have no symbols.
  std::vector<ShapeBucket> buckets;
  // Planning is the registry's build phase: each node's resolution is recorded
  // with its role (or its name when it has none) as a lookup on the policy's first
  // preferred backend: a hit when the node runs there, a slow-path miss naming the
  // kernel it falls back to (or "no kernel") otherwise. The registry is then
  // sealed, and a strict policy covering a violation fails the plan with the seal
  // report (kFailedPrecondition, StrictKernelFailure payload).
  // Null: the process-wide registry.
  Registry* registry = nullptr;
  // False plans without recording or sealing anything.
  bool record_in_registry = true;
  // Note [Caller tensors on a device]
  // The graph inputs and outputs that the caller keeps on a backend other than
  // the host, by name (an input's value name; an output's value name or its
  // producer's node name). An input is read in place by consumers on its backend
  // and copied for the others; an output is written in place by a producer on its
  // backend and copied there otherwise. The executor then takes exactly these
  // tensors on that backend. The use: state that lives on the accelerator across
  // runs, such as a KV cache that each step reads and appends to, which would
  // otherwise cross the bus twice per step.
  std::map<std::string, BackendId, std::less<>> external_backends;
  // Measured costs (calibration.h): every entry the profile covers is ranked by
  // its fitted time instead of its modelled one. Pass the profile's applicable()
  // part, so that nothing measured elsewhere or for an older revision is used.
  std::shared_ptr<const CalibrationProfile> calibration;
  // Let route picking take siblings that trade precision for speed
  // (KernelCaps::trades_precision), ranked by cost with the others and still
  // held to the precision floor. Off: they are rejected with kPrecisionTrade.
  bool admit_precision_trades = false;
  // Let route picking take siblings that read a constant weight packed once per
  // executor (Note [Prepacked weights] in binding_table.h), whose copies cost
  // memory beside the weights'. Off: they are rejected with kPackingOff.
  bool pack_weights = true;
};

// Why a sibling was not chosen; machine-readable, with text beside it.
enum class RejectReason : std::uint8_t {
  kLayoutUnsupported,    // an operand is strided/broadcast and the kernel cannot take it
  kRequiresBroadcast,    // the kernel only takes broadcast operands; these are dense
  kPrecisionUnaudited,   // a precision floor applies and the claim is unaudited
  kPrecisionBelowFloor,  // the audited claim does not meet the floor
  kPrecisionTrade,       // it trades precision for speed and the plan does not admit that
  kShapeNotAdmitted,     // the kernel's cost function refuses these shapes
  kCostError,            // the cost expression failed on these shapes
  kNotBound,             // the backend has no kernel at the (possibly promoted) key
  kOperandNotConstant,   // it packs an operand at load, and that operand is computed
  kPackingOff,           // it packs a weight at load, and the plan does not pack
};
[[nodiscard]] std::string_view name(RejectReason reason);

// The cost function of a sibling that cannot take the shapes it is asked about.
[[nodiscard]] CostEstimate not_admitted_cost();

struct RejectedCandidate {
  BackendId backend = BackendId::kCpu;
  // Empty for kNotBound.
  std::string kernel;
  RejectReason reason = RejectReason::kNotBound;
  std::string detail;
};

// One viable sibling and what it is estimated to cost.
struct RouteCandidate {
  BackendId backend = BackendId::kCpu;
  std::string kernel;
  std::string source;
  int sibling = 0;
  bool cost_known = true;
  // The time ranked: the calibration profile's fit when `measured`, else the
  // modelled roofline (modelled_ns either way).
  double kernel_ns = 0;
  double modelled_ns = 0;
  bool measured = false;
  double transfer_ns = 0;
  double cast_ns = 0;
  double total_ns = 0;
  PrecisionGuarantee precision;
  // Bytes of the weight copy this sibling packs once per executor (Note
  // [Prepacked weights]); 0 when it reads the weight as stored.
  std::int64_t packed_bytes = 0;
};

// A cast the reconciliation pass inserted.
struct InsertedCast {
  std::string cast_node;
  // The node the cast serves and which of its operands (-1: its output).
  std::string for_node;
  int operand = 0;
  DType from = DType::kF32;
  DType to = DType::kF32;
};

// A subgraph the fusion pass replaced by one node.
struct AppliedFusion {
  std::string rule;  // "linear", "ffn_swiglu", "rms_norm_mul", or "runtime:<name>"
  std::string fused_node;
  std::vector<std::string> replaced;
};

// A rule whose pattern matched but which was not applied, and why.
struct SkippedFusion {
  std::string rule;
  std::string anchor_node;
  std::string reason;
};

// Per node and bucket: what was chosen and what was not.
struct NodeReport {
  std::int32_t node = 0;
  std::string name;
  std::string role;
  std::string op;  // "matmul", "fused:<name>"
  std::string signature;
  std::string shapes;
  PrecisionFloor floor;
  bool resolved = false;
  RouteCandidate chosen;
  // On a fallback backend (not in policy.preferred).
  bool fallback = false;
  std::vector<RouteCandidate> runners_up;
  std::vector<RejectedCandidate> rejected;
  // Why the node has no route (the miss diagnostic), when unresolved.
  std::string failure;
};

struct BackendTotal {
  BackendId backend = BackendId::kCpu;
  int nodes = 0;
  double estimated_ns = 0;
  std::int64_t peak_bytes = 0;
};

struct BucketReport {
  std::string name;
  // symbol = size at which the bucket was costed (the range's max)
  std::vector<std::pair<std::string, std::int64_t>> sizes;
  std::vector<NodeReport> nodes;
  std::vector<BackendTotal> per_backend;
  int copies = 0;
  double estimated_ns = 0;
};

struct PlanReport {
  std::uint64_t table_generation = 0;
  std::vector<InsertedCast> casts;
  std::vector<AppliedFusion> fusions;
  std::vector<SkippedFusion> skipped_fusions;
  std::vector<BucketReport> buckets;
  // Nodes without a route, nodes placed on a fallback backend, unknown costs.
  std::vector<std::string> violations;
};

// The typed payload of plan_graph's failure: the report as far as planning got,
// so `switchyard explain` can still show every node.
struct PlanFailure : StatusPayload {
  PlanReport report;
  // The first unresolved node's own error (a NoBackendForOp miss keeps its payload
  // here).
  Status cause;
};

struct BucketPlan;  // bucket_plan.h

class ExecutionPlan {
 public:
  ExecutionPlan();
  ~ExecutionPlan();
  ExecutionPlan(ExecutionPlan&&) noexcept;
  ExecutionPlan& operator=(ExecutionPlan&&) noexcept;

  [[nodiscard]] const PlanReport& report() const { return report_; }
  // The graph after fusion and cast insertion: what the steps execute.
  [[nodiscard]] const Graph& graph() const { return graph_; }
  [[nodiscard]] const PlanOptions& options() const { return options_; }
  [[nodiscard]] const TableSnapshot& table() const { return table_; }
  [[nodiscard]] std::uint64_t table_generation() const { return report_.table_generation; }
  [[nodiscard]] std::size_t bucket_count() const { return buckets_.size(); }
  // The planned steps of bucket i (bucket_plan.h), in the order of options().buckets.
  [[nodiscard]] const BucketPlan& bucket(std::size_t i) const { return *buckets_[i]; }
  // The graph inputs and outputs, in the order run() takes them.
  [[nodiscard]] std::span<const ValueId> inputs() const { return inputs_; }
  [[nodiscard]] std::span<const ValueId> outputs() const { return graph_.outputs(); }
  // Where the caller's tensors live, in the order of inputs() then outputs():
  // the host unless PlanOptions::external_backends says otherwise.
  [[nodiscard]] std::span<const BackendId> input_backends() const { return input_backends_; }
  [[nodiscard]] std::span<const BackendId> output_backends() const { return output_backends_; }

 private:
  friend Result<ExecutionPlan> plan_graph(const Graph&, TableSnapshot, const PlanOptions&);
  friend Result<std::unique_ptr<BucketPlan>> plan_bucket_for_sizes(const ExecutionPlan&,
                                                                   std::span<const std::int64_t>);
  Graph graph_;
  PlanOptions options_;
  TableSnapshot table_;
  PlanReport report_;
  std::vector<ValueId> inputs_;
  std::vector<BackendId> input_backends_, output_backends_;
  std::vector<std::unique_ptr<BucketPlan>> buckets_;
};

// Plans `graph` against `table`. Fails with kInvalidArgument for a malformed graph
// or bucket, and with the first unresolved node's error (kNotFound with the
// table's NoBackendForOp payload for a missing kernel) carrying a PlanFailure
// payload with the whole report.
[[nodiscard]] Result<ExecutionPlan> plan_graph(const Graph& graph, TableSnapshot table,
                                               const PlanOptions& options = {});

// Plans one bucket at exact symbol sizes (one per graph symbol) with the plan's
// graph, table and options: the run-time lookup path the executor takes for a
// shape outside every planned bucket.
[[nodiscard]] Result<std::unique_ptr<BucketPlan>> plan_bucket_for_sizes(
    const ExecutionPlan& plan, std::span<const std::int64_t> sizes);

// Per node and bucket: the chosen kernel, cost, precision, runners-up, rejections,
// then casts and fusions.
[[nodiscard]] std::string explain_text(const PlanReport& report);
// One screen: nodes and estimated time per backend, casts, fusions, violations.
[[nodiscard]] std::string explain_summary(const PlanReport& report);
// The whole report as one JSON object (`switchyard explain --json` adds the
// graph's name and whether it planned): fusions, skipped fusions, casts, and per
// bucket its sizes, per-backend totals and nodes with the chosen candidate,
// runners-up and rejections; then the violations.
[[nodiscard]] std::string explain_json(const PlanReport& report);

}  // namespace switchyard
