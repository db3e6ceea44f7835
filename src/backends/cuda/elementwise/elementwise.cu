// Elementwise kernels: binary and unary ops, casts and strided copies. One
// grid-stride kernel per storage type; the op is a run-time switch that is uniform
// across the grid (Note [Thin .cu files] in device.h says why so few templates).
#include <cmath>
#include <type_traits>

#include "backends/cuda/device_common.cuh"

namespace switchyard::cuda::device {
namespace {

__device__ __forceinline__ float binary_op(BinaryOp op, float x, float y) {
  switch (op) {
    case BinaryOp::kAdd: return __fadd_rn(x, y);
    case BinaryOp::kSub: return __fsub_rn(x, y);
    case BinaryOp::kMul: return __fmul_rn(x, y);
    case BinaryOp::kDiv: return __fdiv_rn(x, y);
  }
  return x;
}

template <typename S>
__global__ void binary_kernel(BinaryOp op, const S* a, Layout la, const S* b, Layout lb, S* out,
                              std::int64_t n) {
  begin_overlapped();  // Note [Kernels overlap their predecessor]
  for (std::int64_t i = blockIdx.x * std::int64_t{blockDim.x} + threadIdx.x; i < n;
       i += std::int64_t{gridDim.x} * blockDim.x) {
    out[i] = from_f32<S>(binary_op(op, to_f32(a[offset_of(la, i)]), to_f32(b[offset_of(lb, i)])));
  }
}

// Note [Dense elementwise launches]
// Operands that are all contiguous (the common case) take a kernel with one element
// per thread and no layout arithmetic: the strided kernel holds both layouts in
// registers and branches on them per element, and measured 0.16 of the device's
// copy bandwidth for a dense f32 add on the H200.
template <typename S>
__global__ void binary_dense_kernel(BinaryOp op, const S* a, const S* b, S* out, std::int64_t n) {
  begin_overlapped();  // Note [Kernels overlap their predecessor]
  const std::int64_t i = blockIdx.x * std::int64_t{blockDim.x} + threadIdx.x;
  if (i < n) out[i] = from_f32<S>(binary_op(op, to_f32(a[i]), to_f32(b[i])));
}

// One thread per element when the grid holds them (2^31 - 1 blocks).
inline bool dense_grid(std::int64_t n) { return (n + kThreads - 1) / kThreads <= 0x7fffffff; }
inline unsigned dense_blocks(std::int64_t n) {
  return static_cast<unsigned>((n + kThreads - 1) / kThreads);
}

// Note [Unary ops in double]
// The transcendental ops are evaluated in double and rounded once to f32 (then to
// the storage type), so every unary row claims what the CPU reference claims: one
// rounding of the output type. The f32 library functions would cost the claims
// their arguments' rounding: gelu's exp(-2u) scales the rounding of u by |2u|, up
// to 87 before the result underflows, and 1 + erf(z) cancels for negative z. The
// kernels are bound by memory bandwidth, which the double arithmetic does not
// exceed on Hopper.
__device__ __forceinline__ double unary_op(UnaryOp op, double x, double scale) {
  switch (op) {
    case UnaryOp::kNeg: return -x;
    case UnaryOp::kExp: return exp(x);
    case UnaryOp::kSilu: return x / (1.0 + exp(-x));
    case UnaryOp::kGelu: {
      // 0.5 x (1 + tanh(u)) = x / (1 + exp(-2u)), without the cancellation.
      const double u = 0.7978845608028654 * (x + 0.044715 * x * x * x);
      return x / (1.0 + exp(-2.0 * u));
    }
    case UnaryOp::kGeluErf: return 0.5 * x * erfc(-x * 0.7071067811865476);
    case UnaryOp::kGeluQuick: return x / (1.0 + exp(-1.702 * x));
    case UnaryOp::kRelu: return x > 0.0 || x != x ? x : 0.0;
    case UnaryOp::kSqrt: return sqrt(x);
    case UnaryOp::kRsqrt: return 1.0 / sqrt(x);
    case UnaryOp::kSigmoid: return 1.0 / (1.0 + exp(-x));
    case UnaryOp::kTanh: return tanh(x);
    case UnaryOp::kScale: return x * scale;
  }
  return x;
}

__device__ __forceinline__ float unary_f32(UnaryOp op, float v, float scale) {
  if (op == UnaryOp::kNeg) return -v;
  if (op == UnaryOp::kScale) return __fmul_rn(v, scale);  // one f32 rounding, as the CPU's
  if (op == UnaryOp::kSqrt) return __fsqrt_rn(v);
  if (op == UnaryOp::kRelu) return v > 0.0f || v != v ? v : 0.0f;
  return __double2float_rn(unary_op(op, static_cast<double>(v), scale));
}

template <typename S>
__global__ void unary_kernel(UnaryOp op, const S* x, Layout lx, S* out, std::int64_t n,
                             float scale) {
  begin_overlapped();  // Note [Kernels overlap their predecessor]
  for (std::int64_t i = blockIdx.x * std::int64_t{blockDim.x} + threadIdx.x; i < n;
       i += std::int64_t{gridDim.x} * blockDim.x) {
    out[i] = from_f32<S>(unary_f32(op, to_f32(x[offset_of(lx, i)]), scale));
  }
}

template <typename S>
__global__ void unary_dense_kernel(UnaryOp op, const S* x, S* out, std::int64_t n, float scale) {
  begin_overlapped();  // Note [Kernels overlap their predecessor]
  const std::int64_t i = blockIdx.x * std::int64_t{blockDim.x} + threadIdx.x;
  if (i < n) out[i] = from_f32<S>(unary_f32(op, to_f32(x[i]), scale));
}

// Float to i32: round to nearest even, saturate, NaN to 0 (cvt.rni.sat semantics).
__device__ __forceinline__ std::int32_t float_to_i32(float v) {
  if (v != v) return 0;
  return __float2int_rn(v);  // saturates at the i32 range
}

template <typename From, typename To>
__device__ __forceinline__ To convert(From v) {
  if constexpr (std::is_same_v<From, std::int32_t>) {
    if constexpr (std::is_same_v<To, std::int32_t>) {
      return v;
    } else if constexpr (std::is_same_v<To, float>) {
      return __int2float_rn(v);
    } else {
      // The direct conversions round once (through f32 they could round twice).
      if constexpr (std::is_same_v<To, __half>) {
        return __int2half_rn(v);
      } else {
        return __int2bfloat16_rn(v);
      }
    }
  } else {
    const float f = to_f32(v);
    if constexpr (std::is_same_v<To, std::int32_t>) {
      return float_to_i32(f);
    } else {
      return from_f32<To>(f);
    }
  }
}

template <typename From, typename To>
__global__ void cast_kernel(const From* x, Layout lx, To* out, std::int64_t n) {
  begin_overlapped();  // Note [Kernels overlap their predecessor]
  for (std::int64_t i = blockIdx.x * std::int64_t{blockDim.x} + threadIdx.x; i < n;
       i += std::int64_t{gridDim.x} * blockDim.x) {
    out[i] = convert<From, To>(x[offset_of(lx, i)]);
  }
}

template <typename Word>
__global__ void copy_kernel(const Word* src, Layout ls, Word* dst, Layout ld, std::int64_t n) {
  begin_overlapped();  // Note [Kernels overlap their predecessor]
  for (std::int64_t i = blockIdx.x * std::int64_t{blockDim.x} + threadIdx.x; i < n;
       i += std::int64_t{gridDim.x} * blockDim.x) {
    dst[offset_of(ld, i)] = src[offset_of(ls, i)];
  }
}

template <Type T>
using S = typename Storage<T>::type;

template <Type From>
cudaError_t cast_from(const void* x, const Layout& lx, Type to, void* out, std::int64_t n,
                      cudaStream_t stream) {
  const auto* in = static_cast<const S<From>*>(x);
  const auto launch = [&](auto tag) {
    using To = decltype(tag);
    (void)launch_overlapping(&cast_kernel<S<From>, To>, dim3(blocks_for(n)), dim3(kThreads), 0,
                             stream, in, lx, static_cast<To*>(out), n);
  };
  if (to == Type::kI32) {
    launch(std::int32_t{});
    return cudaGetLastError();
  }
  return with_float_type(to, launch);
}

}  // namespace

cudaError_t binary(BinaryOp op, Type type, const void* a, const Layout& la, const void* b,
                   const Layout& lb, void* out, std::int64_t n, cudaStream_t stream) {
  if (n == 0) return cudaSuccess;
  if (la.contiguous && lb.contiguous && dense_grid(n)) {  // Note [Dense elementwise launches]
    return with_float_type(type, [&](auto tag) {
      using S = decltype(tag);
      (void)launch_overlapping(&binary_dense_kernel<S>, dim3(dense_blocks(n)), dim3(kThreads), 0,
                               stream, op, static_cast<const S*>(a), static_cast<const S*>(b),
                               static_cast<S*>(out), n);
    });
  }
  return with_float_type(type, [&](auto tag) {
    using S = decltype(tag);
    (void)launch_overlapping(&binary_kernel<S>, dim3(blocks_for(n)), dim3(kThreads), 0, stream, op,
                             static_cast<const S*>(a), la, static_cast<const S*>(b), lb,
                             static_cast<S*>(out), n);
  });
}

cudaError_t unary(UnaryOp op, Type type, const void* x, const Layout& lx, void* out, std::int64_t n,
                  float scale, cudaStream_t stream) {
  if (n == 0) return cudaSuccess;
  if (lx.contiguous && dense_grid(n)) {  // Note [Dense elementwise launches]
    return with_float_type(type, [&](auto tag) {
      using S = decltype(tag);
      (void)launch_overlapping(&unary_dense_kernel<S>, dim3(dense_blocks(n)), dim3(kThreads), 0,
                               stream, op, static_cast<const S*>(x), static_cast<S*>(out), n,
                               scale);
    });
  }
  return with_float_type(type, [&](auto tag) {
    using S = decltype(tag);
    (void)launch_overlapping(&unary_kernel<S>, dim3(blocks_for(n)), dim3(kThreads), 0, stream, op,
                             static_cast<const S*>(x), lx, static_cast<S*>(out), n, scale);
  });
}

cudaError_t cast(Type from, const void* x, const Layout& lx, Type to, void* out, std::int64_t n,
                 cudaStream_t stream) {
  if (n == 0) return cudaSuccess;
  switch (from) {
    case Type::kF32: return cast_from<Type::kF32>(x, lx, to, out, n, stream);
    case Type::kF16: return cast_from<Type::kF16>(x, lx, to, out, n, stream);
    case Type::kBF16: return cast_from<Type::kBF16>(x, lx, to, out, n, stream);
    case Type::kI32: return cast_from<Type::kI32>(x, lx, to, out, n, stream);
  }
  return cudaErrorInvalidValue;
}

cudaError_t copy(int bytes, const void* src, const Layout& ls, void* dst, const Layout& ld,
                 std::int64_t n, cudaStream_t stream) {
  if (n == 0) return cudaSuccess;
  const auto launch = [&](auto word) {
    using Word = decltype(word);
    (void)launch_overlapping(&copy_kernel<Word>, dim3(blocks_for(n)), dim3(kThreads), 0, stream,
                             static_cast<const Word*>(src), ls, static_cast<Word*>(dst), ld, n);
    return cudaGetLastError();
  };
  switch (bytes) {
    case 2: return launch(std::uint16_t{});
    case 4: return launch(std::uint32_t{});
    default: return cudaErrorInvalidValue;
  }
}

}  // namespace switchyard::cuda::device
