// The GEMM micro-kernel and its kernel set, written once over simd_vec.h and
// compiled per instruction set by gemm_avx2.cpp and gemm_avx512.cpp (see gemm.h
// for the packed layout and the driver that calls them).
//
// The tile is R rows by two vectors (NR = 2 kW weight rows): per k one broadcast
// of each row's activation and two weight loads feed 2R independent FMA chains,
// and the accumulators stay in registers for the whole K block. R is the ISA
// file's choice (it fixes how many of the registers the accumulators take), as
// are the cache blocks; the packers (gemm_pack_inl.h) are the same eight-wide
// code for every ISA, since the packed layout does not depend on the vector width.
//
// Like every file over simd_vec.h this one keeps to its rules: internal linkage
// only, no standard-library templates (gemm.h, "Why the ISA files are kept small").
#include <cstdint>

#include "backends/cpu/gemm/gemm.h"
#include "backends/cpu/gemm/gemm_pack_inl.h"
#include "backends/cpu/simd_vec.h"

namespace switchyard::cpu::SWITCHYARD_SIMD_NS {
namespace {

constexpr int kNr = 2 * kW;

// An R x NR tile (MicroKernelFn). The AVX2 tile also starts fetching its C rows
// before the k loop and unrolls the k loop four times (both came with the AVX2
// GEMM's tuning in 607379a); the AVX-512 tile was measured without either (Note
// [AVX-512 GEMM blocking] in gemm_avx512.cpp) and keeps that form until they are
// measured there.
template <int R>
void micro(std::int64_t kc, const float* a, const float* b, float* c, std::int64_t ldc,
           bool accumulate) {
  VF acc[R][2];
#pragma GCC unroll 14
  for (int i = 0; i < R; ++i) {
    acc[i][0] = acc[i][1] = vzero();
#if defined(SWITCHYARD_SIMD_AVX2)
    // The tile's C rows are written at the end: start fetching them now.
    prefetch(c + i * ldc);
    prefetch(c + i * ldc + (kNr - 1));
#endif
  }
#if defined(SWITCHYARD_SIMD_AVX2)
#pragma GCC unroll 4
#endif
  for (std::int64_t k = 0; k < kc; ++k) {
    const VF b0 = load_aligned(b);
    const VF b1 = load_aligned(b + kW);
#pragma GCC unroll 14
    for (int i = 0; i < R; ++i) {
      const VF ai = broadcast(a + i);
      acc[i][0] = vfma(ai, b0, acc[i][0]);
      acc[i][1] = vfma(ai, b1, acc[i][1]);
    }
    a += R;
    b += kNr;
  }
#pragma GCC unroll 14
  for (int i = 0; i < R; ++i) {
    float* row = c + i * ldc;
    if (accumulate) {
      acc[i][0] = vadd(load(row), acc[i][0]);
      acc[i][1] = vadd(load(row + kW), acc[i][1]);
    }
    store(row, acc[i][0]);
    store(row + kW, acc[i][1]);
  }
}

// The kernel set of an R x NR tile with the given cache blocks.
template <int R>
constexpr GemmKernels make_kernels(const char* isa, std::int64_t mc, std::int64_t kc,
                                   std::int64_t nc) {
  return {
      .isa = isa,
      .mr = R,
      .nr = kNr,
      .mc = mc,
      .kc = kc,
      .nc = nc,
      .micro = &micro<R>,
      .pack_a = {&pack_panels<R, LoadF32>, &pack_panels<R, LoadF16>, &pack_panels<R, LoadBF16>},
      .pack_b = {&pack_panels<kNr, LoadF32>, &pack_panels<kNr, LoadF16>,
                 &pack_panels<kNr, LoadBF16>},
  };
}

}  // namespace
}  // namespace switchyard::cpu::SWITCHYARD_SIMD_NS
