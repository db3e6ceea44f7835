// `switchyard perplexity [model.gguf] --file text.txt [--ctx N] [--batch N]`: the
// model's perplexity over a text file, chunked in the standard way
// (switchyard/perplexity.h): chunks of --ctx tokens, each on an empty cache and
// starting with BOS, the second half of each scored. Prints the value with its
// standard error and the tokens per second; `--logits-out` writes every scored
// row's logits as .npy for cross-checks. Without a model file it scores the
// embedded synthetic model (whose perplexity is that of random weights: high,
// but a real number, and the same on every machine and backend up to rounding).
#include <algorithm>
#include <chrono>
#include <memory>
#include <optional>
#include <string>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "command.h"
#include "model_source.h"
#include "npy.h"
#include "output_path.h"
#include "progress.h"
#include "switchyard/backends.h"
#include "switchyard/dispatch.h"
#include "switchyard/llama.h"
#include "switchyard/perplexity.h"
#include "switchyard/thread_pool.h"
#include "switchyard/tokenizer.h"

namespace switchyard::tool {
namespace {

struct PerplexityCommandOptions {
  std::string model;
  std::string file;
  std::int64_t context = 512;
  std::int64_t batch = 0;  // 0: the context
  std::int64_t chunks = 0;
  std::string backend = "auto";
  int threads = 0;
  bool strict = false;
  bool admit_precision_trades = false;
  bool json = false;
  std::string cache_type = "f16";
  std::string logits_out;
};

using Clock = std::chrono::steady_clock;

int perplexity(const PerplexityCommandOptions& o) {
  const std::int64_t batch = o.batch > 0 ? o.batch : o.context;
  if (batch > o.context) {
    return report_failure(invalid_argument_error(fmt::format(
        "perplexity: --batch {} is larger than the chunk (--ctx {})", batch, o.context)));
  }
  Result<std::string> text = read_text_file("perplexity: --file", o.file);
  if (!text.is_ok()) return report_failure(text.status());
  Result<BackendId> backend = pick_backend("perplexity", o.backend);
  if (!backend.is_ok()) return report_failure(backend.status());

  Progress progress(!o.json);
  if (!o.logits_out.empty()) {
    // Refused before the model loads, not after it scored.
    if (Status st = check_output_path(o.logits_out, o.model, "the logits"); !st.is_ok()) {
      return report_failure(st.with_context("perplexity: --logits-out"));
    }
  }
  progress.show("loading", 0, 2);
  Result<GgufFile> file =
      o.model.empty() ? synthetic_file("tiny", "mix", "") : GgufFile::open(o.model);
  if (!file.is_ok()) return report_failure(file.status());
  Result<LlamaConfig> config = LlamaConfig::from_gguf(*file);
  if (!config.is_ok()) return report_failure(config.status());
  Result<Tokenizer> tokenizer = Tokenizer::from_metadata(file->metadata());
  if (!tokenizer.is_ok()) return report_failure(tokenizer.status().with_context("perplexity"));
  if (tokenizer->vocab_size() != config->vocab_size) {
    return report_failure(invalid_argument_error(
        fmt::format("perplexity: the tokenizer has {} tokens but the model's vocabulary {}",
                    tokenizer->vocab_size(), config->vocab_size)));
  }
  if (o.context > config->context_length) {
    return report_failure(
        invalid_argument_error(fmt::format("perplexity: --ctx {} exceeds the model's context of {}",
                                           o.context, config->context_length)));
  }
  const Clock::time_point encode_start = Clock::now();
  const std::vector<std::int32_t> tokens = tokenizer->encode(*text);
  const double encode_s = std::chrono::duration<double>(Clock::now() - encode_start).count();

  std::unique_ptr<ThreadPool> own_pool;
  ParallelRunner* runner = &default_thread_pool();
  if (o.threads > 0) {
    own_pool = std::make_unique<ThreadPool>(o.threads);
    runner = own_pool.get();
  }
  LlamaLoadOptions load;
  load.backend = *backend;
  if (o.strict) load.strict = StrictPolicy::all();
  load.admit_precision_trades = o.admit_precision_trades;
  load.max_context = o.context;
  load.max_batch = batch;
  load.runner = runner;
  load.cache_dtype = *parse_dtype(o.cache_type);  // one of --cache-type's members
  progress.show("loading", 1, 2);
  Result<LlamaModel> model = LlamaModel::load(*file, load);
  progress.clear();
  if (!model.is_ok()) return report_failure(model.status());
  if (Status warm = model->warm_up(); !warm.is_ok()) return report_failure(warm);

  PerplexityOptions options;
  options.context = o.context;
  options.batch = batch;
  options.max_chunks = o.chunks;
  options.bos = tokenizer->adds_bos() ? tokenizer->bos() : -1;
  options.on_chunk = [&](std::int64_t done, std::int64_t total, double ppl) {
    progress.show("perplexity", done, total, fmt::format("chunks, {:.4f}", ppl));
  };
  std::optional<NpyWriter> logits_out;
  const auto whole_chunks = static_cast<std::int64_t>(tokens.size()) / o.context;
  if (!o.logits_out.empty() && whole_chunks > 0) {
    const std::int64_t chunks = o.chunks > 0 ? std::min(o.chunks, whole_chunks) : whole_chunks;
    Result<NpyWriter> writer = NpyWriter::create(
        o.logits_out, chunks * perplexity_scored_per_chunk(o.context), config->vocab_size);
    if (!writer.is_ok())
      return report_failure(writer.status().with_context("perplexity: --logits-out"));
    logits_out.emplace(std::move(*writer));
    options.on_scored = [&](std::span<const float> row, std::int32_t) {
      return logits_out->append(row);
    };
  }
  const Clock::time_point start = Clock::now();
  Result<PerplexityResult> r = compute_perplexity(*model, tokens, options);
  const double seconds = std::chrono::duration<double>(Clock::now() - start).count();
  progress.clear();
  if (!r.is_ok()) return report_failure(r.status());
  if (logits_out) {
    if (Status st = logits_out->finish(); !st.is_ok()) {
      return report_failure(st.with_context("perplexity: --logits-out"));
    }
  }
  const double tokens_per_s = static_cast<double>(r->evaluated_tokens) / seconds;
  if (o.json) {
    nlohmann::json j;
    j["model"] = o.model.empty() ? "synthetic tiny" : o.model;
    j["backend"] = std::string(name(*backend));
    j["threads"] = runner->num_threads();
    j["text"] = {{"file", o.file},
                 {"bytes", text->size()},
                 {"tokens", tokens.size()},
                 {"tokenizer", tokenizer->describe()},
                 {"encode_s", encode_s}};
    j["context"] = o.context;
    j["batch"] = batch;
    j["chunks"] = r->chunks;
    j["scored_tokens"] = r->scored_tokens;
    j["perplexity"] = r->perplexity;
    j["perplexity_stderr"] = r->perplexity_stderr;
    j["mean_nll"] = r->mean_nll;
    j["seconds"] = seconds;
    j["tokens_per_s"] = tokens_per_s;
    fmt::print("{}\n", j.dump(2));
  } else {
    fmt::print("model      {} ({} blocks, dim {}, vocab {})\n",
               o.model.empty() ? "synthetic llama 'tiny' (embedded)" : o.model, config->block_count,
               config->embedding_length, config->vocab_size);
    fmt::print("backend    {}{}, {} thread{}\n", name(*backend),
               o.backend == "auto" ? auto_note(*backend) : std::string(), runner->num_threads(),
               runner->num_threads() == 1 ? "" : "s");
    fmt::print("text       {}: {} bytes, {} tokens ({}) in {:.1f} ms\n", o.file, text->size(),
               tokens.size(), tokenizer->describe(), encode_s * 1e3);
    fmt::print(
        "perplexity {:.4f} +/- {:.4f} over {} chunk{} of {} tokens ({} scored) in {:.2f} s: "
        "{:.1f} tokens/s\n",
        r->perplexity, r->perplexity_stderr, r->chunks, r->chunks == 1 ? "" : "s", o.context,
        r->scored_tokens, seconds, tokens_per_s);
  }
  return kExitOk;
}

}  // namespace

void add_perplexity_command(CLI::App& app, CommandMain& selected) {
  auto options = std::make_shared<PerplexityCommandOptions>();
  CLI::App* cmd = app.add_subcommand(
      "perplexity",
      "A model's perplexity over a text file: chunks of --ctx tokens, the second half of each "
      "scored, with its standard error");
  cmd->add_option("model", options->model,
                  "GGUF model file (omit for the embedded synthetic model)");
  cmd->add_option("--file", options->file, "the text to score")->required();
  cmd->add_option("--ctx", options->context, "tokens per chunk (512)")
      ->check(CLI::Range(std::int64_t{4}, kMaxTokenCount));
  cmd->add_option("--batch", options->batch, "tokens per evaluation (default: --ctx)")
      ->check(CLI::Range(std::int64_t{1}, kMaxTokenCount));
  cmd->add_option("--chunks", options->chunks, "score at most this many chunks (0: all)")
      ->check(CLI::Range(std::int64_t{0}, kMaxTokenCount));
  std::string help = "auto (the first compiled accelerator, else the host) or one of:";
  for (BackendId b : compiled_backends()) help += fmt::format(" {}", name(b));
  cmd->add_option("--backend", options->backend, help);
  cmd->add_option("--threads", options->threads, "CPU threads (default: SWITCHYARD_THREADS or all)")
      ->check(kThreadRange);
  cmd->add_flag("--strict", options->strict, "refuse to run when a kernel is missing");
  add_precision_trades_flag(cmd, options->admit_precision_trades);
  cmd->add_flag("--json", options->json, "print the results as JSON");
  cmd->add_option("--cache-type", options->cache_type,
                  "the KV cache's dtype: f16 (the default), f32 or q8_0")
      ->check(CLI::IsMember({"f16", "f32", "q8_0"}));
  cmd->add_option("--logits-out", options->logits_out,
                  "write the logits of every scored position to this .npy file (f32, one row "
                  "per scored token)");
  cmd->callback([options, &selected] { selected = [options] { return perplexity(*options); }; });
}

}  // namespace switchyard::tool
