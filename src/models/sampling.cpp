#include "switchyard/sampling.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <limits>

#include <fmt/format.h>

namespace switchyard {
namespace {

// Accumulators per pass over the vocabulary: enough for two AVX2 or one AVX-512
// register of floats.
constexpr std::size_t kLanes = 16;

// Most likely first; equal logits by token id, so that every order is total and
// no standard-library algorithm's tie order shows in a result.
bool more_likely(const std::pair<float, std::int32_t>& a, const std::pair<float, std::int32_t>& b) {
  return a.first > b.first || (a.first == b.first && a.second < b.second);
}

}  // namespace

std::string describe(const SamplingOptions& o) {
  if (o.temperature == 0.0f) return "greedy";
  std::string text = fmt::format("temperature {:g}, top-k {}, top-p {:g}, min-p {:g}",
                                 o.temperature, o.top_k, o.top_p, o.min_p);
  if (o.repeat_penalty != 1.0f) {
    text += fmt::format(", repeat penalty {:g} over {} tokens", o.repeat_penalty, o.repeat_last_n);
  }
  return text + fmt::format(", seed {}", o.seed);
}

Sampler::Sampler(const SamplingOptions& options) : options_(options), rng_(options.seed) {}

Result<Sampler> Sampler::create(const SamplingOptions& o) {
  auto bad = [](std::string_view what) {
    return invalid_argument_error(fmt::format("sampling: {}", what));
  };
  if (!std::isfinite(o.temperature) || o.temperature < 0.0f) {
    return bad(fmt::format("temperature must be a finite number >= 0, got {}", o.temperature));
  }
  if (o.top_k < 0) return bad(fmt::format("top-k must be >= 0 (0: off), got {}", o.top_k));
  if (!(o.top_p > 0.0f && o.top_p <= 1.0f)) {
    return bad(fmt::format("top-p must be in (0, 1] (1: off), got {}", o.top_p));
  }
  if (!(o.min_p >= 0.0f && o.min_p < 1.0f)) {
    return bad(fmt::format("min-p must be in [0, 1) (0: off), got {}", o.min_p));
  }
  if (!std::isfinite(o.repeat_penalty) || o.repeat_penalty <= 0.0f) {
    return bad(fmt::format("the repetition penalty must be a finite number > 0 (1: off), got {}",
                           o.repeat_penalty));
  }
  if (o.repeat_last_n < 0) {
    return bad(fmt::format("repeat-last-n must be >= 0, got {}", o.repeat_last_n));
  }
  return Sampler(o);
}

double Sampler::uniform() { return static_cast<double>(rng_() >> 11) * 0x1p-53; }

Result<std::int32_t> Sampler::sample(std::span<const float> logits,
                                     std::span<const std::int32_t> history) {
  const auto vocab = static_cast<std::int64_t>(logits.size());
  if (vocab == 0) return invalid_argument_error("sampling: the row of logits is empty");
  // 1. The penalized tokens, each once, with their new logits.
  penalized_.clear();
  if (options_.repeat_penalty != 1.0f) {
    const std::size_t recent =
        std::min(history.size(), static_cast<std::size_t>(options_.repeat_last_n));
    for (const std::int32_t t : history.last(recent)) {
      if (t < 0 || t >= vocab) {
        return invalid_argument_error(
            fmt::format("sampling: history token {} is outside the vocabulary [0, {})", t, vocab));
      }
      const bool seen = std::any_of(penalized_.begin(), penalized_.end(),
                                    [t](const auto& p) { return p.first == t; });
      if (seen) continue;
      const float l = logits[static_cast<std::size_t>(t)];
      penalized_.emplace_back(t, l > 0 ? l / options_.repeat_penalty : l * options_.repeat_penalty);
    }
  }
  // With penalties, the row is a copy with the penalized logits in place (a copy
  // of the vocabulary costs far less than looking each token up in the list).
  std::span<const float> row = logits;
  if (!penalized_.empty()) {
    adjusted_.assign(logits.begin(), logits.end());
    for (const auto& [t, l] : penalized_) adjusted_[static_cast<std::size_t>(t)] = l;
    row = adjusted_;
  }

  // The most likely token (the first, on ties), and NaN refused. The maximum and
  // a NaN flag are kept per lane of kLanes independent accumulators, a loop the
  // compiler turns into vector instructions; then the first maximum is searched.
  const float kNone = -std::numeric_limits<float>::infinity();
  std::array<float, kLanes> tops;
  tops.fill(kNone);
  std::array<std::uint32_t, kLanes> nans{};
  const float* data = row.data();
  const std::size_t whole = row.size() / kLanes * kLanes;
  for (std::size_t i = 0; i < whole; i += kLanes) {
    for (std::size_t j = 0; j < kLanes; ++j) {
      const float l = data[i + j];
      nans[j] |= static_cast<std::uint32_t>(l != l);
      tops[j] = l > tops[j] ? l : tops[j];
    }
  }
  float top = kNone;
  bool nan = false;
  for (std::size_t i = whole; i < row.size(); ++i) {
    nan |= data[i] != data[i];
    top = data[i] > top ? data[i] : top;
  }
  for (std::size_t j = 0; j < kLanes; ++j) {
    top = tops[j] > top ? tops[j] : top;
    nan |= nans[j] != 0;
  }
  if (nan) {
    const auto at = std::find_if(row.begin(), row.end(), [](float l) { return std::isnan(l); });
    return invalid_argument_error(
        fmt::format("sampling: logit {} is NaN", std::distance(row.begin(), at)));
  }
  const auto best = static_cast<std::int32_t>(
      top == kNone ? 0 : std::distance(row.begin(), std::find(row.begin(), row.end(), top)));
  if (options_.temperature == 0.0f || top == kNone) return best;

  // 2-4. Candidates: tokens that pass min-p (p / p_max >= min_p is logit >= top +
  // temperature * ln(min_p)), then the top k of them.
  const double temperature = options_.temperature;
  const float threshold = options_.min_p > 0.0f
                              ? static_cast<float>(top + temperature * std::log(options_.min_p))
                              : kNone;
  candidates_.clear();
  auto consider = [&](std::size_t i) {
    const float l = row[i];
    if (l >= threshold && l != kNone) candidates_.emplace_back(l, static_cast<std::int32_t>(i));
  };
  // A block of kLanes is looked at one by one only when one of them passes.
  for (std::size_t i = 0; i < whole; i += kLanes) {
    std::uint32_t any = 0;
    for (std::size_t j = 0; j < kLanes; ++j) {
      any |= static_cast<std::uint32_t>(data[i + j] >= threshold);
    }
    if (any == 0) continue;
    for (std::size_t j = 0; j < kLanes; ++j) consider(i + j);
  }
  for (std::size_t i = whole; i < row.size(); ++i) consider(i);
  const auto k = static_cast<std::size_t>(options_.top_k);
  const bool cut = k > 0 && candidates_.size() > k;
  if (cut) {
    std::nth_element(candidates_.begin(), candidates_.begin() + static_cast<std::ptrdiff_t>(k),
                     candidates_.end(), more_likely);
    candidates_.resize(k);
  }
  const auto inverse = static_cast<float>(1.0 / temperature);
  auto weight = [&](float l) { return static_cast<double>(std::exp((l - top) * inverse)); };
  std::size_t keep = candidates_.size();
  if (options_.top_p < 1.0f) {
    // 5. top-p: the shortest most-likely prefix holding top_p of the mass. Only
    // that prefix is sorted: the n most likely are selected and sorted, n growing
    // fourfold until they hold enough, so a peaked distribution sorts a few
    // dozen tokens, not the vocabulary.
    double all = 0;
    for (const auto& c : candidates_) all += weight(c.first);
    const double want = options_.top_p * all;
    for (std::size_t n = std::min<std::size_t>(64, keep);; n = std::min(keep, n * 4)) {
      const auto middle = candidates_.begin() + static_cast<std::ptrdiff_t>(n);
      if (n < candidates_.size()) {
        std::nth_element(candidates_.begin(), middle, candidates_.end(), more_likely);
      }
      std::sort(candidates_.begin(), middle, more_likely);
      double mass = 0;
      std::size_t reached = 0;
      for (std::size_t j = 0; j < n && reached == 0; ++j) {
        mass += weight(candidates_[j].first);
        if (mass >= want) reached = j + 1;
      }
      if (reached != 0 || n == candidates_.size()) {
        keep = reached != 0 ? reached : n;  // n: every candidate, short by rounding
        break;
      }
    }
  } else if (cut) {
    // A fixed order for the draw (nth_element's order is the library's own).
    std::sort(candidates_.begin(), candidates_.end(),
              [](const auto& a, const auto& b) { return a.second < b.second; });
  }
  weights_.resize(keep);
  double total = 0;
  for (std::size_t j = 0; j < keep; ++j) {
    weights_[j] = weight(candidates_[j].first);
    total += weights_[j];
  }
  const double u = uniform() * total;
  double mass = 0;
  for (std::size_t j = 0; j < keep; ++j) {
    mass += weights_[j];
    if (u < mass) return candidates_[j].second;
  }
  return candidates_[keep - 1].second;  // u within rounding of the total
}

}  // namespace switchyard
