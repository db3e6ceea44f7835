// The f32 attention rows compiled for AVX2 (see attention_simd.inl).
#define SWITCHYARD_SIMD_AVX2 1
#include "backends/cpu/attention/attention_simd.inl"

namespace switchyard::cpu {

const AttentionSimd& attention_avx2() { return avx2::kAttentionTable; }

}  // namespace switchyard::cpu
