// The Sampler over a row of Llama-3's vocabulary (128,256 logits): greedy, the
// `run` defaults at temperature 0.8, those with a repetition penalty over 64
// tokens, top-p alone, and no filter at all (every token weighed). The row is N(0, 2.5) noise
// with a few tokens well above it, as a model's logits have. `read_us` is one
// vectorizable pass over the row (its maximum) in the same run: the floor of any
// draw, which must read every logit once. Run:
//   ./build/release/bench/switchyard_bench --benchmark_filter=Sample
#include <benchmark/benchmark.h>

#include <algorithm>
#include <chrono>
#include <random>
#include <vector>

#include "switchyard/sampling.h"

namespace switchyard {
namespace {

constexpr std::size_t kVocab = 128256;

std::vector<float> model_like_logits() {
  std::vector<float> l(kVocab);
  std::mt19937 rng(5);
  std::normal_distribution<float> noise(0.0f, 2.5f);
  for (float& x : l) x = noise(rng);
  for (std::size_t i : {11u, 4242u, 77777u, 128000u}) l[i] = 16.0f + static_cast<float>(i % 3);
  return l;
}

// Microseconds of one pass over the row for its maximum, the median of many.
double read_microseconds(const std::vector<float>& l) {
  std::vector<double> times;
  float sink = 0;
  for (int r = 0; r < 101; ++r) {
    const auto t0 = std::chrono::steady_clock::now();
    // Sixteen running maxima, a loop the compiler vectorizes (as the Sampler's).
    float tops[16];
    std::fill(std::begin(tops), std::end(tops), l[0]);
    for (std::size_t i = 0; i + 16 <= l.size(); i += 16) {
      for (std::size_t j = 0; j < 16; ++j) tops[j] = l[i + j] > tops[j] ? l[i + j] : tops[j];
    }
    sink += *std::max_element(std::begin(tops), std::end(tops));
    times.push_back(
        std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0).count());
  }
  benchmark::DoNotOptimize(sink);
  std::sort(times.begin(), times.end());
  return times[times.size() / 2];
}

void BM_Sample(benchmark::State& state, SamplingOptions options) {
  const std::vector<float> logits = model_like_logits();
  std::vector<std::int32_t> history(64);
  for (std::size_t i = 0; i < history.size(); ++i) {
    history[i] = static_cast<std::int32_t>(i * 1999 % kVocab);
  }
  Result<Sampler> sampler = Sampler::create(options);
  if (!sampler.is_ok()) return state.SkipWithError(sampler.status().to_string().c_str());
  for (auto _ : state) {
    Result<std::int32_t> t = sampler->sample(logits, history);
    benchmark::DoNotOptimize(t);
  }
  state.counters["read_us"] = read_microseconds(logits);
  state.SetLabel(describe(options));
}
BENCHMARK_CAPTURE(BM_Sample, greedy, SamplingOptions{});
BENCHMARK_CAPTURE(BM_Sample, defaults, SamplingOptions{.temperature = 0.8f});
BENCHMARK_CAPTURE(BM_Sample, defaults_penalty,
                  SamplingOptions{.temperature = 0.8f, .repeat_penalty = 1.1f});
BENCHMARK_CAPTURE(BM_Sample, top_p_only,
                  SamplingOptions{.temperature = 1.0f, .top_k = 0, .top_p = 0.9f, .min_p = 0.0f});
BENCHMARK_CAPTURE(BM_Sample, unfiltered,
                  SamplingOptions{.temperature = 1.0f, .top_k = 0, .top_p = 1.0f, .min_p = 0.0f});

}  // namespace
}  // namespace switchyard
