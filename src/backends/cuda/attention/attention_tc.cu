// Attention on the tensor cores, for prompts (Note [Prompt attention on the tensor
// cores]).
#include <mma.h>

#include <cmath>
#include <type_traits>

#include "backends/cuda/device_common.cuh"

namespace switchyard::cuda::device {
namespace {

namespace wmma = nvcuda::wmma;

// Note [Prompt attention on the tensor cores]
// A prompt's attention is two matrix products per head, Q K^T and P V, with a
// softmax between them: compute-bound, so the SIMT kernels (one query row per
// block) leave the tensor cores idle. tc_kernel is flash attention in WMMA
// tiles. A block of four warps takes 64 query rows of one (batch, head), 16 per
// warp, and walks the keys in tiles of 64:
//   1. the block stages the tile's K and V rows in shared memory, converted to
//      the compute type T (f16 for f16 caches, bf16 for bf16; f32 queries are
//      rounded once to T when the block starts);
//   2. each warp multiplies its 16 query rows by the tile's keys, S = Q K^T, in
//      f32 accumulators, and stores S to its own shared scratch;
//   3. two lanes per query row apply the scale, the mask and the causal limit,
//      fold the tile into the row's running maximum and sum (online softmax),
//      write the probabilities P, rounded to T, and rescale the row's output
//      accumulator O (f32, in shared memory) by the maximum's correction;
//   4. the warp adds P V to O on the tensor cores.
// No score matrix is kept beyond one 16 x 64 tile per warp, so any number of keys
// fits. Tiles past the block's last visible key (causal) are never read. The row
// sum adds the rounded probabilities, the ones P V multiplies, so that the
// weights sum to one as used. Every sum runs in a fixed order: the result does
// not depend on timing.
//
// Masked keys (Note [Masked keys] in attention.cu): a masked score is replaced by
// -inf, never computed from K, and a key that no row of the block may see has its
// K and V rows staged as zeros, so a cache tail holding NaN cannot reach P V (0
// times NaN). A key that some rows of the block see and others do not is real
// data for the ones that see it.
//
// The precision: S's products are exact in f32 (T times T), so a score's error is
// the queries' rounding to T, at most u * scale * sum |q k| (u = 2^-11 for f16,
// 2^-8 for bf16; zero for f16 and bf16 queries), and each probability adds its own
// rounding u. The output is then within (2 max_j |dS_j| + 2u) of sum p |v|
// (registration.cpp states the claim and its condition on scale * sum |q k|).
constexpr int kWarps = 4;
constexpr int kRows = 16 * kWarps;  // query rows per block
constexpr int kKeys = 64;           // keys per tile
constexpr int kThreads = 32 * kWarps;

// Shared-memory strides, in elements: padded so that WMMA's row accesses spread
// over the banks (and a multiple of 8 for 16-bit types, 4 for f32, as WMMA needs).
template <int D>
struct Layout {
  static constexpr int kQK = D + 8;     // Q, K, V rows (T)
  static constexpr int kS = kKeys + 4;  // scores (f32)
  static constexpr int kP = kKeys + 8;  // probabilities (T)
  static constexpr int kO = D + 4;      // output accumulators (f32)
  static constexpr std::size_t kQBytes = sizeof(std::uint16_t) * kRows * kQK;
  static constexpr std::size_t kKBytes = sizeof(std::uint16_t) * kKeys * kQK;
  static constexpr std::size_t kSBytes = sizeof(float) * kRows * kS;
  static constexpr std::size_t kPBytes = sizeof(std::uint16_t) * kRows * kP;
  static constexpr std::size_t kOBytes = sizeof(float) * kRows * kO;
  static constexpr std::size_t kBytes = kQBytes + 2 * kKBytes + kSBytes + kPBytes + kOBytes;
};

// v rounded to the compute type T (to nearest even), or v itself when it is one.
template <typename T, typename S>
__device__ __forceinline__ T to_compute(S v) {
  if constexpr (std::is_same_v<T, S>) {
    return v;
  } else if constexpr (std::is_same_v<T, __half>) {
    return __float2half_rn(to_f32(v));
  } else {
    return __float2bfloat16_rn(to_f32(v));
  }
}

struct TcParams {
  AttentionShape s;
  float scale;
  bool causal;
  std::int64_t query_offset;
};

// Whether row i (of the block's valid rows) may see key j: the causal limit and
// the mask (-inf: never).
template <typename Q>
__device__ __forceinline__ bool visible(const TcParams& p, const Q* mask, std::int64_t i,
                                        std::int64_t j) {
  if (p.causal && j > i + p.query_offset) return false;
  return mask == nullptr || to_f32(mask[i * p.s.skv + j]) != -INFINITY;
}

template <typename Q, typename KV, typename T, int D>
__global__ void __launch_bounds__(kThreads)
    tc_kernel(const Q* q, const KV* k, const KV* v, const Q* mask, Q* out, TcParams p) {
  using L = Layout<D>;
  extern __shared__ __align__(128) unsigned char smem[];
  T* qs = reinterpret_cast<T*>(smem);
  T* ks = reinterpret_cast<T*>(smem + L::kQBytes);
  T* vs = reinterpret_cast<T*>(smem + L::kQBytes + L::kKBytes);
  float* ss = reinterpret_cast<float*>(smem + L::kQBytes + 2 * L::kKBytes);
  T* ps = reinterpret_cast<T*>(smem + L::kQBytes + 2 * L::kKBytes + L::kSBytes);
  float* os =
      reinterpret_cast<float*>(smem + L::kQBytes + 2 * L::kKBytes + L::kSBytes + L::kPBytes);
  __shared__ unsigned char key_seen[kKeys];

  const AttentionShape& s = p.s;
  const int tid = static_cast<int>(threadIdx.x);
  const int lane = tid & 31, warp = tid >> 5;
  const std::int64_t q0 = std::int64_t{blockIdx.x} * kRows;
  const std::int64_t h = blockIdx.y, b = blockIdx.z;
  const std::int64_t kvh = h / (s.heads / s.kv_heads);
  const std::int64_t dh = s.head_dim;
  const std::int64_t rows = s.sq - q0 < kRows ? s.sq - q0 : kRows;  // valid rows

  // Q, rounded to T; padding rows and dimensions zero. O starts at zero.
  for (int at = tid; at < kRows * D; at += kThreads) {
    const int r = at / D, d = at % D;
    T value = to_compute<T>(0.0f);
    if (r < rows && d < dh) value = to_compute<T>(q[((b * s.sq + q0 + r) * s.heads + h) * dh + d]);
    qs[r * L::kQK + d] = value;
  }
  for (int at = tid; at < kRows * D; at += kThreads) os[(at / D) * L::kO + at % D] = 0.0f;
  __syncthreads();

  // The keys any row of the block may see: [0, end).
  std::int64_t end = s.skv;
  if (p.causal) {
    const std::int64_t last = q0 + rows - 1 + p.query_offset + 1;
    if (last < end) end = last < 0 ? 0 : last;
  }

  // Lanes 2r and 2r + 1 own row r of the warp's 16: its running maximum and sum,
  // and half of its keys and output dimensions each.
  const int my_row = lane >> 1, half = lane & 1;
  const std::int64_t i = q0 + 16 * warp + my_row;  // this pair's query row
  const bool row_valid = 16 * warp + my_row < rows;
  float m = -INFINITY, l = 0.0f;
  float* s_warp = ss + 16 * warp * L::kS;
  T* p_warp = ps + 16 * warp * L::kP;
  float* o_warp = os + 16 * warp * L::kO;
  const T* q_warp = qs + 16 * warp * L::kQK;
  // The warp's last row's last visible key: tiles past it add nothing here.
  const std::int64_t warp_rows = rows - 16 * warp;
  const std::int64_t warp_end =
      p.causal ? q0 + 16 * warp + (warp_rows < 16 ? warp_rows : 16) + p.query_offset : s.skv;

  for (std::int64_t t0 = 0; t0 < end; t0 += kKeys) {
    __syncthreads();  // the previous tile's K, V and key_seen are no longer read
    const int n = end - t0 < kKeys ? static_cast<int>(end - t0) : kKeys;
    if (mask != nullptr) {
      // Two threads per key, each half of the block's rows.
      if (tid < 2 * kKeys) {
        const int j = tid >> 1;
        bool seen = false;
        if (j < n) {
          for (std::int64_t r = tid & 1; r < rows && !seen; r += 2) {
            seen = visible(p, mask, q0 + r, t0 + j);
          }
        }
        const bool other = __shfl_xor_sync(0xffffffffu, seen, 1);
        if ((tid & 1) == 0) key_seen[j] = seen || other;
      }
      __syncthreads();
    }
    for (int at = tid; at < kKeys * D; at += kThreads) {
      const int j = at / D, d = at % D;
      T kv_k = to_compute<T>(0.0f), kv_v = to_compute<T>(0.0f);
      if (j < n && d < dh && (mask == nullptr || key_seen[j] != 0)) {
        const std::int64_t from = ((b * s.skv + t0 + j) * s.kv_heads + kvh) * dh + d;
        kv_k = to_compute<T>(k[from]);
        kv_v = to_compute<T>(v[from]);
      }
      ks[j * L::kQK + d] = kv_k;
      vs[j * L::kQK + d] = kv_v;
    }
    __syncthreads();
    if (warp_rows <= 0 || t0 >= warp_end) continue;  // no row of this warp sees the tile

      // 2. S = Q K^T for the warp's 16 rows.
#pragma unroll
    for (int c = 0; c < kKeys / 16; ++c) {
      wmma::fragment<wmma::accumulator, 16, 16, 16, float> acc;
      wmma::fill_fragment(acc, 0.0f);
#pragma unroll
      for (int kk = 0; kk < D / 16; ++kk) {
        wmma::fragment<wmma::matrix_a, 16, 16, 16, T, wmma::row_major> a;
        wmma::fragment<wmma::matrix_b, 16, 16, 16, T, wmma::col_major> kt;
        wmma::load_matrix_sync(a, q_warp + 16 * kk, L::kQK);
        wmma::load_matrix_sync(kt, ks + 16 * c * L::kQK + 16 * kk, L::kQK);
        wmma::mma_sync(acc, a, kt, acc);
      }
      wmma::store_matrix_sync(s_warp + 16 * c, acc, L::kS, wmma::mem_row_major);
    }
    __syncwarp();

    // 3. The online softmax, two lanes per row, 32 keys each.
    float logit[kKeys / 2];
    float top = -INFINITY;
#pragma unroll
    for (int c = 0; c < kKeys / 2; ++c) {
      const int j = half * (kKeys / 2) + c;
      const std::int64_t key = t0 + j;
      float x = -INFINITY;
      if (row_valid && j < n && (!p.causal || key <= i + p.query_offset)) {
        const float bias = mask != nullptr ? to_f32(mask[i * s.skv + key]) : 0.0f;
        if (bias != -INFINITY) x = __fadd_rn(__fmul_rn(s_warp[my_row * L::kS + j], p.scale), bias);
      }
      logit[c] = x;
      top = nan_max(top, x);
    }
    top = nan_max(top, __shfl_xor_sync(0xffffffffu, top, 1));
    const float m_new = nan_max(m, top);
    const float correction = m == -INFINITY ? 0.0f : expf(m - m_new);
    float tile_sum = 0.0f;
#pragma unroll
    for (int c = 0; c < kKeys / 2; ++c) {
      const float weight = logit[c] == -INFINITY ? 0.0f : expf(logit[c] - m_new);
      const T rounded = to_compute<T>(weight);
      p_warp[my_row * L::kP + half * (kKeys / 2) + c] = rounded;
      tile_sum += to_f32(rounded);
    }
    // The pair's two halves, added in the same order by both lanes.
    const float other_sum = __shfl_xor_sync(0xffffffffu, tile_sum, 1);
    tile_sum = half == 0 ? tile_sum + other_sum : other_sum + tile_sum;
    l = __fmaf_rn(l, correction, tile_sum);
    m = m_new;
    for (int d = half * (D / 2); d < (half + 1) * (D / 2); ++d)
      o_warp[my_row * L::kO + d] *= correction;
    __syncwarp();

    // 4. O += P V.
#pragma unroll
    for (int c = 0; c < D / 16; ++c) {
      wmma::fragment<wmma::accumulator, 16, 16, 16, float> acc;
      wmma::load_matrix_sync(acc, o_warp + 16 * c, L::kO, wmma::mem_row_major);
#pragma unroll
      for (int kk = 0; kk < kKeys / 16; ++kk) {
        wmma::fragment<wmma::matrix_a, 16, 16, 16, T, wmma::row_major> a;
        wmma::fragment<wmma::matrix_b, 16, 16, 16, T, wmma::row_major> vv;
        wmma::load_matrix_sync(a, p_warp + 16 * kk, L::kP);
        wmma::load_matrix_sync(vv, vs + 16 * kk * L::kQK + 16 * c, L::kQK);
        wmma::mma_sync(acc, a, vv, acc);
      }
      wmma::store_matrix_sync(o_warp + 16 * c, acc, L::kO, wmma::mem_row_major);
    }
    __syncwarp();
  }

  // The output: O / l per row; a row that saw no key gives zeros, as softmax does.
  if (!row_valid) return;
  Q* orow = out + ((b * s.sq + i) * s.heads + h) * dh;
  for (std::int64_t d = half; d < dh; d += 2) {
    const float value = m == -INFINITY ? 0.0f : __fdiv_rn(o_warp[my_row * L::kO + d], l);
    orow[d] = from_f32<Q>(value);
  }
}

template <typename Q, typename KV, typename T, int D>
cudaError_t launch_tc(const void* q, const void* k, const void* v, const void* mask, void* out,
                      const TcParams& p, cudaStream_t stream) {
  constexpr std::size_t kBytes = Layout<D>::kBytes;
  const auto kernel = &tc_kernel<Q, KV, T, D>;
  // Above 48 KiB a kernel must ask for its shared memory; the answer does not
  // change, so asking on every launch costs one driver call.
  if (cudaError_t e = cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                           static_cast<int>(kBytes));
      e != cudaSuccess) {
    return e;
  }
  const dim3 grid(static_cast<unsigned>((p.s.sq + kRows - 1) / kRows),
                  static_cast<unsigned>(p.s.heads), static_cast<unsigned>(p.s.batch));
  kernel<<<grid, kThreads, kBytes, stream>>>(static_cast<const Q*>(q), static_cast<const KV*>(k),
                                             static_cast<const KV*>(v), static_cast<const Q*>(mask),
                                             static_cast<Q*>(out), p);
  return cudaGetLastError();
}

template <typename Q, typename KV, typename T>
cudaError_t launch_for_dim(const void* q, const void* k, const void* v, const void* mask, void* out,
                           const TcParams& p, cudaStream_t stream) {
  if (p.s.head_dim <= 64) return launch_tc<Q, KV, T, 64>(q, k, v, mask, out, p, stream);
  return launch_tc<Q, KV, T, 128>(q, k, v, mask, out, p, stream);
}

}  // namespace

cudaError_t attention_tensor_cores(Type q_type, Type kv_type, const void* q, const void* k,
                                   const void* v, const void* mask, void* out,
                                   const AttentionShape& s, float scale, bool causal,
                                   std::int64_t query_offset, cudaStream_t stream) {
  if (s.batch * s.sq * s.heads == 0 || s.head_dim == 0) return cudaSuccess;
  const std::int64_t row_blocks = (s.sq + kRows - 1) / kRows;
  if (s.head_dim > kMaxTensorCoreHeadDim || s.kv_heads <= 0 || s.heads % s.kv_heads != 0 ||
      row_blocks > 0x7fffffff || s.heads > 65535 || s.batch > 65535) {
    return cudaErrorInvalidValue;
  }
  const TcParams p{s, scale, causal, query_offset};
  if (q_type == Type::kF32 && kv_type == Type::kF16) {
    return launch_for_dim<float, __half, __half>(q, k, v, mask, out, p, stream);
  }
  if (q_type == Type::kF32 && kv_type == Type::kBF16) {
    return launch_for_dim<float, __nv_bfloat16, __nv_bfloat16>(q, k, v, mask, out, p, stream);
  }
  if (q_type == Type::kF16 && kv_type == Type::kF16) {
    return launch_for_dim<__half, __half, __half>(q, k, v, mask, out, p, stream);
  }
  if (q_type == Type::kBF16 && kv_type == Type::kBF16) {
    return launch_for_dim<__nv_bfloat16, __nv_bfloat16, __nv_bfloat16>(q, k, v, mask, out, p,
                                                                       stream);
  }
  return cudaErrorInvalidValue;
}

}  // namespace switchyard::cuda::device
