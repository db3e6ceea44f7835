// Attention on the tensor cores, for prompts (Note [Prompt attention on the tensor
// cores]).
#include <cmath>
#include <cstdint>
#include <cstring>
#include <type_traits>

#include "backends/cuda/device_common.cuh"

namespace switchyard::cuda::device {
namespace {

// Note [Prompt attention on the tensor cores]
// A prompt's attention is two matrix products per head, Q K^T and P V, with a
// softmax between them: compute-bound, so the SIMT kernels (one query row per
// block) leave the tensor cores idle. tc_kernel is flash attention on the
// m16n8k16 tensor-core instruction with every intermediate in registers. A block
// of four warps takes 64 query rows of one (batch, head), 16 per warp, and walks
// the keys in tiles of 64:
//   1. Q is rounded once to the compute type T (f16 for f16 caches, bf16 for
//      bf16) and each warp keeps its 16 rows as instruction operands in
//      registers for the whole walk;
//   2. the tile's K and V rows are copied to shared memory asynchronously, V a
//      step behind K: the next tile's keys arrive while this tile's softmax and
//      P V run, and this tile's values while its scores are computed;
//   3. each warp computes its 16 x 64 scores S = Q K^T in f32 accumulators;
//   4. the online softmax runs on those registers: the scale, the mask and the
//      causal limit, the row's running maximum (the four lanes that share a row
//      exchange theirs), the probabilities P rounded to T, and the correction of
//      the output accumulators O by the maximum's change;
//   5. the accumulator layout of S is the operand layout of P, so O += P V reads
//      P from the registers it was computed in, and V through a transposing
//      shared-memory load.
// No score matrix is kept beyond one 16 x 64 tile per warp, so any number of keys
// fits. Tiles past the block's last visible key (causal) are never read, and the
// blocks of the last query rows, which see the most keys, start first. The row
// sum adds the rounded probabilities, the ones P V multiplies, so that the
// weights sum to one as used. Every sum runs in a fixed order: the result does
// not depend on timing.
//
// Masked keys (Note [Masked keys] in attention.cu): a masked score is replaced by
// -inf, never computed from K, and a key that no row of the block may see has its
// V row staged as zeros, so a cache tail holding NaN cannot reach P V (0 times
// NaN); keys past the tile's end are zeros in K and V and never read from memory.
// A key that some rows of the block see and others do not is real data for the
// ones that see it.
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
// e^y as 2^(y log2 e): the exponent unit's instruction, where expf takes several
// more. A weight above 2^-36 has y = x - m above -25, so rounding the product
// changes it by under 2^-19 of itself, far inside the rounding to T that follows.
constexpr float kLog2e = 1.44269504088896340736f;

// Shared memory: the block's Q rows, then one tile of K and one of V, each row
// padded by 16 bytes so that the eight rows a shared-memory matrix load reads
// fall in different banks.
template <int D>
struct Layout {
  static constexpr int kStride = D + 8;  // elements per staged row
  static constexpr std::size_t kQBytes = sizeof(std::uint16_t) * kRows * kStride;
  static constexpr std::size_t kTileBytes = sizeof(std::uint16_t) * kKeys * kStride;
  static constexpr std::size_t kBytes = kQBytes + 2 * kTileBytes;
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

// --- The instructions, by their PTX names ----------------------------------------

__device__ __forceinline__ unsigned shared_address(const void* p) {
  return static_cast<unsigned>(__cvta_generic_to_shared(p));
}

// Four 8 x 8 matrices of 16-bit values from shared memory; lane l gives the
// address of row l % 8 of matrix l / 8 and receives, of each matrix, the pair at
// row l / 4, columns 2 (l % 4) and 2 (l % 4) + 1 (kTransposed: the pair at column
// l / 4, rows 2 (l % 4) and 2 (l % 4) + 1).
template <bool kTransposed>
__device__ __forceinline__ void load_matrices(unsigned (&r)[4], const void* row) {
  if constexpr (kTransposed) {
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0, %1, %2, %3}, [%4];\n"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
                 : "r"(shared_address(row))
                 : "memory");
  } else {
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];\n"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
                 : "r"(shared_address(row))
                 : "memory");
  }
}

// d += a b for a 16 x 16 A (row-major operand registers), a 16 x 8 B and an f32
// 16 x 8 accumulator.
template <typename T>
__device__ __forceinline__ void mma(float (&d)[4], const unsigned (&a)[4], unsigned b0,
                                    unsigned b1) {
  if constexpr (std::is_same_v<T, __half>) {
    asm("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, "
        "{%8, %9}, {%0, %1, %2, %3};\n"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
  } else {
    asm("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, "
        "{%8, %9}, {%0, %1, %2, %3};\n"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
  }
}

// 16 bytes from global to shared memory without passing through registers; with
// bytes = 0 nothing is read and the destination is zero-filled.
__device__ __forceinline__ void copy_async(void* to, const void* from, int bytes) {
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(shared_address(to)),
               "l"(from), "r"(bytes)
               : "memory");
}
__device__ __forceinline__ void commit_copies() { asm volatile("cp.async.commit_group;\n" ::); }
// Waits until at most kPending of the committed groups are still in flight.
template <int kPending>
__device__ __forceinline__ void wait_copies() {
  asm volatile("cp.async.wait_group %0;\n" ::"n"(kPending) : "memory");
}

// lo and hi rounded to T, packed as one operand register (lo in the low half);
// adds the rounded values to sum.
template <typename T>
__device__ __forceinline__ unsigned pack_rounded(float lo, float hi, float& sum) {
  unsigned bits;
  if constexpr (std::is_same_v<T, __half>) {
    const __half2 h = __floats2half2_rn(lo, hi);
    sum += __low2float(h);
    sum += __high2float(h);
    memcpy(&bits, &h, sizeof bits);
  } else {
    const __nv_bfloat162 h = __floats2bfloat162_rn(lo, hi);
    sum += __low2float(h);
    sum += __high2float(h);
    memcpy(&bits, &h, sizeof bits);
  }
  return bits;
}

struct TcParams {
  AttentionShape s;
  float scale;
  bool causal;
  std::int64_t query_offset;
  bool vector_rows;  // K and V rows copy in 16-byte pieces (head_dim % 8 == 0, aligned)
};

// Whether row i (of the block's valid rows) may see key j: the causal limit and
// the mask (-inf: never).
template <typename Q>
__device__ __forceinline__ bool visible(const TcParams& p, const Q* mask, std::int64_t i,
                                        std::int64_t j) {
  if (p.causal && j > i + p.query_offset) return false;
  return mask == nullptr || to_f32(mask[i * p.s.skv + j]) != -INFINITY;
}

template <typename Q, typename T, int D>
__global__ void __launch_bounds__(kThreads)
    tc_kernel(const Q* q, const T* k, const T* v, const Q* mask, Q* out, TcParams p) {
  begin_overlapped();  // Note [Kernels overlap their predecessor]
  using L = Layout<D>;
  extern __shared__ __align__(128) unsigned char smem[];
  T* qs = reinterpret_cast<T*>(smem);
  T* ks = reinterpret_cast<T*>(smem + L::kQBytes);
  T* vs = reinterpret_cast<T*>(smem + L::kQBytes + L::kTileBytes);
  __shared__ unsigned char key_seen[kKeys];

  const AttentionShape& s = p.s;
  const int tid = static_cast<int>(threadIdx.x);
  const int lane = tid & 31, warp = tid >> 5;
  const int group = lane >> 2, pair = lane & 3;  // an accumulator's row and column pair
  const std::int64_t q0 = std::int64_t{gridDim.x - 1 - blockIdx.x} * kRows;
  const std::int64_t h = blockIdx.y, b = blockIdx.z;
  const std::int64_t kvh = h / (s.heads / s.kv_heads);
  const std::int64_t dh = s.head_dim;
  const std::int64_t rows = s.sq - q0 < kRows ? s.sq - q0 : kRows;  // valid rows

  // The keys any row of the block may see: [0, end).
  std::int64_t end = s.skv;
  if (p.causal) {
    const std::int64_t last = q0 + rows - 1 + p.query_offset + 1;
    if (last < end) end = last < 0 ? 0 : last;
  }

  // Stages the rows of keys [t, t + kKeys) of k or v (zeros past the end, and
  // for keys no row sees when `gated`); the copies are one group once committed.
  const auto stage = [&](T* to, const T* from, std::int64_t t, bool gated) {
    const int n = end - t < kKeys ? static_cast<int>(end - t) : kKeys;
    if (p.vector_rows) {
      constexpr int kPieces = D / 8;
      for (int at = tid; at < kKeys * kPieces; at += kThreads) {
        const int j = at / kPieces, piece = at % kPieces;
        const bool real = j < n && 8 * piece < dh && (!gated || key_seen[j] != 0);
        const T* src = from;
        if (real) src += ((b * s.skv + t + j) * s.kv_heads + kvh) * dh + 8 * piece;
        copy_async(to + j * L::kStride + 8 * piece, src, real ? 16 : 0);
      }
    } else {
      for (int at = tid; at < kKeys * D; at += kThreads) {
        const int j = at / D, d = at % D;
        T value = to_compute<T>(0.0f);
        if (j < n && d < dh && (!gated || key_seen[j] != 0)) {
          value = from[((b * s.skv + t + j) * s.kv_heads + kvh) * dh + d];
        }
        to[j * L::kStride + d] = value;
      }
    }
    commit_copies();
  };
  // key_seen[j]: whether some row of the block sees key t + j (the mask's case),
  // two threads per key, each half of the block's rows.
  const auto find_seen_keys = [&](std::int64_t t) {
    const int j = tid >> 1;
    bool seen = false;
    if (t + j < end) {
      for (std::int64_t r = tid & 1; r < rows && !seen; r += 2)
        seen = visible(p, mask, q0 + r, t + j);
    }
    const bool other = __shfl_xor_sync(0xffffffffu, seen, 1);
    if ((tid & 1) == 0) key_seen[j] = seen || other;
    __syncthreads();
  };
  static_assert(kThreads == 2 * kKeys, "find_seen_keys gives each key two threads");

  if (end > 0) {
    stage(ks, k, 0, false);
    if (mask != nullptr) find_seen_keys(0);
    stage(vs, v, 0, mask != nullptr);
  }
  // Q, rounded to T; padding rows and dimensions zero.
  for (int at = tid; at < kRows * D; at += kThreads) {
    const int r = at / D, d = at % D;
    T value = to_compute<T>(0.0f);
    if (r < rows && d < dh) value = to_compute<T>(q[((b * s.sq + q0 + r) * s.heads + h) * dh + d]);
    qs[r * L::kStride + d] = value;
  }
  __syncthreads();
  // The warp's 16 rows as A operands, one per 16 dimensions: matrices 0-3 of a
  // load are rows 0-7 and 8-15 of dimensions 0-7, then of dimensions 8-15.
  unsigned qa[D / 16][4];
#pragma unroll
  for (int c = 0; c < D / 16; ++c) {
    const int r = 16 * warp + (lane & 7) + 8 * ((lane >> 3) & 1);
    load_matrices<false>(qa[c], qs + r * L::kStride + 16 * c + 8 * (lane >> 4));
  }

  // This lane's two rows: group and group + 8 of the warp's 16.
  std::int64_t row_of[2];
  bool row_valid[2];
  float m[2], l[2];  // running maximum, and this lane's part of the running sum
#pragma unroll
  for (int e = 0; e < 2; ++e) {
    const int r = 16 * warp + group + 8 * e;
    row_of[e] = q0 + r;
    row_valid[e] = r < rows;
    m[e] = -INFINITY;
    l[e] = 0.0f;
  }
  float o[D / 8][4] = {};
  // The warp's last row's last visible key: tiles past it add nothing here.
  const std::int64_t warp_rows = rows - 16 * warp;
  const std::int64_t warp_end =
      p.causal ? q0 + 16 * warp + (warp_rows < 16 ? warp_rows : 16) + p.query_offset : s.skv;

  for (std::int64_t t0 = 0; t0 < end; t0 += kKeys) {
    const bool more = t0 + kKeys < end;
    const bool active = warp_rows > 0 && t0 < warp_end;
    const int n = end - t0 < kKeys ? static_cast<int>(end - t0) : kKeys;
    wait_copies<1>();  // K of this tile (its V may still be in flight)
    __syncthreads();

    // 3. S = Q K^T: matrices 0-3 of a load are keys 0-7 of dimensions 0-7 and
    // 8-15 (one B operand), then keys 8-15 (the next).
    float sc[kKeys / 8][4] = {};
    if (active) {
#pragma unroll
      for (int nt = 0; nt < kKeys / 8; nt += 2) {
#pragma unroll
        for (int c = 0; c < D / 16; ++c) {
          unsigned kb[4];
          const int j = 8 * nt + (lane & 7) + 8 * (lane >> 4);
          load_matrices<false>(kb, ks + j * L::kStride + 16 * c + 8 * ((lane >> 3) & 1));
          mma<T>(sc[nt], qa[c], kb[0], kb[1]);
          mma<T>(sc[nt + 1], qa[c], kb[2], kb[3]);
        }
      }
    }
    __syncthreads();  // K is no longer read: the next tile's keys may land
    if (more) stage(ks, k, t0 + kKeys, false);

    // 4. The online softmax. Accumulator e of tile nt is row group + 8 (e / 2),
    // key 8 nt + 2 pair + e % 2. A tile that every row of the warp sees whole
    // (no mask, no causal limit inside it: most tiles of a long prompt) skips
    // the per-key tests.
    unsigned pa[kKeys / 16][4];
    if (active) {
      float top[2] = {-INFINITY, -INFINITY};
      const bool whole = mask == nullptr && n == kKeys && warp_rows >= 16 &&
                         (!p.causal || t0 + kKeys - 1 <= q0 + 16 * warp + p.query_offset);
      if (whole) {
#pragma unroll
        for (int nt = 0; nt < kKeys / 8; ++nt) {
#pragma unroll
          for (int e = 0; e < 4; ++e) {
            sc[nt][e] = __fmul_rn(sc[nt][e], p.scale);
            top[e >> 1] = nan_max(top[e >> 1], sc[nt][e]);
          }
        }
      } else {
        int limit[2];  // keys [0, limit) of the tile are visible to the row but for the mask
#pragma unroll
        for (int r = 0; r < 2; ++r) {
          std::int64_t last = row_valid[r] ? n : 0;
          if (p.causal && row_of[r] + p.query_offset - t0 + 1 < last) {
            last = row_of[r] + p.query_offset - t0 + 1;
          }
          limit[r] = last < 0 ? 0 : static_cast<int>(last);
        }
#pragma unroll
        for (int nt = 0; nt < kKeys / 8; ++nt) {
#pragma unroll
          for (int e = 0; e < 4; ++e) {
            const int r = e >> 1;
            const int j = 8 * nt + 2 * pair + (e & 1);
            float x = -INFINITY;
            if (j < limit[r]) {
              const float bias = mask != nullptr ? to_f32(mask[row_of[r] * s.skv + t0 + j]) : 0.0f;
              if (bias != -INFINITY) x = __fadd_rn(__fmul_rn(sc[nt][e], p.scale), bias);
            }
            sc[nt][e] = x;
            top[r] = nan_max(top[r], x);
          }
        }
      }
      float correction[2], tile_sum[2] = {0.0f, 0.0f};
#pragma unroll
      for (int r = 0; r < 2; ++r) {
        top[r] = nan_max(top[r], __shfl_xor_sync(0xffffffffu, top[r], 1));
        top[r] = nan_max(top[r], __shfl_xor_sync(0xffffffffu, top[r], 2));
        const float m_new = nan_max(m[r], top[r]);
        correction[r] = m[r] == -INFINITY ? 0.0f : exp2f(__fmul_rn(m[r] - m_new, kLog2e));
        m[r] = m_new;
      }
      const auto weight = [&](float x, int r) { return x == -INFINITY ? 0.0f : expf(x - m[r]); };
      // P's A operand for keys 16 c .. 16 c + 15 is S's tiles 2 c and 2 c + 1.
#pragma unroll
      for (int c = 0; c < kKeys / 16; ++c) {
#pragma unroll
        for (int e = 0; e < 4; ++e) {
          const float* acc = sc[2 * c + (e >> 1)];
          const int r = e & 1;
          pa[c][e] = pack_rounded<T>(weight(acc[2 * r], r), weight(acc[2 * r + 1], r), tile_sum[r]);
        }
      }
#pragma unroll
      for (int r = 0; r < 2; ++r) l[r] = __fmaf_rn(l[r], correction[r], tile_sum[r]);
#pragma unroll
      for (int dt = 0; dt < D / 8; ++dt) {
#pragma unroll
        for (int e = 0; e < 4; ++e) o[dt][e] *= correction[e >> 1];
      }
    }

    if (more) {
      wait_copies<1>();  // V of this tile (the next tile's K may still be in flight)
    } else {
      wait_copies<0>();
    }
    __syncthreads();
    // 5. O += P V: matrices 0-3 of a transposing load are keys 0-7 and 8-15 of
    // dimensions 0-7 (one B operand), then of dimensions 8-15 (the next).
    if (active) {
#pragma unroll
      for (int c = 0; c < kKeys / 16; ++c) {
#pragma unroll
        for (int dt = 0; dt < D / 8; dt += 2) {
          unsigned vb[4];
          const int j = 16 * c + (lane & 7) + 8 * ((lane >> 3) & 1);
          load_matrices<true>(vb, vs + j * L::kStride + 8 * dt + 8 * (lane >> 4));
          mma<T>(o[dt], pa[c], vb[0], vb[1]);
          mma<T>(o[dt + 1], pa[c], vb[2], vb[3]);
        }
      }
    }
    __syncthreads();  // V and key_seen are no longer read
    if (more) {
      if (mask != nullptr) find_seen_keys(t0 + kKeys);
      stage(vs, v, t0 + kKeys, mask != nullptr);
    }
  }

  // The output: O / l per row, l summed over the four lanes of the row in the
  // same order by each; a row that saw no key gives zeros, as softmax does.
#pragma unroll
  for (int r = 0; r < 2; ++r) {
    l[r] += __shfl_xor_sync(0xffffffffu, l[r], 1);
    l[r] += __shfl_xor_sync(0xffffffffu, l[r], 2);
  }
#pragma unroll
  for (int r = 0; r < 2; ++r) {
    if (!row_valid[r]) continue;
    Q* orow = out + ((b * s.sq + row_of[r]) * s.heads + h) * dh;
#pragma unroll
    for (int dt = 0; dt < D / 8; ++dt) {
#pragma unroll
      for (int e = 0; e < 2; ++e) {
        const int d = 8 * dt + 2 * pair + e;
        if (d >= dh) continue;
        orow[d] = from_f32<Q>(m[r] == -INFINITY ? 0.0f : __fdiv_rn(o[dt][2 * r + e], l[r]));
      }
    }
  }
}

template <typename Q, typename T, int D>
cudaError_t launch_tc(const void* q, const void* k, const void* v, const void* mask, void* out,
                      const TcParams& p, cudaStream_t stream) {
  constexpr std::size_t kBytes = Layout<D>::kBytes;
  const auto kernel = &tc_kernel<Q, T, D>;
  // Above 48 KiB a kernel must ask for its shared memory; the answer does not
  // change, so asking on every launch costs one driver call.
  if (cudaError_t e = cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                           static_cast<int>(kBytes));
      e != cudaSuccess) {
    return e;
  }
  const dim3 grid(static_cast<unsigned>((p.s.sq + kRows - 1) / kRows),
                  static_cast<unsigned>(p.s.heads), static_cast<unsigned>(p.s.batch));
  return launch_overlapping(kernel, grid, dim3(kThreads), kBytes, stream, static_cast<const Q*>(q),
                            static_cast<const T*>(k), static_cast<const T*>(v),
                            static_cast<const Q*>(mask), static_cast<Q*>(out), p);
}

template <typename Q, typename T>
cudaError_t launch_for_dim(const void* q, const void* k, const void* v, const void* mask, void* out,
                           const TcParams& p, cudaStream_t stream) {
  if (p.s.head_dim <= 64) return launch_tc<Q, T, 64>(q, k, v, mask, out, p, stream);
  return launch_tc<Q, T, 128>(q, k, v, mask, out, p, stream);
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
  const auto aligned = [](const void* ptr) {
    return reinterpret_cast<std::uintptr_t>(ptr) % 16 == 0;
  };
  const TcParams p{s, scale, causal, query_offset, s.head_dim % 8 == 0 && aligned(k) && aligned(v)};
  if (q_type == Type::kF32 && kv_type == Type::kF16) {
    return launch_for_dim<float, __half>(q, k, v, mask, out, p, stream);
  }
  if (q_type == Type::kF32 && kv_type == Type::kBF16) {
    return launch_for_dim<float, __nv_bfloat16>(q, k, v, mask, out, p, stream);
  }
  if (q_type == Type::kF16 && kv_type == Type::kF16) {
    return launch_for_dim<__half, __half>(q, k, v, mask, out, p, stream);
  }
  if (q_type == Type::kBF16 && kv_type == Type::kBF16) {
    return launch_for_dim<__nv_bfloat16, __nv_bfloat16>(q, k, v, mask, out, p, stream);
  }
  return cudaErrorInvalidValue;
}

}  // namespace switchyard::cuda::device
