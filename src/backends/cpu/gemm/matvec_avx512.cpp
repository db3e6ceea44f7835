// The matvec kernels compiled for AVX-512 (see matvec_simd.inl). The bf16 x bf16
// dot product with vdpbf16ps lives in matvec_avx512bf16.cpp, the one file compiled
// for AVX512_BF16, which this table points to only on CPUs that have it.
#define SWITCHYARD_SIMD_AVX512 1
#include "backends/cpu/gemm/matvec_simd.inl"

namespace switchyard::cpu {
namespace {

constexpr MatvecKernels kAvx512Matvec = {
    .isa = "avx512",
    .by_weight = {avx512::kByWeight[0], avx512::kByWeight[1], avx512::kByWeight[2]},
    .bf16_bf16 = &matvec_bf16_bf16_avx512bf16,
};
// Without AVX512_BF16 the bf16 x bf16 case widens both operands instead.
constexpr MatvecKernels kAvx512MatvecNoBf16 = {
    .isa = "avx512",
    .by_weight = {avx512::kByWeight[0], avx512::kByWeight[1], avx512::kByWeight[2]},
    .bf16_bf16 = nullptr,
};

}  // namespace

const MatvecKernels* matvec_kernels_avx512() { return &kAvx512Matvec; }
const MatvecKernels* matvec_kernels_avx512_no_bf16() { return &kAvx512MatvecNoBf16; }

}  // namespace switchyard::cpu
