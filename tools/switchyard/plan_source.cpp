#include "plan_source.h"

#include <algorithm>
#include <utility>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "command.h"
#include "model_source.h"
#include "switchyard/dispatch.h"
#include "switchyard/example_graphs.h"
#include "switchyard/llama.h"
#include "switchyard/registry.h"

namespace switchyard::tool {

void add_plan_source_options(CLI::App* sub, PlanSource& source) {
  sub->add_option("--synthetic", source.synthetic,
                  fmt::format("embedded model: its shape ({}; tiny is the default)",
                              fmt::join(synthetic_llama_presets(), ", ")))
      ->check(CLI::IsMember(std::vector<std::string>(synthetic_llama_presets().begin(),
                                                     synthetic_llama_presets().end())));
  sub->add_option("--model-type", source.model_type,
                  "embedded model: weight storage, 'mix' (the default) or one dtype for every "
                  "matrix");
  sub->add_option("--max-tokens", source.max_tokens,
                  "Tokens of the planned prefill bucket (default 512)")
      ->check(CLI::Range(std::int64_t{1}, kMaxTokenCount));
}

Result<std::vector<HeldPlan>> plans_of(
    const std::string& graph, const PlanSource& source, ParallelRunner* runner,
    const std::vector<std::shared_ptr<const CalibrationProfile>>& calibrations) {
  std::vector<HeldPlan> out;
  SWITCHYARD_ASSIGN_OR_RETURN(BackendId backend, pick_backend("plan", source.backend));
  if (graph == "llama") {
    SWITCHYARD_ASSIGN_OR_RETURN(
        GgufFile file, source.model.empty()
                           ? synthetic_file(source.synthetic, source.model_type, std::string())
                           : GgufFile::open(source.model));
    for (const std::shared_ptr<const CalibrationProfile>& calibration : calibrations) {
      auto registry = std::make_shared<Registry>(RegistryConfig{.sink = [](std::string_view) {}});
      LlamaLoadOptions load;
      load.registry = registry.get();
      load.runner = runner;
      load.backend = backend;
      load.max_batch = source.max_tokens;
      load.max_context = std::max<std::int64_t>(source.max_tokens, 1) * 2;
      load.record_steps = false;
      load.calibration = calibration;
      SWITCHYARD_ASSIGN_OR_RETURN(LlamaModel model, LlamaModel::load(file, load));
      auto held = std::make_shared<std::pair<std::shared_ptr<Registry>, LlamaModel>>(
          std::move(registry), std::move(model));
      const ExecutionPlan* plan = &held->second.plan();
      out.push_back({std::move(held), plan});
    }
    return out;
  }
  Result<Graph> g =
      invalid_argument_error(fmt::format("unknown graph '{}' (llama, block, mlp)", graph));
  if (graph == "block") g = transformer_block_graph({});
  if (graph == "mlp") g = mlp_graph();
  if (!g.is_ok()) return g.status();
  for (const std::shared_ptr<const CalibrationProfile>& calibration : calibrations) {
    PlanOptions options;
    options.buckets = example_buckets(source.max_tokens);
    options.policy.preferred = {backend};
    options.record_in_registry = false;
    options.calibration = calibration;
    SWITCHYARD_ASSIGN_OR_RETURN(ExecutionPlan plan, plan_graph(*g, current_table(), options));
    auto held = std::make_shared<ExecutionPlan>(std::move(plan));
    const ExecutionPlan* p = held.get();
    out.push_back({std::move(held), p});
  }
  return out;
}

}  // namespace switchyard::tool
