// The norm, softmax and reduction SIMD rows compiled for AVX2 (see rowwise_simd.inl).
#define SWITCHYARD_SIMD_AVX2 1
#include "backends/cpu/rowwise/rowwise_simd.inl"

namespace switchyard::cpu {

const RowwiseSimd& rowwise_avx2() { return avx2::kTable; }

}  // namespace switchyard::cpu
