// AVX-512 matvec kernels for M = 1 (see matvec_avx2.cpp for the scheme): 16-lane
// steps, f16 weights widened with vcvtph2ps, bf16 weights by a shift. The bf16 x
// bf16 dot product with vdpbf16ps lives in matvec_avx512bf16.cpp, the one file
// compiled for AVX512_BF16, which this table points to only on CPUs that have it.
// GCC 12's AVX-512 intrinsic headers build some results from a deliberately
// undefined vector (_mm512_undefined_*), which its uninitialised-use analysis
// reports once the intrinsics are inlined. The warning is about the header, not
// this code, so it is silenced for this file only.
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"

#include <immintrin.h>

#include <cstdint>

#include "backends/cpu/gemm/gemm.h"
#include "switchyard/half.h"

namespace switchyard::cpu {
namespace {

struct Load16F32 {
  using T = float;
  static __m512 load16(const float* p) { return _mm512_loadu_ps(p); }
  static float load1(const float* p) { return *p; }
};
struct Load16F16 {
  using T = std::uint16_t;
  static __m512 load16(const std::uint16_t* p) {
    return _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)));
  }
  static float load1(const std::uint16_t* p) { return f16_to_f32(*p); }
};
struct Load16BF16 {
  using T = std::uint16_t;
  static __m512 load16(const std::uint16_t* p) {
    const __m512i wide =
        _mm512_cvtepu16_epi32(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)));
    return _mm512_castsi512_ps(_mm512_slli_epi32(wide, 16));
  }
  static float load1(const std::uint16_t* p) { return bf16_to_f32(*p); }
};

template <int R, typename Load>
void dot_rows(const float* x, const typename Load::T* const* w, std::int64_t k, float* y) {
  __m512 acc0[R];
  __m512 acc1[R];
#pragma GCC unroll 4
  for (int r = 0; r < R; ++r) acc0[r] = acc1[r] = _mm512_setzero_ps();
  std::int64_t i = 0;
  for (; i + 32 <= k; i += 32) {
    const __m512 x0 = _mm512_loadu_ps(x + i);
    const __m512 x1 = _mm512_loadu_ps(x + i + 16);
#pragma GCC unroll 4
    for (int r = 0; r < R; ++r) {
      acc0[r] = _mm512_fmadd_ps(x0, Load::load16(w[r] + i), acc0[r]);
      acc1[r] = _mm512_fmadd_ps(x1, Load::load16(w[r] + i + 16), acc1[r]);
    }
  }
  if (i + 16 <= k) {
    const __m512 x0 = _mm512_loadu_ps(x + i);
#pragma GCC unroll 4
    for (int r = 0; r < R; ++r) acc0[r] = _mm512_fmadd_ps(x0, Load::load16(w[r] + i), acc0[r]);
    i += 16;
  }
#pragma GCC unroll 4
  for (int r = 0; r < R; ++r) {
    float tail = 0.0f;
    for (std::int64_t j = i; j < k; ++j) tail += x[j] * Load::load1(w[r] + j);
    y[r] = _mm512_reduce_add_ps(_mm512_add_ps(acc0[r], acc1[r])) + tail;
  }
}

template <typename Load>
void matvec(const float* x, const void* w_v, std::int64_t ldw, std::int64_t k, std::int64_t n0,
            std::int64_t n1, float* y) {
  const auto* w = static_cast<const typename Load::T*>(w_v);
  std::int64_t n = n0;
  for (; n + 4 <= n1; n += 4) {
    const typename Load::T* rows[4] = {w + n * ldw, w + (n + 1) * ldw, w + (n + 2) * ldw,
                                       w + (n + 3) * ldw};
    dot_rows<4, Load>(x, rows, k, y + n);
  }
  for (; n < n1; ++n) {
    const typename Load::T* rows[1] = {w + n * ldw};
    dot_rows<1, Load>(x, rows, k, y + n);
  }
}

constexpr MatvecKernels kAvx512Matvec = {
    .isa = "avx512",
    .by_weight = {&matvec<Load16F32>, &matvec<Load16F16>, &matvec<Load16BF16>},
    .bf16_bf16 = &matvec_bf16_bf16_avx512bf16,
};
// Without AVX512_BF16 the bf16 x bf16 case widens both operands instead.
constexpr MatvecKernels kAvx512MatvecNoBf16 = {
    .isa = "avx512",
    .by_weight = {&matvec<Load16F32>, &matvec<Load16F16>, &matvec<Load16BF16>},
    .bf16_bf16 = nullptr,
};

}  // namespace

const MatvecKernels* matvec_kernels_avx512() { return &kAvx512Matvec; }
const MatvecKernels* matvec_kernels_avx512_no_bf16() { return &kAvx512MatvecNoBf16; }

}  // namespace switchyard::cpu
