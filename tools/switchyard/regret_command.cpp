// `switchyard regret`: how much time the planner's routing leaves on the table.
// Plans a llama model (the embedded synthetic one by default, or a GGUF file) and
// the built-in example graphs, times every sibling each node could have taken on
// its backend (measure_regret, switchyard/regret.h), and reports per bucket the
// total regret (time of the chosen kernels over time of the fastest ones) and the
// nodes that cost the most. With --calibration it plans each graph twice, with
// the modelled costs and with the profile's, and judges both by the same timings.
#include <algorithm>
#include <cstdio>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "command.h"
#include "model_source.h"
#include "plan_source.h"
#include "progress.h"
#include "switchyard/llama.h"
#include "switchyard/regret.h"

namespace switchyard::tool {
namespace {

struct RegretCommandOptions {
  PlanSource source;
  std::vector<std::string> graphs = kPlanGraphs;
  std::string calibration;
  int threads = 0;
  double budget_ms = 50;
  int top = 8;
  bool json = false;
};

// One graph's reports: with the modelled costs and (given a profile) with the
// profile's.
struct Subject {
  std::string graph;
  std::vector<std::pair<std::string, RegretReport>> reports;  // "modelled" / "profile"
};

std::string percent(double x) { return fmt::format("{:.1f} %", 100.0 * x); }

std::vector<std::string> buckets_of(const RegretReport& r) {
  std::vector<std::string> names;
  for (const RegretNode& n : r.nodes) {
    if (std::find(names.begin(), names.end(), n.bucket) == names.end()) names.push_back(n.bucket);
  }
  return names;
}

void print_text(const std::vector<Subject>& subjects, int top) {
  for (const Subject& s : subjects) {
    for (const auto& [label, r] : s.reports) {
      fmt::print("\n{} ({} costs)\n", s.graph, label);
      // "worst": the largest node regret; "beyond noise": the largest of those
      // that exceed their node's timing spread (Note [Regret within the noise]).
      fmt::print("  {:<10} {:>6} {:>12} {:>12} {:>8} {:>8} {:>13}\n", "bucket", "nodes",
                 "chosen ms", "fastest ms", "regret", "worst", "beyond noise");
      for (const std::string& b : buckets_of(r)) {
        int nodes = 0;
        double worst = 0, worst_beyond = 0;
        for (const RegretNode& n : r.nodes) {
          if (n.bucket != b) continue;
          ++nodes;
          worst = std::max(worst, n.regret());
          if (n.beyond_noise()) worst_beyond = std::max(worst_beyond, n.regret());
        }
        fmt::print("  {:<10} {:>6} {:>12.3f} {:>12.3f} {:>8} {:>8} {:>13}\n", b, nodes,
                   r.chosen_ns(b) * 1e-6, r.fastest_ns(b) * 1e-6, percent(r.total_regret(b)),
                   percent(worst), percent(worst_beyond));
      }
      fmt::print("  {:<10} {:>6} {:>12.3f} {:>12.3f} {:>8} {:>8} {:>13}\n", "all", r.nodes.size(),
                 r.chosen_ns() * 1e-6, r.fastest_ns() * 1e-6, percent(r.total_regret()),
                 percent(r.worst_regret()), percent(r.worst_regret_beyond_noise()));
      // The nodes that lose the most time, largest first.
      std::vector<const RegretNode*> lossy;
      for (const RegretNode& n : r.nodes) {
        if (n.fastest != 0) lossy.push_back(&n);
      }
      std::sort(lossy.begin(), lossy.end(), [](const RegretNode* a, const RegretNode* b) {
        return a->chosen_ns() - a->fastest_ns() > b->chosen_ns() - b->fastest_ns();
      });
      if (lossy.empty()) {
        fmt::print("  every node took its fastest sibling\n");
        continue;
      }
      fmt::print("  {} node(s) did not take their fastest sibling{}:\n", lossy.size(),
                 lossy.size() > static_cast<std::size_t>(top)
                     ? fmt::format(", the {} costliest", top)
                     : "");
      for (std::size_t i = 0; i < lossy.size() && i < static_cast<std::size_t>(top); ++i) {
        const RegretNode& n = *lossy[i];
        fmt::print("    {} / {} {}: {} {:.1f} us, {} {:.1f} us faster (+{}; noise {}{})\n",
                   n.bucket, n.node, n.shapes, n.candidates.front().kernel, n.chosen_ns() * 1e-3,
                   n.candidates[n.fastest].kernel, n.fastest_ns() * 1e-3, percent(n.regret()),
                   percent(n.noise()), n.beyond_noise() ? "" : ", within it");
      }
    }
  }
}

nlohmann::json to_json(const std::vector<Subject>& subjects) {
  nlohmann::json out = nlohmann::json::array();
  for (const Subject& s : subjects) {
    for (const auto& [label, r] : s.reports) {
      nlohmann::json j;
      j["graph"] = s.graph;
      j["costs"] = label;
      j["total_regret"] = r.total_regret();
      j["worst_regret"] = r.worst_regret();
      j["worst_regret_beyond_noise"] = r.worst_regret_beyond_noise();
      j["chosen_ns"] = r.chosen_ns();
      j["fastest_ns"] = r.fastest_ns();
      j["skipped"] = r.skipped;
      for (const std::string& b : buckets_of(r)) {
        j["buckets"][b] = {{"total_regret", r.total_regret(b)},
                           {"chosen_ns", r.chosen_ns(b)},
                           {"fastest_ns", r.fastest_ns(b)}};
      }
      j["nodes"] = nlohmann::json::array();
      for (const RegretNode& n : r.nodes) {
        nlohmann::json node = {{"bucket", n.bucket},
                               {"node", n.node},
                               {"op", n.op},
                               {"shapes", n.shapes},
                               {"backend", name(n.backend)},
                               {"regret", n.regret()},
                               {"noise", n.noise()},
                               {"chosen", n.candidates.front().kernel},
                               {"fastest", n.candidates[n.fastest].kernel}};
        for (const RegretCandidate& c : n.candidates) {
          node["candidates"].push_back({{"kernel", c.kernel},
                                        {"measured_ns", c.measured_ns},
                                        {"spread", c.spread},
                                        {"ranked_ns", c.ranked_ns},
                                        {"ranked_by", c.ranked_by_profile ? "profile" : "model"}});
        }
        j["nodes"].push_back(std::move(node));
      }
      out.push_back(std::move(j));
    }
  }
  return out;
}

int run_regret(const RegretCommandOptions& o) {
  std::unique_ptr<ThreadPool> own_pool;
  ParallelRunner* runner = &default_thread_pool();
  if (o.threads > 0) {
    own_pool = std::make_unique<ThreadPool>(o.threads);
    runner = own_pool.get();
  }
  Result<std::shared_ptr<const CalibrationProfile>> profile =
      planning_calibration(o.calibration, runner->num_threads());
  if (!profile.is_ok()) return report_failure(profile.status());
  if (!o.calibration.empty() && *profile == nullptr) {
    return report_failure(invalid_argument_error(
        fmt::format("regret: --calibration {}: nothing in it applies here", o.calibration)));
  }
  Result<BackendId> backend = pick_backend("regret", o.source.backend);
  if (!backend.is_ok()) return report_failure(backend.status());
  RegretOptions options;
  options.threads = runner->num_threads();
  options.budget_s = o.budget_ms * 1e-3;
  Progress progress(!o.json);
  RegretTimings timings;
  std::vector<Subject> subjects;
  for (const std::string& graph : o.graphs) {
    progress.show(graph, 0, 1, "planning");
    std::vector<std::shared_ptr<const CalibrationProfile>> rankings = {nullptr};
    if (*profile) rankings.push_back(*profile);
    Result<std::vector<HeldPlan>> plans = plans_of(graph, o.source, runner, rankings);
    if (!plans.is_ok()) {
      progress.clear();
      return report_failure(plans.status());
    }
    Subject subject{.graph = graph, .reports = {}};
    for (std::size_t i = 0; i < plans->size(); ++i) {
      options.progress = [&](std::size_t done, std::size_t total, std::string_view kernel) {
        progress.show(graph, static_cast<std::int64_t>(done), static_cast<std::int64_t>(total),
                      kernel);
      };
      Result<RegretReport> r = measure_regret(*(*plans)[i].plan, options, timings);
      if (!r.is_ok()) {
        progress.clear();
        return report_failure(r.status());
      }
      subject.reports.emplace_back(i == 0 ? "modelled" : "profile", std::move(*r));
    }
    subjects.push_back(std::move(subject));
  }
  progress.clear();
  if (o.json) {
    fmt::print("{}\n", to_json(subjects).dump(2));
  } else {
    fmt::print(
        "routing regret of the {} plans{} on {} thread{}: the planner's kernels against the "
        "fastest sibling of each node, {} kernel timing(s)\n",
        name(*backend), o.source.backend == "auto" ? auto_note(*backend) : std::string(),
        runner->num_threads(), runner->num_threads() == 1 ? "" : "s", timings.size());
    print_text(subjects, o.top);
  }
  return kExitOk;
}

}  // namespace

void add_regret_command(CLI::App& app, CommandMain& selected) {
  auto options = std::make_shared<RegretCommandOptions>();
  CLI::App* sub = app.add_subcommand(
      "regret",
      "Time every sibling each planned node could have taken and report how much slower "
      "the planner's choices are than the fastest (per bucket and per node)");
  sub->add_option("model", options->source.model,
                  "GGUF model file for the llama graph (omit for the embedded synthetic model)");
  add_plan_source_options(sub, options->source);
  sub->add_option("--backend", options->source.backend,
                  "Backend the plans prefer: auto (the default: an accelerator whose device is "
                  "present, else cpu) or a compiled backend's name");
  sub->add_option("--graph", options->graphs,
                  "Graphs to measure: llama, block, mlp (default: all three)")
      ->delimiter(',')
      ->check(CLI::IsMember(kPlanGraphs));
  sub->add_option("--calibration", options->calibration,
                  "Also plan with this calibration profile's costs and judge both plans "
                  "(default: SWITCHYARD_CALIBRATION)");
  sub->add_option("--threads", options->threads, "CPU threads (default: all)")->check(kThreadRange);
  sub->add_option(
         "--budget-ms", options->budget_ms,
         "Milliseconds of timed calls per kernel and shape (at least 5 rounds; default 50)")
      ->check(CLI::Range(0.0, 60000.0));
  sub->add_option("--top", options->top, "Nodes listed per plan (default 8)")
      ->check(CLI::Range(0, 1000));
  sub->add_flag("--json", options->json, "Print every node's timings as JSON");
  sub->callback([options, &selected] { selected = [options] { return run_regret(*options); }; });
}

}  // namespace switchyard::tool
