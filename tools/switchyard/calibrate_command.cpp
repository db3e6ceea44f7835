// `switchyard calibrate`: times the kernels of the binding table over a grid of
// shapes, fits each one's cost and writes a calibration profile, which `run` and
// `explain` then rank by (--calibration F or SWITCHYARD_CALIBRATION).
#include <cstdio>
#include <filesystem>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "calibration_plot.h"
#include "command.h"
#include "plan_source.h"
#include "progress.h"
#include "switchyard/backends.h"
#include "switchyard/calibrate.h"
#include "switchyard/dispatch.h"
#include "switchyard/environment.h"
#include "switchyard/llama.h"
#include "switchyard/regret.h"

namespace switchyard::tool {

Result<std::shared_ptr<const CalibrationProfile>> planning_calibration(const std::string& flag,
                                                                       int threads) {
  std::string path = flag;
  if (path.empty()) {
    const char* env = read_environment(EnvVar::kCalibration);
    if (env == nullptr || *env == '\0') return std::shared_ptr<const CalibrationProfile>();
    path = env;
  }
  std::vector<std::string> ignored;
  SWITCHYARD_ASSIGN_OR_RETURN(std::shared_ptr<const CalibrationProfile> profile,
                              load_calibration(path, *current_table(), threads, ignored));
  for (const std::string& why : ignored) {
    std::fprintf(stderr, "switchyard: calibration %s: ignored: %s\n", path.c_str(), why.c_str());
  }
  std::fprintf(stderr, "switchyard: calibration %s: %zu kernel(s) measured on this machine\n",
               path.c_str(), profile->entries().size());
  return profile;
}

namespace {

struct CalibrateCommandOptions {
  std::string backend;
  std::string op;
  // Graphs whose plans' shapes to calibrate at (only their kernels then).
  std::vector<std::string> graphs;
  PlanSource source;
  double budget_s = 180;
  std::string out = "switchyard-calibration.json";
  // Where to draw the pictures (calibrate --plot), or empty.
  std::string plot;
  int threads = 0;
  bool verbose = false;
};

int run_calibrate(const CalibrateCommandOptions& o) {
  CalibrateOptions options;
  options.budget_s = o.budget_s;
  options.threads = o.threads > 0 ? o.threads : default_thread_count();
  if (!o.backend.empty()) {
    Result<BackendId> b = parse_compiled_backend(o.backend);
    if (!b.is_ok()) return report_failure(b.status());
    options.backend = *b;
  }
  if (!o.op.empty()) {
    Result<OpKind> op = parse_op(o.op);
    if (!op.is_ok()) return report_failure(op.status());
    options.op = *op;
  }
  Progress progress(true);
  if (!o.graphs.empty()) {
    PlanSource source = o.source;
    source.backend = o.backend.empty() ? "auto" : o.backend;
    // The shapes the plans run each candidate at, planned with the modelled costs
    // on a pool of the calibration's size, for the backend calibrated (or as `run`
    // would pick it).
    ThreadPool pool(options.threads);
    for (const std::string& graph : o.graphs) {
      progress.show(graph, 0, 1, "planning");
      Result<std::vector<HeldPlan>> plans = plans_of(graph, source, &pool, {nullptr});
      if (!plans.is_ok()) {
        progress.clear();
        return report_failure(plans.status());
      }
      for (const HeldPlan& held : *plans) {
        for (PlannedShape& s : planned_shapes(*held.plan)) options.planned.push_back(std::move(s));
      }
    }
    progress.clear();
  }
  options.progress = [&](std::size_t i, std::size_t n, std::string_view kernel) {
    progress.show("calibrate", static_cast<std::int64_t>(i), static_cast<std::int64_t>(n), kernel);
  };
  Result<CalibrateReport> report = calibrate(*current_table(), options);
  progress.clear();
  if (!report.is_ok()) return report_failure(report.status());
  if (Status saved = report->profile.save(o.out); !saved.is_ok()) return report_failure(saved);

  // How far the model is from the measurement, at the smallest and largest size.
  const BackendCaps caps;
  fmt::print("{:<48} {:>6} {:>12} {:>12} {:>18}\n", "kernel", "sizes", "smallest", "largest",
             "measured/modelled");
  for (const auto& [hash, e] : report->profile.entries()) {
    const CostSample& lo = e.cost.samples.front();
    const CostSample& hi = e.cost.samples.back();
    auto ratio = [&](const CostSample& x) {
      return x.ns / CostEstimate{x.flops, x.bytes, 0, true}.time_ns(caps);
    };
    fmt::print("{:<48} {:>6} {:>10.0f}ns {:>10.0f}us {:>8.2f} .. {:<7.2f}\n", e.kernel,
               e.cost.samples.size(), lo.ns, hi.ns / 1e3, ratio(lo), ratio(hi));
  }
  if (o.verbose) {
    for (const std::string& s : report->skipped) fmt::print("skipped {}\n", s);
  }
  for (const BackendFingerprint& f : report->profile.fingerprints()) {
    fmt::print("\n{}: {}", name(f.backend), f.text);
  }
  fmt::print("\n{} kernel(s) calibrated, {} skipped{}, in {:.0f} s; profile {}\n",
             report->calibrated, report->skipped.size(), o.verbose ? "" : " (--verbose lists them)",
             report->seconds, o.out);
  if (!o.plot.empty() && report->calibrated > 0) {
    Result<std::vector<std::filesystem::path>> data = write_calibration_plot_data(*report, o.plot);
    if (!data.is_ok()) return report_failure(data.status());
    Result<std::vector<std::filesystem::path>> pictures = draw_calibration_plots(o.plot, *data);
    if (!pictures.is_ok()) return report_failure(pictures.status());
    for (const std::filesystem::path& p : *pictures) fmt::print("picture {}\n", p.string());
  }
  return report->calibrated > 0 ? kExitOk : kExitCheckFailed;
}

}  // namespace

void add_calibrate_command(CLI::App& app, CommandMain& selected) {
  auto options = std::make_shared<CalibrateCommandOptions>();
  CLI::App* sub = app.add_subcommand(
      "calibrate",
      "Time every kernel over a grid of shapes, fit its cost and write a calibration profile "
      "that run and explain rank by (docs/calibration.md)");
  sub->add_option("--backend", options->backend, "Only this backend (cpu, cuda, ...)");
  sub->add_option("--op", options->op, "Only this op (add, matmul, ...)");
  sub->add_option("--budget-s", options->budget_s, "Seconds for the whole table (default 180)")
      ->check(CLI::Range(1.0, 86400.0));
  sub->add_option("--out", options->out, "The profile to write")->capture_default_str();
  sub->add_option("--threads", options->threads, "CPU threads (default: SWITCHYARD_THREADS)")
      ->check(kThreadRange);
  sub->add_option("--graph", options->graphs,
                  "Calibrate only the kernels these graphs' plans may run (llama, block, mlp), "
                  "at the grid's shapes and at the plans' own")
      ->delimiter(',')
      ->check(CLI::IsMember(kPlanGraphs));
  sub->add_option("--model", options->source.model,
                  "GGUF model file for the llama graph (default: the embedded synthetic model)");
  add_plan_source_options(sub, options->source);
  sub->add_option("--plot", options->plot,
                  "Also draw, per op family, each kernel's measured times against its fitted "
                  "and modelled cost into this directory (SVG; needs python3 with matplotlib)");
  sub->add_flag("--verbose", options->verbose, "List the kernels skipped and why");
  sub->callback([options, &selected] { selected = [options] { return run_calibrate(*options); }; });
}

}  // namespace switchyard::tool
