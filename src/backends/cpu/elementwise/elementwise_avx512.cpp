// The elementwise SIMD rows compiled for AVX512 (see elementwise_simd.inl).
#define SWITCHYARD_SIMD_AVX512 1
#include "backends/cpu/elementwise/elementwise_simd.inl"

namespace switchyard::cpu {

const ElementwiseSimd& elementwise_avx512() { return avx512::kTable; }

}  // namespace switchyard::cpu
