// The AVX-512 GEMM micro-kernel: a 14 x 32 f32 tile held in 28 zmm accumulators,
// fed by one broadcast per row and two 16-wide weight loads per k (31 of the 32
// registers). Twenty-eight independent FMA chains cover the FMA latency on two
// 512-bit ports, and each k step issues 16 loads for 28 FMAs; the packers are the
// shared AVX2 ones (the panels are the same layout, only wider).
// GCC 12's AVX-512 intrinsic headers build some results from a deliberately
// undefined vector (_mm512_undefined_*), which its uninitialised-use analysis
// reports once the intrinsics are inlined. The warning is about the header, not
// this code, so it is silenced for this file only.
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"

#include <immintrin.h>

#include "backends/cpu/gemm/gemm.h"
#include "backends/cpu/gemm/gemm_pack_inl.h"

namespace switchyard::cpu {
namespace {

constexpr int kMr = 14;
constexpr int kNarrowMr = 8;
constexpr int kNr = 32;

// An R x 32 tile (R = 14, or 8 for products of at most 8 rows).
template <int R>
void micro(std::int64_t kc, const float* a, const float* b, float* c, std::int64_t ldc,
           bool accumulate) {
  __m512 acc[R][2];
#pragma GCC unroll 14
  for (int i = 0; i < R; ++i) acc[i][0] = acc[i][1] = _mm512_setzero_ps();
  for (std::int64_t k = 0; k < kc; ++k) {
    const __m512 b0 = _mm512_load_ps(b);
    const __m512 b1 = _mm512_load_ps(b + 16);
#pragma GCC unroll 14
    for (int i = 0; i < R; ++i) {
      const __m512 ai = _mm512_set1_ps(a[i]);
      acc[i][0] = _mm512_fmadd_ps(ai, b0, acc[i][0]);
      acc[i][1] = _mm512_fmadd_ps(ai, b1, acc[i][1]);
    }
    a += R;
    b += kNr;
  }
#pragma GCC unroll 14
  for (int i = 0; i < R; ++i) {
    float* row = c + i * ldc;
    if (accumulate) {
      acc[i][0] = _mm512_add_ps(_mm512_loadu_ps(row), acc[i][0]);
      acc[i][1] = _mm512_add_ps(_mm512_loadu_ps(row + 16), acc[i][1]);
    }
    _mm512_storeu_ps(row, acc[i][0]);
    _mm512_storeu_ps(row + 16, acc[i][1]);
  }
}

// Note [AVX-512 GEMM blocking]
// A weight panel (kc x 32 floats) is reused by every activation panel of a row
// block, so it has to stay in L1 while they stream past it: at kc = 256 it is
// 32 KiB, which leaves room in a 48 KiB L1 for the 14-row activation panel in
// flight (14 KiB). At kc = 384 the panel alone was 48 KiB and the tile ran at 0.82
// of OpenBLAS on one Ice Lake core; 256 gives 0.97-1.02. The row block is small
// (56 rows, 56 KiB packed) and the column block's packed weights (256 x 1024, 1 MiB)
// fit a 1.25 MiB L2, so a weight panel comes from L2 for each row block. The
// sweep that chose these figures is in the history of docs/benchmarks.md
// (commit 7dea69f and before: "14 x 32 micro-kernel" blocking sweep).
constexpr GemmKernels kAvx512Kernels = {
    .isa = "avx512",
    .mr = kMr,
    .nr = kNr,
    .mc = 56,
    .kc = 256,
    .nc = 1024,
    .micro = &micro<kMr>,
    .pack_a = {&pack_panels<kMr, LoadF32>, &pack_panels<kMr, LoadF16>, &pack_panels<kMr, LoadBF16>},
    .pack_b = {&pack_panels<kNr, LoadF32>, &pack_panels<kNr, LoadF16>, &pack_panels<kNr, LoadBF16>},
};

// A product of at most 8 rows would spend most of a 14-row tile on zero padding
// (1.75x the FMAs at 8 rows); an 8-row tile with the same kc gives every output
// the same bytes, since an output's sum runs over k in the same order whatever the
// tile's height.
constexpr GemmKernels kAvx512NarrowKernels = {
    .isa = "avx512",
    .mr = kNarrowMr,
    .nr = kNr,
    .mc = kNarrowMr,
    .kc = kAvx512Kernels.kc,
    .nc = kAvx512Kernels.nc,
    .micro = &micro<kNarrowMr>,
    .pack_a = {&pack_panels<kNarrowMr, LoadF32>, &pack_panels<kNarrowMr, LoadF16>,
               &pack_panels<kNarrowMr, LoadBF16>},
    .pack_b = {&pack_panels<kNr, LoadF32>, &pack_panels<kNr, LoadF16>, &pack_panels<kNr, LoadBF16>},
};

}  // namespace

const GemmKernels* gemm_kernels_avx512(std::int64_t rows) {
  return rows <= kNarrowMr ? &kAvx512NarrowKernels : &kAvx512Kernels;
}

}  // namespace switchyard::cpu
