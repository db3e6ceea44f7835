// Routing regret: how much slower the planner's choices are than the fastest
// sibling each node could have taken, measured.
//
// For every kernel step of every bucket of a plan, measure_regret times the
// chosen kernel and each runner-up on the same backend (the siblings the planner
// found admissible for the node: its layouts, precision floor and shapes), at
// the node's shapes at the bucket's costed sizes (its ranges' maxima), with the
// node's parameters, on operands made for the purpose (calibrate/timing.h: the
// same values calibration uses). A node's regret is chosen time / fastest time
// - 1; a bucket's and the plan's are the sums' ratio, so long nodes weigh more.
//
// Several plans of one graph (with and without a calibration profile, say) are
// measured against one RegretTimings, so that a kernel at a shape is timed once
// and every plan's choice is judged by the same numbers. Each kernel is timed
// twice, so that a node's regret can be told from the timings' own spread (Note
// [Regret within the noise]).
//
// Example: the regret of the planner's choices for the built-in MLP
//   Result<ExecutionPlan> plan = plan_graph(mlp_graph(), current_table(), options);
//   RegretTimings timings;
//   Result<RegretReport> r = measure_regret(*plan, {.threads = 2}, timings);
//   fmt::print("{:.1f} %\n", 100 * r->total_regret());
#pragma once

#include <algorithm>
#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "switchyard/bucket_plan.h"
#include "switchyard/calibrate.h"
#include "switchyard/status.h"

namespace switchyard {

struct RegretOptions {
  // CPU threads the kernels run on (a pool of this size is made).
  int threads = 1;
  // Seconds of timed calls per kernel and shape (at least 3 calls each).
  double budget_s = 0.05;
  // Called before each kernel step is measured: (steps done, kernel steps in the
  // plan, the chosen kernel).
  std::function<void(std::size_t, std::size_t, std::string_view)> progress;
};

// Note [Regret within the noise]
// Two timings of one kernel at one shape differ too: by a few percent for a long
// kernel, and for one of a fraction of a microsecond by as much as the clock's
// resolution and the calls around it allow, which can be 20 %. A node's regret
// is only a routing mistake where it exceeds what separates two timings of the
// same kernel. So every kernel is timed twice in the same alternation, as two
// independent timers (measure_regret), its time is the mean of the two medians
// and its spread their difference (at least the clock's step, which the medians
// of calls of a few ticks cannot resolve) over the smaller; a node's noise is the
// larger spread of its chosen and its fastest kernel, and the report gives the
// worst regret over all nodes and over the nodes whose regret exceeds their
// noise.

// A kernel's timing at one shape: the mean of two independent medians, and
// their difference over the smaller (Note [Regret within the noise]).
struct RegretTiming {
  double ns = 0;
  double spread = 0;
};

// Timings by kernel name and the call's shapes and parameters.
class RegretTimings {
 public:
  [[nodiscard]] const RegretTiming* find(const std::string& key) const;
  void add(std::string key, RegretTiming t) { timings_.emplace(std::move(key), t); }
  [[nodiscard]] std::size_t size() const { return timings_.size(); }

 private:
  std::map<std::string, RegretTiming> timings_;
};

struct RegretCandidate {
  std::string kernel;
  // Measured: the mean of two medians, and their relative difference.
  double measured_ns = 0;
  double spread = 0;
  // What the planner ranked it by (a profile's fit, or the modelled roofline).
  double ranked_ns = 0;
  bool ranked_by_profile = false;
};

struct RegretNode {
  std::string bucket;
  std::string node;
  std::string op;
  std::string shapes;
  BackendId backend = BackendId::kCpu;
  // The chosen kernel first, then the runners-up on its backend.
  std::vector<RegretCandidate> candidates;
  std::size_t fastest = 0;  // index into candidates

  [[nodiscard]] double chosen_ns() const { return candidates.front().measured_ns; }
  [[nodiscard]] double fastest_ns() const { return candidates[fastest].measured_ns; }
  [[nodiscard]] double regret() const { return chosen_ns() / fastest_ns() - 1.0; }
  // The larger spread of the chosen and the fastest kernel's timings.
  [[nodiscard]] double noise() const {
    return std::max(candidates.front().spread, candidates[fastest].spread);
  }
  [[nodiscard]] bool beyond_noise() const { return regret() > noise(); }
};

struct RegretReport {
  std::vector<RegretNode> nodes;
  // Steps not measured, and why ("bucket / node: runtime-fused recipe").
  std::vector<std::string> skipped;

  [[nodiscard]] double chosen_ns(std::string_view bucket = {}) const;
  [[nodiscard]] double fastest_ns(std::string_view bucket = {}) const;
  // sum chosen / sum fastest - 1 over the bucket's nodes (every node when empty).
  [[nodiscard]] double total_regret(std::string_view bucket = {}) const;
  // The largest node regret, of every node or of those beyond their noise.
  [[nodiscard]] double worst_regret() const;
  [[nodiscard]] double worst_regret_beyond_noise() const;
};

// Every shape at which a node of `plan` runs, or could run, a kernel: per kernel
// step, the chosen kernel and its runners-up on the same backend at the step's
// shapes and parameters (what measure_regret times), each (kernel, shapes,
// parameters) once. For CalibrateOptions::planned.
[[nodiscard]] std::vector<PlannedShape> planned_shapes(const ExecutionPlan& plan);

// Measures `plan` (see the file comment). Errors: a kernel that fails on its
// operands (the message names it, the bucket and the node); a device backend
// that is not ready.
[[nodiscard]] Result<RegretReport> measure_regret(const ExecutionPlan& plan,
                                                  const RegretOptions& options,
                                                  RegretTimings& timings);

}  // namespace switchyard
