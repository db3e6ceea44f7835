// The CPU backend's data-movement kernels: get_rows and set_rows (get_rows.cpp) and copy /
// transpose / concat (layout.cpp), and the collectives (collective.cpp). Multi-threaded by output
// rows and deterministic at any thread count.
//
// Example
//   KernelFn fn = get_rows_kernel(DType::kF16, DType::kF32, Variant::kRef);  // f16 -> f32 rows
#pragma once

#include "backends/cpu/kernel_util.h"

namespace switchyard::cpu {

// get_rows: table [R, C] of `table` dtype, idx i32 [N] -> out [N, C] of `out`
// dtype (f32, f16 or bf16 each); contiguous. kOutOfRange names the first index
// outside [0, R), and nothing is written then. SIMD siblings exist where the row
// is converted (table and out dtypes differ); null otherwise.
[[nodiscard]] KernelFn get_rows_kernel(DType table, DType out, Variant variant);

// set_rows: dst [R, C], src [N, C] (f32, f16 or bf16 each), idx i32 [N] -> out
// [R, C] of dst's dtype: dst with row idx[i] replaced by src[i], converted. In
// place when out is dst's memory (Note [Rows written in place] in get_rows.cpp).
// kOutOfRange names the first index outside [0, R), and nothing is written then.
[[nodiscard]] KernelFn set_rows_kernel(DType dst, DType src);

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

// all_reduce, all_gather, reduce_scatter (collective.cpp) over f32, f16 or bf16
// contiguous operands, between the ranks of the HostRankGroup whose communicator
// is ExecContext::comm; with one rank, a copy. Null for another op or dtype.
[[nodiscard]] KernelFn collective_kernel(OpKind op, DType dtype);

}  // namespace switchyard::cpu
