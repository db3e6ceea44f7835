// The portable dense matmul: a 64x64 output tile per block of 256 threads, each
// thread a 4x4 patch, K in steps of 16 through shared memory. Operands of any
// float storage type are widened to f32 as they are staged, so one kernel serves
// the mixed keys cuBLASLt does not ((f32, f16, f32), (f32, bf16, f32)) and is the
// reference sibling of every key. Each output is one f32 FMA chain in k order, so
// it claims what the CPU's sequential reference claims.
//
// Few activation rows (decoding) take matvec_kernel instead (Note [Matvec for
// few rows]).
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
  begin_overlapped();  // Note [Kernels overlap their predecessor]
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

// Note [Matvec for few rows]
// With one to kMatvecRows activation rows a matmul reads each weight once and does
// almost no arithmetic per byte: it is a stream of weight bytes, and the tiled
// kernel, which stages 64 rows of activations that do not exist, reads them at a
// small fraction of the memory bandwidth. matvec_kernel gives each warp one
// weight row (one output column): its lanes read the row in 16-byte loads, four
// in flight, and keep one f32 sum per activation row, which the warp then adds
// across its lanes in a fixed order. The sums are in a different order from the
// tiled kernel's chain, within the same claimed bound, and the same on every run.
constexpr int kMatvecRows = 8;
constexpr int kMatvecWarps = 8;

// N values of T from p (N * sizeof(T) bytes, aligned to that size up to 16), as f32.
template <typename T, int N>
__device__ __forceinline__ void load_f32(const T* p, float (&out)[N]) {
  constexpr int kBytes = N * static_cast<int>(sizeof(T));
  static_assert(kBytes % 8 == 0 && kBytes <= 32);
  if constexpr (kBytes % 16 == 0) {
#pragma unroll
    for (int c = 0; c < kBytes / 16; ++c) {
      const uint4 raw = __ldg(reinterpret_cast<const uint4*>(p) + c);
      const T* e = reinterpret_cast<const T*>(&raw);
#pragma unroll
      for (int i = 0; i < 16 / static_cast<int>(sizeof(T)); ++i) {
        out[c * (16 / static_cast<int>(sizeof(T))) + i] = to_f32(e[i]);
      }
    }
  } else {
    const uint2 raw = __ldg(reinterpret_cast<const uint2*>(p));
    const T* e = reinterpret_cast<const T*>(&raw);
#pragma unroll
    for (int i = 0; i < N; ++i) out[i] = to_f32(e[i]);
  }
}

// With kPair the warp reads row `col` of a second matrix w2 as well and writes
// silu(a . w) * (a . w2): the gate and up projections of a SwiGLU feed-forward
// and its activation in one pass (Note [Fused decode feed-forward]).
//
// Note [Splitting a row across warps]
// A matrix of few rows (attn_k and attn_v of Llama-3.1-8B: 1024 rows of 4096)
// gives one warp per row too few warps to keep the memory busy: 128 blocks for
// 132 SMs, each with 8 warps' loads in flight. kSplit warps then share a row,
// each reading a contiguous slice of it (a whole number of the warp's 32-load
// steps), and the block adds the slices' sums in slice order through shared
// memory, so the result is the same on every run. matvec_split picks kSplit from
// the shape alone, so a shape always sums in the same order (the fused gate and
// up have the bits of the separate products).
template <typename A, typename W, typename O, int M, bool kPair, int kSplit>
__global__ void __launch_bounds__(kMatvecWarps * 32)
    matvec_kernel(const A* a, const W* w, const W* w2, O* out, int m, std::int64_t n,
                  std::int64_t k, std::int64_t w_batch_stride) {
  // M is m rounded up to a power of two: rows from m on are neither read nor written.
  constexpr int V = 16 / static_cast<int>(sizeof(W));  // weights per load
  constexpr int kInFlight = 4;
  constexpr int kMats = kPair ? 2 : 1;
  constexpr int kRowsPerBlock = kMatvecWarps / kSplit;
  const int lane = threadIdx.x & 31;
  const int warp = static_cast<int>(threadIdx.x >> 5);
  const int slice = warp % kSplit;
  const std::int64_t col = std::int64_t{blockIdx.x} * kRowsPerBlock + warp / kSplit;
  const bool active = col < n;
  let_successor_start();
  if (kSplit == 1 && !active) return;
  const std::int64_t batch = blockIdx.y;
  a += batch * m * k;
  out += batch * m * n;
  const W* wrows[kMats];
  wrows[0] = w + batch * w_batch_stride + (active ? col : 0) * k;
  if constexpr (kPair) wrows[1] = w2 + batch * w_batch_stride + (active ? col : 0) * k;
  float sum[kMats][M] = {};
  const std::int64_t step = 32 * V;
  // This warp's slice of the row: [k_begin, k_end), k_begin a whole step.
  const std::int64_t per_slice = ((k + kSplit - 1) / kSplit + step - 1) / step * step;
  const std::int64_t k_begin = slice * per_slice;
  const std::int64_t k_end =
      !active ? k_begin : (k_begin + per_slice < k ? k_begin + per_slice : k);
  std::int64_t k0 = k_begin + std::int64_t{lane} * V;
  // The first round of this lane's weight loads into L2 while the kernel before
  // finishes (Note [Kernels overlap their predecessor]).
#pragma unroll
  for (int x = 0; x < kMats; ++x) {
#pragma unroll
    for (int u = 0; u < kInFlight; ++u) {
      if (k0 + u * step < k_end) prefetch_l2(wrows[x] + k0 + u * step);
    }
  }
  wait_for_predecessor();
  for (; k0 + (kInFlight - 1) * step < k_end; k0 += kInFlight * step) {
    float wv[kMats][kInFlight][V];
#pragma unroll
    for (int x = 0; x < kMats; ++x) {
#pragma unroll
      for (int u = 0; u < kInFlight; ++u) load_f32<W, V>(wrows[x] + k0 + u * step, wv[x][u]);
    }
#pragma unroll
    for (int u = 0; u < kInFlight; ++u) {
#pragma unroll
      for (int r = 0; r < M; ++r) {
        if (r >= m) break;
        float xv[V];
        load_f32<A, V>(a + r * k + k0 + u * step, xv);
#pragma unroll
        for (int x = 0; x < kMats; ++x) {
#pragma unroll
          for (int e = 0; e < V; ++e) sum[x][r] = __fmaf_rn(xv[e], wv[x][u][e], sum[x][r]);
        }
      }
    }
  }
  for (; k0 < k_end; k0 += step) {
    float wv[kMats][V];
#pragma unroll
    for (int x = 0; x < kMats; ++x) load_f32<W, V>(wrows[x] + k0, wv[x]);
#pragma unroll
    for (int r = 0; r < M; ++r) {
      if (r >= m) break;
      float xv[V];
      load_f32<A, V>(a + r * k + k0, xv);
#pragma unroll
      for (int x = 0; x < kMats; ++x) {
#pragma unroll
        for (int e = 0; e < V; ++e) sum[x][r] = __fmaf_rn(xv[e], wv[x][e], sum[x][r]);
      }
    }
  }
  float total[kMats][M];
#pragma unroll
  for (int x = 0; x < kMats; ++x) {
#pragma unroll
    for (int r = 0; r < M; ++r) total[x][r] = r < m ? warp_sum(sum[x][r]) : 0.0f;
  }
  if constexpr (kSplit > 1) {
    __shared__ float slices[kMatvecWarps][kMats][M];
    if (lane == 0) {
#pragma unroll
      for (int x = 0; x < kMats; ++x) {
#pragma unroll
        for (int r = 0; r < M; ++r) slices[warp][x][r] = total[x][r];
      }
    }
    __syncthreads();
    if (slice != 0 || !active) return;
#pragma unroll
    for (int x = 0; x < kMats; ++x) {
#pragma unroll
      for (int r = 0; r < M; ++r) {
        float t = slices[warp][x][r];
#pragma unroll
        for (int j = 1; j < kSplit; ++j) t += slices[warp + j][x][r];
        total[x][r] = t;
      }
    }
  }
#pragma unroll
  for (int r = 0; r < M; ++r) {
    if (r >= m) break;
    float result = total[0][r];
    if constexpr (kPair) {
      // As the silu and mul kernels compute it: silu in double, rounded to f32
      // (Note [Unary ops in double] in elementwise.cu), then one f32 product.
      const double g = result;
      result = __fmul_rn(static_cast<float>(g / (1.0 + exp(-g))), total[1][r]);
    }
    if (lane == 0) out[r * n + col] = from_f32<O>(result);
  }
}

// Warps per weight row (Note [Splitting a row across warps]): doubled while the
// grid has under 512 blocks and each slice keeps a full round of loads in flight
// per lane. On the H200 a 4096 x 4096 bf16 matrix read 16% slower split in two
// (512 blocks are enough), and 1024 x 4096 split in eight left each warp two
// loads, issued one after the other.
inline int matvec_split(std::int64_t n, std::int64_t k, std::int64_t per_load) {
  constexpr std::int64_t kRound = 4 * 32;  // kInFlight loads for each of 32 lanes
  int split = 1;
  while (split < kMatvecWarps && n * split < 512 * kMatvecWarps &&
         k / (2 * split) >= kRound * per_load) {
    split *= 2;
  }
  return split;
}

template <typename A, typename W, typename O, int M, bool kPair, int kSplit>
void launch_matvec_split(const void* a, const void* w, const void* w2, void* out,
                         std::int64_t batch, std::int64_t m, std::int64_t n, std::int64_t k,
                         std::int64_t w_batch_stride, cudaStream_t stream) {
  constexpr std::int64_t kRowsPerBlock = kMatvecWarps / kSplit;
  const dim3 grid(static_cast<unsigned>((n + kRowsPerBlock - 1) / kRowsPerBlock),
                  static_cast<unsigned>(batch));
  // A failed launch is left for the caller's cudaGetLastError.
  (void)launch_overlapping(&matvec_kernel<A, W, O, M, kPair, kSplit>, grid, dim3(kMatvecWarps * 32),
                           0, stream, static_cast<const A*>(a), static_cast<const W*>(w),
                           static_cast<const W*>(w2), static_cast<O*>(out), static_cast<int>(m), n,
                           k, w_batch_stride);
}

template <typename A, typename W, typename O, int M, bool kPair>
void launch_matvec(const void* a, const void* w, const void* w2, void* out, std::int64_t batch,
                   std::int64_t m, std::int64_t n, std::int64_t k, std::int64_t w_batch_stride,
                   cudaStream_t stream) {
  switch (matvec_split(n, k, 16 / static_cast<std::int64_t>(sizeof(W)))) {
    case 1:
      launch_matvec_split<A, W, O, M, kPair, 1>(a, w, w2, out, batch, m, n, k, w_batch_stride,
                                                stream);
      break;
    case 2:
      launch_matvec_split<A, W, O, M, kPair, 2>(a, w, w2, out, batch, m, n, k, w_batch_stride,
                                                stream);
      break;
    case 4:
      launch_matvec_split<A, W, O, M, kPair, 4>(a, w, w2, out, batch, m, n, k, w_batch_stride,
                                                stream);
      break;
    default:
      launch_matvec_split<A, W, O, M, kPair, 8>(a, w, w2, out, batch, m, n, k, w_batch_stride,
                                                stream);
      break;
  }
}

// matvec_kernel where it applies (Note [Matvec for few rows]): m rows at most
// kMatvecRows, every row of a and w (and w2) starting on a whole load. False
// otherwise.
template <typename A, typename W, typename O, bool kPair = false>
bool try_matvec(const void* a, const void* w, const void* w2, void* out, std::int64_t batch,
                std::int64_t m, std::int64_t n, std::int64_t k, std::int64_t w_batch_stride,
                cudaStream_t stream) {
  constexpr std::int64_t V = 16 / sizeof(W);
  const std::int64_t a_load = V * static_cast<std::int64_t>(sizeof(A));
  const auto on = [](const void* p, std::int64_t bytes) {
    return reinterpret_cast<std::uintptr_t>(p) % static_cast<std::uintptr_t>(bytes) == 0;
  };
  if (m > kMatvecRows || k % V != 0 || w_batch_stride % V != 0 || !on(w, 16) ||
      (kPair && !on(w2, 16)) || !on(a, a_load < 16 ? a_load : 16) || batch > 65535) {
    return false;
  }
  if (m == 1) {
    launch_matvec<A, W, O, 1, kPair>(a, w, w2, out, batch, m, n, k, w_batch_stride, stream);
  } else if (m == 2) {
    launch_matvec<A, W, O, 2, kPair>(a, w, w2, out, batch, m, n, k, w_batch_stride, stream);
  } else if (m <= 4) {
    launch_matvec<A, W, O, 4, kPair>(a, w, w2, out, batch, m, n, k, w_batch_stride, stream);
  } else {
    launch_matvec<A, W, O, kMatvecRows, kPair>(a, w, w2, out, batch, m, n, k, w_batch_stride,
                                               stream);
  }
  return true;
}

template <typename A, typename W, typename O>
cudaError_t launch(const void* a, const void* w, void* out, std::int64_t batch, std::int64_t m,
                   std::int64_t n, std::int64_t k, std::int64_t w_batch_stride,
                   cudaStream_t stream) {
  if (m <= kMatvecRows &&
      try_matvec<A, W, O>(a, w, nullptr, out, batch, m, n, k, w_batch_stride, stream)) {
    return cudaGetLastError();
  }
  const dim3 grid(static_cast<unsigned>((n + kTile - 1) / kTile),
                  static_cast<unsigned>((m + kTile - 1) / kTile), static_cast<unsigned>(batch));
  return launch_overlapping(&matmul_kernel<A, W, O>, grid, dim3(kGemmThreads), 0, stream,
                            static_cast<const A*>(a), static_cast<const W*>(w),
                            static_cast<O*>(out), m, n, k, w_batch_stride);
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

cudaError_t matvec_swiglu(Type w_type, const float* a, const void* gate, const void* up, float* out,
                          std::int64_t m, std::int64_t n, std::int64_t k, cudaStream_t stream) {
  if (m == 0 || n == 0) return cudaSuccess;
  bool launched = false;
  if (w_type == Type::kF16) {
    launched = try_matvec<float, __half, float, true>(a, gate, up, out, 1, m, n, k, 0, stream);
  } else if (w_type == Type::kBF16) {
    launched =
        try_matvec<float, __nv_bfloat16, float, true>(a, gate, up, out, 1, m, n, k, 0, stream);
  }
  return launched ? cudaGetLastError() : cudaErrorNotSupported;
}

}  // namespace switchyard::cuda::device
