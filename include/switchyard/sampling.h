// Choosing the next token from a row of logits.
//
// A Sampler is greedy (temperature 0) or draws from the model's distribution
// after these steps, in this order:
//   1. repetition penalty: each distinct token among the last `repeat_last_n` of
//      the history has its logit divided by `repeat_penalty` when positive and
//      multiplied by it when negative (1 turns it off);
//   2. temperature: probabilities proportional to exp(logit / temperature);
//   3. top-k: only the k most likely tokens (0 turns it off);
//   4. min-p: only tokens at least `min_p` times as likely as the most likely
//      one (0 turns it off);
//   5. top-p: the most likely tokens whose probabilities, renormalized after the
//      steps before, first add up to `top_p` or more (1 turns it off);
// then one draw. Every filter keeps at least the most likely token. The draw
// uses the Sampler's own generator (64-bit Mersenne Twister, turned into a double
// by its top 53 bits), so the same seed, logits and history give the same token
// on every platform and compiler.
//
// Cost: one pass over the vocabulary for the maximum and one for the tokens that
// pass min-p (or every token when min-p is off), plus a copy of the row when a
// repetition penalty applies. Sorting touches only what is kept: top-k selects
// its k first, and top-p sorts a growing selection of the most likely tokens
// until it holds the mass asked for. The scratch memory is kept
// between calls, so a draw allocates nothing after the first.
//
// Example
//   SWITCHYARD_ASSIGN_OR_RETURN(Sampler sampler, Sampler::create({.temperature = 0.8f}));
//   SWITCHYARD_ASSIGN_OR_RETURN(std::int32_t next, sampler.sample(logits, history));
#pragma once

#include <cstdint>
#include <random>
#include <span>
#include <string>
#include <vector>

#include "switchyard/status.h"

namespace switchyard {

struct SamplingOptions {
  // 0: greedy (the most likely token; ties go to the lowest id).
  float temperature = 0.0f;
  std::int32_t top_k = 40;
  float top_p = 0.95f;
  float min_p = 0.05f;
  float repeat_penalty = 1.0f;
  std::int32_t repeat_last_n = 64;
  std::uint64_t seed = 0;
};

// The options in one line, as `run` prints them: "greedy" or
// "temperature 0.8, top-k 40, top-p 0.95, min-p 0.05, seed 0".
[[nodiscard]] std::string describe(const SamplingOptions& options);

class Sampler {
 public:
  // kInvalidArgument naming the option for a temperature below 0 or not finite, a
  // negative top-k or repeat_last_n, top-p outside (0, 1], min-p outside [0, 1),
  // or a repetition penalty that is not a finite number above 0.
  [[nodiscard]] static Result<Sampler> create(const SamplingOptions& options);

  // The next token for `logits` (one row, the vocabulary's size), given the
  // tokens so far. kInvalidArgument for an empty row or a NaN in it (a model's
  // logits are checked before they get here; a NaN would make any choice
  // arbitrary), or, with a repetition penalty, for a history token outside the
  // row.
  [[nodiscard]] Result<std::int32_t> sample(std::span<const float> logits,
                                            std::span<const std::int32_t> history);

  [[nodiscard]] const SamplingOptions& options() const { return options_; }

 private:
  explicit Sampler(const SamplingOptions& options);
  [[nodiscard]] double uniform();

  SamplingOptions options_;
  std::mt19937_64 rng_;
  // Scratch, reused: the penalized tokens and their logits, the row with them in
  // place, the candidates and their weights.
  std::vector<std::pair<std::int32_t, float>> penalized_;
  std::vector<float> adjusted_;
  std::vector<std::pair<float, std::int32_t>> candidates_;
  std::vector<double> weights_;
};

}  // namespace switchyard
