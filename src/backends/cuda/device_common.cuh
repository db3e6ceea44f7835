// Device helpers shared by the .cu files: loading and storing each storage type
// through f32, layout indexing, launch sizes and a NaN-propagating max.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <cstdint>

#include "backends/cuda/device.h"

namespace switchyard::cuda::device {

template <Type T>
struct Storage;
template <>
struct Storage<Type::kF32> {
  using type = float;
};
template <>
struct Storage<Type::kF16> {
  using type = __half;
};
template <>
struct Storage<Type::kBF16> {
  using type = __nv_bfloat16;
};
template <>
struct Storage<Type::kI32> {
  using type = std::int32_t;
};

__device__ __forceinline__ float to_f32(float v) { return v; }
__device__ __forceinline__ float to_f32(__half v) { return __half2float(v); }
__device__ __forceinline__ float to_f32(__nv_bfloat16 v) { return __bfloat162float(v); }

// f32 to the storage type, rounded to nearest even.
template <typename S>
__device__ __forceinline__ S from_f32(float v);
template <>
__device__ __forceinline__ float from_f32<float>(float v) {
  return v;
}
template <>
__device__ __forceinline__ __half from_f32<__half>(float v) {
  return __float2half_rn(v);
}
template <>
__device__ __forceinline__ __nv_bfloat16 from_f32<__nv_bfloat16>(float v) {
  return __float2bfloat16_rn(v);
}

// Note [NaN-propagating max]
// fmaxf returns the other operand when one is NaN, so a softmax or attention row
// whose maximum came from fmaxf would turn a NaN logit into ordinary numbers and
// hide it. Every max in these kernels goes through this one: NaN wins.
__device__ __forceinline__ float nan_max(float a, float b) {
  return (a != a || b != b) ? __int_as_float(0x7fc00000) : (a > b ? a : b);
}

// The element offset of logical index i (row-major over l.dims) in layout l.
__device__ __forceinline__ std::int64_t offset_of(const Layout& l, std::int64_t i) {
  if (l.contiguous) return i;
  std::int64_t off = 0;
  for (int d = l.rank - 1; d >= 0; --d) {
    const std::int64_t n = l.dims[d];
    const std::int64_t q = i / n;
    off += (i - q * n) * l.strides[d];
    i = q;
  }
  return off;
}

// Calls `launch` with the storage type of `type` (a float type; i32 is
// refused) and returns the launch's error.
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

// Grid-stride loops: blocks of 256 threads, at most kMaxBlocks blocks.
inline constexpr int kThreads = 256;
inline constexpr std::int64_t kMaxBlocks = 65535;
inline unsigned blocks_for(std::int64_t n) {
  const std::int64_t b = (n + kThreads - 1) / kThreads;
  return static_cast<unsigned>(b < 1 ? 1 : (b > kMaxBlocks ? kMaxBlocks : b));
}

// Warp and block sums and maxima for the rowwise kernels (blockDim.x a multiple
// of 32, at most 1024). `scratch` holds 32 floats of shared memory.
__device__ __forceinline__ float warp_sum(float v) {
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  return v;
}
__device__ __forceinline__ float warp_max(float v) {
  for (int o = 16; o > 0; o >>= 1) v = nan_max(v, __shfl_xor_sync(0xffffffffu, v, o));
  return v;
}
__device__ __forceinline__ float block_sum(float v, float* scratch) {
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  v = warp_sum(v);
  __syncthreads();  // scratch may still be read by a previous reduction
  if (lane == 0) scratch[warp] = v;
  __syncthreads();
  const int warps = blockDim.x >> 5;
  v = lane < warps ? scratch[lane] : 0.0f;
  return warp_sum(v);
}
__device__ __forceinline__ float block_max(float v, float* scratch) {
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  v = warp_max(v);
  __syncthreads();
  if (lane == 0) scratch[warp] = v;
  __syncthreads();
  const int warps = blockDim.x >> 5;
  v = lane < warps ? scratch[lane] : -INFINITY;
  return warp_max(v);
}

// Note [Kernels overlap their predecessor]
// A decode step is a chain of a few hundred small dependent kernels, and each
// waited for the one before to finish and drain before its own blocks started:
// a launch's ramp per kernel, a few microseconds each. Every kernel of this
// backend is launched with programmatic stream serialization (CUDA's
// programmatic dependent launch, launch_overlapping): its blocks may start
// while the kernel before is still running, once every block of that kernel
// has let them (let_successor_start, which these kernels call as they begin;
// begin_overlapped does both calls). Such a block
// first waits (wait_for_predecessor) until the kernel before has finished and
// its writes are visible, and only then reads or writes anything; what it
// gains is the launch and the block scheduling, done while its predecessor's
// last blocks run. The matrix-vector kernels, whose rows are long, first ask L2
// for the first weight bytes they will read, then wait: the prefetch only
// moves lines into L2, where the predecessor's writes land too, so it can read
// nothing stale even where the "weight" operand is an activation. The order
// stays a chain: a kernel finishes only after it has waited for the one before,
// so waiting for one's predecessor is waiting for all of them. A kernel not
// launched this way (a cuBLASLt product, a copy) starts after its predecessor
// as usual, and both calls do nothing there; on GPUs before sm_90 they compile
// to nothing. Every kernel that launch_overlapping launches must wait before it
// touches memory, or it would race the kernel before it.
__device__ __forceinline__ void wait_for_predecessor() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.wait;" ::: "memory");
#endif
}
__device__ __forceinline__ void let_successor_start() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
#endif
}
// How a kernel that launch_overlapping launches and that prefetches nothing
// begins (Note [Kernels overlap their predecessor]).
__device__ __forceinline__ void begin_overlapped() {
  let_successor_start();
  wait_for_predecessor();
}
__device__ __forceinline__ void prefetch_l2(const void* p) {
  asm volatile("prefetch.global.L2 [%0];" ::"l"(p));
}

// kernel<<<grid, block, shared_bytes, stream>>>(args...), launched so that it
// may overlap the kernel before it on the stream (Note [Kernels overlap their
// predecessor]); the kernel must call wait_for_predecessor before it reads
// anything but its prefetches or writes. Returns the launch's error.
template <typename... Params, typename... Args>
cudaError_t launch_overlapping(void (*kernel)(Params...), dim3 grid, dim3 block,
                               std::size_t shared_bytes, cudaStream_t stream, Args... args) {
  cudaLaunchConfig_t config{};
  config.gridDim = grid;
  config.blockDim = block;
  config.dynamicSmemBytes = shared_bytes;
  config.stream = stream;
  cudaLaunchAttribute attribute{};
  attribute.id = cudaLaunchAttributeProgrammaticStreamSerialization;
  attribute.val.programmaticStreamSerializationAllowed = 1;
  config.attrs = &attribute;
  config.numAttrs = 1;
  if (cudaLaunchKernelEx(&config, kernel, static_cast<Params>(args)...) == cudaSuccess) {
    return cudaSuccess;
  }
  // A driver or stream that refuses the overlap gets the ordinary launch.
  (void)cudaGetLastError();
  config.numAttrs = 0;
  return cudaLaunchKernelEx(&config, kernel, static_cast<Params>(args)...);
}

}  // namespace switchyard::cuda::device
