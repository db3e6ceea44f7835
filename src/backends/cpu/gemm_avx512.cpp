// The AVX-512 GEMM micro-kernel: an 8 x 32 f32 tile held in 16 zmm accumulators,
// fed by one broadcast per row (folded into the FMA as an embedded broadcast) and
// two 16-wide weight loads per k. Sixteen independent FMA chains cover the FMA
// latency on two 512-bit ports; the packers are the shared AVX2 ones (the panels are
// the same layout, only wider).
// GCC 12's AVX-512 intrinsic headers build some results from a deliberately
// undefined vector (_mm512_undefined_*), which its uninitialised-use analysis
// reports once the intrinsics are inlined. The warning is about the header, not
// this code, so it is silenced for this file only.
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"

#include <immintrin.h>

#include "backends/cpu/gemm.h"
#include "backends/cpu/gemm_pack_inl.h"

namespace switchyard::cpu {
namespace {

constexpr int kMr = 8;
constexpr int kNr = 32;

void micro_8x32(std::int64_t kc, const float* a, const float* b, float* c, std::int64_t ldc,
                bool accumulate) {
  __m512 acc[kMr][2];
#pragma GCC unroll 8
  for (int i = 0; i < kMr; ++i) acc[i][0] = acc[i][1] = _mm512_setzero_ps();
  for (std::int64_t k = 0; k < kc; ++k) {
    const __m512 b0 = _mm512_load_ps(b);
    const __m512 b1 = _mm512_load_ps(b + 16);
#pragma GCC unroll 8
    for (int i = 0; i < kMr; ++i) {
      const __m512 ai = _mm512_set1_ps(a[i]);
      acc[i][0] = _mm512_fmadd_ps(ai, b0, acc[i][0]);
      acc[i][1] = _mm512_fmadd_ps(ai, b1, acc[i][1]);
    }
    a += kMr;
    b += kNr;
  }
#pragma GCC unroll 8
  for (int i = 0; i < kMr; ++i) {
    float* row = c + i * ldc;
    if (accumulate) {
      acc[i][0] = _mm512_add_ps(_mm512_loadu_ps(row), acc[i][0]);
      acc[i][1] = _mm512_add_ps(_mm512_loadu_ps(row + 16), acc[i][1]);
    }
    _mm512_storeu_ps(row, acc[i][0]);
    _mm512_storeu_ps(row + 16, acc[i][1]);
  }
}

// 96 x 384 packed activations (144 KiB) stay in a 1-2 MiB L2; 384 x 2048 packed
// weights (3 MiB) stream from L3.
constexpr GemmKernels kAvx512Kernels = {
    .isa = "avx512",
    .mr = kMr,
    .nr = kNr,
    .mc = 96,
    .kc = 384,
    .nc = 2048,
    .micro = &micro_8x32,
    .pack_a = {&pack_panels<kMr, LoadF32>, &pack_panels<kMr, LoadF16>, &pack_panels<kMr, LoadBF16>},
    .pack_b = {&pack_panels<kNr, LoadF32>, &pack_panels<kNr, LoadF16>, &pack_panels<kNr, LoadBF16>},
};

}  // namespace

const GemmKernels* gemm_kernels_avx512() { return &kAvx512Kernels; }

}  // namespace switchyard::cpu
