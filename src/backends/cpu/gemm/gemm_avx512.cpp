// The GEMM kernel sets compiled for AVX-512 (see gemm_simd.inl): a 14 x 32 f32
// tile held in 28 zmm accumulators, fed by one broadcast per row and two 16-wide
// weight loads per k (31 of the 32 registers). Twenty-eight independent FMA chains
// cover the FMA latency on two 512-bit ports, and each k step issues 16 loads for
// 28 FMAs.
#define SWITCHYARD_SIMD_AVX512 1
#include "backends/cpu/gemm/gemm_simd.inl"

namespace switchyard::cpu {
namespace {

constexpr int kMr = 14;
constexpr int kNarrowMr = 8;

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
constexpr GemmKernels kAvx512Kernels = avx512::make_kernels<kMr>("avx512", 56, 256, 1024);

// A product of at most 8 rows would spend most of a 14-row tile on zero padding
// (1.75x the FMAs at 8 rows); an 8-row tile with the same kc gives every output
// the same bytes, since an output's sum runs over k in the same order whatever the
// tile's height.
constexpr GemmKernels kAvx512NarrowKernels =
    avx512::make_kernels<kNarrowMr>("avx512", kNarrowMr, kAvx512Kernels.kc, kAvx512Kernels.nc);

}  // namespace

const GemmKernels* gemm_kernels_avx512(std::int64_t rows) {
  return rows <= kNarrowMr ? &kAvx512NarrowKernels : &kAvx512Kernels;
}

}  // namespace switchyard::cpu
