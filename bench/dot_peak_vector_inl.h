// The vector half of dot_peak.h, shared by dot_peak_avx2.cpp and
// dot_peak_avx512vnni.cpp: twelve accumulators, so that no instruction's latency
// stalls its ports, each advanced by `step(acc, b)` per round for `iterations`
// rounds. An empty asm keeps b opaque, so the chains cannot be folded. In an
// anonymous namespace: each file compiles its own copy with its own flags.
// Include only from those files.
#pragma once

#include <chrono>
#include <cstdint>

namespace switchyard::bench {
namespace {

template <typename V, typename Step, typename Add>
double vector_peak(std::int64_t iterations, double macs_per_step, V b, Step step, Add add) {
  constexpr int kChains = 12;
  V acc[kChains];
  for (int i = 0; i < kChains; ++i) acc[i] = add(b, b);
  const auto t0 = std::chrono::steady_clock::now();
  for (std::int64_t it = 0; it < iterations; ++it) {
    asm volatile("" : "+v"(b));
#pragma GCC unroll 12
    for (int i = 0; i < kChains; ++i) acc[i] = step(acc[i], b);
  }
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  V sum = acc[0];
  for (int i = 1; i < kChains; ++i) sum = add(sum, acc[i]);
  asm volatile("" : : "v"(sum));
  return macs_per_step * kChains * static_cast<double>(iterations) / seconds;
}

}  // namespace
}  // namespace switchyard::bench
