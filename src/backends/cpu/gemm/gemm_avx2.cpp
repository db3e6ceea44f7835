// The GEMM kernel set compiled for AVX2 + FMA + F16C (see gemm_simd.inl): a 6 x 16
// f32 tile held in 12 ymm accumulators. Six rows by two vectors keeps 12
// independent FMA chains in flight, enough to cover the FMA latency on two FMA
// ports, and leaves registers for the operands.
#define SWITCHYARD_SIMD_AVX2 1
#include "backends/cpu/gemm/gemm_simd.inl"

namespace switchyard::cpu {
namespace {

// mc x kc of packed activations (120 x 256 floats, 120 KiB) stays in L2 while the
// weight panels stream from L3; kc x nc of packed weights is 2 MiB.
constexpr GemmKernels kAvx2Kernels = avx2::make_kernels<6>("avx2", 120, 256, 2048);

}  // namespace

const GemmKernels* gemm_kernels_avx2() { return &kAvx2Kernels; }

}  // namespace switchyard::cpu
