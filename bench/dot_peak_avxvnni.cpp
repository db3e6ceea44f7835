// dot_peak.h: the AVX-VNNI peak (the VEX vpdpbusd on ymm registers, 32 byte
// multiply-adds each).
#include <immintrin.h>

#include "dot_peak.h"
#include "dot_peak_vector_inl.h"

namespace switchyard::bench {

double dot_peak_avxvnni(std::int64_t iterations) {
  const __m256i a = _mm256_set1_epi8(3);
  return vector_peak(
      iterations, 32.0, _mm256_set1_epi8(-2),
      [&](__m256i acc, __m256i b) { return _mm256_dpbusd_avx_epi32(acc, a, b); },
      [](__m256i x, __m256i y) { return _mm256_add_epi32(x, y); });
}

}  // namespace switchyard::bench
