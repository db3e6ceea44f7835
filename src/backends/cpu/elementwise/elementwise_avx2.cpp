// The elementwise SIMD rows compiled for AVX2 (see elementwise_simd.inl).
#define SWITCHYARD_SIMD_AVX2 1
#include "backends/cpu/elementwise/elementwise_simd.inl"

namespace switchyard::cpu {

const ElementwiseSimd& elementwise_avx2() { return avx2::kTable; }

}  // namespace switchyard::cpu
