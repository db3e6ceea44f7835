#include "switchyard/perplexity.h"

#include <algorithm>
#include <cmath>

#include <fmt/format.h>

namespace switchyard {
namespace {

// -log softmax(row)[target], in double.
double negative_log_likelihood(std::span<const float> row, std::int32_t target) {
  const float top = *std::max_element(row.begin(), row.end());
  double sum = 0;
  for (float x : row) sum += std::exp(static_cast<double>(x) - top);
  return std::log(sum) + top - static_cast<double>(row[static_cast<std::size_t>(target)]);
}

}  // namespace

std::int64_t perplexity_scored_per_chunk(std::int64_t context) { return context - 1 - context / 2; }

Result<PerplexityResult> compute_perplexity(LlamaModel& model, std::span<const std::int32_t> tokens,
                                            const PerplexityOptions& o) {
  const auto bad = [](std::string what) {
    return invalid_argument_error("perplexity: " + std::move(what));
  };
  if (o.context < 4 || o.context > model.max_context()) {
    return bad(fmt::format("the context must be 4 to the model's {} tokens, not {}",
                           model.max_context(), o.context));
  }
  if (o.batch < 1 || o.batch > model.max_batch()) {
    return bad(fmt::format("the batch must be 1 to the model's {} tokens, not {}",
                           model.max_batch(), o.batch));
  }
  if (o.max_chunks < 0) return bad(fmt::format("max_chunks must be >= 0, not {}", o.max_chunks));
  const auto n = static_cast<std::int64_t>(tokens.size());
  std::int64_t chunks = n / o.context;
  if (chunks == 0) {
    return bad(fmt::format("the text has {} tokens, fewer than one chunk of {}", n, o.context));
  }
  if (o.max_chunks > 0) chunks = std::min(chunks, o.max_chunks);

  const std::int64_t vocab = model.config().vocab_size;
  const std::int64_t first = o.context / 2;
  std::vector<std::int32_t> chunk(static_cast<std::size_t>(o.context));
  std::vector<float> logits(static_cast<std::size_t>(o.batch * vocab));
  double sum = 0;
  double sum_squares = 0;
  std::int64_t count = 0;
  for (std::int64_t c = 0; c < chunks; ++c) {
    const auto begin = tokens.begin() + static_cast<std::ptrdiff_t>(c * o.context);
    std::copy(begin, begin + static_cast<std::ptrdiff_t>(o.context), chunk.begin());
    if (o.bos >= 0) chunk[0] = o.bos;
    model.reset();
    for (std::int64_t at = 0; at < o.context; at += o.batch) {
      const std::int64_t m = std::min(o.batch, o.context - at);
      // A batch that ends before the scored half needs no logits but its last
      // row's, which skips the output head for the rest.
      const bool scored = at + m - 1 >= first;
      std::span<float> out =
          std::span(logits).first(static_cast<std::size_t>((scored ? m : 1) * vocab));
      SWITCHYARD_RETURN_IF_ERROR(model.eval(
          std::span(chunk).subspan(static_cast<std::size_t>(at), static_cast<std::size_t>(m)),
          out));
      if (!scored) continue;
      // Position j's logits score token j + 1, for j in [first, context - 1).
      for (std::int64_t j = std::max(at, first); j < std::min(at + m, o.context - 1); ++j) {
        const std::span<const float> row = std::span<const float>(logits).subspan(
            static_cast<std::size_t>((j - at) * vocab), static_cast<std::size_t>(vocab));
        const std::int32_t target = chunk[static_cast<std::size_t>(j + 1)];
        const double nll = negative_log_likelihood(row, target);
        sum += nll;
        sum_squares += nll * nll;
        ++count;
        if (o.on_scored) SWITCHYARD_RETURN_IF_ERROR(o.on_scored(row, target));
      }
    }
    if (o.on_chunk) o.on_chunk(c + 1, chunks, std::exp(sum / static_cast<double>(count)));
  }
  PerplexityResult r;
  r.chunks = chunks;
  r.scored_tokens = count;
  r.evaluated_tokens = chunks * o.context;
  r.mean_nll = sum / static_cast<double>(count);
  const double variance =
      std::max(0.0, sum_squares / static_cast<double>(count) - r.mean_nll * r.mean_nll);
  r.nll_stderr = count > 1 ? std::sqrt(variance / static_cast<double>(count - 1)) : 0.0;
  r.perplexity = std::exp(r.mean_nll);
  r.perplexity_stderr = r.perplexity * r.nll_stderr;
  return r;
}

}  // namespace switchyard
