// The f32 attention rows compiled for AVX512 (see attention_simd.inl).
#define SWITCHYARD_SIMD_AVX512 1
#include "backends/cpu/attention/attention_simd.inl"

namespace switchyard::cpu {

const AttentionSimd& attention_avx512() { return avx512::kAttentionTable; }

}  // namespace switchyard::cpu
