// f32 activations split into two bf16 halves, or rounded to one, for the
// tensor-core matmul of f32 x bf16 (Notes [Exact f32 products on bf16 tensor
// cores] and [One bf16 pass is a precision trade] in gemm/matmul.cpp).
#include "backends/cuda/device_common.cuh"

namespace switchyard::cuda::device {
namespace {

// hi takes the top 16 bits of v (rounded toward zero, so it never overflows to
// infinity), lo the rest rounded to nearest: v - hi is exact in f32 and has at
// most 16 significant bits, so lo is within 2^-9 of it and hi + lo within 2^-16
// of v. A NaN keeps a NaN in hi (truncating its bits could make an infinity);
// infinities and NaN have lo = 0, so that hi alone carries them.
__device__ __forceinline__ void split_one(float v, __nv_bfloat16& hi, __nv_bfloat16& lo) {
  const unsigned bits = __float_as_uint(v);
  if ((bits & 0x7f800000u) == 0x7f800000u) {
    hi = v != v ? __ushort_as_bfloat16(0x7fc0) : __ushort_as_bfloat16(bits >> 16);
    lo = __ushort_as_bfloat16(0);
    return;
  }
  const unsigned short top = static_cast<unsigned short>(bits >> 16);
  hi = __ushort_as_bfloat16(top);
  const float rest = __fsub_rn(v, __uint_as_float(static_cast<unsigned>(top) << 16));
  lo = __float2bfloat16_rn(rest);
}

// silu(g) * u as the elementwise kernels compute it: silu in double rounded to f32
// (Note [Unary ops in double] in elementwise.cu), then one f32 product.
__device__ __forceinline__ float swiglu(float g, float u) {
  const double x = g;
  return __fmul_rn(static_cast<float>(x / (1.0 + exp(-x))), u);
}

template <bool kSwiglu, bool kRounded>
__global__ void split_kernel(const float* a, const float* u, __nv_bfloat16* hi, __nv_bfloat16* lo,
                             std::int64_t n) {
  begin_overlapped();  // Note [Kernels overlap their predecessor]
  const std::int64_t stride = std::int64_t{gridDim.x} * blockDim.x;
  for (std::int64_t i = std::int64_t{blockIdx.x} * blockDim.x + threadIdx.x; i < n; i += stride) {
    float v = a[i];
    if constexpr (kSwiglu) v = swiglu(v, u[i]);
    if constexpr (kRounded) {
      hi[i] = __float2bfloat16_rn(v);
    } else {
      split_one(v, hi[i], lo[i]);
    }
  }
}

}  // namespace

cudaError_t split_bf16(const float* a, const float* u, void* hi, void* lo, std::int64_t n,
                       cudaStream_t stream) {
  if (n <= 0) return cudaSuccess;
  auto* h = static_cast<__nv_bfloat16*>(hi);
  auto* l = static_cast<__nv_bfloat16*>(lo);
  const auto launch = [&](auto kernel) {
    return launch_overlapping(kernel, dim3(blocks_for(n)), dim3(kThreads), 0, stream, a, u, h, l,
                              n);
  };
  if (u != nullptr) {
    return l != nullptr ? launch(&split_kernel<true, false>) : launch(&split_kernel<true, true>);
  }
  return l != nullptr ? launch(&split_kernel<false, false>) : launch(&split_kernel<false, true>);
}

}  // namespace switchyard::cuda::device
