// Kernels over GGUF block-quantized weights: dequantization (get_rows, casts and
// the prefill product's bf16 tiles) and the matrix-vector product of decoding.
//
// Note [Quantized matrix-vector products]
// Decoding multiplies one (or a few) activation rows by every weight: a stream of
// weight bytes with almost no arithmetic per byte. Two things decide its speed:
// reading the weights in wide, contiguous loads (Note [Reading blocks on the
// device] in quant_formats.cuh), and keeping the arithmetic per weight small
// enough that the SMs keep up with HBM. Dequantizing each weight to f32 and
// multiplying it by an f32 activation costs a conversion, a multiply-add and 4
// bytes of activation read per weight, which at 4.8 TB/s of 4.5-bit weights is
// more than the L1 cache delivers. So the activations are quantized once per call
// to 8 bits, with one f32 scale per 32 values (quantize_activations), and each
// chunk of 32 weights is four dp4a per group of 16 against them:
//
//   sum_j w_j x_j ~= dx * sum_g (scale_g * sum_j level_j q_j + offset_g * sum_j q_j)
//
// with the offsets' sums (q4_1, q5_1, q2_k, q4_k, q5_k) from a dp4a against ones.
// Each warp takes one weight row, its lanes adjacent chunks, four chunks in
// flight per lane; the lanes' f32 sums are added across the warp in a fixed
// order, so results are the same on every run. The error is that of the 8-bit
// activations (each within amax / 254 of its block's largest magnitude), which
// is the CPU integer siblings' claim (quant_integer_dot in registration.cpp),
// on finer blocks than the CPU's q8_k.
#include <cuda_pipeline.h>

#include <cfloat>

#include "backends/cuda/device_common.cuh"
#include "backends/cuda/quant/quant_formats.cuh"

namespace switchyard::cuda::device {
namespace {

using quant::Chunk;
using quant::Format;

constexpr int kChunkElems = 32;

// --- activations to 8 bits --------------------------------------------------------

// One warp per group of 32 values (n is a multiple of 32, and so is every warp's
// stride): q = round(x * 127 / amax), and the group's scale amax / 127. A group
// with a NaN or an infinity gets a NaN scale, so every product it enters is NaN.
__global__ void quantize_activations(const float* x, std::int64_t n, std::int8_t* q,
                                     float* scales) {
  begin_overlapped();  // Note [Kernels overlap their predecessor]
  for (std::int64_t e = blockIdx.x * std::int64_t{blockDim.x} + threadIdx.x; e < n;
       e += std::int64_t{gridDim.x} * blockDim.x) {
    const float v = x[e];
    const float amax = warp_max(fabsf(v));
    float scale;
    int level = 0;
    if (!(amax <= FLT_MAX)) {
      scale = __int_as_float(0x7fc00000);
    } else {
      scale = amax / 127.0f;
      if (amax > 0.0f) level = __float2int_rn(v * (127.0f / amax));
    }
    q[e] = static_cast<std::int8_t>(level);
    if ((threadIdx.x & 31) == 0) scales[e / kChunkElems] = scale;
  }
}

// --- the matrix-vector product -----------------------------------------------------

constexpr int kMatvecWarps = 4;
constexpr int kChunksInFlight = 4;
constexpr int kMaxRows = 8;

__device__ __forceinline__ int dot16(const int* levels, const int4& x) {
  int s = __dp4a(levels[0], x.x, 0);
  s = __dp4a(levels[1], x.y, s);
  s = __dp4a(levels[2], x.z, s);
  return __dp4a(levels[3], x.w, s);
}
__device__ __forceinline__ int sum16(const int4& x) {
  constexpr int kOnes = 0x01010101;
  int s = __dp4a(kOnes, x.x, 0);
  s = __dp4a(kOnes, x.y, s);
  s = __dp4a(kOnes, x.z, s);
  return __dp4a(kOnes, x.w, s);
}

// Note [Staging weights in shared memory]
// A lane reads its chunk's bytes in several small loads, and with 18- to
// 210-byte blocks the 32 lanes of one load are spread over the warp's whole
// stretch of row: each warp-wide load then touches several cache lines for 128
// useful bytes, and the L1 cache, not HBM, sets the pace (Note [Reading blocks
// on the device] in quant_formats.cuh). So each warp first copies the bytes of
// its next kStepChunks chunks to its own shared memory in 16-byte asynchronous
// copies (cp.async, all in flight at once) at adjacent addresses (from the
// 16-byte boundary at or before them: the extra
// bytes share a segment, and so a page, with bytes of the row), then its lanes
// unpack their chunks there, where a load costs one pass of the banks. q4_k and
// q5_k, whose lanes already read whole 16-byte pieces, read global memory directly.
constexpr int kStepChunks = 32 * kChunksInFlight;

template <QuantFormat F>
constexpr bool kStaged = Format<F>::kAlign < 16;

// Bytes of shared memory per warp: a step's blocks, the bytes before them in
// their first 16-byte segment and the rest of the last one.
template <QuantFormat F>
constexpr int stage_bytes() {
  return kStepChunks / (Format<F>::kBlockElems / kChunkElems) * Format<F>::kBlockBytes + 32;
}

// The dot products of chunks c0 + 32 u (u < kChunksInFlight, below `chunks`)
// with m activation rows, added to acc; `blocks` holds block b0 = c0 / per-block
// chunks onwards (shared memory or the row itself).
template <QuantFormat F, int M>
__device__ __forceinline__ void dot_chunks(const std::uint8_t* blocks, std::int64_t c0,
                                           std::int64_t first_chunk, std::int64_t chunks,
                                           const std::int8_t* xq, const float* xs, int m,
                                           std::int64_t k, float (&acc)[M]) {
  using Fmt = Format<F>;
  constexpr int kChunksPerBlock = Fmt::kBlockElems / kChunkElems;
  Chunk ch[kChunksInFlight];
#pragma unroll
  for (int u = 0; u < kChunksInFlight; ++u) {
    const std::int64_t c = c0 + 32 * u;
    if (c < chunks) {
      const std::int64_t local = c - first_chunk;
      Fmt::unpack(blocks + (local / kChunksPerBlock) * Fmt::kBlockBytes,
                  static_cast<int>(local % kChunksPerBlock), ch[u]);
    }
  }
#pragma unroll
  for (int u = 0; u < kChunksInFlight; ++u) {
    const std::int64_t c = c0 + 32 * u;
    if (c >= chunks) break;
#pragma unroll
    for (int r = 0; r < M; ++r) {
      if (r >= m) break;
      const int4* x = reinterpret_cast<const int4*>(xq + r * k + c * kChunkElems);
      const int4 x0 = __ldg(x), x1 = __ldg(x + 1);
      float v = ch[u].scale[0] * static_cast<float>(dot16(ch[u].q, x0)) +
                ch[u].scale[1] * static_cast<float>(dot16(ch[u].q + 4, x1));
      if constexpr (Fmt::kOffsets) {
        v += ch[u].offset[0] * static_cast<float>(sum16(x0)) +
             ch[u].offset[1] * static_cast<float>(sum16(x1));
      }
      acc[r] = fmaf(__ldg(xs + r * (k / kChunkElems) + c), v, acc[r]);
    }
  }
}

// Rows [0, m) of out (m <= M) for weight row blockIdx.x * kMatvecWarps + warp.
template <QuantFormat F, int M>
__global__ void __launch_bounds__(kMatvecWarps * 32)
    matvec_kernel(const std::uint8_t* w, std::int64_t row_bytes, const std::int8_t* xq,
                  const float* xs, float* out, int m, std::int64_t n, std::int64_t k) {
  using Fmt = Format<F>;
  constexpr int kChunksPerBlock = Fmt::kBlockElems / kChunkElems;
  const int lane = threadIdx.x & 31;
  const int warp = static_cast<int>(threadIdx.x >> 5);
  const std::int64_t col = std::int64_t{blockIdx.x} * kMatvecWarps + warp;
  let_successor_start();
  if (col >= n) return;
  const std::uint8_t* row = w + col * row_bytes;
  // The row's first 4 KiB into L2, a 128-byte line per lane, while the kernel
  // before finishes (Note [Kernels overlap their predecessor]).
  if (std::int64_t{lane} * 128 < row_bytes) prefetch_l2(row + lane * 128);
  wait_for_predecessor();
  const std::int64_t chunks = k / kChunkElems;
  float acc[M] = {};
  for (std::int64_t step = 0; step < chunks; step += kStepChunks) {
    if constexpr (kStaged<F>) {
      __shared__ __align__(16) std::uint8_t stage[kMatvecWarps][stage_bytes<F>()];
      const std::int64_t step_chunks = chunks - step < kStepChunks ? chunks - step : kStepChunks;
      const std::uint8_t* first = row + step / kChunksPerBlock * Fmt::kBlockBytes;
      const auto start = reinterpret_cast<std::uintptr_t>(first);
      const auto* aligned = reinterpret_cast<const uint4*>(start & ~std::uintptr_t{15});
      const int head = static_cast<int>(start & 15u);
      const int bytes = static_cast<int>(step_chunks / kChunksPerBlock) * Fmt::kBlockBytes;
      const int segments = (head + bytes + 15) / 16;
      uint4* dst = reinterpret_cast<uint4*>(stage[warp]);
      // Asynchronous copies: every segment's load is in flight at once, none
      // waits in a register for its store.
      for (int i = lane; i < segments; i += 32) {
        __pipeline_memcpy_async(dst + i, aligned + i, sizeof(uint4));
      }
      __pipeline_commit();
      __pipeline_wait_prior(0);
      __syncwarp();
      dot_chunks<F, M>(stage[warp] + head, step + lane, step, chunks, xq, xs, m, k, acc);
      __syncwarp();  // every lane is done with the stage before the next step fills it
    } else {
      dot_chunks<F, M>(row + step / kChunksPerBlock * Fmt::kBlockBytes, step + lane, step, chunks,
                       xq, xs, m, k, acc);
    }
  }
#pragma unroll
  for (int r = 0; r < M; ++r) {
    if (r >= m) break;
    const float total = warp_sum(acc[r]);
    if (lane == 0) out[r * n + col] = total;
  }
}

template <QuantFormat F>
void launch_matvec(const std::uint8_t* w, const std::int8_t* xq, const float* xs, float* out,
                   std::int64_t m, std::int64_t n, std::int64_t k, cudaStream_t stream) {
  const std::int64_t row_bytes = k / Format<F>::kBlockElems * Format<F>::kBlockBytes;
  const dim3 grid(static_cast<unsigned>((n + kMatvecWarps - 1) / kMatvecWarps));
  const dim3 block(kMatvecWarps * 32);
  const int rows = static_cast<int>(m);
  // A failed launch is left for the caller's cudaGetLastError.
  const auto run = [&](auto kernel) {
    (void)launch_overlapping(kernel, grid, block, 0, stream, w, row_bytes, xq, xs, out, rows, n, k);
  };
  if (m == 1) {
    run(&matvec_kernel<F, 1>);
  } else if (m == 2) {
    run(&matvec_kernel<F, 2>);
  } else if (m <= 4) {
    run(&matvec_kernel<F, 4>);
  } else {
    run(&matvec_kernel<F, kMaxRows>);
  }
}

// --- dequantization ------------------------------------------------------------------

// 32 values to dst as O, in 16-byte stores when `vector` (dst 16-byte aligned).
template <typename O>
__device__ __forceinline__ void store_chunk(const float (&v)[kChunkElems], O* dst, bool vector) {
  if (vector) {
    constexpr int kPerStore = 16 / static_cast<int>(sizeof(O));
#pragma unroll
    for (int s = 0; s < kChunkElems / kPerStore; ++s) {
      uint4 packed;
      O* e = reinterpret_cast<O*>(&packed);
#pragma unroll
      for (int i = 0; i < kPerStore; ++i) e[i] = from_f32<O>(v[s * kPerStore + i]);
      reinterpret_cast<uint4*>(dst)[s] = packed;
    }
  } else {
#pragma unroll
    for (int i = 0; i < kChunkElems; ++i) dst[i] = from_f32<O>(v[i]);
  }
}

// One thread per chunk of 32 values of the output.
template <QuantFormat F, typename O>
__global__ void dequantize_kernel(const std::uint8_t* table, std::int64_t table_rows,
                                  std::int64_t row_bytes, std::int64_t chunks_per_row,
                                  const std::int32_t* idx, std::int64_t total, O* out, bool vector,
                                  int* error) {
  begin_overlapped();  // Note [Kernels overlap their predecessor]
  using Fmt = Format<F>;
  constexpr int kChunksPerBlock = Fmt::kBlockElems / kChunkElems;
  for (std::int64_t t = blockIdx.x * std::int64_t{blockDim.x} + threadIdx.x; t < total;
       t += std::int64_t{gridDim.x} * blockDim.x) {
    const std::int64_t r = t / chunks_per_row, c = t - r * chunks_per_row;
    const std::int64_t source = idx == nullptr ? r : idx[r];
    if (source < 0 || source >= table_rows) {
      *error = kIndexOutOfRange;
      continue;
    }
    Chunk ch;
    Fmt::unpack(table + source * row_bytes + (c / kChunksPerBlock) * Fmt::kBlockBytes,
                static_cast<int>(c % kChunksPerBlock), ch);
    float v[kChunkElems];
#pragma unroll
    for (int i = 0; i < 8; ++i) {
      const int g = i / 4;
#pragma unroll
      for (int b = 0; b < 4; ++b) {
        const auto level =
            static_cast<float>(static_cast<signed char>((ch.q[i] >> (8 * b)) & 0xff));
        // Exact products (Note [Levels fit a signed byte]); one rounding where
        // the offset is added, none without one.
        v[4 * i + b] = Fmt::kOffsets ? __fmaf_rn(ch.scale[g], level, ch.offset[g])
                                     : __fmul_rn(ch.scale[g], level);
      }
    }
    store_chunk(v, out + t * kChunkElems, vector);
  }
}

template <QuantFormat F>
cudaError_t launch_dequantize(const void* table, std::int64_t table_rows, std::int64_t k,
                              const std::int32_t* idx, std::int64_t rows, Type out_type, void* out,
                              int* error, cudaStream_t stream) {
  const std::int64_t row_bytes = k / Format<F>::kBlockElems * Format<F>::kBlockBytes;
  const std::int64_t chunks_per_row = k / kChunkElems;
  const std::int64_t total = rows * chunks_per_row;
  if (total == 0) return cudaSuccess;
  const auto* t = static_cast<const std::uint8_t*>(table);
  const bool vector = reinterpret_cast<std::uintptr_t>(out) % 16 == 0;
  return with_float_type(out_type, [&](auto tag) {
    using O = decltype(tag);
    (void)launch_overlapping(&dequantize_kernel<F, O>, dim3(blocks_for(total)), dim3(kThreads), 0,
                             stream, t, table_rows, row_bytes, chunks_per_row, idx, total,
                             static_cast<O*>(out), vector, error);
  });
}

// op.template run<F>() for the runtime format (C++17: no templated lambdas).
template <typename Op>
cudaError_t with_format(QuantFormat format, const Op& op) {
  switch (format) {
    case QuantFormat::kQ4_0: return op.template run<QuantFormat::kQ4_0>();
    case QuantFormat::kQ4_1: return op.template run<QuantFormat::kQ4_1>();
    case QuantFormat::kQ5_0: return op.template run<QuantFormat::kQ5_0>();
    case QuantFormat::kQ5_1: return op.template run<QuantFormat::kQ5_1>();
    case QuantFormat::kQ8_0: return op.template run<QuantFormat::kQ8_0>();
    case QuantFormat::kQ2_K: return op.template run<QuantFormat::kQ2_K>();
    case QuantFormat::kQ3_K: return op.template run<QuantFormat::kQ3_K>();
    case QuantFormat::kQ4_K: return op.template run<QuantFormat::kQ4_K>();
    case QuantFormat::kQ5_K: return op.template run<QuantFormat::kQ5_K>();
    case QuantFormat::kQ6_K: return op.template run<QuantFormat::kQ6_K>();
    case QuantFormat::kIQ4_NL: return op.template run<QuantFormat::kIQ4_NL>();
    case QuantFormat::kIQ4_XS: return op.template run<QuantFormat::kIQ4_XS>();
    case QuantFormat::kMXFP4: return op.template run<QuantFormat::kMXFP4>();
  }
  return cudaErrorInvalidValue;
}

struct Alignment {
  int* align;
  template <QuantFormat F>
  cudaError_t run() const {
    *align = Format<F>::kAlign;
    return cudaSuccess;
  }
};

struct Dequantize {
  const void* table;
  std::int64_t table_rows, k;
  const std::int32_t* idx;
  std::int64_t rows;
  Type out_type;
  void* out;
  int* error;
  cudaStream_t stream;
  template <QuantFormat F>
  cudaError_t run() const {
    return launch_dequantize<F>(table, table_rows, k, idx, rows, out_type, out, error, stream);
  }
};

// Rows of 8-bit activations against the weights, kMaxRows at a time.
struct Matvec {
  const void* w;
  const std::int8_t* xq;
  const float* xs;
  float* out;
  std::int64_t m, n, k;
  cudaStream_t stream;
  template <QuantFormat F>
  cudaError_t run() const {
    const std::int64_t chunks = k / kChunkElems;
    for (std::int64_t r0 = 0; r0 < m; r0 += kMaxRows) {
      const std::int64_t rows = m - r0 < kMaxRows ? m - r0 : kMaxRows;
      launch_matvec<F>(static_cast<const std::uint8_t*>(w), xq + r0 * k, xs + r0 * chunks,
                       out + r0 * n, rows, n, k, stream);
      if (cudaError_t e = cudaGetLastError(); e != cudaSuccess) return e;
    }
    return cudaSuccess;
  }
};

// Activation scratch: the 8-bit values, then the scales at a 256-byte boundary.
std::size_t activation_bytes(std::int64_t m, std::int64_t k) {
  return (static_cast<std::size_t>(m * k) + 255) / 256 * 256;
}

}  // namespace

int quant_alignment(QuantFormat format) {
  int align = 0;
  (void)with_format(format, Alignment{&align});
  return align;
}

cudaError_t dequantize_rows(QuantFormat format, const void* table, std::int64_t table_rows,
                            std::int64_t k, const std::int32_t* idx, std::int64_t rows,
                            Type out_type, void* out, int* error, cudaStream_t stream) {
  return with_format(format,
                     Dequantize{table, table_rows, k, idx, rows, out_type, out, error, stream});
}

std::size_t quant_matvec_scratch_bytes(std::int64_t m, std::int64_t k) {
  return activation_bytes(m, k) + static_cast<std::size_t>(m * (k / kChunkElems)) * sizeof(float);
}

cudaError_t quant_matvec(QuantFormat format, const float* a, const void* w, float* out,
                         std::int64_t m, std::int64_t n, std::int64_t k, void* scratch,
                         cudaStream_t stream) {
  if (m == 0 || n == 0) return cudaSuccess;
  if ((n + kMatvecWarps - 1) / kMatvecWarps > 0x7fffffff) return cudaErrorInvalidConfiguration;
  auto* xq = static_cast<std::int8_t*>(scratch);
  auto* xs = reinterpret_cast<float*>(static_cast<std::byte*>(scratch) + activation_bytes(m, k));
  const std::int64_t values = m * k;
  if (cudaError_t e = launch_overlapping(&quantize_activations, dim3(blocks_for(values)),
                                         dim3(kThreads), 0, stream, a, values, xq, xs);
      e != cudaSuccess) {
    return e;
  }
  return with_format(format, Matvec{w, xq, xs, out, m, n, k, stream});
}

}  // namespace switchyard::cuda::device
