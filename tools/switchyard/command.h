// How the `switchyard` subcommands plug into main(): each command file defines one
// add_*_command function that declares its options on a CLI11 subcommand and, when
// the subcommand is chosen, stores the function that runs it.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include <CLI/CLI.hpp>

#include "guard.h"
#include "switchyard/calibration.h"
#include "switchyard/status.h"
#include "switchyard/thread_pool.h"

namespace switchyard::tool {

// Runs the chosen command and returns the process exit status.
using CommandMain = std::function<int()>;

// Ranges every numeric flag is checked against at parse time (a usage error, exit
// 2, names the flag, the value and the range). Token counts are checked again
// against the model's context once it is known.
inline constexpr std::int64_t kMaxTokenCount = std::int64_t{1} << 20;
inline const CLI::Range kThreadRange(0, kMaxThreads);  // 0: the default
inline const CLI::Range kTokenRange(std::int64_t{0}, kMaxTokenCount);

// Prints `status` to stderr and maps its code to an exit status.
int report_failure(const Status& status);

// --admit-precision-trades, on the commands that load a model (Note [Precision
// trades] in binding_table.h).
inline void add_precision_trades_flag(CLI::App* cmd, bool& admit) {
  cmd->add_flag("--admit-precision-trades", admit,
                "let the planner take kernels that compute in a narrower type to be faster "
                "(on cuda, TF32 products of f32 weights); off, they are never chosen");
}

void add_coverage_command(CLI::App& app, CommandMain& selected);
void add_run_command(CLI::App& app, CommandMain& selected);
void add_explain_command(CLI::App& app, CommandMain& selected);
void add_verify_command(CLI::App& app, CommandMain& selected);
void add_inspect_command(CLI::App& app, CommandMain& selected);
void add_quantize_command(CLI::App& app, CommandMain& selected);
void add_perplexity_command(CLI::App& app, CommandMain& selected);
void add_calibrate_command(CLI::App& app, CommandMain& selected);
void add_regret_command(CLI::App& app, CommandMain& selected);
void add_report_command(CLI::App& app, CommandMain& selected);

// The calibration profile the planner should use: the file `flag` names, else
// SWITCHYARD_CALIBRATION's, else none (null). What it ignores (another machine,
// changed kernels) is printed on stderr.
[[nodiscard]] Result<std::shared_ptr<const CalibrationProfile>> planning_calibration(
    const std::string& flag, int threads);

}  // namespace switchyard::tool
