// How the `switchyard` subcommands plug into main(): each command file defines one
// add_*_command function that declares its options on a CLI11 subcommand and, when
// the subcommand is chosen, stores the function that runs it.
#pragma once

#include <functional>

#include <CLI/CLI.hpp>

#include "switchyard/status.h"

namespace switchyard::tool {

// Runs the chosen command and returns the process exit status.
using CommandMain = std::function<int()>;

// Exit statuses: 0 success, 1 a check failed (verification, strict mode),
// 2 bad usage or bad input.
inline constexpr int kExitOk = 0;
inline constexpr int kExitCheckFailed = 1;
inline constexpr int kExitUsage = 2;

// Prints `status` to stderr and maps its code to an exit status.
int report_failure(const Status& status);

void add_coverage_command(CLI::App& app, CommandMain& selected);
void add_run_command(CLI::App& app, CommandMain& selected);
void add_explain_command(CLI::App& app, CommandMain& selected);
void add_verify_command(CLI::App& app, CommandMain& selected);
void add_inspect_command(CLI::App& app, CommandMain& selected);
void add_quantize_command(CLI::App& app, CommandMain& selected);

}  // namespace switchyard::tool
