// `switchyard run`, shared with `switchyard report`, which runs a model the same
// way to show its plan, kernel report and measured times.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "switchyard/sampling.h"

namespace switchyard::tool {

struct RunOptions {
  std::string model;
  // The embedded model only: its weight storage ("mix": the default mix of q4_k,
  // q6_k and q8_0; or one dtype name for every matrix) and where to keep its file.
  std::string model_type = "mix";
  // The embedded model's shape: a synthetic_llama_presets() name.
  std::string synthetic = "tiny";
  std::string save_model;
  std::string backend = "auto";
  std::int64_t prompt_tokens = 64;
  // The prompt as text (--prompt, or --prompt-file's contents); empty: token ids,
  // --prompt-tokens of them.
  std::string prompt;
  std::string prompt_file;
  bool text_prompt = false;  // --prompt or --prompt-file given
  std::int64_t tokens = 32;
  int threads = 0;
  bool strict = false;
  bool admit_precision_trades = false;
  bool no_pack = false;
  // Split the model over this many devices (LlamaLoadOptions::devices; 0: not split).
  int devices = 0;
  bool json = false;
  // Scan every weight for NaN and infinity before loading: the default (Note
  // [Checking weights before a run]); --no-check-weights skips it.
  bool check_weights = true;
  // Time each node on the device by waiting for it (Note [Profiling a device]).
  bool device_profile = false;
  // On a device, record a decode step and replay it (Note [Recorded runs]);
  // --no-record launches every node from the host.
  bool record = true;
  // The KV cache's dtype: f16 (the default) or f32.
  std::string cache_type = "f16";
  std::string calibration;
  // Where to write the logits each token was chosen from, as .npy; empty: nowhere.
  std::string logits_out;
  // Generation stops at the model's end-of-sequence tokens unless ignore_eos, and
  // at any of stop_tokens.
  bool ignore_eos = false;
  std::vector<std::int32_t> stop_tokens;
  // How each generated token is chosen: greedy unless --temperature > 0.
  SamplingOptions sampling;
  // Where to write the run's report page (report.h), or empty; with report_json
  // the report's JSON goes to stdout instead and nothing else is printed.
  std::string report;
  bool report_json = false;
  // The verification ledger the report's coverage map reads.
  std::string ledger = "switchyard-ledger.json";
};

// Loads, prefills, generates and reports as `run` does; returns the exit status.
[[nodiscard]] int run_model(const RunOptions& options);

}  // namespace switchyard::tool
