// `switchyard run`: load a llama-family model (or the embedded synthetic one),
// prefill a prompt, generate greedily, and report throughput, where the time went
// by op family, and the kernel report of the load.
//
// Note [Checking weights before a run]
//   A NaN or an infinity in a weight or a block scale does not always reach the
//   logits: a NaN attention score row can read as fully masked and the tokens
//   simply change, with exit 0. So run scans every weight first (check_weights,
//   switchyard/weight_check.h) and refuses a model that holds one, naming the
//   tensor (exit 1). It does so by default because the scan costs one read of the
//   weights at close to read bandwidth (docs/benchmarks.md, "Checking weights":
//   0.6-1.0 of a plain read of the same mapping on two threads of machine C),
//   which is what one decode step reads anyway: about one generated token for a
//   memory-bound model, under 1% of the default 64 + 32 token run on the embedded
//   model (0.6 ms against 4 ms per decode step in f32). A cold file costs the disk
//   read once either way: the scan brings the pages in that the first evaluation
//   would. --no-check-weights skips the scan (a model already checked with
//   `inspect --check`, a benchmark of the load itself).
//
// Note [Streaming text]
//   With --prompt (or --prompt-file) the prompt is text: the model's tokenizer
//   encodes it, control tokens written in it included (a chat template's
//   markers), and run prints the prompt, then each generated token's text as soon
//   as it is chosen, through a TextStream that holds back a UTF-8 character a
//   later token finishes. Without a text prompt, a model that has a tokenizer is
//   prompted with kDefaultPromptText's tokens repeated to --prompt-tokens, so the
//   prompt length (and the throughput figure) stays what was asked for, and the
//   continuation is decoded once at the end. Either way run reports what the text
//   path cost: the prompt's encoding, and decoding per generated token against the
//   generation's time.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <limits>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "command.h"
#include "model_source.h"
#include "npy.h"
#include "output_path.h"
#include "progress.h"
#include "report.h"
#include "run_model.h"
#include "switchyard/backends.h"
#include "switchyard/bucket_plan.h"
#include "switchyard/collective.h"
#include "switchyard/dispatch.h"
#include "switchyard/file_io.h"
#include "switchyard/gguf.h"
#include "switchyard/llama.h"
#include "switchyard/sampling.h"
#include "switchyard/thread_pool.h"
#include "switchyard/tokenizer.h"
#include "weight_check_text.h"

namespace switchyard::tool {
namespace {

using Clock = std::chrono::steady_clock;
double seconds_since(Clock::time_point t) {
  return std::chrono::duration<double>(Clock::now() - t).count();
}

// The text a model with a tokenizer is prompted with when no prompt is given:
// its tokens, repeated, make the --prompt-tokens prompt.
constexpr std::string_view kDefaultPromptText =
    "The tokenizer turns the text into tokens, and the model writes the next one. ";

// A deterministic prompt: token ids spread over the vocabulary.
std::vector<std::int32_t> make_prompt(std::int64_t n, std::int64_t vocab) {
  std::vector<std::int32_t> p(static_cast<std::size_t>(n));
  std::uint64_t x = 0x9e3779b97f4a7c15ULL;
  for (std::int32_t& t : p) {
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    t = static_cast<std::int32_t>(x % static_cast<std::uint64_t>(vocab));
  }
  return p;
}

// The default prompt of a model with a tokenizer: BOS where the tokenizer adds
// one, then kDefaultPromptText's tokens over and over, n tokens in all.
std::vector<std::int32_t> default_text_prompt(const Tokenizer& tokenizer, std::int64_t n) {
  std::vector<std::int32_t> prompt = tokenizer.encode(kDefaultPromptText);
  const std::vector<std::int32_t> body =
      tokenizer.encode(kDefaultPromptText, {.add_special = false});
  while (static_cast<std::int64_t>(prompt.size()) < n && !body.empty()) {
    prompt.insert(prompt.end(), body.begin(), body.end());
  }
  prompt.resize(static_cast<std::size_t>(n), body.empty() ? 0 : body.front());
  return prompt;
}

// Text for a one-line report: quoted, with control characters escaped.
std::string escaped_text(std::string_view text) {
  std::string out = "\"";
  for (char c : text) {
    if (c == '\n')
      out += "\\n";
    else if (c == '\t')
      out += "\\t";
    else if (c == '"' || c == '\\')
      out += fmt::format("\\{}", c);
    else if (static_cast<unsigned char>(c) < 0x20 || c == 0x7F)
      out += fmt::format("\\x{:02x}", static_cast<unsigned char>(c));
    else
      out += c;
  }
  return out + "\"";
}

bool all_finite(std::span<const float> v) {
  return std::all_of(v.begin(), v.end(), [](float x) { return std::isfinite(x); });
}

}  // namespace

int run_model(const RunOptions& o) {
  if (o.prompt_tokens < 1 || o.tokens < 0) {
    return report_failure(
        invalid_argument_error("run: --prompt-tokens must be >= 1 and --tokens >= 0"));
  }
  if (o.threads < 0) return report_failure(invalid_argument_error("run: --threads must be >= 0"));
  if (!o.model.empty() &&
      (o.model_type != "mix" || o.synthetic != "tiny" || !o.save_model.empty())) {
    return report_failure(invalid_argument_error(
        "run: --synthetic, --model-type and --save-model apply to the embedded model, not to a "
        "model file"));
  }
  // Outputs are refused before the model loads, not after it ran.
  if (!o.report.empty()) {
    if (Status st = check_output_path(o.report, o.model, "the report page"); !st.is_ok()) {
      return report_failure(st.with_context("run: --report"));
    }
  }
  if (!o.logits_out.empty()) {
    if (Status st = check_output_path(o.logits_out, o.model, "the logits"); !st.is_ok()) {
      return report_failure(st.with_context("run: --logits-out"));
    }
  }
  std::string prompt_text = o.prompt;
  if (!o.prompt_file.empty()) {
    Result<std::string> text = read_text_file("run: --prompt-file", o.prompt_file);
    if (!text.is_ok()) return report_failure(text.status());
    prompt_text = std::move(*text);
  }
  Result<BackendId> backend = pick_backend("run", o.backend);
  if (!backend.is_ok()) return report_failure(backend.status());
  Result<Sampler> sampler = Sampler::create(o.sampling);
  if (!sampler.is_ok()) return report_failure(sampler.status().with_context("run"));

  // Only the report's JSON goes to stdout with report_json: no bar either.
  const bool quiet = o.json || o.report_json;
  Progress progress(!quiet);
  const Clock::time_point load_start = Clock::now();
  progress.show("loading", 0, 3);
  Result<GgufFile> file = o.model.empty() ? synthetic_file(o.synthetic, o.model_type, o.save_model)
                                          : GgufFile::open(o.model);
  if (!file.is_ok()) return report_failure(file.status());
  progress.show("loading", 1, 3);
  Result<LlamaConfig> config = LlamaConfig::from_gguf(*file);
  if (!config.is_ok()) return report_failure(config.status());
  // The tokenizer, where the file has one: text in (--prompt) and out.
  std::optional<Tokenizer> tokenizer;
  if (Result<Tokenizer> t = Tokenizer::from_metadata(file->metadata()); t.is_ok()) {
    if (t->vocab_size() != config->vocab_size) {
      return report_failure(invalid_argument_error(
          fmt::format("run: the tokenizer has {} tokens but the model's vocabulary {}",
                      t->vocab_size(), config->vocab_size)));
    }
    tokenizer = std::move(*t);
  } else if (t.status().code() != StatusCode::kNotFound) {
    return report_failure(t.status().with_context("run"));
  }
  std::vector<std::int32_t> prompt;
  double encode_s = 0;
  if (o.text_prompt) {
    if (!tokenizer) {
      return report_failure(invalid_argument_error(
          "run: --prompt and --prompt-file need a tokenizer, and the model file has none (no "
          "tokenizer.ggml.* keys); --prompt-tokens gives a prompt of token ids"));
    }
    const Clock::time_point encode_start = Clock::now();
    // Control tokens written in the prompt (a chat template's markers) are tokens.
    prompt = tokenizer->encode(prompt_text, {.parse_special = true});
    encode_s = seconds_since(encode_start);
    if (prompt.empty()) return report_failure(invalid_argument_error("run: the prompt is empty"));
  } else if (tokenizer) {
    prompt = default_text_prompt(*tokenizer, o.prompt_tokens);
  } else {
    prompt = make_prompt(o.prompt_tokens, config->vocab_size);
  }
  const auto prompt_tokens = static_cast<std::int64_t>(prompt.size());
  if (prompt_tokens + o.tokens > config->context_length) {
    return report_failure(invalid_argument_error(
        fmt::format("run: {} prompt + {} generated tokens exceed the model's context of {}",
                    prompt_tokens, o.tokens, config->context_length)));
  }
  for (std::int32_t t : o.stop_tokens) {
    if (t >= config->vocab_size) {
      return report_failure(invalid_argument_error(fmt::format(
          "run: --stop-token {} is outside the {}-token vocabulary", t, config->vocab_size)));
    }
  }

  std::unique_ptr<ThreadPool> own_pool;
  ParallelRunner* runner = &default_thread_pool();
  if (o.threads > 0) {
    own_pool = std::make_unique<ThreadPool>(o.threads);
    runner = own_pool.get();
  }
  std::optional<TimedWeightCheck> weight_check;
  if (o.check_weights) {
    progress.clear();
    Result<TimedWeightCheck> check = timed_weight_check(*file, runner, !o.json);
    if (!check.is_ok()) return report_failure(check.status());
    if (!check->report.finite()) {
      std::fprintf(stderr, "switchyard: run: the model's weights hold NaN or infinity: %s\n",
                   first_nonfinite_text(*file, check->report).c_str());
      return kExitCheckFailed;
    }
    weight_check = std::move(*check);
  }

  LlamaLoadOptions load;
  load.backend = *backend;
  if (o.strict) load.strict = StrictPolicy::all();
  load.max_context = prompt_tokens + std::max<std::int64_t>(o.tokens, 1);
  load.max_batch = std::min<std::int64_t>(prompt_tokens, 512);
  load.runner = runner;
  // On the host the profile costs two clock reads per node; on a device a
  // profiled run is never recorded, and its per-node times would be the host's
  // launches, so it profiles only with --device-profile.
  const BackendMemory* backend_memory = current_table()->backend_memory(*backend);
  const bool host = backend_memory == nullptr || backend_memory->host_addressable();
  load.profile = host || o.device_profile;
  load.profile_device_time = o.device_profile;
  load.record_steps = o.record;
  load.cache_dtype = *parse_dtype(o.cache_type);  // one of --cache-type's members
  Result<std::shared_ptr<const CalibrationProfile>> calibration =
      planning_calibration(o.calibration, runner->num_threads());
  if (!calibration.is_ok()) return report_failure(calibration.status());
  load.calibration = *calibration;
  load.admit_precision_trades = o.admit_precision_trades;
  load.pack_weights = !o.no_pack;
  load.devices = o.devices;
  // The weights' upload to a device: a bar, and its rate from the first constant's
  // end to the last's (the clock starts once a copy has finished).
  struct {
    Clock::time_point first, last;
    std::int64_t first_bytes = 0, total = 0;
  } upload;
  load.on_upload = [&](std::int64_t done, std::int64_t total) {
    const Clock::time_point now = Clock::now();
    if (upload.total == 0) {
      upload.first = now;
      upload.first_bytes = done;
    }
    upload.last = now;
    upload.total = total;
    progress.show("uploading", done >> 20, total >> 20, "MiB");
  };
  progress.show("loading", 2, 3);
  Result<LlamaModel> loaded = LlamaModel::load(*file, load);
  progress.clear();
  if (!loaded.is_ok()) return report_failure(loaded.status());
  LlamaModel& model = *loaded;
  // The weight check has its own line; the load time is the load's.
  const double load_s = seconds_since(load_start) - (weight_check ? weight_check->seconds : 0.0);
  const LlamaConfig& c = model.config();
  const double upload_s = std::chrono::duration<double>(upload.last - upload.first).count();
  const double upload_gbps =
      upload_s > 0 ? static_cast<double>(upload.total - upload.first_bytes) / upload_s * 1e-9 : 0;
  // Each bucket's first run, outside the timed prompt (Note [Warming up]).
  const Clock::time_point warm_start = Clock::now();
  progress.show("warming up", 0, 1);
  if (Status warm = model.warm_up(); !warm.is_ok()) {
    progress.clear();
    return report_failure(warm);
  }
  progress.clear();
  const double warm_s = seconds_since(warm_start);

  // Prefill in chunks of the prefill bucket's size, each asking for its last
  // token's logits only (Note [Logits of chosen rows]).
  std::vector<float> logits(static_cast<std::size_t>(c.vocab_size));
  std::vector<float> last(static_cast<std::size_t>(c.vocab_size));
  const Clock::time_point prefill_start = Clock::now();
  for (std::int64_t at = 0; at < prompt_tokens; at += model.max_batch()) {
    progress.show("prompt", at, prompt_tokens);
    const std::int64_t n = std::min(model.max_batch(), prompt_tokens - at);
    Status st = model.eval(
        std::span(prompt).subspan(static_cast<std::size_t>(at), static_cast<std::size_t>(n)),
        logits);
    if (!st.is_ok()) {
      progress.clear();
      return report_failure(st);
    }
  }
  const double prefill_s = seconds_since(prefill_start);
  std::copy(logits.end() - c.vocab_size, logits.end(), last.begin());
  bool finite = all_finite(last);

  std::vector<std::int32_t> generated;
  // The repetition penalty's history: the prompt, then what is generated.
  std::vector<std::int32_t> history = prompt;
  double sampling_s = 0;
  // The host's side of each decode step (ExecStats::last_queue_ns), and how many
  // steps replayed a recording.
  double queue_ns = 0;
  const std::uint64_t replays_before = model.executor_stats().replays;
  const Clock::time_point decode_start = Clock::now();
  // The rows of --logits-out: the logits each generated token was drawn from.
  std::vector<float> logit_rows;
  // Where generation stops early: the model's end tokens (unless --ignore-eos)
  // and --stop-token's.
  std::vector<std::int32_t> stops = o.stop_tokens;
  if (!o.ignore_eos) stops.insert(stops.end(), c.end_tokens.begin(), c.end_tokens.end());
  std::optional<std::int32_t> stopped_at;
  std::int64_t decode_evals = 0;
  // With a text prompt the text is printed as it is generated (Note [Streaming
  // text]); otherwise it is decoded once at the end.
  const bool streaming = o.text_prompt && !quiet;
  std::optional<TextStream> stream;
  std::string continuation;
  double decode_text_s = 0;
  if (streaming) {
    progress.clear();
    std::fwrite(prompt_text.data(), 1, prompt_text.size(), stdout);
    std::fflush(stdout);
    stream.emplace(*tokenizer, DecodeOptions{.at_start = false});
  }
  for (std::int64_t i = 0; i < o.tokens && finite; ++i) {
    if (!streaming) progress.show("generate", i, o.tokens);
    if (!o.logits_out.empty()) logit_rows.insert(logit_rows.end(), last.begin(), last.end());
    const Clock::time_point sample_start = Clock::now();
    Result<std::int32_t> drawn = sampler->sample(last, history);
    sampling_s += seconds_since(sample_start);
    if (!drawn.is_ok()) {
      progress.clear();
      return report_failure(drawn.status().with_context("run"));
    }
    const std::int32_t next = *drawn;
    generated.push_back(next);
    history.push_back(next);
    if (stream) {
      const Clock::time_point text_start = Clock::now();
      Result<std::string> piece = stream->push(next);
      if (!piece.is_ok()) return report_failure(piece.status().with_context("run"));
      decode_text_s += seconds_since(text_start);
      std::fwrite(piece->data(), 1, piece->size(), stdout);
      std::fflush(stdout);
      continuation += *piece;
    }
    if (std::find(stops.begin(), stops.end(), next) != stops.end()) {
      stopped_at = next;
      break;
    }
    if (i + 1 == o.tokens) break;  // the last choice needs no further eval
    Status st = model.eval(std::span(&next, 1), last);
    if (!st.is_ok()) {
      progress.clear();
      return report_failure(st);
    }
    ++decode_evals;
    queue_ns += model.executor_stats().last_queue_ns;
    finite = all_finite(last);
  }
  const double decode_s = seconds_since(decode_start);
  progress.clear();
  if (stream) {
    const std::string rest = stream->finish();
    continuation += rest;
    std::fwrite(rest.data(), 1, rest.size(), stdout);
    std::fputs("\n", stdout);
  } else if (tokenizer) {
    const Clock::time_point text_start = Clock::now();
    Result<std::string> text = tokenizer->decode(generated, {.at_start = false});
    if (!text.is_ok()) return report_failure(text.status().with_context("run"));
    decode_text_s = seconds_since(text_start);
    continuation = std::move(*text);
  }
  const double prompt_tps = static_cast<double>(prompt_tokens) / prefill_s;
  const double gen_tps = decode_evals > 0 ? static_cast<double>(decode_evals) / decode_s : 0.0;
  const std::uint64_t replays = model.executor_stats().replays - replays_before;
  std::size_t decode_nodes = 0;
  for (std::size_t b = 0; b < model.plan().bucket_count(); ++b) {
    if (model.plan().bucket(b).name == "decode") decode_nodes = model.plan().bucket(b).steps.size();
  }
  const double step_host_us = decode_evals > 0 ? queue_ns * 1e-3 / double(decode_evals) : 0.0;

  if (!o.logits_out.empty()) {
    const auto rows = static_cast<std::int64_t>(logit_rows.size()) / c.vocab_size;
    if (Status st = write_npy_f32(o.logits_out, rows, c.vocab_size, logit_rows); !st.is_ok()) {
      return report_failure(st.with_context("run: --logits-out"));
    }
  }
  const LlamaProfile& prof = model.profile();
  double profiled_ns = prof.copy_ns;
  for (double ns : prof.family_ns) profiled_ns += ns;
  const LlamaKernelReport& report = model.kernel_report();

  // The run's record: what --json prints, and what a report shows of the run.
  nlohmann::json j;
  {
    j["model"] = o.model.empty() ? "synthetic " + o.synthetic : o.model;
    j["backend"] = std::string(name(*backend));
    j["threads"] = runner->num_threads();
    j["devices"] = model.devices();
    j["packed_weight_bytes"] = report.packed_bytes;
    j["config"] = {{"architecture", c.architecture}, {"file_type", c.file_type},
                   {"vocab", c.vocab_size},          {"dim", c.embedding_length},
                   {"blocks", c.block_count},        {"heads", c.head_count},
                   {"kv_heads", c.head_count_kv},    {"ff", c.feed_forward_length}};
    j["load_s"] = load_s;
    j["warm_up_s"] = warm_s;
    if (upload.total > 0) j["upload"] = {{"bytes", upload.total}, {"gb_per_s", upload_gbps}};
    if (weight_check) j["weight_check"] = check_json(*file, *weight_check);
    j["prompt"] = {{"tokens", prompt_tokens}, {"seconds", prefill_s}, {"tokens_per_s", prompt_tps}};
    if (o.text_prompt) j["prompt"]["text"] = prompt_text;
    if (tokenizer) {
      j["text"] = continuation;
      j["tokenizer"] = {{"kind", tokenizer->describe()},
                        {"encode_s", encode_s},
                        {"decode_us_per_token",
                         generated.empty() ? 0.0 : decode_text_s * 1e6 / double(generated.size())}};
    }
    j["generation"] = {{"tokens", static_cast<std::int64_t>(generated.size())},
                       {"stopped_at", stopped_at ? nlohmann::json(*stopped_at) : nlohmann::json()},
                       {"evals", decode_evals},
                       {"seconds", decode_s},
                       {"tokens_per_s", gen_tps},
                       {"ids", generated}};
    j["decode_host"] = {
        {"us_per_step", step_host_us},
        {"steps", decode_nodes},
        {"ns_per_step_node", decode_nodes > 0 ? step_host_us * 1e3 / double(decode_nodes) : 0.0},
        {"replayed_steps", replays}};
    j["sampling"] = {
        {"options", describe(o.sampling)},
        {"seconds", sampling_s},
        {"us_per_token", generated.empty() ? 0.0 : sampling_s * 1e6 / double(generated.size())}};
    nlohmann::json split = nlohmann::json::object();
    for (OpFamily f : kAllOpFamilies) {
      const double ns = prof.family_ns[static_cast<std::size_t>(f)];
      if (ns > 0) split[std::string(name(f))] = ns * 1e-6;
    }
    if (prof.copy_ns > 0) split["copy"] = prof.copy_ns * 1e-6;
    j["time_ms_by_family"] = split;
    j["device_profile"] = o.device_profile;
    nlohmann::json buckets = nlohmann::json::object();
    for (const auto& b : report.buckets) {
      nlohmann::json per = nlohmann::json::object();
      for (const auto& [bk, n] : b.nodes) per[std::string(name(bk))] = n;
      buckets[b.bucket] = per;
    }
    nlohmann::json violations = nlohmann::json::array();
    for (const auto& v : report.violations) {
      violations.push_back({{"tensor", v.tensor},
                            {"role", v.role},
                            {"op", v.op},
                            {"dtype", std::string(name(v.dtype))},
                            {"fallback", v.fallback}});
      if (!v.problem.empty()) violations.back()["problem"] = v.problem;
    }
    j["kernels"] = {{"probes", report.probes}, {"nodes", buckets}, {"violations", violations}};
    j["ok"] = finite;
  }
  if (o.report_json) {
    // `report --json` prints the report, of which the run's record is a part.
  } else if (o.json) {
    // Generated text need not be valid UTF-8 (a token may end inside a
    // character): such bytes are written as U+FFFD rather than failing the dump.
    fmt::print("{}\n", j.dump(2, ' ', false, nlohmann::json::error_handler_t::replace));
  } else {
    fmt::print(
        "model    {} ({} {} blocks, dim {}, {} heads / {} kv of {}, ff {}, vocab {}{})\n",
        o.model.empty() ? fmt::format("synthetic llama '{}' (embedded)", o.synthetic) : o.model,
        c.architecture, c.block_count, c.embedding_length, c.head_count, c.head_count_kv,
        c.head_dim(), c.feed_forward_length, c.vocab_size,
        c.file_type >= 0 ? fmt::format(", general.file_type {}", c.file_type) : std::string());
    fmt::print("backend  {}{}{}, {} thread{}; loaded in {:.2f} s, warmed up in {:.2f} s\n",
               name(*backend), o.backend == "auto" ? auto_note(*backend) : std::string(),
               model.devices() > 0
                   ? fmt::format(", split over {} device{}{}", model.devices(),
                                 model.devices() == 1 ? "" : "s",
                                 *backend == BackendId::kCpu ? " (simulated ranks)" : "")
                   : std::string(),
               runner->num_threads(), runner->num_threads() == 1 ? "" : "s", load_s, warm_s);
    if (weight_check) fmt::print("weights  {}\n", check_summary(*file, *weight_check));
    if (upload.total > 0) {
      fmt::print("upload   {:.3f} GB to {} at {:.1f} GB/s\n",
                 static_cast<double>(upload.total) * 1e-9, name(*backend), upload_gbps);
    }
    fmt::print("prompt   {} tokens in {:.3f} s: {:.1f} tokens/s\n", prompt_tokens, prefill_s,
               prompt_tps);
    fmt::print("generate {} tokens ({} decode steps) in {:.3f} s: {:.1f} tokens/s\n",
               generated.size(), decode_evals, decode_s, gen_tps);
    if (stopped_at) {
      fmt::print(
          "stopped  at token {}, {}\n", *stopped_at,
          std::find(o.stop_tokens.begin(), o.stop_tokens.end(), *stopped_at) != o.stop_tokens.end()
              ? "a --stop-token"
              : "the model's end of sequence (--ignore-eos generates past it)");
    }
    fmt::print("sampling {}: {:.1f} us per token, {:.2f}% of generation\n", describe(o.sampling),
               generated.empty() ? 0.0 : sampling_s * 1e6 / generated.size(),
               decode_s > 0 ? 100.0 * sampling_s / decode_s : 0.0);
    if (decode_evals > 0 && !host) {
      fmt::print(
          "host     {:.1f} us per decode step to bind and queue its {} steps ({:.0f} ns per "
          "step); {} of {} decode steps replayed a recording\n",
          step_host_us, decode_nodes,
          decode_nodes > 0 ? step_host_us * 1e3 / double(decode_nodes) : 0.0, replays,
          decode_evals);
    }
    std::string ids;
    for (std::size_t i = 0; i < generated.size() && i < 16; ++i)
      ids += fmt::format(" {}", generated[i]);
    fmt::print("tokens  {}{}\n", ids, generated.size() > 16 ? " ..." : "");
    if (tokenizer) {
      if (!streaming) fmt::print("text     {}\n", escaped_text(continuation));
      fmt::print("text in  {}{}; text out {:.2f} us per token, {:.2f}% of generation\n",
                 tokenizer->describe(),
                 o.text_prompt ? fmt::format(": {} bytes encoded in {:.3f} ms", prompt_text.size(),
                                             encode_s * 1e3)
                               : std::string(),
                 generated.empty() ? 0.0 : decode_text_s * 1e6 / double(generated.size()),
                 decode_s > 0 ? 100.0 * decode_text_s / decode_s : 0.0);
    }
    if (profiled_ns > 0) {
      fmt::print("time by op family ({}, prompt + generation):\n",
                 host ? "kernel time" : "device time, each node waited for");
    } else {
      fmt::print("time by op family: on a device, with --device-profile\n");
    }
    std::vector<std::pair<double, std::string>> rows;
    for (OpFamily f : kAllOpFamilies) {
      const double ns = prof.family_ns[static_cast<std::size_t>(f)];
      if (ns > 0) rows.emplace_back(ns, std::string(name(f)));
    }
    if (prof.copy_ns > 0) rows.emplace_back(prof.copy_ns, "copy");
    std::sort(rows.rbegin(), rows.rend());
    for (const auto& [ns, fam] : rows) {
      fmt::print("  {:<10} {:9.2f} ms  {:5.1f}%\n", fam, ns * 1e-6,
                 profiled_ns > 0 ? 100.0 * ns / profiled_ns : 0.0);
    }
    fmt::print("{}", report.render());
  }
  if (!o.report.empty() || o.report_json) {
    Result<ReportInputs> inputs =
        report_inputs(o.ledger, std::nullopt, o.calibration, runner->num_threads());
    if (!inputs.is_ok()) return report_failure(inputs.status().with_context("run: report"));
    inputs->model = ReportModel{&model, std::move(j)};
    const nlohmann::json document = report_json(*inputs);
    if (o.report_json) {
      fmt::print("{}\n", document.dump(2, ' ', false, nlohmann::json::error_handler_t::replace));
    } else {
      if (Status st = write_file_atomically(o.report, report_html(document), "the report page");
          !st.is_ok()) {
        return report_failure(st.with_context("run: --report"));
      }
      if (!o.json) fmt::print("report   {} (open it in a browser)\n", o.report);
    }
  }
  if (!finite) {
    std::fprintf(stderr, "switchyard: run: the logits hold a NaN or infinity\n");
    return kExitCheckFailed;
  }
  return kExitOk;
}

void add_run_command(CLI::App& app, CommandMain& selected) {
  auto options = std::make_shared<RunOptions>();
  CLI::App* cmd = app.add_subcommand(
      "run",
      "Run a llama-family model (default: an embedded synthetic one): prompt and "
      "generation throughput, time by op family, the kernel report");
  cmd->add_option("model", options->model,
                  "GGUF model file (omit for the embedded synthetic model)");
  cmd->add_option("--model-type", options->model_type,
                  "embedded model: weight storage, 'mix' (q4_k, q6_k, q8_0; the default) or "
                  "one dtype for every matrix (f32, f16, q8_0, q4_k, ...)");
  cmd->add_option("--synthetic", options->synthetic,
                  fmt::format("embedded model: its shape, with random weights ({}; tiny is the "
                              "default)",
                              fmt::join(synthetic_llama_presets(), ", ")))
      ->check(CLI::IsMember(std::vector<std::string>(synthetic_llama_presets().begin(),
                                                     synthetic_llama_presets().end())));
  cmd->add_option("--save-model", options->save_model,
                  "embedded model: keep its GGUF file at this path");
  std::string help = "auto (the first compiled accelerator, else the host) or one of:";
  for (BackendId b : compiled_backends()) help += fmt::format(" {}", name(b));
  cmd->add_option("--backend", options->backend, help);
  CLI::Option* prompt_tokens =
      cmd->add_option("--prompt-tokens", options->prompt_tokens,
                      "prompt length in tokens (64): the default text's tokens repeated, or "
                      "token ids spread over the vocabulary for a model without a tokenizer")
          ->check(CLI::Range(std::int64_t{1}, kMaxTokenCount));
  CLI::Option* prompt = cmd->add_option("--prompt", options->prompt,
                                        "the prompt as text (needs the model's tokenizer); the "
                                        "generated text is printed as it comes")
                            ->excludes(prompt_tokens);
  cmd->add_option("--prompt-file", options->prompt_file, "read the prompt text from this file")
      ->excludes(prompt_tokens)
      ->excludes(prompt);
  cmd->add_option("--tokens", options->tokens, "tokens to generate (32)")->check(kTokenRange);
  cmd->add_option("--calibration", options->calibration,
                  "Plan with the measured costs of this calibration profile (switchyard "
                  "calibrate; default: SWITCHYARD_CALIBRATION)");
  cmd->add_option("--threads", options->threads, "CPU threads (default: SWITCHYARD_THREADS or all)")
      ->check(kThreadRange);
  cmd->add_flag("--strict", options->strict, "refuse to run when a kernel is missing");
  add_precision_trades_flag(cmd, options->admit_precision_trades);
  cmd->add_flag("--no-pack", options->no_pack,
                "never pack weights at load: the prefill GEMM reads the file's layout (slower, "
                "and no packed copies beside the weights)");
  cmd->add_option("--devices", options->devices,
                  "split the model over this many devices, tensor parallel (on the cpu: "
                  "simulated ranks, threads of this process; on cuda: rank r on GPU r; "
                  "docs/multi-gpu.md)")
      ->check(CLI::Range(1, HostRankGroup::kMaxRanks));
  cmd->add_flag("--json", options->json, "print the results as JSON");
  cmd->add_option("--report", options->report,
                  "also write this run's report page (HTML: coverage, kernel report, plan, "
                  "measured times; see switchyard report) to this file");
  SamplingOptions& sampling = options->sampling;
  cmd->add_option("--temperature", sampling.temperature,
                  "0 picks the most likely token (the default); above 0, draw from the model's "
                  "distribution at this temperature")
      ->check(CLI::Range(0.0f, 100.0f));
  cmd->add_option("--top-k", sampling.top_k, "draw among the k most likely tokens (40; 0: off)")
      ->check(CLI::Range(0, 1 << 30));
  cmd->add_option("--top-p", sampling.top_p,
                  "draw among the most likely tokens holding this much probability (0.95; 1: off)");
  cmd->add_option("--min-p", sampling.min_p,
                  "drop tokens less than this fraction as likely as the top one (0.05; 0: off)");
  cmd->add_option("--repeat-penalty", sampling.repeat_penalty,
                  "divide the logits of recent tokens by this (1: off, the default)");
  cmd->add_option("--repeat-last-n", sampling.repeat_last_n,
                  "how many recent tokens the penalty looks at (64)")
      ->check(CLI::Range(0, 1 << 30));
  cmd->add_option("--seed", sampling.seed,
                  "the sampler's seed: the same seed, the same tokens (0)");
  cmd->add_flag("--device-profile", options->device_profile,
                "on a GPU, wait for each node so that the time by op family is device time "
                "(slows the run: the throughput figures then include the waits)");
  cmd->add_option("--logits-out", options->logits_out,
                  "write the logits each generated token was chosen from to this .npy file "
                  "(f32, one row per token)");
  cmd->add_flag("--ignore-eos", options->ignore_eos,
                "generate past the model's end-of-sequence tokens");
  cmd->add_option("--stop-token", options->stop_tokens,
                  "stop generating after this token id (repeatable)")
      ->check(CLI::Range(0, std::numeric_limits<std::int32_t>::max()));
  cmd->add_option("--cache-type", options->cache_type,
                  "the KV cache's dtype: f16 (the default; half the memory), f32, or q8_0 "
                  "(a little over half of f16's bytes; heads of whole 32-value blocks)")
      ->check(CLI::IsMember({"f16", "f32", "q8_0"}));
  cmd->add_flag("--record,!--no-record", options->record,
                "on a device, record a decode step once and replay it (the default); "
                "--no-record launches every node from the host");
  cmd->add_flag("--check-weights,!--no-check-weights", options->check_weights,
                "scan every weight for NaN and infinity before loading and refuse (exit 1) a "
                "model that holds any (the default; --no-check-weights skips the scan)");
  cmd->callback([options, cmd, &selected] {
    options->text_prompt = cmd->count("--prompt") + cmd->count("--prompt-file") > 0;
    selected = [options] { return run_model(*options); };
  });
}

}  // namespace switchyard::tool
