// Row kernels: rms_norm, layer_norm, softmax and the reductions. One block per row
// of a contiguous [rows, d]; each thread walks the row with a stride of the block
// size (or, for rms_norm, holds its share of it: Note [A row norm held in
// registers]) and the block combines the partial results in a fixed order, so a
// row's result does not depend on anything but its values (bit-stable run to run).
#include <cmath>

#include "backends/cuda/device_common.cuh"

namespace switchyard::cuda::device {
namespace {

constexpr int kRowThreads = 256;

template <typename S>
__global__ void rms_norm_kernel(const S* x, const S* w, S* out, std::int64_t d, float eps) {
  begin_overlapped();  // Note [Kernels overlap their predecessor]
  __shared__ float scratch[32];
  const S* row = x + blockIdx.x * d;
  S* dst = out + blockIdx.x * d;
  float ss = 0.0f;
  for (std::int64_t j = threadIdx.x; j < d; j += blockDim.x) {
    const float v = to_f32(row[j]);
    ss = __fmaf_rn(v, v, ss);
  }
  ss = block_sum(ss, scratch);
  const float r = __fdiv_rn(1.0f, __fsqrt_rn(__fadd_rn(__fdiv_rn(ss, static_cast<float>(d)), eps)));
  for (std::int64_t j = threadIdx.x; j < d; j += blockDim.x) {
    float v = __fmul_rn(to_f32(row[j]), r);
    if (w != nullptr) v = __fmul_rn(v, to_f32(w[j]));
    dst[j] = from_f32<S>(v);
  }
}

// Note [A row norm held in registers]
// rms_norm_kernel walks its row twice with one element load in flight per thread,
// so a decode step's single row (4096 values, one block) waits on a memory round
// trip per 256 elements, twice: about 15 us of a 7.6 ms step, 64 times a step on
// Llama-3.1-8B's shape. Where a row fits in the block's registers (d a whole
// number of 16-byte loads, at most kMaxHeldChunks per thread) this kernel reads
// it once: each thread issues all its loads, of x and of the weight, before it
// uses any, the block sums the squares (each thread its own values in order,
// then block_sum's fixed order), and each thread scales what it holds. The sum's
// order differs from the loop's, within the same claim; it is fixed by d alone.
constexpr int kMaxHeldChunks = 8;

template <typename S>
__device__ __forceinline__ void load_chunk(const S* p, float (&v)[16 / sizeof(S)]) {
  const uint4 raw = *reinterpret_cast<const uint4*>(p);
  const S* e = reinterpret_cast<const S*>(&raw);
#pragma unroll
  for (int i = 0; i < static_cast<int>(16 / sizeof(S)); ++i) v[i] = to_f32(e[i]);
}

template <typename S, int kChunks>
__global__ void __launch_bounds__(kRowThreads)
    rms_norm_held_kernel(const S* x, const S* w, S* out, std::int64_t d, float eps) {
  constexpr int V = 16 / sizeof(S);
  begin_overlapped();  // Note [Kernels overlap their predecessor]
  __shared__ float scratch[32];
  const S* row = x + blockIdx.x * d;
  S* dst = out + blockIdx.x * d;
  float v[kChunks][V], g[kChunks][V];
#pragma unroll
  for (int c = 0; c < kChunks; ++c) {
    const std::int64_t j = (std::int64_t{c} * kRowThreads + threadIdx.x) * V;
#pragma unroll
    for (int e = 0; e < V; ++e) v[c][e] = g[c][e] = 0.0f;
    if (j < d) {
      load_chunk(row + j, v[c]);
      if (w != nullptr) load_chunk(w + j, g[c]);
    }
  }
  float ss = 0.0f;
#pragma unroll
  for (int c = 0; c < kChunks; ++c) {
#pragma unroll
    for (int e = 0; e < V; ++e) ss = __fmaf_rn(v[c][e], v[c][e], ss);
  }
  ss = block_sum(ss, scratch);
  const float r = __fdiv_rn(1.0f, __fsqrt_rn(__fadd_rn(__fdiv_rn(ss, static_cast<float>(d)), eps)));
#pragma unroll
  for (int c = 0; c < kChunks; ++c) {
    const std::int64_t j = (std::int64_t{c} * kRowThreads + threadIdx.x) * V;
    if (j >= d) break;
    uint4 raw;
    S* e = reinterpret_cast<S*>(&raw);
#pragma unroll
    for (int i = 0; i < V; ++i) {
      float y = __fmul_rn(v[c][i], r);
      if (w != nullptr) y = __fmul_rn(y, g[c][i]);
      e[i] = from_f32<S>(y);
    }
    *reinterpret_cast<uint4*>(dst + j) = raw;
  }
}

// Chunks per thread for rms_norm_held_kernel (a power of two), or 0 where the row
// does not fit or is not made of aligned 16-byte loads.
template <typename S>
int held_chunks(const void* x, const void* w, const void* out, std::int64_t d) {
  constexpr std::int64_t V = 16 / sizeof(S);
  const auto aligned = [](const void* p) { return reinterpret_cast<std::uintptr_t>(p) % 16 == 0; };
  if (d % V != 0 || !aligned(x) || !aligned(out) || (w != nullptr && !aligned(w))) return 0;
  const std::int64_t chunks = (d / V + kRowThreads - 1) / kRowThreads;
  int c = 1;
  while (c < chunks) c *= 2;
  return c <= kMaxHeldChunks ? c : 0;
}

template <typename S>
__global__ void layer_norm_kernel(const S* x, const S* w, const S* b, S* out, std::int64_t d,
                                  float eps) {
  begin_overlapped();  // Note [Kernels overlap their predecessor]
  __shared__ float scratch[32];
  const S* row = x + blockIdx.x * d;
  S* dst = out + blockIdx.x * d;
  float s = 0.0f;
  for (std::int64_t j = threadIdx.x; j < d; j += blockDim.x) s += to_f32(row[j]);
  const float mean = __fdiv_rn(block_sum(s, scratch), static_cast<float>(d));
  float ss = 0.0f;
  for (std::int64_t j = threadIdx.x; j < d; j += blockDim.x) {
    const float c = to_f32(row[j]) - mean;
    ss = __fmaf_rn(c, c, ss);
  }
  const float var = __fdiv_rn(block_sum(ss, scratch), static_cast<float>(d));
  const float r = __fdiv_rn(1.0f, __fsqrt_rn(var + eps));
  for (std::int64_t j = threadIdx.x; j < d; j += blockDim.x) {
    float v = __fmul_rn(to_f32(row[j]) - mean, r);
    if (w != nullptr) v = __fmul_rn(v, to_f32(w[j]));
    if (b != nullptr) v = __fadd_rn(v, to_f32(b[j]));
    dst[j] = from_f32<S>(v);
  }
}

// The masked, scaled logit of column j of row i: -inf where the mask says so.
template <typename S>
__device__ __forceinline__ float logit(const S* row, const S* mask_row, std::int64_t i,
                                       std::int64_t j, float scale, bool causal,
                                       std::int64_t query_offset) {
  if (causal && j > i + query_offset) return -INFINITY;
  float v = __fmul_rn(to_f32(row[j]), scale);
  if (mask_row != nullptr) v = __fadd_rn(v, to_f32(mask_row[j]));
  return v;
}

template <typename S>
__global__ void softmax_kernel(const S* x, const S* mask, S* out, std::int64_t r, std::int64_t c,
                               float scale, bool causal, std::int64_t query_offset) {
  begin_overlapped();  // Note [Kernels overlap their predecessor]
  __shared__ float scratch[32];
  const std::int64_t i = blockIdx.x % r;
  const S* row = x + blockIdx.x * c;
  const S* mask_row = mask != nullptr ? mask + i * c : nullptr;
  S* dst = out + blockIdx.x * c;
  float m = -INFINITY;
  for (std::int64_t j = threadIdx.x; j < c; j += blockDim.x) {
    m = nan_max(m, logit(row, mask_row, i, j, scale, causal, query_offset));
  }
  m = block_max(m, scratch);
  if (m == -INFINITY) {
    // Every entry masked: the row is zeros (docs/ops.md).
    for (std::int64_t j = threadIdx.x; j < c; j += blockDim.x) dst[j] = from_f32<S>(0.0f);
    return;
  }
  float sum = 0.0f;
  for (std::int64_t j = threadIdx.x; j < c; j += blockDim.x) {
    sum += expf(logit(row, mask_row, i, j, scale, causal, query_offset) - m);
  }
  sum = block_sum(sum, scratch);
  for (std::int64_t j = threadIdx.x; j < c; j += blockDim.x) {
    const float e = expf(logit(row, mask_row, i, j, scale, causal, query_offset) - m);
    dst[j] = from_f32<S>(__fdiv_rn(e, sum));
  }
}

template <typename S>
__global__ void reduce_kernel(ReduceOp op, const S* x, S* out, std::int64_t d) {
  begin_overlapped();  // Note [Kernels overlap their predecessor]
  __shared__ float scratch[32];
  const S* row = x + blockIdx.x * d;
  float acc = op == ReduceOp::kMax ? -INFINITY : 0.0f;
  for (std::int64_t j = threadIdx.x; j < d; j += blockDim.x) {
    const float v = to_f32(row[j]);
    acc = op == ReduceOp::kMax ? nan_max(acc, v) : acc + v;
  }
  acc = op == ReduceOp::kMax ? block_max(acc, scratch) : block_sum(acc, scratch);
  if (op == ReduceOp::kMean) acc = __fdiv_rn(acc, static_cast<float>(d));
  if (threadIdx.x == 0) out[blockIdx.x] = from_f32<S>(acc);
}

// Rows are blocks: a grid's x dimension holds 2^31 - 1 of them.
bool too_many_rows(std::int64_t rows) { return rows > 0x7fffffff; }

}  // namespace

cudaError_t rms_norm(Type type, const void* x, const void* w, void* out, std::int64_t rows,
                     std::int64_t d, float eps, cudaStream_t stream) {
  if (rows == 0 || d == 0) return cudaSuccess;
  if (too_many_rows(rows)) return cudaErrorInvalidConfiguration;
  return with_float_type(type, [&](auto tag) {
    using S = decltype(tag);
    const auto* xs = static_cast<const S*>(x);
    const auto* ws = static_cast<const S*>(w);
    auto* os = static_cast<S*>(out);
    const auto launch = [&](auto kernel) {
      (void)launch_overlapping(kernel, dim3(static_cast<unsigned>(rows)), dim3(kRowThreads), 0,
                               stream, xs, ws, os, d, eps);
    };
    switch (held_chunks<S>(x, w, out, d)) {
      case 1: launch(&rms_norm_held_kernel<S, 1>); break;
      case 2: launch(&rms_norm_held_kernel<S, 2>); break;
      case 4: launch(&rms_norm_held_kernel<S, 4>); break;
      case 8: launch(&rms_norm_held_kernel<S, 8>); break;
      default: launch(&rms_norm_kernel<S>); break;
    }
  });
}

cudaError_t layer_norm(Type type, const void* x, const void* w, const void* b, void* out,
                       std::int64_t rows, std::int64_t d, float eps, cudaStream_t stream) {
  if (rows == 0 || d == 0) return cudaSuccess;
  if (too_many_rows(rows)) return cudaErrorInvalidConfiguration;
  return with_float_type(type, [&](auto tag) {
    using S = decltype(tag);
    (void)launch_overlapping(&layer_norm_kernel<S>, dim3(static_cast<unsigned>(rows)),
                             dim3(kRowThreads), 0, stream, static_cast<const S*>(x),
                             static_cast<const S*>(w), static_cast<const S*>(b),
                             static_cast<S*>(out), d, eps);
  });
}

cudaError_t softmax(Type type, const void* x, const void* mask, void* out, std::int64_t batch,
                    std::int64_t r, std::int64_t c, float scale, bool causal,
                    std::int64_t query_offset, cudaStream_t stream) {
  const std::int64_t rows = batch * r;
  if (rows == 0 || c == 0) return cudaSuccess;
  if (too_many_rows(rows)) return cudaErrorInvalidConfiguration;
  return with_float_type(type, [&](auto tag) {
    using S = decltype(tag);
    (void)launch_overlapping(&softmax_kernel<S>, dim3(static_cast<unsigned>(rows)),
                             dim3(kRowThreads), 0, stream, static_cast<const S*>(x),
                             static_cast<const S*>(mask), static_cast<S*>(out), r, c, scale, causal,
                             query_offset);
  });
}

cudaError_t reduce(ReduceOp op, Type type, const void* x, void* out, std::int64_t rows,
                   std::int64_t d, cudaStream_t stream) {
  if (rows == 0) return cudaSuccess;
  if (too_many_rows(rows)) return cudaErrorInvalidConfiguration;
  return with_float_type(type, [&](auto tag) {
    using S = decltype(tag);
    (void)launch_overlapping(&reduce_kernel<S>, dim3(static_cast<unsigned>(rows)),
                             dim3(kRowThreads), 0, stream, op, static_cast<const S*>(x),
                             static_cast<S*>(out), d);
  });
}

}  // namespace switchyard::cuda::device
