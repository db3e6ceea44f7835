// dot_peak.h: the AVX2 integer peak, as the AVX2 quantized kernels multiply: an
// unsigned byte by a signed byte in pairs (vpmaddubsw), the pairs' 16-bit sums in
// pairs again (vpmaddwd by ones), added to 32-bit accumulators (vpaddd). Each
// chain's product takes its own accumulator's bytes as the unsigned operand: with
// one operand for all, the compiler computes the product once per round and the
// loop times only the additions.
#include <immintrin.h>

#include "dot_peak.h"
#include "dot_peak_vector_inl.h"

namespace switchyard::bench {

double dot_peak_avx2(std::int64_t iterations) {
  const __m256i ones = _mm256_set1_epi16(1);
  return vector_peak(
      iterations, 32.0, _mm256_set1_epi8(-2),
      [&](__m256i acc, __m256i b) {
        return _mm256_add_epi32(acc, _mm256_madd_epi16(_mm256_maddubs_epi16(acc, b), ones));
      },
      [](__m256i x, __m256i y) { return _mm256_add_epi32(x, y); });
}

}  // namespace switchyard::bench
