// dot_peak.h: the AVX-512 VNNI peaks (vpdpbusd on zmm and on ymm registers).
#include <immintrin.h>

#include "dot_peak.h"
#include "dot_peak_vector_inl.h"

namespace switchyard::bench {

double dot_peak_avx512vnni(std::int64_t iterations) {
  const __m512i a = _mm512_set1_epi8(3);
  return vector_peak(
      iterations, 64.0, _mm512_set1_epi8(-2),
      [&](__m512i acc, __m512i b) { return _mm512_dpbusd_epi32(acc, a, b); },
      [](__m512i x, __m512i y) { return _mm512_add_epi32(x, y); });
}

double dot_peak_avx512vnni_256(std::int64_t iterations) {
  const __m256i a = _mm256_set1_epi8(3);
  return vector_peak(
      iterations, 32.0, _mm256_set1_epi8(-2),
      [&](__m256i acc, __m256i b) { return _mm256_dpbusd_epi32(acc, a, b); },
      [](__m256i x, __m256i y) { return _mm256_add_epi32(x, y); });
}

}  // namespace switchyard::bench
