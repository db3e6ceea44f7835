// Attention, the simple kernel: one block of four warps per (batch, query row,
// head). Each warp walks every fourth key with an online softmax (running maximum,
// running sum, running weighted sum of v), its lanes holding head_dim / 32 of the
// dimensions; the four partial results are merged at the end. No score matrix is
// stored, so any number of keys fits. Grouped-query heads read kv head
// h / (heads / kv_heads).
//
// This is the correct-first kernel: the split over keys inside a block is the
// shape a flash-decoding kernel splits across blocks, and a tiled tensor-core
// kernel for prefill replaces it where rows are many.
#include <cmath>

#include "backends/cuda/device_common.cuh"

namespace switchyard::cuda::device {
namespace {

constexpr int kWarps = 4;
constexpr int kPerLane = static_cast<int>(kMaxHeadDim / 32);

template <typename Q, typename KV>
__global__ void __launch_bounds__(kWarps * 32)
    attention_kernel(const Q* q, const KV* k, const KV* v, const Q* mask, Q* out, AttentionShape s,
                     float scale, bool causal, std::int64_t query_offset) {
  __shared__ float part_m[kWarps], part_l[kWarps];
  __shared__ float part_acc[kWarps][kMaxHeadDim];
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const std::int64_t h = blockIdx.x % s.heads;
  const std::int64_t i = (blockIdx.x / s.heads) % s.sq;
  const std::int64_t b = blockIdx.x / (s.heads * s.sq);
  const std::int64_t kvh = h / (s.heads / s.kv_heads);
  const std::int64_t dh = s.head_dim;
  const Q* qrow = q + ((b * s.sq + i) * s.heads + h) * dh;

  float qv[kPerLane], acc[kPerLane];
#pragma unroll
  for (int p = 0; p < kPerLane; ++p) {
    const std::int64_t dim = lane + 32 * p;
    qv[p] = dim < dh ? to_f32(qrow[dim]) : 0.0f;
    acc[p] = 0.0f;
  }
  float m = -INFINITY, l = 0.0f;
  const std::int64_t last = causal ? i + query_offset : s.skv - 1;  // the last key seen
  for (std::int64_t j = warp; j < s.skv && j <= last; j += kWarps) {
    const std::int64_t at = ((b * s.skv + j) * s.kv_heads + kvh) * dh;
    float dot = 0.0f;
#pragma unroll
    for (int p = 0; p < kPerLane; ++p) {
      const std::int64_t dim = lane + 32 * p;
      if (dim < dh) dot = __fmaf_rn(qv[p], to_f32(k[at + dim]), dot);
    }
    float logit = __fmul_rn(warp_sum(dot), scale);
    if (mask != nullptr) logit = __fadd_rn(logit, to_f32(mask[i * s.skv + j]));
    if (logit == -INFINITY) continue;  // masked: weight 0
    const float m_new = nan_max(m, logit);
    const float correction = expf(m - m_new);  // 0 for the first key seen
    const float weight = expf(logit - m_new);
    l = __fmaf_rn(l, correction, weight);
#pragma unroll
    for (int p = 0; p < kPerLane; ++p) {
      const std::int64_t dim = lane + 32 * p;
      if (dim < dh) acc[p] = __fmaf_rn(acc[p], correction, weight * to_f32(v[at + dim]));
    }
    m = m_new;
  }
  if (lane == 0) {
    part_m[warp] = m;
    part_l[warp] = l;
  }
#pragma unroll
  for (int p = 0; p < kPerLane; ++p) {
    const std::int64_t dim = lane + 32 * p;
    if (dim < dh) part_acc[warp][dim] = acc[p];
  }
  __syncthreads();
  if (warp != 0) return;
  float top = -INFINITY;
  for (int w = 0; w < kWarps; ++w) top = nan_max(top, part_m[w]);
  Q* orow = out + ((b * s.sq + i) * s.heads + h) * dh;
  if (top == -INFINITY) {
    // Every key masked: zeros, as softmax gives for such a row.
    for (std::int64_t dim = lane; dim < dh; dim += 32) orow[dim] = from_f32<Q>(0.0f);
    return;
  }
  float factor[kWarps];
  float total = 0.0f;
  for (int w = 0; w < kWarps; ++w) {
    factor[w] = part_m[w] == -INFINITY ? 0.0f : expf(part_m[w] - top);
    total = __fmaf_rn(part_l[w], factor[w], total);
  }
  for (std::int64_t dim = lane; dim < dh; dim += 32) {
    float sum = 0.0f;
    for (int w = 0; w < kWarps; ++w) sum = __fmaf_rn(part_acc[w][dim], factor[w], sum);
    orow[dim] = from_f32<Q>(__fdiv_rn(sum, total));
  }
}

template <typename Q, typename KV>
void launch(const void* q, const void* k, const void* v, const void* mask, void* out,
            const AttentionShape& s, float scale, bool causal, std::int64_t query_offset,
            cudaStream_t stream) {
  const auto blocks = static_cast<unsigned>(s.batch * s.sq * s.heads);
  attention_kernel<Q, KV><<<blocks, kWarps * 32, 0, stream>>>(
      static_cast<const Q*>(q), static_cast<const KV*>(k), static_cast<const KV*>(v),
      static_cast<const Q*>(mask), static_cast<Q*>(out), s, scale, causal, query_offset);
}

}  // namespace

cudaError_t attention(Type q_type, Type kv_type, const void* q, const void* k, const void* v,
                      const void* mask, void* out, const AttentionShape& s, float scale,
                      bool causal, std::int64_t query_offset, cudaStream_t stream) {
  const std::int64_t blocks = s.batch * s.sq * s.heads;
  if (blocks == 0 || s.head_dim == 0) return cudaSuccess;
  if (blocks > 0x7fffffff || s.head_dim > kMaxHeadDim || s.kv_heads <= 0 ||
      s.heads % s.kv_heads != 0) {
    return cudaErrorInvalidValue;
  }
  // The pairs the CPU backend registers: (f32, f32|f16|bf16), (f16, f16), (bf16, bf16).
  if (q_type == Type::kF32 && kv_type == Type::kF32) {
    launch<float, float>(q, k, v, mask, out, s, scale, causal, query_offset, stream);
  } else if (q_type == Type::kF32 && kv_type == Type::kF16) {
    launch<float, __half>(q, k, v, mask, out, s, scale, causal, query_offset, stream);
  } else if (q_type == Type::kF32 && kv_type == Type::kBF16) {
    launch<float, __nv_bfloat16>(q, k, v, mask, out, s, scale, causal, query_offset, stream);
  } else if (q_type == Type::kF16 && kv_type == Type::kF16) {
    launch<__half, __half>(q, k, v, mask, out, s, scale, causal, query_offset, stream);
  } else if (q_type == Type::kBF16 && kv_type == Type::kBF16) {
    launch<__nv_bfloat16, __nv_bfloat16>(q, k, v, mask, out, s, scale, causal, query_offset,
                                         stream);
  } else {
    return cudaErrorInvalidValue;
  }
  return cudaGetLastError();
}

}  // namespace switchyard::cuda::device
