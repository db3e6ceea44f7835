// The norm, softmax and reduction SIMD rows compiled for AVX512 (see rowwise_simd.inl).
#define SWITCHYARD_SIMD_AVX512 1
#include "backends/cpu/rowwise/rowwise_simd.inl"

namespace switchyard::cpu {

const RowwiseSimd& rowwise_avx512() { return avx512::kTable; }

}  // namespace switchyard::cpu
