// rope, get_rows and set_rows.
#include <cfloat>
#include <cmath>

#include "backends/cuda/device_common.cuh"

namespace switchyard::cuda::device {
namespace {

// Note [Rope angles once per pair]
// The angle of pair i at a token is the same for every head, and computing it
// (pow and sincos in double) costs far more than rotating two values. So one
// thread takes one pair slot i of up to kRopeHeads heads of one token: it
// computes the angle once (divided by the pair's frequency factor where there
// are factors), rounds its cosine and sine to f32, and rotates the pair in each
// of its heads with one rounded product and one FMA per output, as the CPU's
// SIMD rows do (Note [CUDA precision claims] in registration.cpp). Slots from
// rope_dims / 2 on copy the head's unrotated tail, two values each. The values
// are those of one thread per element computing its own angle.
constexpr std::int64_t kRopeHeads = 4;

template <typename S>
__global__ void rope_kernel(const S* x, const std::int32_t* pos, const float* factors, S* out,
                            std::int64_t t, std::int64_t h, std::int64_t d, int mode, double base,
                            std::int64_t rope_dims, std::int64_t n) {
  begin_overlapped();  // Note [Kernels overlap their predecessor]
  // n = rows (batch * t) x head groups x slots.
  const std::int64_t slots = (d + 1) / 2, groups = (h + kRopeHeads - 1) / kRopeHeads;
  const std::int64_t half = rope_dims / 2;
  for (std::int64_t e = blockIdx.x * std::int64_t{blockDim.x} + threadIdx.x; e < n;
       e += std::int64_t{gridDim.x} * blockDim.x) {
    const std::int64_t i = e % slots, rest = e / slots;
    const std::int64_t group = rest % groups, r = rest / groups;
    const std::int64_t h_end = (group + 1) * kRopeHeads < h ? (group + 1) * kRopeHeads : h;
    const S* src = x + r * h * d;
    S* dst = out + r * h * d;
    if (i >= half) {  // the unrotated tail
      const std::int64_t j = rope_dims + 2 * (i - half);
      for (std::int64_t head = group * kRopeHeads; head < h_end; ++head) {
        dst[head * d + j] = src[head * d + j];
        if (j + 1 < d) dst[head * d + j + 1] = src[head * d + j + 1];
      }
      continue;
    }
    const std::int64_t first = mode == 0 ? 2 * i : i;
    const std::int64_t second = mode == 0 ? first + 1 : i + half;
    double theta = static_cast<double>(pos[r % t]) *
                   pow(base, -2.0 * static_cast<double>(i) / static_cast<double>(rope_dims));
    if (factors != nullptr) theta /= static_cast<double>(factors[i]);
    double sd, cd;
    sincos(theta, &sd, &cd);
    const float c = __double2float_rn(cd), s = __double2float_rn(sd);
    for (std::int64_t head = group * kRopeHeads; head < h_end; ++head) {
      const float u = to_f32(src[head * d + first]), v = to_f32(src[head * d + second]);
      dst[head * d + first] = from_f32<S>(__fmaf_rn(u, c, -__fmul_rn(v, s)));
      dst[head * d + second] = from_f32<S>(__fmaf_rn(u, s, __fmul_rn(v, c)));
    }
  }
}

template <typename T, typename O>
__global__ void get_rows_kernel(const T* table, std::int64_t rows, std::int64_t cols,
                                const std::int32_t* idx, O* out, std::int64_t n, int* error) {
  begin_overlapped();  // Note [Kernels overlap their predecessor]
  for (std::int64_t e = blockIdx.x * std::int64_t{blockDim.x} + threadIdx.x; e < n;
       e += std::int64_t{gridDim.x} * blockDim.x) {
    const std::int64_t r = e / cols;
    const std::int64_t row = idx[r];
    if (row < 0 || row >= rows) {
      *error = kIndexOutOfRange;
      continue;
    }
    out[e] = from_f32<O>(to_f32(table[row * cols + (e - r * cols)]));
  }
}

// One thread per element of src; row i lands at dst row idx[i], converted.
template <typename S, typename D>
__global__ void set_rows_kernel(const S* src, std::int64_t cols, const std::int32_t* idx, D* out,
                                std::int64_t rows, std::int64_t n, int* error) {
  begin_overlapped();  // Note [Kernels overlap their predecessor]
  for (std::int64_t e = blockIdx.x * std::int64_t{blockDim.x} + threadIdx.x; e < n;
       e += std::int64_t{gridDim.x} * blockDim.x) {
    const std::int64_t r = e / cols;
    const std::int64_t row = idx[r];
    if (row < 0 || row >= rows) {
      *error = kIndexOutOfRange;
      continue;
    }
    out[row * cols + (e - r * cols)] = from_f32<D>(to_f32(src[e]));
  }
}

template <typename S>
cudaError_t set_rows_from(const S* src, std::int64_t cols, const std::int32_t* idx, Type out_type,
                          void* out, std::int64_t rows, std::int64_t n, int* error,
                          cudaStream_t stream) {
  return with_float_type(out_type, [&](auto tag) {
    using D = decltype(tag);
    (void)launch_overlapping(&set_rows_kernel<S, D>, dim3(blocks_for(n)), dim3(kThreads), 0, stream,
                             src, cols, idx, static_cast<D*>(out), rows, n, error);
  });
}

// Note [A q8_0 cache on the device]
// set_rows into q8_0 (a q8_0 KV cache; the CPU's Note [A q8_0 KV cache]): one
// warp per block of 32 values of src, the block quantized as the CPU quantizes
// it, with the same f32 operations in the same order (amax / 127, its
// reciprocal, round half away from zero), so the bytes are the CPU's; a block
// holding a NaN or an infinity gets a NaN scale. src has n x cols values, cols
// a multiple of 32 (the host checks).
constexpr int kQ8Values = 32, kQ8Bytes = 34;

template <typename S>
__global__ void set_rows_q8_0_kernel(const S* src, std::int64_t cols, const std::int32_t* idx,
                                     std::uint8_t* out, std::int64_t rows, std::int64_t n,
                                     int* error) {
  begin_overlapped();  // Note [Kernels overlap their predecessor]
  const std::int64_t blocks_per_row = cols / kQ8Values;
  for (std::int64_t e = blockIdx.x * std::int64_t{blockDim.x} + threadIdx.x; e < n;
       e += std::int64_t{gridDim.x} * blockDim.x) {
    const std::int64_t r = e / cols;
    const std::int64_t row = idx[r];
    const float x = to_f32(src[e]);
    const float amax = warp_max(fabsf(x));
    // Every lane of the warp agrees on its block's row (blocks do not straddle
    // rows), so a bad index skips the whole block.
    if (row < 0 || row >= rows) {
      *error = kIndexOutOfRange;
      continue;
    }
    const int lane = static_cast<int>(threadIdx.x & 31);
    std::uint8_t* block = out + (row * blocks_per_row + (e - r * cols) / kQ8Values) * kQ8Bytes;
    float d = amax / 127.0f;
    int level = 0;
    if (!(amax <= FLT_MAX)) {
      d = __int_as_float(0x7fc00000);
    } else {
      const float id = d != 0.0f ? 1.0f / d : 0.0f;
      level = static_cast<int>(fminf(fmaxf(roundf(__fmul_rn(x, id)), -128.0f), 127.0f));
    }
    block[2 + lane] = static_cast<std::uint8_t>(static_cast<std::int8_t>(level));
    if (lane == 0) *reinterpret_cast<__half*>(block) = __float2half_rn(d);
  }
}

template <typename T>
cudaError_t get_rows_to(const T* table, std::int64_t rows, std::int64_t cols,
                        const std::int32_t* idx, std::int64_t n, Type out_type, void* out,
                        int* error, cudaStream_t stream) {
  return with_float_type(out_type, [&](auto tag) {
    using O = decltype(tag);
    (void)launch_overlapping(&get_rows_kernel<T, O>, dim3(blocks_for(n)), dim3(kThreads), 0, stream,
                             table, rows, cols, idx, static_cast<O*>(out), n, error);
  });
}

}  // namespace

cudaError_t rope(Type type, const void* x, const std::int32_t* pos, const float* factors, void* out,
                 std::int64_t batch, std::int64_t t, std::int64_t h, std::int64_t d, int mode,
                 float base, std::int64_t rope_dims, cudaStream_t stream) {
  const std::int64_t n = batch * t * ((h + kRopeHeads - 1) / kRopeHeads) * ((d + 1) / 2);
  if (n == 0) return cudaSuccess;
  return with_float_type(type, [&](auto tag) {
    using S = decltype(tag);
    (void)launch_overlapping(&rope_kernel<S>, dim3(blocks_for(n)), dim3(kThreads), 0, stream,
                             static_cast<const S*>(x), pos, factors, static_cast<S*>(out), t, h, d,
                             mode, static_cast<double>(base), rope_dims, n);
  });
}

cudaError_t get_rows(Type table_type, const void* table, std::int64_t rows, std::int64_t cols,
                     const std::int32_t* idx, std::int64_t n, Type out_type, void* out, int* error,
                     cudaStream_t stream) {
  const std::int64_t elements = n * cols;
  if (elements == 0) return cudaSuccess;
  switch (table_type) {
    case Type::kF32:
      return get_rows_to(static_cast<const float*>(table), rows, cols, idx, elements, out_type, out,
                         error, stream);
    case Type::kF16:
      return get_rows_to(static_cast<const __half*>(table), rows, cols, idx, elements, out_type,
                         out, error, stream);
    case Type::kBF16:
      return get_rows_to(static_cast<const __nv_bfloat16*>(table), rows, cols, idx, elements,
                         out_type, out, error, stream);
    case Type::kI32: return cudaErrorInvalidValue;
  }
  return cudaErrorInvalidValue;
}

cudaError_t set_rows_q8_0(Type src_type, const void* src, std::int64_t n, std::int64_t cols,
                          const std::int32_t* idx, void* out, std::int64_t rows, int* error,
                          cudaStream_t stream) {
  const std::int64_t elements = n * cols;
  if (elements == 0) return cudaSuccess;
  if (cols % kQ8Values != 0) return cudaErrorInvalidValue;
  auto* o = static_cast<std::uint8_t*>(out);
  // kThreads and the grid stride are whole warps, as the kernel needs.
  return with_float_type(src_type, [&](auto tag) {
    using S = decltype(tag);
    (void)launch_overlapping(&set_rows_q8_0_kernel<S>, dim3(blocks_for(elements)), dim3(kThreads),
                             0, stream, static_cast<const S*>(src), cols, idx, o, rows, elements,
                             error);
  });
}

cudaError_t set_rows(Type src_type, const void* src, std::int64_t n, std::int64_t cols,
                     const std::int32_t* idx, Type out_type, void* out, std::int64_t rows,
                     int* error, cudaStream_t stream) {
  const std::int64_t elements = n * cols;
  if (elements == 0) return cudaSuccess;
  switch (src_type) {
    case Type::kF32:
      return set_rows_from(static_cast<const float*>(src), cols, idx, out_type, out, rows, elements,
                           error, stream);
    case Type::kF16:
      return set_rows_from(static_cast<const __half*>(src), cols, idx, out_type, out, rows,
                           elements, error, stream);
    case Type::kBF16:
      return set_rows_from(static_cast<const __nv_bfloat16*>(src), cols, idx, out_type, out, rows,
                           elements, error, stream);
    case Type::kI32: return cudaErrorInvalidValue;
  }
  return cudaErrorInvalidValue;
}

}  // namespace switchyard::cuda::device
