// AVX2 matvec kernels for M = 1: y[n] = x · w[n] with the weights streamed once at
// memory bandwidth. f16 weights are widened with F16C, bf16 weights by a shift;
// both are free next to the memory traffic. Four weight rows are processed together
// so each x vector load serves four rows; every row is still summed in the same
// fixed order (two 8-lane accumulators over 16-wide steps, one 8-wide step, a scalar
// tail, a fixed horizontal reduction) whether it is part of a group of four or not.
#include <immintrin.h>

#include "backends/cpu/gemm/gemm.h"
#include "backends/cpu/gemm/gemm_pack_inl.h"

namespace switchyard::cpu {
namespace {

float horizontal_sum(__m256 v) {
  const __m128 lo = _mm256_castps256_ps128(v);
  const __m128 hi = _mm256_extractf128_ps(v, 1);
  __m128 s = _mm_add_ps(lo, hi);
  s = _mm_add_ps(s, _mm_movehl_ps(s, s));
  s = _mm_add_ss(s, _mm_movehdup_ps(s));
  return _mm_cvtss_f32(s);
}

template <int R, typename Load>
void dot_rows(const float* x, const typename Load::T* const* w, std::int64_t k, float* y) {
  __m256 acc0[R];
  __m256 acc1[R];
#pragma GCC unroll 4
  for (int r = 0; r < R; ++r) acc0[r] = acc1[r] = _mm256_setzero_ps();
  std::int64_t i = 0;
  for (; i + 16 <= k; i += 16) {
    const __m256 x0 = _mm256_loadu_ps(x + i);
    const __m256 x1 = _mm256_loadu_ps(x + i + 8);
#pragma GCC unroll 4
    for (int r = 0; r < R; ++r) {
      acc0[r] = _mm256_fmadd_ps(x0, Load::load8(w[r] + i), acc0[r]);
      acc1[r] = _mm256_fmadd_ps(x1, Load::load8(w[r] + i + 8), acc1[r]);
    }
  }
  if (i + 8 <= k) {
    const __m256 x0 = _mm256_loadu_ps(x + i);
#pragma GCC unroll 4
    for (int r = 0; r < R; ++r) acc0[r] = _mm256_fmadd_ps(x0, Load::load8(w[r] + i), acc0[r]);
    i += 8;
  }
#pragma GCC unroll 4
  for (int r = 0; r < R; ++r) {
    float tail = 0.0f;
    for (std::int64_t j = i; j < k; ++j) tail += x[j] * Load::load1(w[r] + j);
    y[r] = horizontal_sum(_mm256_add_ps(acc0[r], acc1[r])) + tail;
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

constexpr MatvecKernels kAvx2Matvec = {
    .isa = "avx2",
    .by_weight = {&matvec<LoadF32>, &matvec<LoadF16>, &matvec<LoadBF16>},
    .bf16_bf16 = nullptr,
};

}  // namespace

const MatvecKernels* matvec_kernels_avx2() { return &kAvx2Matvec; }

}  // namespace switchyard::cpu
