// The AVX2 + FMA GEMM micro-kernel: a 6 x 16 f32 tile held in 12 ymm accumulators,
// fed by one broadcast per row and two 8-wide weight loads per k. Six rows by two
// vectors keeps 12 independent FMA chains in flight, enough to cover the FMA latency
// on two FMA ports, and leaves registers for the operands.
#include <immintrin.h>

#include "backends/cpu/gemm/gemm.h"
#include "backends/cpu/gemm/gemm_pack_inl.h"

namespace switchyard::cpu {
namespace {

constexpr int kMr = 6;
constexpr int kNr = 16;

void micro_6x16(std::int64_t kc, const float* a, const float* b, float* c, std::int64_t ldc,
                bool accumulate) {
  __m256 acc[kMr][2];
#pragma GCC unroll 6
  for (int i = 0; i < kMr; ++i) {
    acc[i][0] = acc[i][1] = _mm256_setzero_ps();
    // The tile's C rows are written at the end: start fetching them now.
    _mm_prefetch(reinterpret_cast<const char*>(c + i * ldc), _MM_HINT_T0);
    _mm_prefetch(reinterpret_cast<const char*>(c + i * ldc + 15), _MM_HINT_T0);
  }
#pragma GCC unroll 4
  for (std::int64_t k = 0; k < kc; ++k) {
    const __m256 b0 = _mm256_load_ps(b);
    const __m256 b1 = _mm256_load_ps(b + 8);
#pragma GCC unroll 6
    for (int i = 0; i < kMr; ++i) {
      const __m256 ai = _mm256_broadcast_ss(a + i);
      acc[i][0] = _mm256_fmadd_ps(ai, b0, acc[i][0]);
      acc[i][1] = _mm256_fmadd_ps(ai, b1, acc[i][1]);
    }
    a += kMr;
    b += kNr;
  }
#pragma GCC unroll 6
  for (int i = 0; i < kMr; ++i) {
    float* row = c + i * ldc;
    if (accumulate) {
      acc[i][0] = _mm256_add_ps(_mm256_loadu_ps(row), acc[i][0]);
      acc[i][1] = _mm256_add_ps(_mm256_loadu_ps(row + 8), acc[i][1]);
    }
    _mm256_storeu_ps(row, acc[i][0]);
    _mm256_storeu_ps(row + 8, acc[i][1]);
  }
}

// mc x kc of packed activations (120 x 256 floats, 120 KiB) stays in L2 while the
// weight panels stream from L3; kc x nc of packed weights is 2 MiB.
constexpr GemmKernels kAvx2Kernels = {
    .isa = "avx2",
    .mr = kMr,
    .nr = kNr,
    .mc = 120,
    .kc = 256,
    .nc = 2048,
    .micro = &micro_6x16,
    .pack_a = {&pack_panels<kMr, LoadF32>, &pack_panels<kMr, LoadF16>, &pack_panels<kMr, LoadBF16>},
    .pack_b = {&pack_panels<kNr, LoadF32>, &pack_panels<kNr, LoadF16>, &pack_panels<kNr, LoadBF16>},
};

}  // namespace

const GemmKernels* gemm_kernels_avx2() { return &kAvx2Kernels; }

}  // namespace switchyard::cpu
