// Inline helpers of the AVX2 quantized matmul files (quant_matmul_block32_avx2.cpp,
// quant_matmul_kquant_avx2.cpp), in an anonymous namespace: each file compiles its
// own private copy (quant_tile_inl.h says why). Include only from those files.
#pragma once

#include <immintrin.h>

#include <cstdint>
#include <cstring>

#include "backends/cpu/quant/quant_matmul_simd.h"
#include "backends/cpu/quant/quant_tile_inl.h"

namespace switchyard::cpu {
namespace {

inline float f16_at(const std::uint8_t* p) {
  std::uint16_t h;
  std::memcpy(&h, p, sizeof h);
  return _cvtsh_ss(h);
}

inline __m256i sum_i16_to_i32(__m256i v) { return _mm256_madd_epi16(v, _mm256_set1_epi16(1)); }

inline float hsum(__m256 v) {
  __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  s = _mm_add_ps(s, _mm_movehl_ps(s, s));
  s = _mm_add_ss(s, _mm_movehdup_ps(s));
  return _mm_cvtss_f32(s);
}

// Two pair sums (blocks 2p, 2p + 1 and 2p + 2, 2p + 3) halved: lane 0 holds
// blocks 2p, 2p + 2, 2p, 2p + 2, lane 1 the odd ones.
inline __m256i fold_pairs(__m256i a, __m256i b) {
  return _mm256_add_epi32(_mm256_unpacklo_epi32(a, b), _mm256_unpackhi_epi32(a, b));
}

// row_is_finite with eight values per step: a value is not finite when its
// exponent bits are all set. (The portable loop took about 5% of a 4096-wide
// decode step against 256 weight rows.)
bool row_is_finite_avx2(const float* row, std::int64_t k) {
  const __m256i exponent = _mm256_set1_epi32(0x7f800000);
  __m256i non_finite = _mm256_setzero_si256();
  std::int64_t i = 0;
  for (; i + 8 <= k; i += 8) {
    non_finite = _mm256_or_si256(
        non_finite, _mm256_cmpeq_epi32(_mm256_and_si256(load256(row + i), exponent), exponent));
  }
  return _mm256_testz_si256(non_finite, non_finite) != 0 && row_is_finite(row + i, k - i);
}

// Weight rows per parallel task, and per tile inside a task: a tile's rows stay
// in L2 while every group of activation rows passes over them.
constexpr std::int64_t kRowGrain = 8;
constexpr std::int64_t kTileRows = 64;

}  // namespace
}  // namespace switchyard::cpu
