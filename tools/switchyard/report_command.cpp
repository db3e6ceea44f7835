// `switchyard report`: the page a person reads to decide whether a model will run
// well on this machine (report.h). With a model (or, without one, the embedded
// synthetic model) it loads and runs it as `run` does and shows its seal report,
// plan and measured times beside the coverage map; --no-model shows the table
// (and a calibration profile) alone.
#include <memory>
#include <optional>
#include <string>

#include <fmt/format.h>

#include "command.h"
#include "model_source.h"
#include "output_path.h"
#include "report.h"
#include "run_model.h"
#include "switchyard/backends.h"
#include "switchyard/file_io.h"
#include "switchyard/llama.h"
#include "switchyard/thread_pool.h"

namespace switchyard::tool {
namespace {

struct ReportOptions {
  RunOptions run;
  std::string out = "switchyard-report.html";
  bool json = false;
  bool no_model = false;
  std::string coverage_backend;
};

int run_report(ReportOptions o) {
  if (o.no_model) {
    if (!o.run.model.empty()) {
      return report_failure(invalid_argument_error("report: --no-model and a model file"));
    }
    std::optional<BackendId> only;
    if (!o.coverage_backend.empty()) {
      Result<BackendId> b = parse_backend(o.coverage_backend);
      if (!b.is_ok()) return report_failure(b.status().with_context("report"));
      only = *b;
    }
    if (!o.json) {
      if (Status st = check_output_path(o.out, "", "the report page"); !st.is_ok()) {
        return report_failure(st.with_context("report"));
      }
    }
    Result<ReportInputs> inputs =
        report_inputs(o.run.ledger, only, o.run.calibration,
                      o.run.threads > 0 ? o.run.threads : default_thread_count());
    if (!inputs.is_ok()) return report_failure(inputs.status().with_context("report"));
    const nlohmann::json document = report_json(*inputs);
    if (o.json) {
      fmt::print("{}\n", document.dump(2, ' ', false, nlohmann::json::error_handler_t::replace));
      return kExitOk;
    }
    if (Status st = write_file_atomically(o.out, report_html(document), "the report page");
        !st.is_ok()) {
      return report_failure(st.with_context("report"));
    }
    fmt::print("report {} (open it in a browser)\n", o.out);
    return kExitOk;
  }
  if (!o.coverage_backend.empty()) {
    return report_failure(invalid_argument_error(
        "report: --coverage-backend applies with --no-model (a model's report shows every "
        "backend's coverage)"));
  }
  RunOptions run = o.run;
  if (o.json) {
    run.report_json = true;
  } else {
    run.report = o.out;
  }
  return run_model(run);
}

}  // namespace

void add_report_command(CLI::App& app, CommandMain& selected) {
  auto options = std::make_shared<ReportOptions>();
  RunOptions& run = options->run;
  CLI::App* cmd = app.add_subcommand(
      "report",
      "Write one self-contained HTML page: coverage map, a model's seal report, plan and "
      "measured run, a calibration profile");
  cmd->add_option("model", run.model, "GGUF model file (omit for the embedded synthetic model)");
  cmd->add_option("--synthetic", run.synthetic,
                  fmt::format("embedded model: its shape ({}; tiny is the default)",
                              fmt::join(synthetic_llama_presets(), ", ")))
      ->check(CLI::IsMember(std::vector<std::string>(synthetic_llama_presets().begin(),
                                                     synthetic_llama_presets().end())));
  cmd->add_option("--model-type", run.model_type,
                  "embedded model: weight storage, 'mix' (the default) or one dtype");
  std::string help = "the backend to run on: auto (the default) or one of:";
  for (BackendId b : compiled_backends()) help += fmt::format(" {}", name(b));
  cmd->add_option("--backend", run.backend, help);
  cmd->add_option("--calibration", run.calibration,
                  "plan with this calibration profile and show it (default: "
                  "SWITCHYARD_CALIBRATION)");
  cmd->add_option("--ledger", run.ledger,
                  "the verification ledger for the coverage map's states (default: "
                  "switchyard-ledger.json; a missing file leaves every claim unverified)");
  cmd->add_option("--out", options->out, "the page to write (default: switchyard-report.html)");
  cmd->add_flag("--json", options->json, "print the report's JSON instead of writing the page");
  cmd->add_flag("--no-model", options->no_model,
                "no model: the coverage map and the calibration profile only");
  cmd->add_option("--coverage-backend", options->coverage_backend,
                  "with --no-model: only this backend's coverage panel");
  cmd->add_option("--prompt-tokens", run.prompt_tokens, "prompt length of the measured run (64)")
      ->check(CLI::Range(std::int64_t{1}, kMaxTokenCount));
  cmd->add_option("--tokens", run.tokens, "tokens generated in the measured run (32)")
      ->check(kTokenRange);
  cmd->add_option("--threads", run.threads, "CPU threads (default: SWITCHYARD_THREADS or all)")
      ->check(kThreadRange);
  cmd->add_flag("--strict", run.strict, "refuse to run when a kernel is missing");
  add_precision_trades_flag(cmd, run.admit_precision_trades);
  cmd->add_flag("--device-profile", run.device_profile,
                "on a GPU, wait for each node so that the times are device times");
  cmd->callback([options, &selected] { selected = [options] { return run_report(*options); }; });
}

}  // namespace switchyard::tool
