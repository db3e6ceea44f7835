// dot_peak.h: the AVX-512 VNNI peak. Twelve accumulators, so that vpdpbusd's
// latency never stalls its ports.
#include <immintrin.h>

#include <chrono>

#include "dot_peak.h"

namespace switchyard::bench {

double dot_peak_avx512vnni(std::int64_t iterations) {
  constexpr int kChains = 12;
  __m512i acc[kChains];
  for (int i = 0; i < kChains; ++i) acc[i] = _mm512_set1_epi32(i);
  const __m512i a = _mm512_set1_epi8(3);
  __m512i b = _mm512_set1_epi8(-2);
  const auto t0 = std::chrono::steady_clock::now();
  for (std::int64_t it = 0; it < iterations; ++it) {
    // An empty asm keeps b opaque, so the chains cannot be folded.
    asm volatile("" : "+v"(b));
#pragma GCC unroll 12
    for (int i = 0; i < kChains; ++i) acc[i] = _mm512_dpbusd_epi32(acc[i], a, b);
  }
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  __m512i sum = acc[0];
  for (int i = 1; i < kChains; ++i) sum = _mm512_add_epi32(sum, acc[i]);
  asm volatile("" : : "v"(sum));
  return 64.0 * kChains * static_cast<double>(iterations) / seconds;
}

}  // namespace switchyard::bench
