#include "switchyard/regret.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <memory>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include <fmt/format.h>

#include "calibrate/timing.h"
#include "switchyard/plan.h"
#include "switchyard/thread_pool.h"

namespace switchyard {
namespace {

const NodeReport* node_report(const BucketReport& bucket, std::int32_t node) {
  for (const NodeReport& n : bucket.nodes) {
    if (n.node == node) return &n;
  }
  return nullptr;
}

// The sibling named `kernel` at the step's key, or null.
const BindingEntry* find_sibling(const KernelBindingTable& table, BindingKey key,
                                 const DTypeList& dtypes, BackendId backend,
                                 std::string_view kernel) {
  for (const BindingEntry& e : table.lookup_alternatives(key, dtypes, backend)) {
    if (e.name == kernel) return &e;
  }
  return nullptr;
}

Status timing_error(std::string_view bucket, std::string_view node, const BindingEntry& entry,
                    const Status& cause) {
  return Status(cause.code(),
                fmt::format("regret: {} / {}: {}: {}", bucket, node, entry.name, cause.message()));
}

double sum_over(const std::vector<RegretNode>& nodes, std::string_view bucket, bool fastest) {
  double total = 0;
  for (const RegretNode& n : nodes) {
    if (bucket.empty() || n.bucket == bucket) total += fastest ? n.fastest_ns() : n.chosen_ns();
  }
  return total;
}

}  // namespace

const RegretTiming* RegretTimings::find(const std::string& key) const {
  const auto it = timings_.find(key);
  return it == timings_.end() ? nullptr : &it->second;
}

double RegretReport::chosen_ns(std::string_view bucket) const {
  return sum_over(nodes, bucket, false);
}

double RegretReport::fastest_ns(std::string_view bucket) const {
  return sum_over(nodes, bucket, true);
}

double RegretReport::total_regret(std::string_view bucket) const {
  const double fastest = fastest_ns(bucket);
  return fastest > 0 ? chosen_ns(bucket) / fastest - 1.0 : 0.0;
}

double RegretReport::worst_regret() const {
  double worst = 0;
  for (const RegretNode& n : nodes) worst = std::max(worst, n.regret());
  return worst;
}

double RegretReport::worst_regret_beyond_noise() const {
  double worst = 0;
  for (const RegretNode& n : nodes) {
    if (n.beyond_noise()) worst = std::max(worst, n.regret());
  }
  return worst;
}

namespace {

// One kernel step of a plan, as measured: the node, its operands at the bucket's
// costed sizes (inputs, then the output), and its candidates on the chosen
// backend, the chosen one first.
struct StepSite {
  const BucketPlan* bucket = nullptr;
  const Node* node = nullptr;
  const NodeReport* report = nullptr;
  std::vector<Shape> shapes;
  std::vector<DType> dtypes;
  const OpParams* params = nullptr;
  // The output is planned into the first input's memory (set_rows' cache).
  bool in_place = false;
  std::vector<RouteCandidate> ranked;
  std::vector<const BindingEntry*> entries;  // ranked's, from the table
};

// Calls visit(site) for every kernel step of `plan` that is not a runtime-fused
// recipe (those go to skip(bucket, node)), in bucket and step order.
template <typename Visit, typename Skip>
Status for_each_step(const ExecutionPlan& plan, Visit&& visit, Skip&& skip) {
  const KernelBindingTable& table = *plan.table();
  const Graph& graph = plan.graph();
  for (std::size_t b = 0; b < plan.bucket_count(); ++b) {
    const BucketPlan& bucket = plan.bucket(b);
    const BucketReport& bucket_report = plan.report().buckets[b];
    for (const PlannedStep& step : bucket.steps) {
      if (step.kind != StepKind::kKernel) continue;
      StepSite site;
      site.bucket = &bucket;
      site.node = &graph.node(step.node);
      const Node& node = *site.node;
      site.report = node_report(bucket_report, step.node);
      if (site.report == nullptr) {
        return internal_error(
            fmt::format("regret: bucket {} has no report for node {}", bucket.name, node.name));
      }
      if (node.fused_key != 0) {
        skip(bucket.name, node.name);
        continue;
      }
      const std::size_t operands = std::size_t{step.num_inputs} + 1;
      for (std::size_t i = 0; i < operands; ++i) {
        const Value& v = graph.value(bucket.operands[step.first_operand + i].value);
        site.shapes.push_back(concrete_shape(v.shape, bucket.max));
        site.dtypes.push_back(v.dtype);
      }
      site.params = step.params != nullptr ? step.params : &node.params;
      const OperandRef& first = bucket.operands[step.first_operand];
      const OperandRef& result = bucket.operands[step.first_operand + step.num_inputs];
      site.in_place =
          node.op == OpKind::kSetRows && site.shapes.front() == site.shapes.back() &&
          site.dtypes.front() == site.dtypes.back() &&
          (first.value == result.value || (first.buffer >= 0 && first.buffer == result.buffer));
      const NodeReport& nr = *site.report;
      site.ranked.push_back(nr.chosen);
      for (const RouteCandidate& c : nr.runners_up) {
        if (c.backend == nr.chosen.backend) site.ranked.push_back(c);
      }
      const DTypeList key_dtypes(site.dtypes);
      for (const RouteCandidate& c : site.ranked) {
        const BindingEntry* entry =
            find_sibling(table, node.op, key_dtypes, nr.chosen.backend, c.kernel);
        if (entry == nullptr) {
          return internal_error(
              fmt::format("regret: {} / {}: the plan's candidate {} is not in "
                          "the table",
                          bucket.name, node.name, c.kernel));
        }
        site.entries.push_back(entry);
      }
      SWITCHYARD_RETURN_IF_ERROR(visit(site, step));
    }
  }
  return Status::ok();
}

}  // namespace

std::vector<PlannedShape> planned_shapes(const ExecutionPlan& plan) {
  std::vector<PlannedShape> out;
  std::set<std::string> seen;
  const Status walked = for_each_step(
      plan,
      [&](const StepSite& site, const PlannedStep&) {
        for (const BindingEntry* e : site.entries) {
          if (!seen.insert(timing_key(e->name, site.shapes, *site.params)).second) continue;
          out.push_back({.kernel = e->name,
                         .shapes = site.shapes,
                         .params = *site.params,
                         .in_place = site.in_place});
        }
        return Status::ok();
      },
      [](std::string_view, std::string_view) {});
  // The walk fails only on a plan inconsistent with its own table and report.
  SWITCHYARD_CHECK_MSG(walked.is_ok(), walked.to_string());
  return out;
}

Result<RegretReport> measure_regret(const ExecutionPlan& plan, const RegretOptions& options,
                                    RegretTimings& timings) {
  const KernelBindingTable& table = *plan.table();
  ThreadPool pool(options.threads);
  RegretReport report;
  std::size_t steps = 0, done = 0;
  for (std::size_t b = 0; b < plan.bucket_count(); ++b) {
    for (const PlannedStep& step : plan.bucket(b).steps) steps += step.kind == StepKind::kKernel;
  }
  const auto measure = [&](const StepSite& site, const PlannedStep& step) -> Status {
    if (options.progress) options.progress(done++, steps, step.entry->name);
    const BucketPlan& bucket = *site.bucket;
    const Node& node = *site.node;
    const NodeReport& nr = *site.report;
    const OpParams& params = *site.params;
    const std::vector<Shape>& shapes = site.shapes;
    const std::vector<DType>& dtypes = site.dtypes;
    const std::vector<const BindingEntry*>& entries = site.entries;
    RegretNode out{.bucket = bucket.name,
                   .node = node.name,
                   .op = nr.op,
                   .shapes = nr.shapes,
                   .backend = nr.chosen.backend};
    BackendMemory* memory = table.backend_memory(nr.chosen.backend);
    std::vector<std::string> keys;
    for (const BindingEntry* e : entries) keys.push_back(timing_key(e->name, shapes, params));
    // The siblings not timed yet, each as two timers, all called in turn (Notes
    // [Timing in alternation] in timing.h, [Regret within the noise]).
    std::vector<KernelTimer> timers;
    std::vector<std::size_t> timed;
    for (std::size_t i = 0; i < entries.size(); ++i) {
      const auto before = keys.begin() + static_cast<std::ptrdiff_t>(i);
      if (timings.find(keys[i]) != nullptr || std::find(keys.begin(), before, keys[i]) != before) {
        continue;
      }
      for (int twin = 0; twin < 2; ++twin) {
        Result<KernelTimer> timer = KernelTimer::make(*entries[i], nr.chosen.backend, dtypes,
                                                      shapes, params, memory, pool, site.in_place);
        if (!timer.is_ok()) {
          return timing_error(bucket.name, node.name, *entries[i], timer.status());
        }
        timers.push_back(std::move(*timer));
      }
      timed.push_back(i);
    }
    std::vector<Result<double>> medians = time_in_turn(timers, options.budget_s, /*min_rounds=*/5);
    for (std::size_t t = 0; t < timed.size(); ++t) {
      for (std::size_t twin = 2 * t; twin < 2 * t + 2; ++twin) {
        if (!medians[twin].is_ok()) {
          return timing_error(bucket.name, node.name, *entries[timed[t]], medians[twin].status());
        }
      }
      // Two medians closer than the clock's step differ by at least that step.
      const double a = *medians[2 * t], b = *medians[2 * t + 1];
      const double low = std::min(a, b);
      const double apart = std::max(std::abs(a - b), clock_step_ns());
      timings.add(keys[timed[t]], {.ns = (a + b) / 2, .spread = low > 0 ? apart / low : 0.0});
    }
    for (std::size_t i = 0; i < entries.size(); ++i) {
      const RegretTiming& timing = *timings.find(keys[i]);
      out.candidates.push_back({.kernel = entries[i]->name,
                                .measured_ns = timing.ns,
                                .spread = timing.spread,
                                .ranked_ns = site.ranked[i].kernel_ns,
                                .ranked_by_profile = site.ranked[i].measured});
    }
    const auto fastest = std::min_element(out.candidates.begin(), out.candidates.end(),
                                          [](const RegretCandidate& a, const RegretCandidate& c) {
                                            return a.measured_ns < c.measured_ns;
                                          });
    out.fastest = static_cast<std::size_t>(fastest - out.candidates.begin());
    report.nodes.push_back(std::move(out));
    return Status::ok();
  };
  const auto skip = [&](std::string_view bucket, std::string_view node) {
    report.skipped.push_back(
        fmt::format("{} / {}: a runtime-fused recipe (its steps are timed as one)", bucket, node));
  };
  SWITCHYARD_RETURN_IF_ERROR(for_each_step(plan, measure, skip));
  return report;
}

}  // namespace switchyard
