// The plans `regret` and `calibrate --graph` measure: a llama model's (the
// embedded synthetic one, or a GGUF file) and the built-in example graphs'.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>

#include "switchyard/calibration.h"
#include "switchyard/kernel.h"
#include "switchyard/plan.h"
#include "switchyard/status.h"

namespace switchyard::tool {

// Where the llama graph comes from, and the prefill bucket's size.
struct PlanSource {
  std::string model;               // a GGUF file; empty: the embedded model
  std::string synthetic = "tiny";  // the embedded model's preset
  std::string model_type = "mix";  // the embedded model's weight storage
  std::int64_t max_tokens = 512;   // tokens of the prefill bucket
  // The backend plans prefer: a compiled backend's name, or auto (as `run`: the
  // first accelerator with a device present, else the CPU).
  std::string backend = "auto";
};

// One plan and what keeps it alive (the model it belongs to, or the plan).
struct HeldPlan {
  std::shared_ptr<const void> owner;
  const ExecutionPlan* plan = nullptr;
};

// Declares --synthetic, --model-type and --max-tokens on `sub` (the model file
// is each command's own: an argument or --model).
void add_plan_source_options(CLI::App* sub, PlanSource& source);

// The graph names plans_of takes.
inline const std::vector<std::string> kPlanGraphs = {"llama", "block", "mlp"};

// `graph` ("llama", "block" or "mlp") planned for `source.backend`, the CPU
// taking what it does not bind, as `run` plans it, once per entry of `calibrations` (null: the
// modelled costs). A llama model is loaded once per ranking, with a registry of
// its own so that its probes do not reach the process-wide one.
[[nodiscard]] Result<std::vector<HeldPlan>> plans_of(
    const std::string& graph, const PlanSource& source, ParallelRunner* runner,
    const std::vector<std::shared_ptr<const CalibrationProfile>>& calibrations);

}  // namespace switchyard::tool
