// The CUDA backend's device entry points: plain launch functions over raw
// pointers, one per kernel family, defined in the .cu files of this folder.
//
// Note [Thin .cu files]
// Only the kernels and their launch arithmetic are compiled by nvcc. Everything
// that checks a KernelCall (dtypes, shapes, layouts, the stream) and turns an
// error into a Status naming the kernel lives in kernels.cpp and
// gemm/*.cpp, compiled by the host compiler. So nvcc never parses {fmt}
// or the Switchyard headers, which keeps its share of a CI build on two cores
// small, and the .cu files hold device code only. This header is the whole
// interface between the two sides: standard types and cudaStream_t.
//
// Every function returns the error of its launch (cudaGetLastError() after it);
// errors the kernels raise later surface when the stream is synchronized
// (CudaMemory::synchronize). Pointers are device pointers to the first element.
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>

namespace switchyard::cuda::device {

// The element types the kernels store. Arithmetic is in f32 (doubles where a
// kernel says so); results are rounded to nearest even once.
enum class Type : int { kF32, kF16, kBF16, kI32 };

// An operand's layout in elements: up to six dimensions (switchyard::kMaxRank),
// outermost first, any strides (0 for a broadcast dimension).
inline constexpr int kMaxRank = 6;
struct Layout {
  int rank = 0;
  std::int64_t dims[kMaxRank] = {};
  std::int64_t strides[kMaxRank] = {};
  // Whether the strides are the contiguous ones, so that element i is at i.
  bool contiguous = true;
};

// Codes a kernel writes into its stream's error word (CudaStream::error_host).
enum ErrorCode : int { kNoError = 0, kIndexOutOfRange = 1 };

// --- elementwise.cu ------------------------------------------------------------
enum class BinaryOp : int { kAdd, kSub, kMul, kDiv };
enum class UnaryOp : int {
  kNeg,
  kExp,
  kSilu,
  kGelu,
  kGeluErf,
  kGeluQuick,
  kRelu,
  kSqrt,
  kRsqrt,
  kSigmoid,
  kTanh,
  kScale
};
// out (contiguous, n elements) = a op b, both laid out over out's shape.
cudaError_t binary(BinaryOp op, Type type, const void* a, const Layout& la, const void* b,
                   const Layout& lb, void* out, std::int64_t n, cudaStream_t stream);
// out = op(x); `scale` is the multiplier of kScale.
cudaError_t unary(UnaryOp op, Type type, const void* x, const Layout& lx, void* out, std::int64_t n,
                  float scale, cudaStream_t stream);
// out = x converted: floats round to nearest even, float to i32 rounds to nearest
// even and saturates, NaN to i32 is 0.
cudaError_t cast(Type from, const void* x, const Layout& lx, Type to, void* out, std::int64_t n,
                 cudaStream_t stream);
// Moves n elements of `bytes` each from src's layout to dst's (copy, transpose and
// each input of concat are this with different layouts).
cudaError_t copy(int bytes, const void* src, const Layout& ls, void* dst, const Layout& ld,
                 std::int64_t n, cudaStream_t stream);

// --- rowwise.cu: one block per row of a contiguous [rows, d] --------------------
// rms_norm (`b` ignored) and layer_norm; `w` and `b` may be null.
cudaError_t rms_norm(Type type, const void* x, const void* w, void* out, std::int64_t rows,
                     std::int64_t d, float eps, cudaStream_t stream);
cudaError_t layer_norm(Type type, const void* x, const void* w, const void* b, void* out,
                       std::int64_t rows, std::int64_t d, float eps, cudaStream_t stream);
// x [batch, r, c] (rows of one batch share `mask` [r, c], which may be null).
cudaError_t softmax(Type type, const void* x, const void* mask, void* out, std::int64_t batch,
                    std::int64_t r, std::int64_t c, float scale, bool causal,
                    std::int64_t query_offset, cudaStream_t stream);
enum class ReduceOp : int { kSum, kMean, kMax };
cudaError_t reduce(ReduceOp op, Type type, const void* x, void* out, std::int64_t rows,
                   std::int64_t d, cudaStream_t stream);

// --- tensor.cu ------------------------------------------------------------------
// x [batch, t, h, d], pos [t], factors [rope_dims / 2] or null; mode 0 normal
// (adjacent pairs), 1 neox (halves).
cudaError_t rope(Type type, const void* x, const std::int32_t* pos, const float* factors, void* out,
                 std::int64_t batch, std::int64_t t, std::int64_t h, std::int64_t d, int mode,
                 float base, std::int64_t rope_dims, cudaStream_t stream);
// out [n, cols] = table [rows, cols] at idx; an index outside [0, rows) writes
// kIndexOutOfRange into *error and leaves its row unwritten.
cudaError_t get_rows(Type table_type, const void* table, std::int64_t rows, std::int64_t cols,
                     const std::int32_t* idx, std::int64_t n, Type out_type, void* out, int* error,
                     cudaStream_t stream);
// out [rows, cols] row idx[i] = src [n, cols] row i, converted; an index outside
// [0, rows) writes kIndexOutOfRange into *error and leaves its row unwritten.
cudaError_t set_rows(Type src_type, const void* src, std::int64_t n, std::int64_t cols,
                     const std::int32_t* idx, Type out_type, void* out, std::int64_t rows,
                     int* error, cudaStream_t stream);
// The same into q8_0 rows (a q8_0 KV cache; cols a multiple of 32): each block of
// 32 values quantized as the CPU quantizes it (Note [A q8_0 cache on the device]).
cudaError_t set_rows_q8_0(Type src_type, const void* src, std::int64_t n, std::int64_t cols,
                          const std::int32_t* idx, void* out, std::int64_t rows, int* error,
                          cudaStream_t stream);

// --- attention.cu ---------------------------------------------------------------
struct AttentionShape {
  std::int64_t batch = 1, sq = 0, skv = 0, heads = 0, kv_heads = 0, head_dim = 0;
};
// The largest head dimension the kernel takes.
inline constexpr std::int64_t kMaxHeadDim = 256;
// Note [Splitting the keys across blocks]
// One block per (batch, query, head) leaves most of the GPU idle when rows are few
// (decoding one token: batch x heads blocks). The keys are then split over
// several blocks, each writing an unnormalised partial result, and a second
// kernel merges them, as flash-decoding does: enough splits for about
// kAttentionBlocks blocks, none shorter than kMinKeysPerSplit keys.
inline constexpr std::int64_t kAttentionBlocks = 1024;
inline constexpr std::int64_t kMinKeysPerSplit = 256;
// How many splits attention() wants for `shape` and the K/V storage type; 1
// needs no partial buffer.
std::int64_t attention_splits(const AttentionShape& shape, Type kv_type);
// q [batch, sq, heads, head_dim], k and v [batch, skv, kv_heads, head_dim], mask
// [sq, skv] or null, out like q. With splits > 1, `partial` holds
// batch * sq * heads * splits * (head_dim + 2) floats of device memory.
cudaError_t attention(Type q_type, Type kv_type, const void* q, const void* k, const void* v,
                      const void* mask, void* out, const AttentionShape& shape, float scale,
                      bool causal, std::int64_t query_offset, std::int64_t splits, float* partial,
                      cudaStream_t stream);
// attention_splits and attention for f32 q, mask and out over q8_0 k and v (a
// q8_0 KV cache, head_dim a multiple of 32), each value read as its exact f32
// value (Note [A q8_0 cache on the device] in tensor/tensor.cu).
std::int64_t attention_splits_q8_0(const AttentionShape& shape);
cudaError_t attention_q8_0(const float* q, const void* k, const void* v, const float* mask,
                           float* out, const AttentionShape& shape, float scale, bool causal,
                           std::int64_t query_offset, std::int64_t splits, float* partial,
                           cudaStream_t stream);

// --- attention_tc.cu ------------------------------------------------------------
// The largest head dimension the tensor-core kernel takes.
inline constexpr std::int64_t kMaxTensorCoreHeadDim = 128;
// attention() on the tensor cores (Note [Prompt attention on the tensor cores]):
// the same operands, for (q, k/v) of (f32, f16), (f32, bf16), (f16, f16) and
// (bf16, bf16), head_dim at most kMaxTensorCoreHeadDim, no key splits.
cudaError_t attention_tensor_cores(Type q_type, Type kv_type, const void* q, const void* k,
                                   const void* v, const void* mask, void* out,
                                   const AttentionShape& shape, float scale, bool causal,
                                   std::int64_t query_offset, cudaStream_t stream);

// --- matmul_simt.cu -------------------------------------------------------------
// out [batch, m, n] = a [batch, m, k] . w [n, k]^T (w_batch_stride 0) or per batch.
cudaError_t matmul_simt(Type a_type, Type w_type, Type out_type, const void* a, const void* w,
                        void* out, std::int64_t batch, std::int64_t m, std::int64_t n,
                        std::int64_t k, std::int64_t w_batch_stride, cudaStream_t stream);
// out [m, n] = silu(a . gate^T) * (a . up^T) for f32 a [m, k] and f16 or bf16 gate
// and up [n, k], through the matrix-vector path in one pass (Note [Fused decode
// feed-forward] in gemm/fused.cpp). Only where that path applies (m <= 8 rows,
// operands on whole loads); elsewhere cudaErrorNotSupported, launching nothing.
cudaError_t matvec_swiglu(Type w_type, const float* a, const void* gate, const void* up, float* out,
                          std::int64_t m, std::int64_t n, std::int64_t k, cudaStream_t stream);

// --- split.cu -------------------------------------------------------------------
// hi[i] + lo[i] (bf16 each) within 2^-16 of v = a[i], or of v = silu(a[i]) * u[i]
// when u is not null; an infinity or NaN is carried by hi alone (Note [Exact f32
// products on bf16 tensor cores] in gemm/matmul.cpp). With lo null, hi[i] is v
// rounded to the nearest bf16 (Note [One bf16 pass is a precision trade]).
cudaError_t split_bf16(const float* a, const float* u, void* hi, void* lo, std::int64_t n,
                       cudaStream_t stream);

// --- quant/quant.cu: GGUF block-quantized weights ------------------------------
// The weight formats of dtype.def (is_quantized_weight_format), in its order.
enum class QuantFormat : int {
  kQ4_0,
  kQ4_1,
  kQ5_0,
  kQ5_1,
  kQ8_0,
  kQ2_K,
  kQ3_K,
  kQ4_K,
  kQ5_K,
  kQ6_K,
  kIQ4_NL,
  kIQ4_XS,
  kMXFP4
};
// The alignment in bytes that a matrix of `format` must start on: the largest
// power of two up to 16 that divides its block size, so that every block of a
// row keeps it (Note [Reading blocks on the device] in quant/quant_formats.cuh).
int quant_alignment(QuantFormat format);
// Dequantizes rows of a [table_rows, k] quantized matrix (k a whole number of
// blocks; each row `row_bytes` long) into out [rows, k] of `out_type` (f32, f16
// or bf16): row i of out is table row idx[i], or row i itself when idx is null.
// An index outside [0, table_rows) writes kIndexOutOfRange into *error and
// leaves its row unwritten. Each value is the exact f32 dequantization, then
// rounded once to out_type.
cudaError_t dequantize_rows(QuantFormat format, const void* table, std::int64_t table_rows,
                            std::int64_t k, const std::int32_t* idx, std::int64_t rows,
                            Type out_type, void* out, int* error, cudaStream_t stream);
// The device memory quant_matvec needs for m activation rows of k values.
std::size_t quant_matvec_scratch_bytes(std::int64_t m, std::int64_t k);
// out [m, n] = a [m, k] . w [n, k]^T for f32 activations and quantized weights,
// through 8-bit activations and integer dot products (Note [Quantized matrix-
// vector products] in quant/quant.cu). `scratch` holds
// quant_matvec_scratch_bytes(m, k) bytes, 16-byte aligned. Any m; the weights
// are read once per group of up to 8 activation rows.
cudaError_t quant_matvec(QuantFormat format, const float* a, const void* w, float* out,
                         std::int64_t m, std::int64_t n, std::int64_t k, void* scratch,
                         cudaStream_t stream);

}  // namespace switchyard::cuda::device
