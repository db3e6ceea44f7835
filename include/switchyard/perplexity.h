// Perplexity of a llama-family model over a token sequence, chunked in the
// standard way: the tokens are cut into chunks of `context` tokens (a last partial
// chunk is dropped); each chunk runs on an empty cache, its first token replaced
// by BOS where the tokenizer has one; the first half of each chunk is context
// only, and each token of the second half is scored by the logits at the token
// before it. With N scored tokens and nll_i = -log p(token_i | what precedes it in
// its chunk):
//   perplexity = exp(mean nll), and its standard error by the delta method,
//   perplexity * sqrt((mean(nll^2) - mean(nll)^2) / (N - 1)).
// Log-probabilities are computed in double from each row's logits.
//
// Example
//   SWITCHYARD_ASSIGN_OR_RETURN(PerplexityResult r,
//                               compute_perplexity(model, tokens, {.context = 512}));
//   fmt::print("{:.4f} +/- {:.4f}\n", r.perplexity, r.perplexity_stderr);
#pragma once

#include <cstdint>
#include <functional>
#include <span>
#include <vector>

#include "switchyard/llama.h"
#include "switchyard/status.h"

namespace switchyard {

struct PerplexityOptions {
  // Tokens per chunk, at least 4 and at most the model's max_context().
  std::int64_t context = 512;
  // Tokens per eval, 1 to the model's max_batch().
  std::int64_t batch = 512;
  // Score at most this many chunks (0: every whole chunk).
  std::int64_t max_chunks = 0;
  // The token each chunk starts with instead of its own; -1 keeps the chunk's.
  std::int32_t bos = -1;
  // After each chunk: chunks done, chunks in all, the perplexity so far.
  std::function<void(std::int64_t done, std::int64_t total, double perplexity)> on_chunk;
  // Each scored position's logits (vocab_size floats) and the token they score,
  // in order; an error stops the computation and is returned.
  std::function<Status(std::span<const float> logits, std::int32_t target)> on_scored;
};

struct PerplexityResult {
  std::int64_t chunks = 0;
  std::int64_t scored_tokens = 0;
  // Tokens run through the model (chunks x context).
  std::int64_t evaluated_tokens = 0;
  double mean_nll = 0;
  double nll_stderr = 0;
  double perplexity = 0;
  double perplexity_stderr = 0;
};

// The number of positions compute_perplexity scores in each chunk of `context`
// tokens: context - 1 - context / 2.
[[nodiscard]] std::int64_t perplexity_scored_per_chunk(std::int64_t context);

// Runs the chunks through `model` (its cache is reset before each and left
// holding the last). kInvalidArgument for options outside the ranges above, or
// fewer tokens than one chunk (naming both counts); the model's eval errors
// (a token outside the vocabulary, non-finite logits) as they are.
[[nodiscard]] Result<PerplexityResult> compute_perplexity(LlamaModel& model,
                                                          std::span<const std::int32_t> tokens,
                                                          const PerplexityOptions& options);

}  // namespace switchyard
