// `switchyard explain`: plans a graph against the published binding table and
// shows, per node and shape bucket, the chosen kernel, its estimated cost and
// precision claim, the runners-up, every rejected candidate with its reason, and
// the casts and fusions the planner inserted. With no arguments it explains a
// built-in transformer block, so it is useful before any model is at hand.
#include <memory>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "command.h"
#include "switchyard/dispatch.h"
#include "switchyard/example_graphs.h"
#include "switchyard/plan.h"

namespace switchyard::tool {
namespace {

struct ExplainOptions {
  std::string graph = "block";
  bool json = false;
  bool summary = false;
  std::vector<std::string> prefer;
  std::vector<std::string> fallback;
  bool no_fusion = false;
  bool no_casts = false;
  std::string floor;
  std::int64_t max_tokens = 512;
  std::string calibration;
  bool admit_precision_trades = false;
};

Result<std::vector<BackendId>> parse_backends(const std::vector<std::string>& names) {
  std::vector<BackendId> out;
  for (const std::string& n : names) {
    SWITCHYARD_ASSIGN_OR_RETURN(BackendId b, parse_backend(n));
    out.push_back(b);
  }
  return out;
}

Result<PrecisionFloor> parse_floor(const std::string& text) {
  if (text.empty() || text == "none") return PrecisionFloor::none();
  if (text == "bit-stable") return PrecisionFloor::bit_stable_only();
  if (text.rfind("rel:", 0) == 0) {
    try {
      std::size_t used = 0;
      const double bound = std::stod(text.substr(4), &used);
      if (used == text.size() - 4 && bound > 0) return PrecisionFloor::relative(bound);
    } catch (const std::exception&) {
    }
  }
  return invalid_argument_error("--floor takes none, bit-stable or rel:<bound>, got '" + text +
                                "'");
}

int run_explain(const ExplainOptions& options) {
  Result<Graph> graph =
      invalid_argument_error("unknown graph '" + options.graph + "' (block, mlp)");
  if (options.graph == "block") graph = transformer_block_graph({});
  if (options.graph == "mlp") graph = mlp_graph();
  if (!graph.is_ok()) return report_failure(graph.status());
  Result<PrecisionFloor> floor = parse_floor(options.floor);
  if (!floor.is_ok()) return report_failure(floor.status());
  graph->set_precision_floor(*floor);

  PlanOptions plan_options;
  plan_options.buckets = example_buckets(options.max_tokens);
  plan_options.enable_fusion = !options.no_fusion;
  plan_options.enable_casts = !options.no_casts;
  if (!options.prefer.empty()) {
    Result<std::vector<BackendId>> prefer = parse_backends(options.prefer);
    if (!prefer.is_ok()) return report_failure(prefer.status());
    plan_options.policy.preferred = *prefer;
  }
  Result<std::vector<BackendId>> fallback = parse_backends(options.fallback);
  if (!fallback.is_ok()) return report_failure(fallback.status());
  plan_options.policy.fallbacks = *fallback;
  Result<std::shared_ptr<const CalibrationProfile>> calibration =
      planning_calibration(options.calibration, default_thread_count());
  if (!calibration.is_ok()) return report_failure(calibration.status());
  plan_options.calibration = *calibration;
  plan_options.admit_precision_trades = options.admit_precision_trades;

  Result<ExecutionPlan> plan = plan_graph(*graph, current_table(), plan_options);
  const PlanReport* report = nullptr;
  if (plan.is_ok()) {
    report = &plan->report();
  } else if (const PlanFailure* failure = plan.status().payload<PlanFailure>()) {
    report = &failure->report;
  } else {
    return report_failure(plan.status());
  }
  if (options.json) {
    nlohmann::json j = nlohmann::json::parse(explain_json(*report));
    j["graph"] = options.graph;
    j["planned"] = plan.is_ok();
    fmt::print("{}\n", j.dump(2));
  } else {
    fmt::print("explaining the built-in '{}' graph\n", options.graph);
    fmt::print("{}", options.summary ? explain_summary(*report) : explain_text(*report));
    if (!options.summary) fmt::print("\n{}", explain_summary(*report));
  }
  // A graph that cannot be planned is a failed check, not a usage error.
  return plan.is_ok() ? kExitOk : kExitCheckFailed;
}

}  // namespace

void add_explain_command(CLI::App& app, CommandMain& selected) {
  auto options = std::make_shared<ExplainOptions>();
  CLI::App* sub = app.add_subcommand(
      "explain",
      "Plan a graph and show where each node goes: chosen kernel, cost, precision, "
      "runners-up, rejections, casts and fusions");
  sub->add_option("--graph", options->graph, "Built-in graph to plan: block (default) or mlp");
  sub->add_flag("--json", options->json, "Print JSON instead of text");
  sub->add_flag("--summary", options->summary,
                "Only the one-screen summary (nodes and time per backend, violations)");
  sub->add_option("--prefer", options->prefer, "Preferred backends in order (default: cpu)")
      ->delimiter(',');
  sub->add_option("--fallback", options->fallback, "Backends allowed as fallbacks")->delimiter(',');
  sub->add_flag("--no-fusion", options->no_fusion, "Keep every subgraph decomposed");
  sub->add_flag("--no-casts", options->no_casts, "Do not insert dtype casts");
  sub->add_option("--floor", options->floor,
                  "Precision floor for every node: none, bit-stable or rel:<bound>");
  sub->add_flag("--admit-precision-trades", options->admit_precision_trades,
                "Let kernels that compute in a narrower type to be faster (TF32) compete; "
                "off, they are rejected as precision_trade");
  sub->add_option("--max-tokens", options->max_tokens,
                  "Largest token count of the prefill bucket (default 512)")
      ->check(CLI::Range(std::int64_t{1}, kMaxTokenCount));
  sub->add_option("--calibration", options->calibration,
                  "Rank by the measured costs of this calibration profile (switchyard calibrate; "
                  "default: SWITCHYARD_CALIBRATION)");
  sub->callback([options, &selected] { selected = [options] { return run_explain(*options); }; });
}

}  // namespace switchyard::tool
