// The portable dense matmul: a 64x64 output tile per block of 256 threads, each
// thread a 4x4 patch, K in steps of 16 through shared memory. Operands of any
// float storage type are widened to f32 as they are staged, so one kernel serves
// the mixed keys cuBLASLt does not ((f32, f16, f32), (f32, bf16, f32)) and is the
// reference sibling of every key. Each output is one f32 FMA chain in k order, so
// it claims what the CPU's sequential reference claims.
#include "backends/cuda/device_common.cuh"

namespace switchyard::cuda::device {
namespace {

constexpr int kTile = 64;
constexpr int kStep = 16;
constexpr int kPatch = 4;
constexpr int kGemmThreads = (kTile / kPatch) * (kTile / kPatch);

template <typename A, typename W, typename O>
__global__ void __launch_bounds__(kGemmThreads)
    matmul_kernel(const A* a, const W* w, O* out, std::int64_t m, std::int64_t n, std::int64_t k,
                  std::int64_t w_batch_stride) {
  __shared__ float as[kStep][kTile + 1];
  __shared__ float ws[kStep][kTile + 1];
  const std::int64_t batch = blockIdx.z;
  a += batch * m * k;
  w += batch * w_batch_stride;
  out += batch * m * n;
  const std::int64_t m0 = std::int64_t{blockIdx.y} * kTile;
  const std::int64_t n0 = std::int64_t{blockIdx.x} * kTile;
  const int tid = threadIdx.x;
  const int tx = tid % (kTile / kPatch), ty = tid / (kTile / kPatch);
  float acc[kPatch][kPatch] = {};
  for (std::int64_t k0 = 0; k0 < k; k0 += kStep) {
#pragma unroll
    for (int r = 0; r < kTile * kStep / kGemmThreads; ++r) {
      const int e = tid + r * kGemmThreads;
      const int row = e / kStep, kk = e % kStep;
      const std::int64_t kc = k0 + kk;
      const std::int64_t am = m0 + row, wn = n0 + row;
      as[kk][row] = am < m && kc < k ? to_f32(a[am * k + kc]) : 0.0f;
      ws[kk][row] = wn < n && kc < k ? to_f32(w[wn * k + kc]) : 0.0f;
    }
    __syncthreads();
    const int steps = static_cast<int>(k - k0 < kStep ? k - k0 : kStep);
    for (int kk = 0; kk < steps; ++kk) {
      float af[kPatch], wf[kPatch];
#pragma unroll
      for (int i = 0; i < kPatch; ++i) {
        af[i] = as[kk][ty * kPatch + i];
        wf[i] = ws[kk][tx * kPatch + i];
      }
#pragma unroll
      for (int i = 0; i < kPatch; ++i) {
#pragma unroll
        for (int j = 0; j < kPatch; ++j) acc[i][j] = __fmaf_rn(af[i], wf[j], acc[i][j]);
      }
    }
    __syncthreads();
  }
#pragma unroll
  for (int i = 0; i < kPatch; ++i) {
    const std::int64_t row = m0 + ty * kPatch + i;
    if (row >= m) continue;
#pragma unroll
    for (int j = 0; j < kPatch; ++j) {
      const std::int64_t col = n0 + tx * kPatch + j;
      if (col < n) out[row * n + col] = from_f32<O>(acc[i][j]);
    }
  }
}

template <typename A, typename W, typename O>
cudaError_t launch(const void* a, const void* w, void* out, std::int64_t batch, std::int64_t m,
                   std::int64_t n, std::int64_t k, std::int64_t w_batch_stride,
                   cudaStream_t stream) {
  const dim3 grid(static_cast<unsigned>((n + kTile - 1) / kTile),
                  static_cast<unsigned>((m + kTile - 1) / kTile), static_cast<unsigned>(batch));
  matmul_kernel<A, W, O>
      <<<grid, kGemmThreads, 0, stream>>>(static_cast<const A*>(a), static_cast<const W*>(w),
                                          static_cast<O*>(out), m, n, k, w_batch_stride);
  return cudaGetLastError();
}

}  // namespace

cudaError_t matmul_simt(Type a_type, Type w_type, Type out_type, const void* a, const void* w,
                        void* out, std::int64_t batch, std::int64_t m, std::int64_t n,
                        std::int64_t k, std::int64_t w_batch_stride, cudaStream_t stream) {
  if (batch == 0 || m == 0 || n == 0) return cudaSuccess;
  if (batch > 65535 || (m + kTile - 1) / kTile > 65535 || (n + kTile - 1) / kTile > 0x7fffffff) {
    return cudaErrorInvalidConfiguration;
  }
  // The keys of op.def's matmul row: (f32, f32|f16|bf16, f32), (f16, f16, f16),
  // (bf16, bf16, bf16).
  using F16 = __half;
  using BF16 = __nv_bfloat16;
  if (a_type == Type::kF32 && out_type == Type::kF32) {
    switch (w_type) {
      case Type::kF32:
        return launch<float, float, float>(a, w, out, batch, m, n, k, w_batch_stride, stream);
      case Type::kF16:
        return launch<float, F16, float>(a, w, out, batch, m, n, k, w_batch_stride, stream);
      case Type::kBF16:
        return launch<float, BF16, float>(a, w, out, batch, m, n, k, w_batch_stride, stream);
      case Type::kI32: return cudaErrorInvalidValue;
    }
  }
  if (a_type == Type::kF16 && w_type == Type::kF16 && out_type == Type::kF16) {
    return launch<F16, F16, F16>(a, w, out, batch, m, n, k, w_batch_stride, stream);
  }
  if (a_type == Type::kBF16 && w_type == Type::kBF16 && out_type == Type::kBF16) {
    return launch<BF16, BF16, BF16>(a, w, out, batch, m, n, k, w_batch_stride, stream);
  }
  return cudaErrorInvalidValue;
}

}  // namespace switchyard::cuda::device
