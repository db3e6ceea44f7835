// dot_peak.h: the AVX2 integer peak, as the AVX2 quantized kernels multiply: an
// unsigned byte by a signed byte in pairs (vpmaddubsw), the pairs' 16-bit sums in
// pairs again (vpmaddwd by ones), added to 32-bit accumulators (vpaddd). Twelve
// chains, so that no instruction's latency stalls its ports.
#include <immintrin.h>

#include <chrono>

#include "dot_peak.h"

namespace switchyard::bench {

double dot_peak_avx2(std::int64_t iterations) {
  constexpr int kChains = 12;
  __m256i acc[kChains];
  for (int i = 0; i < kChains; ++i) acc[i] = _mm256_set1_epi32(i);
  const __m256i a = _mm256_set1_epi8(3);
  const __m256i ones = _mm256_set1_epi16(1);
  __m256i b = _mm256_set1_epi8(-2);
  const auto t0 = std::chrono::steady_clock::now();
  for (std::int64_t it = 0; it < iterations; ++it) {
    // An empty asm keeps b opaque, so the chains cannot be folded.
    asm volatile("" : "+x"(b));
#pragma GCC unroll 12
    for (int i = 0; i < kChains; ++i) {
      acc[i] = _mm256_add_epi32(acc[i], _mm256_madd_epi16(_mm256_maddubs_epi16(a, b), ones));
    }
  }
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  __m256i sum = acc[0];
  for (int i = 1; i < kChains; ++i) sum = _mm256_add_epi32(sum, acc[i]);
  asm volatile("" : : "x"(sum));
  return 32.0 * kChains * static_cast<double>(iterations) / seconds;
}

}  // namespace switchyard::bench
