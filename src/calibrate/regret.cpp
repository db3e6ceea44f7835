#include "switchyard/regret.h"

#include <algorithm>
#include <chrono>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include <fmt/format.h>

#include "calibrate/timing.h"
#include "switchyard/plan.h"
#include "switchyard/thread_pool.h"

namespace switchyard {
namespace {

// What a timing is keyed by: the kernel, its operand shapes and every parameter a
// kernel reads.
std::string timing_key(std::string_view kernel, std::span<const Shape> shapes, const OpParams& p) {
  std::string key(kernel);
  for (const Shape& s : shapes) key += " " + s.to_string();
  key += fmt::format(" | {} {} {} {} {} {} {} {}", p.scale, p.eps, p.axis, p.causal,
                     static_cast<int>(p.rope_mode), p.rope_base, p.rope_dims, p.query_offset);
  return key;
}

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

// Note [Timing in alternation]
// This machine's speed may drift by a factor of two over minutes, and a kernel
// timed right after another inherits its caches and clocks. So the siblings of a
// node are timed in rounds, each round calling every one once, until each has had
// its budget (at least 5 rounds, at most 1000); their medians are then compared
// under the same conditions. Each is called once to warm up first.
Result<std::vector<double>> time_in_turn(std::vector<KernelTimer>& timers, double budget_s,
                                         std::string_view bucket, std::string_view node) {
  std::vector<std::vector<double>> times(timers.size());
  for (KernelTimer& t : timers) {
    if (Result<double> warm = t.call_ns(); !warm.is_ok()) {
      return timing_error(bucket, node, t.entry(), warm.status());
    }
  }
  using Clock = std::chrono::steady_clock;
  const auto budget = std::chrono::duration_cast<Clock::duration>(
      std::chrono::duration<double>(budget_s * static_cast<double>(timers.size())));
  const Clock::time_point deadline = Clock::now() + budget;
  for (int round = 0; !timers.empty() && round < 1000; ++round) {
    if (round >= 5 && Clock::now() >= deadline) break;
    for (std::size_t i = 0; i < timers.size(); ++i) {
      Result<double> ns = timers[i].call_ns();
      if (!ns.is_ok()) return timing_error(bucket, node, timers[i].entry(), ns.status());
      times[i].push_back(*ns);
    }
  }
  std::vector<double> medians;
  for (std::vector<double>& t : times) medians.push_back(median(std::move(t)));
  return medians;
}

double sum_over(const std::vector<RegretNode>& nodes, std::string_view bucket, bool fastest) {
  double total = 0;
  for (const RegretNode& n : nodes) {
    if (bucket.empty() || n.bucket == bucket) total += fastest ? n.fastest_ns() : n.chosen_ns();
  }
  return total;
}

}  // namespace

const double* RegretTimings::find(const std::string& key) const {
  const auto it = ns_.find(key);
  return it == ns_.end() ? nullptr : &it->second;
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

Result<RegretReport> measure_regret(const ExecutionPlan& plan, const RegretOptions& options,
                                    RegretTimings& timings) {
  const KernelBindingTable& table = *plan.table();
  const Graph& graph = plan.graph();
  ThreadPool pool(options.threads);
  RegretReport report;
  std::size_t steps = 0, done = 0;
  for (std::size_t b = 0; b < plan.bucket_count(); ++b) {
    for (const PlannedStep& step : plan.bucket(b).steps) steps += step.kind == StepKind::kKernel;
  }
  for (std::size_t b = 0; b < plan.bucket_count(); ++b) {
    const BucketPlan& bucket = plan.bucket(b);
    const BucketReport& bucket_report = plan.report().buckets[b];
    for (const PlannedStep& step : bucket.steps) {
      if (step.kind != StepKind::kKernel) continue;
      const Node& node = graph.node(step.node);
      if (options.progress) options.progress(done++, steps, step.entry->name);
      const NodeReport* nr = node_report(bucket_report, step.node);
      if (nr == nullptr) {
        return internal_error(
            fmt::format("regret: bucket {} has no report for node {}", bucket.name, node.name));
      }
      if (node.fused_key != 0) {
        report.skipped.push_back(
            fmt::format("{} / {}: a runtime-fused recipe (its steps are timed as one)", bucket.name,
                        node.name));
        continue;
      }
      // The step's operands at the bucket's costed sizes, inputs then output.
      std::vector<Shape> shapes;
      std::vector<DType> dtypes;
      const std::size_t operands = std::size_t{step.num_inputs} + 1;
      for (std::size_t i = 0; i < operands; ++i) {
        const Value& v = graph.value(bucket.operands[step.first_operand + i].value);
        shapes.push_back(concrete_shape(v.shape, bucket.max));
        dtypes.push_back(v.dtype);
      }
      const DTypeList key_dtypes(dtypes);
      const OpParams& params = step.params != nullptr ? *step.params : node.params;
      std::vector<RouteCandidate> ranked = {nr->chosen};
      for (const RouteCandidate& c : nr->runners_up) {
        if (c.backend == nr->chosen.backend) ranked.push_back(c);
      }
      RegretNode out{.bucket = bucket.name,
                     .node = node.name,
                     .op = nr->op,
                     .shapes = nr->shapes,
                     .backend = nr->chosen.backend};
      BackendMemory* memory = table.backend_memory(nr->chosen.backend);
      std::vector<const BindingEntry*> entries;
      std::vector<std::string> keys;
      for (const RouteCandidate& c : ranked) {
        const BindingEntry* entry =
            find_sibling(table, node.op, key_dtypes, nr->chosen.backend, c.kernel);
        if (entry == nullptr) {
          return internal_error(
              fmt::format("regret: {} / {}: the plan's candidate {} is not in "
                          "the table",
                          bucket.name, node.name, c.kernel));
        }
        entries.push_back(entry);
        keys.push_back(timing_key(entry->name, shapes, params));
      }
      // The siblings not timed yet, called in turn (Note [Timing in alternation]).
      std::vector<KernelTimer> timers;
      std::vector<std::size_t> timed;
      for (std::size_t i = 0; i < entries.size(); ++i) {
        if (timings.find(keys[i]) != nullptr ||
            std::find(keys.begin(), keys.begin() + static_cast<std::ptrdiff_t>(i), keys[i]) !=
                keys.begin() + static_cast<std::ptrdiff_t>(i)) {
          continue;
        }
        Result<KernelTimer> timer = KernelTimer::make(*entries[i], nr->chosen.backend, dtypes,
                                                      shapes, params, memory, pool);
        if (!timer.is_ok())
          return timing_error(bucket.name, node.name, *entries[i], timer.status());
        timers.push_back(std::move(*timer));
        timed.push_back(i);
      }
      SWITCHYARD_ASSIGN_OR_RETURN(std::vector<double> medians,
                                  time_in_turn(timers, options.budget_s, bucket.name, node.name));
      for (std::size_t t = 0; t < timed.size(); ++t) timings.add(keys[timed[t]], medians[t]);
      for (std::size_t i = 0; i < entries.size(); ++i) {
        out.candidates.push_back({.kernel = entries[i]->name,
                                  .measured_ns = *timings.find(keys[i]),
                                  .ranked_ns = ranked[i].kernel_ns,
                                  .ranked_by_profile = ranked[i].measured});
      }
      const auto fastest = std::min_element(out.candidates.begin(), out.candidates.end(),
                                            [](const RegretCandidate& a, const RegretCandidate& c) {
                                              return a.measured_ns < c.measured_ns;
                                            });
      out.fastest = static_cast<std::size_t>(fastest - out.candidates.begin());
      report.nodes.push_back(std::move(out));
    }
  }
  return report;
}

}  // namespace switchyard
