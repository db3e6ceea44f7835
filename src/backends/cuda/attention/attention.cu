// Attention, the simple kernel: one block of eight warps per (batch, query row,
// head). Each warp takes every eighth group of four keys into an online softmax
// (running maximum, running sum, running weighted sum of v), its lanes holding
// head_dim / 32 of the dimensions; the eight partial results are merged at the
// end. No score matrix is stored, so any number of keys fits. Grouped-query heads
// read kv head h / (heads / kv_heads).
//
// This is the correct-first kernel: the split over keys inside a block is the
// shape a flash-decoding kernel splits across blocks, and a tiled tensor-core
// kernel for prefill replaces it where rows are many.
#include <cmath>

#include "backends/cuda/device_common.cuh"

namespace switchyard::cuda::device {
namespace {

constexpr int kWarps = 8;
// Note [Keys in flight]
// A warp that reads one key, reduces its dot product across lanes and only then
// reads the next is bound by memory latency, not bandwidth: the first version
// (four warps, one key at a time) read a 4k-token f16 cache at 0.05 of the H200's
// copy bandwidth. Each warp now issues the loads of kKeys keys before reducing any
// of them, and a block holds eight warps.
constexpr int kKeys = 4;
constexpr int kPerLane = static_cast<int>(kMaxHeadDim / 32);

// Block (row, split) takes the keys [split * chunk, (split + 1) * chunk) of its
// row, a row being one (batch, query, head). With one split it writes the output;
// with more it writes its unnormalised partial result (maximum, sum, weighted sum)
// to `partial`, [rows, splits, head_dim + 2] floats, which merge_kernel combines
// (Note [Splitting the keys across blocks] in device.h).
template <typename Q, typename KV>
__global__ void __launch_bounds__(kWarps * 32)
    attention_kernel(const Q* q, const KV* k, const KV* v, const Q* mask, Q* out, AttentionShape s,
                     float scale, bool causal, std::int64_t query_offset, std::int64_t splits,
                     std::int64_t chunk, float* partial) {
  __shared__ float part_m[kWarps], part_l[kWarps];
  __shared__ float part_acc[kWarps][kMaxHeadDim];
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const std::int64_t row = blockIdx.x / splits, split = blockIdx.x % splits;
  const std::int64_t h = row % s.heads;
  const std::int64_t i = (row / s.heads) % s.sq;
  const std::int64_t b = row / (s.heads * s.sq);
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
  const std::int64_t first = split * chunk;
  std::int64_t end = last + 1 < s.skv ? last + 1 : s.skv;  // keys [first, end)
  if (end > first + chunk) end = first + chunk;
  // Each warp takes kKeys consecutive keys at a time, so that their loads are in
  // flight together (Note [Keys in flight]), then folds them into its online
  // softmax in key order.
  for (std::int64_t j0 = first + std::int64_t{warp} * kKeys; j0 < end; j0 += kWarps * kKeys) {
    float kv_v[kKeys][kPerLane];
    float dot[kKeys];
#pragma unroll
    for (int u = 0; u < kKeys; ++u) {
      const std::int64_t at = ((b * s.skv + j0 + u) * s.kv_heads + kvh) * dh;
      const bool key = j0 + u < end;
      dot[u] = 0.0f;
#pragma unroll
      for (int p = 0; p < kPerLane; ++p) {
        const std::int64_t dim = lane + 32 * p;
        const bool in = key && dim < dh;
        dot[u] = __fmaf_rn(qv[p], in ? to_f32(k[at + dim]) : 0.0f, dot[u]);
        kv_v[u][p] = in ? to_f32(v[at + dim]) : 0.0f;
      }
    }
#pragma unroll
    for (int u = 0; u < kKeys; ++u) dot[u] = warp_sum(dot[u]);
#pragma unroll
    for (int u = 0; u < kKeys; ++u) {
      const std::int64_t j = j0 + u;
      if (j >= end) break;
      float logit = __fmul_rn(dot[u], scale);
      if (mask != nullptr) logit = __fadd_rn(logit, to_f32(mask[i * s.skv + j]));
      if (logit == -INFINITY) continue;  // masked: weight 0
      const float m_new = nan_max(m, logit);
      const float correction = expf(m - m_new);  // 0 for the first key seen
      const float weight = expf(logit - m_new);
      l = __fmaf_rn(l, correction, weight);
#pragma unroll
      for (int p = 0; p < kPerLane; ++p) {
        acc[p] = __fmaf_rn(acc[p], correction, __fmul_rn(weight, kv_v[u][p]));
      }
      m = m_new;
    }
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
  float* prow = partial != nullptr ? partial + (row * splits + split) * (dh + 2) : nullptr;
  if (prow != nullptr && top == -INFINITY) {
    // No key of this split counts: a partial result that weighs nothing.
    if (lane == 0) {
      prow[0] = -INFINITY;
      prow[1] = 0.0f;
    }
    for (std::int64_t dim = lane; dim < dh; dim += 32) prow[2 + dim] = 0.0f;
    return;
  }
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
  if (prow != nullptr && lane == 0) {
    prow[0] = top;
    prow[1] = total;
  }
  for (std::int64_t dim = lane; dim < dh; dim += 32) {
    float sum = 0.0f;
    for (int w = 0; w < kWarps; ++w) sum = __fmaf_rn(part_acc[w][dim], factor[w], sum);
    if (prow != nullptr) {
      prow[2 + dim] = sum;
    } else {
      orow[dim] = from_f32<Q>(__fdiv_rn(sum, total));
    }
  }
}

// Combines the splits of each row (one warp per row), as a block combines its
// warps.
template <typename Q>
__global__ void merge_kernel(const float* partial, Q* out, std::int64_t splits, std::int64_t dh) {
  const std::int64_t row = blockIdx.x;
  const int lane = threadIdx.x;
  const float* p = partial + row * splits * (dh + 2);
  Q* orow = out + row * dh;
  float top = -INFINITY;
  for (std::int64_t t = 0; t < splits; ++t) top = nan_max(top, p[t * (dh + 2)]);
  if (top == -INFINITY) {
    for (std::int64_t dim = lane; dim < dh; dim += 32) orow[dim] = from_f32<Q>(0.0f);
    return;
  }
  float total = 0.0f;
  for (std::int64_t t = 0; t < splits; ++t) {
    const float m = p[t * (dh + 2)];
    total = __fmaf_rn(p[t * (dh + 2) + 1], m == -INFINITY ? 0.0f : expf(m - top), total);
  }
  for (std::int64_t dim = lane; dim < dh; dim += 32) {
    float sum = 0.0f;
    for (std::int64_t t = 0; t < splits; ++t) {
      const float m = p[t * (dh + 2)];
      sum = __fmaf_rn(p[t * (dh + 2) + 2 + dim], m == -INFINITY ? 0.0f : expf(m - top), sum);
    }
    orow[dim] = from_f32<Q>(__fdiv_rn(sum, total));
  }
}

template <typename Q, typename KV>
void launch(const void* q, const void* k, const void* v, const void* mask, void* out,
            const AttentionShape& s, float scale, bool causal, std::int64_t query_offset,
            std::int64_t splits, float* partial, cudaStream_t stream) {
  const std::int64_t rows = s.batch * s.sq * s.heads;
  const std::int64_t chunk = (s.skv + splits - 1) / splits;
  attention_kernel<Q, KV><<<static_cast<unsigned>(rows * splits), kWarps * 32, 0, stream>>>(
      static_cast<const Q*>(q), static_cast<const KV*>(k), static_cast<const KV*>(v),
      static_cast<const Q*>(mask), static_cast<Q*>(out), s, scale, causal, query_offset, splits,
      chunk, splits > 1 ? partial : nullptr);
  if (splits > 1) {
    merge_kernel<Q><<<static_cast<unsigned>(rows), 32, 0, stream>>>(partial, static_cast<Q*>(out),
                                                                    splits, s.head_dim);
  }
}

}  // namespace

std::int64_t attention_splits(const AttentionShape& s) {
  const std::int64_t rows = s.batch * s.sq * s.heads;
  if (rows <= 0) return 1;
  const std::int64_t by_blocks = (kAttentionBlocks + rows - 1) / rows;
  const std::int64_t by_keys = (s.skv + kMinKeysPerSplit - 1) / kMinKeysPerSplit;
  const std::int64_t splits = by_blocks < by_keys ? by_blocks : by_keys;
  return splits < 1 ? 1 : splits;
}

cudaError_t attention(Type q_type, Type kv_type, const void* q, const void* k, const void* v,
                      const void* mask, void* out, const AttentionShape& s, float scale,
                      bool causal, std::int64_t query_offset, std::int64_t splits, float* partial,
                      cudaStream_t stream) {
  const std::int64_t blocks = s.batch * s.sq * s.heads * splits;
  if (blocks == 0 || s.head_dim == 0) return cudaSuccess;
  if (blocks > 0x7fffffff || s.head_dim > kMaxHeadDim || s.kv_heads <= 0 ||
      s.heads % s.kv_heads != 0 || splits < 1 || (splits > 1 && partial == nullptr)) {
    return cudaErrorInvalidValue;
  }
  // The pairs the CPU backend registers: (f32, f32|f16|bf16), (f16, f16), (bf16, bf16).
  if (q_type == Type::kF32 && kv_type == Type::kF32) {
    launch<float, float>(q, k, v, mask, out, s, scale, causal, query_offset, splits, partial,
                         stream);
  } else if (q_type == Type::kF32 && kv_type == Type::kF16) {
    launch<float, __half>(q, k, v, mask, out, s, scale, causal, query_offset, splits, partial,
                          stream);
  } else if (q_type == Type::kF32 && kv_type == Type::kBF16) {
    launch<float, __nv_bfloat16>(q, k, v, mask, out, s, scale, causal, query_offset, splits,
                                 partial, stream);
  } else if (q_type == Type::kF16 && kv_type == Type::kF16) {
    launch<__half, __half>(q, k, v, mask, out, s, scale, causal, query_offset, splits, partial,
                           stream);
  } else if (q_type == Type::kBF16 && kv_type == Type::kBF16) {
    launch<__nv_bfloat16, __nv_bfloat16>(q, k, v, mask, out, s, scale, causal, query_offset, splits,
                                         partial, stream);
  } else {
    return cudaErrorInvalidValue;
  }
  return cudaGetLastError();
}

}  // namespace switchyard::cuda::device
