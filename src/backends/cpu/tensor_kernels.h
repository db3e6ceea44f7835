// The CPU backend's data-movement and sequence kernels: rope (rope.cpp), get_rows
// (get_rows.cpp), copy / transpose / concat (layout.cpp) and attention
// (attention.cpp). Multi-threaded by output rows (attention: by fixed work items)
// and deterministic at any thread count; attention also has SIMD siblings.
//
// Example
//   KernelFn fn = get_rows_kernel(DType::kF16, DType::kF32, Variant::kRef);  // f16 -> f32 rows
#pragma once

#include "backends/cpu/kernel_util.h"

namespace switchyard::cpu {

// rope: x [..., T, H, D] (f32, f16 or bf16), pos i32 [T] -> out like x; contiguous.
// Angles are computed in double; the reference rotates in double and rounds once,
// the SIMD siblings round cos and sin to f32 and rotate in f32.
[[nodiscard]] KernelFn rope_kernel(DType dtype, Variant variant);

// get_rows: table [R, C] of `table` dtype, idx i32 [N] -> out [N, C] of `out`
// dtype (f32, f16 or bf16 each); contiguous. kOutOfRange names the first index
// outside [0, R), and nothing is written then. SIMD siblings exist where the row
// is converted (table and out dtypes differ); null otherwise.
[[nodiscard]] KernelFn get_rows_kernel(DType table, DType out, Variant variant);

// copy, transpose: input of any strides (broadcast too), contiguous output, for
// f32, f16, bf16 and i32. Transpose has an AVX2 sibling (register-tile
// transposes, layout_avx2.cpp); null for AVX-512.
[[nodiscard]] KernelFn copy_kernel(DType dtype);
[[nodiscard]] KernelFn transpose_kernel(DType dtype, Variant variant);

// concat of `inputs` tensors (2 to kMaxConcatInputs) of any strides into a
// contiguous output, along params.axis. The AVX2 sibling copies the output's
// contiguous runs split across the pool; null for AVX-512.
inline constexpr int kMaxConcatInputs = 7;
[[nodiscard]] KernelFn concat_kernel(DType dtype, int inputs, Variant variant);

// attention: q [..., Sq, H, Dh] of `q` dtype, k and v [..., Skv, Hkv, Dh] of `kv`
// dtype, an optional mask [Sq, Skv] of `q` dtype, out like q; contiguous. The
// reference computes scores, softmax and the weighted sum in double and rounds
// once; the SIMD siblings compute in f32 with an online softmax over key blocks
// (attention_simd.inl). Null where the variant does not serve the dtypes.
[[nodiscard]] KernelFn attention_kernel(DType q, DType kv, bool with_mask, Variant variant);

}  // namespace switchyard::cpu
