// `switchyard quantize IN OUT --type T [--tensor-type PATTERN=TYPE ...]`: writes a
// quantized copy of a GGUF model, choosing each tensor's type by the rules of
// quantize_model.h, and reports what it did: tensors per type, sizes, fallbacks.
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "command.h"
#include "switchyard/quantize_model.h"
#include "switchyard/thread_pool.h"

namespace switchyard::tool {
namespace {

struct QuantizeCommandOptions {
  std::string input;
  std::string output;
  std::string type;
  std::vector<std::string> tensor_types;
  bool allow_requantize = false;
  int threads = 0;
  bool dry_run = false;
  bool json = false;
};

// One line on stderr, redrawn in place, only when stderr is a terminal.
class ProgressLine {
 public:
  explicit ProgressLine(bool enabled) : enabled_(enabled && isatty(STDERR_FILENO) == 1) {}
  void show(const QuantizeProgress& p) {
    if (!enabled_) return;
    constexpr int kWidth = 30;
    const int filled =
        p.bytes_total > 0 ? static_cast<int>(kWidth * p.bytes_done / p.bytes_total) : kWidth;
    std::fprintf(stderr, "\rquantizing [%s%s] %zu/%zu %-40.*s",
                 std::string(static_cast<std::size_t>(filled), '#').c_str(),
                 std::string(static_cast<std::size_t>(kWidth - filled), ' ').c_str(),
                 p.tensor_index + 1, p.tensor_count, static_cast<int>(p.tensor_name.size()),
                 p.tensor_name.data());
    std::fflush(stderr);
  }
  void clear() {
    if (!enabled_) return;
    std::fprintf(stderr, "\r%100s\r", "");
    std::fflush(stderr);
  }

 private:
  bool enabled_;
};

struct TypeTally {
  int tensors = 0;
  std::int64_t bytes = 0;
};

// Output tensors per type, in dtype.def order.
std::map<DType, TypeTally> tally(const QuantizePlan& plan) {
  std::map<DType, TypeTally> by_type;
  for (const TensorQuantizeDecision& d : plan.tensors) {
    TypeTally& t = by_type[d.to];
    ++t.tensors;
    t.bytes += d.output_bytes;
  }
  return by_type;
}

std::string mib(std::uint64_t bytes) {
  return fmt::format("{:.2f} MiB", static_cast<double>(bytes) / (1024.0 * 1024.0));
}

nlohmann::json plan_json(const QuantizePlan& plan, const std::vector<QuantizeRule>& rules) {
  nlohmann::json j;
  j["type"] = plan.target.name;
  j["preset"] = plan.target.preset;
  j["file_type"] = plan.target.file_type;
  j["block_count"] = plan.block_count;
  j["rules"] = nlohmann::json::array();
  for (const QuantizeRule& r : rules)
    j["rules"].push_back({{"pattern", r.pattern}, {"type", name(r.dtype)}});
  j["preset_rules"] = nlohmann::json::array();
  for (const QuantizeRule& r : plan.preset_rules)
    j["preset_rules"].push_back({{"pattern", r.pattern}, {"type", name(r.dtype)}});
  j["tensors"] = nlohmann::json::array();
  for (const TensorQuantizeDecision& d : plan.tensors) {
    nlohmann::json t = {{"name", d.name},
                        {"shape", d.shape.dims()},
                        {"from", name(d.from)},
                        {"to", name(d.to)},
                        {"copied", d.copy},
                        {"reason", d.reason},
                        {"input_bytes", d.input_bytes},
                        {"output_bytes", d.output_bytes}};
    if (d.fallback_from) t["fallback_from"] = name(*d.fallback_from);
    j["tensors"].push_back(std::move(t));
  }
  nlohmann::json types = nlohmann::json::object();
  for (const auto& [dtype, t] : tally(plan)) {
    types[std::string(name(dtype))] = {{"tensors", t.tensors}, {"bytes", t.bytes}};
  }
  j["by_type"] = std::move(types);
  return j;
}

void print_plan_text(const QuantizePlan& plan) {
  std::size_t width = 4;
  for (const TensorQuantizeDecision& d : plan.tensors) width = std::max(width, d.name.size());
  fmt::print("  {:<{}}  {:<16}  {:<6}  {:<6}  {}\n", "name", width, "shape", "from", "to", "why");
  for (const TensorQuantizeDecision& d : plan.tensors) {
    fmt::print("  {:<{}}  {:<16}  {:<6}  {:<6}  {}\n", d.name, width, d.shape.to_string(),
               name(d.from), name(d.to), d.reason);
  }
}

void print_summary_text(const QuantizePlan& plan, std::int64_t in_tensor_bytes,
                        std::int64_t out_tensor_bytes) {
  fmt::print("tensors by output type:\n");
  for (const auto& [dtype, t] : tally(plan)) {
    fmt::print("  {:<7} {:>5} tensor{}  {:>12}\n", name(dtype), t.tensors,
               t.tensors == 1 ? " " : "s", mib(static_cast<std::uint64_t>(t.bytes)));
  }
  fmt::print("tensor data: {} -> {} ({:.1f}%)\n", mib(static_cast<std::uint64_t>(in_tensor_bytes)),
             mib(static_cast<std::uint64_t>(out_tensor_bytes)),
             in_tensor_bytes > 0 ? 100.0 * static_cast<double>(out_tensor_bytes) /
                                       static_cast<double>(in_tensor_bytes)
                                 : 0.0);
  int fallbacks = 0;
  for (const TensorQuantizeDecision& d : plan.tensors) {
    if (!d.fallback_from) continue;
    if (fallbacks++ == 0) fmt::print("fallbacks (rows not whole blocks of the chosen type):\n");
    fmt::print("  {} {}: {} instead of {}\n", d.name, d.shape.to_string(), name(d.to),
               name(*d.fallback_from));
  }
}

int run_quantize(const QuantizeCommandOptions& o) {
  if (o.threads < 0) {
    return report_failure(invalid_argument_error("quantize: --threads must be >= 0"));
  }
  QuantizeOptions options;
  options.type = o.type;
  options.allow_requantize = o.allow_requantize;
  for (const std::string& text : o.tensor_types) {
    Result<QuantizeRule> rule = parse_quantize_rule(text);
    if (!rule.is_ok()) return report_failure(rule.status());
    options.rules.push_back(*rule);
  }
  // Check the type before opening anything, so a typo is reported as such.
  if (Result<QuantizeTarget> t = parse_quantize_target(o.type); !t.is_ok()) {
    return report_failure(t.status());
  }

  if (o.dry_run) {
    Result<GgufFile> file = GgufFile::open(o.input);
    if (!file.is_ok()) return report_failure(file.status());
    Result<QuantizePlan> plan = plan_quantization(*file, options);
    if (!plan.is_ok()) return report_failure(plan.status());
    std::int64_t in = 0, out = 0;
    for (const TensorQuantizeDecision& d : plan->tensors) {
      in += d.input_bytes;
      out += d.output_bytes;
    }
    if (o.json) {
      nlohmann::json j = plan_json(*plan, options.rules);
      j["input"] = o.input;
      j["dry_run"] = true;
      j["input_tensor_bytes"] = in;
      j["output_tensor_bytes"] = out;
      fmt::print("{}\n", j.dump(2));
    } else {
      fmt::print("{} as {} ({} blocks): plan only, nothing written\n", o.input, plan->target.name,
                 plan->block_count);
      print_plan_text(*plan);
      print_summary_text(*plan, in, out);
    }
    return kExitOk;
  }

  std::unique_ptr<ThreadPool> own_pool;
  ParallelRunner* runner = &default_thread_pool();
  if (o.threads > 0) {
    own_pool = std::make_unique<ThreadPool>(o.threads);
    runner = own_pool.get();
  }
  options.runner = runner;
  ProgressLine progress(!o.json);
  options.progress = [&progress](const QuantizeProgress& p) { progress.show(p); };

  const auto start = std::chrono::steady_clock::now();
  Result<QuantizeSummary> summary = quantize_gguf(o.input, o.output, options);
  progress.clear();
  if (!summary.is_ok()) return report_failure(summary.status());
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  const QuantizeSummary& s = *summary;

  if (o.json) {
    nlohmann::json j = plan_json(s.plan, options.rules);
    j["input"] = o.input;
    j["output"] = o.output;
    j["threads"] = runner->num_threads();
    j["seconds"] = seconds;
    j["input_file_bytes"] = s.input_file_bytes;
    j["output_file_bytes"] = s.output_file_bytes;
    j["input_tensor_bytes"] = s.input_tensor_bytes;
    j["output_tensor_bytes"] = s.output_tensor_bytes;
    fmt::print("{}\n", j.dump(2));
    return kExitOk;
  }
  fmt::print("{} -> {} as {} ({} tensors, {} blocks), {} thread{}, {:.2f} s\n", o.input, o.output,
             s.plan.target.name, s.plan.tensors.size(), s.plan.block_count, runner->num_threads(),
             runner->num_threads() == 1 ? "" : "s", seconds);
  print_summary_text(s.plan, s.input_tensor_bytes, s.output_tensor_bytes);
  fmt::print("file: {} -> {}\n", mib(s.input_file_bytes), mib(s.output_file_bytes));
  return kExitOk;
}

}  // namespace

void add_quantize_command(CLI::App& app, CommandMain& selected) {
  auto options = std::make_shared<QuantizeCommandOptions>();
  CLI::App* cmd = app.add_subcommand(
      "quantize",
      "Write a quantized copy of a GGUF model: a type or mix preset, per-tensor rules, "
      "norms kept f32");
  cmd->add_option("input", options->input, "GGUF model to read")->required();
  cmd->add_option("output", options->output, "GGUF file to write (not the input)")->required();
  cmd->add_option("--type", options->type,
                  "a type (q4_k, q8_0, f16, ...) or a mix preset (q4_k_m, q5_k_m, q4_k_s, "
                  "q5_k_s)")
      ->required();
  cmd->add_option("--tensor-type", options->tensor_types,
                  "PATTERN=TYPE: tensors whose name matches PATTERN get TYPE; repeatable, the "
                  "first match wins, before the preset's rules (e.g. ffn_down=q6_k, "
                  "blk.1?.attn_v=q8_0)");
  cmd->add_flag("--allow-requantize", options->allow_requantize,
                "convert tensors that are already quantized (dequantize, quantize again)");
  cmd->add_option("--threads", options->threads, "CPU threads (default: SWITCHYARD_THREADS or all)")
      ->check(kThreadRange);
  cmd->add_flag("--dry-run", options->dry_run, "print each tensor's planned type; write nothing");
  cmd->add_flag("--json", options->json, "print the summary as JSON");
  cmd->callback([options, &selected] { selected = [options] { return run_quantize(*options); }; });
}

}  // namespace switchyard::tool
