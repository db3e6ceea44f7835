// Row kernels: rms_norm, layer_norm, softmax and the reductions. One block per row
// of a contiguous [rows, d]; each thread walks the row with a stride of the block
// size and the block combines the partial results in a fixed order, so a row's
// result does not depend on anything but its values (bit-stable run to run).
#include <cmath>

#include "backends/cuda/device_common.cuh"

namespace switchyard::cuda::device {
namespace {

constexpr int kRowThreads = 256;

template <typename S>
__global__ void rms_norm_kernel(const S* x, const S* w, S* out, std::int64_t d, float eps) {
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

template <typename S>
__global__ void layer_norm_kernel(const S* x, const S* w, const S* b, S* out, std::int64_t d,
                                  float eps) {
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

// Calls `launch` with the storage type of `type` (never i32 here).
template <typename Launch>
cudaError_t with_float_type(Type type, Launch&& launch) {
  switch (type) {
    case Type::kF32: launch(float{}); break;
    case Type::kF16: launch(__half{}); break;
    case Type::kBF16: launch(__nv_bfloat16{}); break;
    case Type::kI32: return cudaErrorInvalidValue;
  }
  return cudaGetLastError();
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
    rms_norm_kernel<<<static_cast<unsigned>(rows), kRowThreads, 0, stream>>>(
        static_cast<const S*>(x), static_cast<const S*>(w), static_cast<S*>(out), d, eps);
  });
}

cudaError_t layer_norm(Type type, const void* x, const void* w, const void* b, void* out,
                       std::int64_t rows, std::int64_t d, float eps, cudaStream_t stream) {
  if (rows == 0 || d == 0) return cudaSuccess;
  if (too_many_rows(rows)) return cudaErrorInvalidConfiguration;
  return with_float_type(type, [&](auto tag) {
    using S = decltype(tag);
    layer_norm_kernel<<<static_cast<unsigned>(rows), kRowThreads, 0, stream>>>(
        static_cast<const S*>(x), static_cast<const S*>(w), static_cast<const S*>(b),
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
    softmax_kernel<<<static_cast<unsigned>(rows), kRowThreads, 0, stream>>>(
        static_cast<const S*>(x), static_cast<const S*>(mask), static_cast<S*>(out), r, c, scale,
        causal, query_offset);
  });
}

cudaError_t reduce(ReduceOp op, Type type, const void* x, void* out, std::int64_t rows,
                   std::int64_t d, cudaStream_t stream) {
  if (rows == 0) return cudaSuccess;
  if (too_many_rows(rows)) return cudaErrorInvalidConfiguration;
  return with_float_type(type, [&](auto tag) {
    using S = decltype(tag);
    reduce_kernel<<<static_cast<unsigned>(rows), kRowThreads, 0, stream>>>(
        op, static_cast<const S*>(x), static_cast<S*>(out), d);
  });
}

}  // namespace switchyard::cuda::device
