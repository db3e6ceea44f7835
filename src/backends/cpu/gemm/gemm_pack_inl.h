// Panel packers for the GEMM micro-kernels (see gemm.h for the packed layout).
// Included only by gemm_simd.inl, that is by the ISA files (gemm_avx2.cpp,
// gemm_avx512.cpp), which are compiled with at least AVX2 + F16C. The packers are
// eight-wide for every ISA: the packed layout does not depend on the vector width.
//
// Everything here sits in an anonymous namespace on purpose: each ISA file gets its
// own private copy, compiled with its own flags, so the linker can never substitute
// a copy built for a wider ISA into a narrower kernel (gemm.h says more).
//
// The packers transpose 8 rows x 8 k values at a time in registers: the operands
// are K-contiguous, the micro-kernels want the rows of one k side by side.
#pragma once

#include <immintrin.h>

#include <cstdint>

#include "switchyard/half.h"

namespace switchyard::cpu {
namespace {

// Loads 8 consecutive values of a row as f32.
struct LoadF32 {
  using T = float;
  static __m256 load8(const float* p) { return _mm256_loadu_ps(p); }
  static float load1(const float* p) { return *p; }
};
struct LoadF16 {
  using T = std::uint16_t;
  static __m256 load8(const std::uint16_t* p) {
    return _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
  }
  static float load1(const std::uint16_t* p) { return f16_to_f32(*p); }
};
struct LoadBF16 {
  using T = std::uint16_t;
  // bf16 is the upper half of an f32: widen and shift, exactly.
  static __m256 load8(const std::uint16_t* p) {
    const __m256i wide =
        _mm256_cvtepu16_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
    return _mm256_castsi256_ps(_mm256_slli_epi32(wide, 16));
  }
  static float load1(const std::uint16_t* p) { return bf16_to_f32(*p); }
};

inline void transpose8x8(__m256 r[8]) {
  const __m256 t0 = _mm256_unpacklo_ps(r[0], r[1]);
  const __m256 t1 = _mm256_unpackhi_ps(r[0], r[1]);
  const __m256 t2 = _mm256_unpacklo_ps(r[2], r[3]);
  const __m256 t3 = _mm256_unpackhi_ps(r[2], r[3]);
  const __m256 t4 = _mm256_unpacklo_ps(r[4], r[5]);
  const __m256 t5 = _mm256_unpackhi_ps(r[4], r[5]);
  const __m256 t6 = _mm256_unpacklo_ps(r[6], r[7]);
  const __m256 t7 = _mm256_unpackhi_ps(r[6], r[7]);
  const __m256 s0 = _mm256_shuffle_ps(t0, t2, 0x44);
  const __m256 s1 = _mm256_shuffle_ps(t0, t2, 0xEE);
  const __m256 s2 = _mm256_shuffle_ps(t1, t3, 0x44);
  const __m256 s3 = _mm256_shuffle_ps(t1, t3, 0xEE);
  const __m256 s4 = _mm256_shuffle_ps(t4, t6, 0x44);
  const __m256 s5 = _mm256_shuffle_ps(t4, t6, 0xEE);
  const __m256 s6 = _mm256_shuffle_ps(t5, t7, 0x44);
  const __m256 s7 = _mm256_shuffle_ps(t5, t7, 0xEE);
  r[0] = _mm256_permute2f128_ps(s0, s4, 0x20);
  r[1] = _mm256_permute2f128_ps(s1, s5, 0x20);
  r[2] = _mm256_permute2f128_ps(s2, s6, 0x20);
  r[3] = _mm256_permute2f128_ps(s3, s7, 0x20);
  r[4] = _mm256_permute2f128_ps(s0, s4, 0x31);
  r[5] = _mm256_permute2f128_ps(s1, s5, 0x31);
  r[6] = _mm256_permute2f128_ps(s2, s6, 0x31);
  r[7] = _mm256_permute2f128_ps(s3, s7, 0x31);
}

// Packs panels of W rows (W = 6, 8, 16, 32 ...): groups of up to 8 rows are loaded
// 8 k values at a time, transposed, and stored at their column offset in the panel.
template <int W, typename Load>
void pack_panels(const void* src_v, std::int64_t ld, std::int64_t rows, std::int64_t k0,
                 std::int64_t kc, float* dst) {
  using T = typename Load::T;
  const T* src = static_cast<const T*>(src_v);
  const __m256i lanes = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
  for (std::int64_t p0 = 0; p0 < rows; p0 += W) {
    float* panel = dst + (p0 / W) * W * kc;
    for (int g = 0; g < W; g += 8) {
      const int gw = W - g < 8 ? W - g : 8;
      const T* row[8];
      for (int j = 0; j < 8; ++j) {
        const std::int64_t r = p0 + g + j;
        row[j] = (j < gw && r < rows) ? src + r * ld + k0 : nullptr;
      }
      // A group narrower than 8 (the last of a 6-row panel) stores only its lanes.
      const __m256i mask = _mm256_cmpgt_epi32(_mm256_set1_epi32(gw), lanes);
      std::int64_t k = 0;
      for (; k + 8 <= kc; k += 8) {
        __m256 v[8];
        for (int j = 0; j < 8; ++j) {
          v[j] = row[j] != nullptr ? Load::load8(row[j] + k) : _mm256_setzero_ps();
        }
        transpose8x8(v);
        for (int t = 0; t < 8; ++t) {
          float* d = panel + (k + t) * W + g;
          if (gw == 8) {
            _mm256_storeu_ps(d, v[t]);
          } else {
            _mm256_maskstore_ps(d, mask, v[t]);
          }
        }
      }
      for (; k < kc; ++k) {
        float* d = panel + k * W + g;
        for (int j = 0; j < gw; ++j) d[j] = row[j] != nullptr ? Load::load1(row[j] + k) : 0.0f;
      }
    }
  }
}

}  // namespace
}  // namespace switchyard::cpu
