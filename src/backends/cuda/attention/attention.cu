// Attention, the simple kernel: one block of eight warps per (batch, query row,
// head). Each warp takes every eighth group of four keys into an online softmax
// (running maximum, running sum, running weighted sum of v), its lanes holding
// head_dim / 32 of the dimensions; the eight partial results are merged at the
// end. No score matrix is stored, so any number of keys fits. Grouped-query heads
// read kv head h / (heads / kv_heads).
//
// Where the shapes allow, decoding and prefill take grouped_kernel instead (Note
// [Grouped decode attention]): one block per (batch, query, kv head) and split of
// the keys, serving every query head of the group from one read of K and V. A
// tiled tensor-core kernel for prefill is still to come.
#include <cmath>
#include <cstdint>
#include <type_traits>

#include "backends/cuda/device_common.cuh"

namespace switchyard::cuda::device {
namespace {

// Keys and values of a q8_0 cache: the tag type KV of the kernels below, read
// through Q8Ptr, which moves by values as a pointer does and gives each value
// exactly (its block's f16 scale times its signed byte).
struct Q8_0Kv {};
constexpr int kQ8Values = 32, kQ8Bytes = 34;

struct Q8Ptr {
  const std::uint8_t* blocks;
  std::int64_t at;
  __device__ Q8Ptr operator+(std::int64_t n) const { return {blocks, at + n}; }
  __device__ float operator[](std::int64_t i) const {
    const std::int64_t e = at + i;
    const std::uint8_t* block = blocks + (e / kQ8Values) * kQ8Bytes;
    const float d = __half2float(*reinterpret_cast<const __half*>(block));
    return d * static_cast<float>(static_cast<std::int8_t>(block[2 + e % kQ8Values]));
  }
};

// How a kernel reads K and V of storage KV: the pointer type, and the values one
// thread of grouped_kernel loads at once (16 bytes of a dense type; a quarter
// of a q8_0 block, which keeps the kernel's shared memory that of f16).
template <typename KV>
struct KvRead {
  using Ptr = const KV*;
  static constexpr int kPerLoad = static_cast<int>(16 / sizeof(KV));
  static Ptr at(const void* p) { return static_cast<Ptr>(p); }
};
template <>
struct KvRead<Q8_0Kv> {
  using Ptr = Q8Ptr;
  static constexpr int kPerLoad = 8;
  static Ptr at(const void* p) { return {static_cast<const std::uint8_t*>(p), 0}; }
};

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
    attention_kernel(const Q* q, typename KvRead<KV>::Ptr k, typename KvRead<KV>::Ptr v,
                     const Q* mask, Q* out, AttentionShape s, float scale, bool causal,
                     std::int64_t query_offset, std::int64_t splits, std::int64_t chunk,
                     float* partial) {
  begin_overlapped();  // Note [Kernels overlap their predecessor]
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
      // A masked key takes no part, whatever K holds (Note [Masked keys]).
      const float bias = mask != nullptr ? to_f32(mask[i * s.skv + j]) : 0.0f;
      if (bias == -INFINITY) continue;
      const float logit = __fadd_rn(__fmul_rn(dot[u], scale), bias);
      if (logit == -INFINITY) continue;  // weight 0
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

// Combines the splits of each row: one block of kMergeThreads per row. The
// splits' weights exp(m - top) are computed once into shared memory (dynamic:
// `splits` floats), then each thread adds one output dimension over the splits,
// so the loads of consecutive dimensions are coalesced and independent. All sums
// run in a fixed order.
constexpr int kMergeThreads = 128;

template <typename Q>
__global__ void __launch_bounds__(kMergeThreads)
    merge_kernel(const float* partial, Q* out, std::int64_t splits, std::int64_t dh) {
  begin_overlapped();  // Note [Kernels overlap their predecessor]
  extern __shared__ float weight[];
  __shared__ float scratch[32];
  const std::int64_t row = blockIdx.x;
  const std::int64_t stride = dh + 2;
  const float* p = partial + row * splits * stride;
  Q* orow = out + row * dh;
  float top = -INFINITY;
  for (std::int64_t t = threadIdx.x; t < splits; t += kMergeThreads)
    top = nan_max(top, p[t * stride]);
  top = block_max(top, scratch);
  float total = 0.0f;
  for (std::int64_t t = threadIdx.x; t < splits; t += kMergeThreads) {
    const float m = p[t * stride];
    const float w = m == -INFINITY ? 0.0f : expf(m - top);
    weight[t] = w;
    total = __fmaf_rn(p[t * stride + 1], w, total);
  }
  total = block_sum(total, scratch);  // its barriers also publish `weight`
  for (std::int64_t d = threadIdx.x; d < dh; d += kMergeThreads) {
    if (top == -INFINITY) {
      orow[d] = from_f32<Q>(0.0f);  // no key counted anywhere: zeros, as softmax gives
      continue;
    }
    float sum = 0.0f;
#pragma unroll 8
    for (std::int64_t t = 0; t < splits; ++t)
      sum = __fmaf_rn(p[t * stride + 2 + d], weight[t], sum);
    orow[d] = from_f32<Q>(__fdiv_rn(sum, total));
  }
}

template <typename Q>
void launch_merge(const float* partial, void* out, const AttentionShape& s, std::int64_t splits,
                  cudaStream_t stream) {
  (void)launch_overlapping(&merge_kernel<Q>, dim3(static_cast<unsigned>(s.batch * s.sq * s.heads)),
                           dim3(kMergeThreads), static_cast<std::size_t>(splits) * sizeof(float),
                           stream, partial, static_cast<Q*>(out), splits, s.head_dim);
}

// Note [Grouped decode attention]
// Decoding reads the whole KV cache for one query row, so it is a stream of K
// and V bytes and must run at memory bandwidth. The simple kernel falls short
// three ways: each of a group's query heads reads the group's K and V again; a
// warp reduces a dot product across all 32 lanes per key; and its loads are
// 2 or 4 bytes per lane, one key at a time. grouped_kernel fixes all three. A
// block (128 threads) takes one (batch, query, kv head) and a split of the keys,
// with the G query heads that share the kv head in registers. A key's row of
// head_dim values is read by LANES = head_dim / V threads, V values each in one
// 16-byte load, so the block reads 128 / LANES keys at once, and every thread
// issues all its loads of a tile before using any (bandwidth needs many bytes in
// flight). Per tile of kTileKeys keys:
//   1. scores: each thread's partial dot products for the G heads, summed over
//      its key's lanes by shuffles, to shared memory;
//   2. one warp per head: the tile's maximum, the running maximum's correction
//      and the probabilities exp(score - max), to shared memory (the V rows'
//      loads are already in flight);
//   3. values: each thread scales its accumulators by the correction and adds
//      its keys' probabilities times their V values.
// At the end the key slots' accumulators and sums are added in a fixed order
// through shared memory, so results do not depend on timing. A split's partial
// result has the simple kernel's layout, and merge_kernel combines them.
// NaN propagates: the maximum is nan_max, and a NaN score gives NaN weights.
// A prompt's rows take it too: each query row is a block that reads its group's
// keys (from L2, a layer's K and V of a 512-token prompt being 4 MB in f32)
// once for its G heads, where the simple kernel reads them per head and reduces
// each key's dot product over a whole warp. On the H200 that cut the attention
// of a 512-token prompt of Llama-3.1-8B's shape from 58.8 to 22.6 ms over its 32
// layers (docs/benchmarks.md, section 13).
constexpr int kGroupThreads = 128;
constexpr int kTileKeys = 64;
constexpr std::int64_t kMinGroupedKeysPerSplit = 64;

// The V values of a dense KV in one 16-byte load, as f32.
template <typename KV>
__device__ __forceinline__ void load_values(const KV* p, float (&out)[16 / sizeof(KV)]) {
  const uint4 raw = __ldg(reinterpret_cast<const uint4*>(p));
  const KV* e = reinterpret_cast<const KV*>(&raw);
#pragma unroll
  for (int i = 0; i < static_cast<int>(16 / sizeof(KV)); ++i) out[i] = to_f32(e[i]);
}
// A quarter of a q8_0 block (8 values from a multiple of 8): its scale and 8
// bytes that sit on 2-byte boundaries, read as four 2-byte words.
__device__ __forceinline__ void load_values(Q8Ptr p, float (&out)[8]) {
  const std::uint8_t* block = p.blocks + (p.at / kQ8Values) * kQ8Bytes;
  const float d = __half2float(__ldg(reinterpret_cast<const __half*>(block)));
  const auto* words = reinterpret_cast<const unsigned short*>(block + 2 + p.at % kQ8Values);
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    const unsigned w = __ldg(words + i);
    out[2 * i] = d * static_cast<float>(static_cast<std::int8_t>(w & 0xffu));
    out[2 * i + 1] = d * static_cast<float>(static_cast<std::int8_t>(w >> 8));
  }
}

template <typename Q, typename KV, int G, int LANES>
__global__ void __launch_bounds__(kGroupThreads)
    grouped_kernel(const Q* q, typename KvRead<KV>::Ptr k, typename KvRead<KV>::Ptr v,
                   const Q* mask, Q* out, AttentionShape s, float scale, bool causal,
                   std::int64_t query_offset, std::int64_t splits, std::int64_t chunk,
                   float* partial) {
  begin_overlapped();  // Note [Kernels overlap their predecessor]
  constexpr int V = KvRead<KV>::kPerLoad;
  constexpr int kDh = LANES * V;
  constexpr int kSlots = kGroupThreads / LANES;  // keys read at once
  constexpr int kPer = kTileKeys / kSlots;       // keys per thread and tile
  __shared__ float score[G][kTileKeys];
  __shared__ float prob[G][kTileKeys];
  __shared__ float sum_acc[G][kSlots * kDh];
  __shared__ float sum_l[G][kSlots];
  __shared__ float running_max[G], tile_correction[G];
  const int slot = static_cast<int>(threadIdx.x) / LANES;
  const int lane = static_cast<int>(threadIdx.x) & 31, warp = static_cast<int>(threadIdx.x) >> 5;
  const int part = static_cast<int>(threadIdx.x) % LANES;
  const std::int64_t row = blockIdx.x / splits, split = blockIdx.x % splits;
  const std::int64_t kvh = row % s.kv_heads;
  const std::int64_t i = (row / s.kv_heads) % s.sq;
  const std::int64_t b = row / (s.kv_heads * s.sq);
  const std::int64_t kv_stride = s.kv_heads * kDh;  // elements between keys

  static_assert(kTileKeys == 64, "the softmax step takes two scores per lane");
  float qv[G][V], acc[G][V], l[G];
#pragma unroll
  for (int g = 0; g < G; ++g) {
    const Q* qrow = q + ((b * s.sq + i) * s.heads + kvh * G + g) * kDh + part * V;
#pragma unroll
    for (int e = 0; e < V; ++e) {
      qv[g][e] = to_f32(qrow[e]);
      acc[g][e] = 0.0f;
    }
    l[g] = 0.0f;
  }
  if (threadIdx.x < G) running_max[threadIdx.x] = -INFINITY;
  const std::int64_t last = causal ? i + query_offset : s.skv - 1;
  const std::int64_t first = split * chunk;
  std::int64_t end = last + 1 < s.skv ? last + 1 : s.skv;
  if (end > first + chunk) end = first + chunk;
  if (mask != nullptr) {
    // Note [Masked keys]
    // A key whose mask entry is -inf takes no part in the result, whatever its K
    // and V rows hold: a cache bound past its written rows (a decode step's
    // binding rounded up, llama.cpp) may hold anything there, NaN included. The
    // block first trims its keys to the last one the mask lets through, so a
    // masked tail is never read; a masked key inside the range gets a -inf
    // score, and a key of weight 0 adds nothing to the values.
    __shared__ unsigned long long live_end;
    if (threadIdx.x == 0) live_end = static_cast<unsigned long long>(first);
    __syncthreads();
    std::int64_t mine = first;
    for (std::int64_t t = first + threadIdx.x; t < end; t += kGroupThreads) {
      if (to_f32(mask[i * s.skv + t]) != -INFINITY) mine = t + 1;
    }
    atomicMax(&live_end, static_cast<unsigned long long>(mine));
    __syncthreads();
    end = static_cast<std::int64_t>(live_end);
  }
  const typename KvRead<KV>::Ptr kbase = k + (b * s.skv * s.kv_heads + kvh) * kDh + part * V;
  const typename KvRead<KV>::Ptr vbase = v + (b * s.skv * s.kv_heads + kvh) * kDh + part * V;

  for (std::int64_t t0 = first; t0 < end; t0 += kTileKeys) {
    const int n = static_cast<int>(end - t0 < kTileKeys ? end - t0 : kTileKeys);
    // 1. Scores. The loops are unrolled, so every lane runs every shuffle; a
    // key past the tile reduces zeros and stores nothing.
    float row_data[kPer][V];
#pragma unroll
    for (int u = 0; u < kPer; ++u) {
      const int j = u * kSlots + slot;
      if (j < n) {
        load_values(kbase + (t0 + j) * kv_stride, row_data[u]);
      } else {
#pragma unroll
        for (int e = 0; e < V; ++e) row_data[u][e] = 0.0f;
      }
    }
#pragma unroll
    for (int u = 0; u < kPer; ++u) {
      const int j = u * kSlots + slot;
      float dot[G];
#pragma unroll
      for (int g = 0; g < G; ++g) {
        dot[g] = 0.0f;
#pragma unroll
        for (int e = 0; e < V; ++e) dot[g] = __fmaf_rn(qv[g][e], row_data[u][e], dot[g]);
      }
#pragma unroll
      for (int o = LANES / 2; o > 0; o /= 2) {
#pragma unroll
        for (int g = 0; g < G; ++g) dot[g] += __shfl_xor_sync(0xffffffffu, dot[g], o);
      }
      if (part == 0 && j < n) {
        const float bias = mask != nullptr ? to_f32(mask[i * s.skv + t0 + j]) : 0.0f;
#pragma unroll
        for (int g = 0; g < G; ++g) {
          score[g][j] = bias == -INFINITY ? -INFINITY : __fadd_rn(__fmul_rn(dot[g], scale), bias);
        }
      }
    }
    // The V rows do not depend on the scores: their loads go out now, so their
    // latency overlaps the softmax step.
#pragma unroll
    for (int u = 0; u < kPer; ++u) {
      const int j = u * kSlots + slot;
      if (j < n) load_values(vbase + (t0 + j) * kv_stride, row_data[u]);
    }
    __syncthreads();
    // 2. Warp w takes heads w, w + 4, ...: the tile's maximum (two scores per
    // lane), the correction of what came before, the probabilities.
    for (int g = warp; g < G; g += kGroupThreads / 32) {
      const float x0 = lane < n ? score[g][lane] : -INFINITY;
      const float x1 = lane + 32 < n ? score[g][lane + 32] : -INFINITY;
      const float before = running_max[g];
      const float top = warp_max(nan_max(before, nan_max(x0, x1)));
      if (lane < n) prob[g][lane] = x0 == -INFINITY ? 0.0f : expf(x0 - top);
      if (lane + 32 < n) prob[g][lane + 32] = x1 == -INFINITY ? 0.0f : expf(x1 - top);
      __syncwarp();
      if (lane == 0) {
        tile_correction[g] = before == -INFINITY ? 0.0f : expf(before - top);
        running_max[g] = top;
      }
    }
    __syncthreads();
    // 3. Values.
#pragma unroll
    for (int g = 0; g < G; ++g) {
      const float correction = tile_correction[g];
      l[g] *= correction;
#pragma unroll
      for (int e = 0; e < V; ++e) acc[g][e] *= correction;
    }
#pragma unroll
    for (int u = 0; u < kPer; ++u) {
      const int j = u * kSlots + slot;
      if (j >= n) continue;
#pragma unroll
      for (int g = 0; g < G; ++g) {
        const float p = prob[g][j];
        if (p == 0.0f) continue;  // masked or negligible: adds nothing
        l[g] += p;
#pragma unroll
        for (int e = 0; e < V; ++e) acc[g][e] = __fmaf_rn(p, row_data[u][e], acc[g][e]);
      }
    }
    // The next tile's scores and probabilities overwrite shared memory.
    __syncthreads();
  }

  // The key slots' accumulators and sums, added in slot order.
#pragma unroll
  for (int g = 0; g < G; ++g) {
#pragma unroll
    for (int e = 0; e < V; ++e) sum_acc[g][slot * kDh + part * V + e] = acc[g][e];
    if (part == 0) sum_l[g][slot] = l[g];
  }
  __syncthreads();
  for (int at = static_cast<int>(threadIdx.x); at < G * kDh; at += kGroupThreads) {
    const int g = at / kDh, d = at % kDh;
    float total = 0.0f, value = 0.0f;
#pragma unroll
    for (int r = 0; r < kSlots; ++r) {
      total += sum_l[g][r];
      value += sum_acc[g][r * kDh + d];
    }
    const float m_g = running_max[g];
    const std::int64_t qrow = (b * s.sq + i) * s.heads + kvh * G + g;
    if (partial != nullptr) {
      float* prow = partial + (qrow * splits + split) * (kDh + 2);
      if (d == 0) {
        prow[0] = m_g;
        prow[1] = m_g == -INFINITY ? 0.0f : total;
      }
      prow[2 + d] = m_g == -INFINITY ? 0.0f : value;
    } else {
      out[qrow * kDh + d] = from_f32<Q>(m_g == -INFINITY ? 0.0f : __fdiv_rn(value, total));
    }
  }
}

// The key-row lanes of grouped_kernel for these shapes (8, 16 or 32), or 0 where
// the simple kernel runs.
// `per_load` is KvRead<KV>::kPerLoad.
int grouped_lanes(const AttentionShape& s, std::int64_t per_load) {
  if (s.kv_heads <= 0 || s.heads % s.kv_heads != 0) return 0;
  const std::int64_t g = s.heads / s.kv_heads;
  if (g != 1 && g != 2 && g != 4 && g != 8) return 0;
  if (s.head_dim % per_load != 0) return 0;
  const std::int64_t lanes = s.head_dim / per_load;
  return lanes == 8 || lanes == 16 || lanes == 32 ? static_cast<int>(lanes) : 0;
}

// One attention() call's operands and parameters, passed whole down the launch
// helpers.
struct Launch {
  const void *q, *k, *v, *mask;
  void* out;
  AttentionShape s;
  float scale;
  bool causal;
  std::int64_t query_offset, splits;
  float* partial;
  cudaStream_t stream;

  // Blocks for `rows` rows, each split over the keys.
  [[nodiscard]] unsigned blocks(std::int64_t rows) const {
    return static_cast<unsigned>(rows * splits);
  }
  [[nodiscard]] std::int64_t chunk() const { return (s.skv + splits - 1) / splits; }
  [[nodiscard]] float* partial_or_null() const { return splits > 1 ? partial : nullptr; }
  template <typename Q>
  void merge() const {
    if (splits > 1) launch_merge<Q>(partial, out, s, splits, stream);
  }
};

template <typename Q, typename KV, int G, int LANES>
void launch_grouped(const Launch& a) {
  (void)launch_overlapping(
      &grouped_kernel<Q, KV, G, LANES>, dim3(a.blocks(a.s.batch * a.s.sq * a.s.kv_heads)),
      dim3(kGroupThreads), 0, a.stream, static_cast<const Q*>(a.q), KvRead<KV>::at(a.k),
      KvRead<KV>::at(a.v), static_cast<const Q*>(a.mask), static_cast<Q*>(a.out), a.s, a.scale,
      a.causal, a.query_offset, a.splits, a.chunk(), a.partial_or_null());
  a.merge<Q>();
}

// grouped_kernel for the group size and lanes of the shape; false where none
// applies.
template <typename Q, typename KV, int LANES>
bool try_grouped_for_lanes(const Launch& a) {
  switch (a.s.heads / a.s.kv_heads) {
    case 1: launch_grouped<Q, KV, 1, LANES>(a); return true;
    case 2: launch_grouped<Q, KV, 2, LANES>(a); return true;
    case 4: launch_grouped<Q, KV, 4, LANES>(a); return true;
    case 8: launch_grouped<Q, KV, 8, LANES>(a); return true;
    default: return false;
  }
}

template <typename Q, typename KV>
bool try_grouped(const Launch& a) {
  // Dense rows take 16-byte loads; q8_0 rows 2-byte ones (load_values above).
  const std::uintptr_t align = std::is_same_v<KV, Q8_0Kv> ? 2 : 16;
  const auto aligned = [&](const void* p) {
    return reinterpret_cast<std::uintptr_t>(p) % align == 0;
  };
  if (!aligned(a.k) || !aligned(a.v)) return false;
  switch (grouped_lanes(a.s, KvRead<KV>::kPerLoad)) {
    case 8: return try_grouped_for_lanes<Q, KV, 8>(a);
    case 16: return try_grouped_for_lanes<Q, KV, 16>(a);
    case 32: return try_grouped_for_lanes<Q, KV, 32>(a);
    default: return false;
  }
}

template <typename Q, typename KV>
void launch(const Launch& a) {
  if (try_grouped<Q, KV>(a)) return;
  (void)launch_overlapping(&attention_kernel<Q, KV>, dim3(a.blocks(a.s.batch * a.s.sq * a.s.heads)),
                           dim3(kWarps * 32), 0, a.stream, static_cast<const Q*>(a.q),
                           KvRead<KV>::at(a.k), KvRead<KV>::at(a.v), static_cast<const Q*>(a.mask),
                           static_cast<Q*>(a.out), a.s, a.scale, a.causal, a.query_offset, a.splits,
                           a.chunk(), a.partial_or_null());
  a.merge<Q>();
}

// attention_splits for K and V that grouped_kernel reads `per_load` values at a time.
std::int64_t splits_for(const AttentionShape& s, std::int64_t per_load) {
  const bool grouped = grouped_lanes(s, per_load) != 0;
  const std::int64_t rows = s.batch * s.sq * (grouped ? s.kv_heads : s.heads);
  if (rows <= 0) return 1;
  const std::int64_t min_keys = grouped ? kMinGroupedKeysPerSplit : kMinKeysPerSplit;
  const std::int64_t by_blocks = (kAttentionBlocks + rows - 1) / rows;
  const std::int64_t by_keys = (s.skv + min_keys - 1) / min_keys;
  const std::int64_t splits = by_blocks < by_keys ? by_blocks : by_keys;
  return splits < 1 ? 1 : splits;
}

// The checks every attention call makes; false where the shapes are refused.
bool attention_shape_ok(const AttentionShape& s, std::int64_t splits, const float* partial) {
  const std::int64_t blocks = s.batch * s.sq * s.heads * splits;
  return blocks <= 0x7fffffff && s.head_dim <= kMaxHeadDim && s.kv_heads > 0 &&
         s.heads % s.kv_heads == 0 && splits >= 1 && (splits == 1 || partial != nullptr);
}

}  // namespace

std::int64_t attention_splits(const AttentionShape& s, Type kv_type) {
  return splits_for(s, kv_type == Type::kF32 ? KvRead<float>::kPerLoad : KvRead<__half>::kPerLoad);
}

std::int64_t attention_splits_q8_0(const AttentionShape& s) {
  return splits_for(s, KvRead<Q8_0Kv>::kPerLoad);
}

cudaError_t attention_q8_0(const float* q, const void* k, const void* v, const float* mask,
                           float* out, const AttentionShape& s, float scale, bool causal,
                           std::int64_t query_offset, std::int64_t splits, float* partial,
                           cudaStream_t stream) {
  if (s.batch * s.sq * s.heads * splits == 0 || s.head_dim == 0) return cudaSuccess;
  if (!attention_shape_ok(s, splits, partial) || s.head_dim % kQ8Values != 0) {
    return cudaErrorInvalidValue;
  }
  launch<float, Q8_0Kv>(
      {q, k, v, mask, out, s, scale, causal, query_offset, splits, partial, stream});
  return cudaGetLastError();
}

cudaError_t attention(Type q_type, Type kv_type, const void* q, const void* k, const void* v,
                      const void* mask, void* out, const AttentionShape& s, float scale,
                      bool causal, std::int64_t query_offset, std::int64_t splits, float* partial,
                      cudaStream_t stream) {
  if (s.batch * s.sq * s.heads * splits == 0 || s.head_dim == 0) return cudaSuccess;
  if (!attention_shape_ok(s, splits, partial)) return cudaErrorInvalidValue;
  const Launch a{q, k, v, mask, out, s, scale, causal, query_offset, splits, partial, stream};
  // The pairs the CPU backend registers: (f32, f32|f16|bf16), (f16, f16), (bf16, bf16).
  if (q_type == Type::kF32 && kv_type == Type::kF32) {
    launch<float, float>(a);
  } else if (q_type == Type::kF32 && kv_type == Type::kF16) {
    launch<float, __half>(a);
  } else if (q_type == Type::kF32 && kv_type == Type::kBF16) {
    launch<float, __nv_bfloat16>(a);
  } else if (q_type == Type::kF16 && kv_type == Type::kF16) {
    launch<__half, __half>(a);
  } else if (q_type == Type::kBF16 && kv_type == Type::kBF16) {
    launch<__nv_bfloat16, __nv_bfloat16>(a);
  } else {
    return cudaErrorInvalidValue;
  }
  return cudaGetLastError();
}

}  // namespace switchyard::cuda::device
