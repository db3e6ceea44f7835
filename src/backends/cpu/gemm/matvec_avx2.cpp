// The matvec kernels compiled for AVX2 + FMA + F16C (see matvec_simd.inl).
#define SWITCHYARD_SIMD_AVX2 1
#include "backends/cpu/gemm/matvec_simd.inl"

namespace switchyard::cpu {
namespace {

constexpr MatvecKernels kAvx2Matvec = {
    .isa = "avx2",
    .by_weight = {avx2::kByWeight[0], avx2::kByWeight[1], avx2::kByWeight[2]},
    .bf16_bf16 = nullptr,
};

}  // namespace

const MatvecKernels* matvec_kernels_avx2() { return &kAvx2Matvec; }

}  // namespace switchyard::cpu
