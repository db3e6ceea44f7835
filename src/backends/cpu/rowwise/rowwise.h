// The CPU backend's row kernels: rms_norm and layer_norm (norm.cpp), softmax
// (softmax.cpp), the last-dimension reductions sum, mean and max (reduce.cpp) and
// rope (rope.cpp), for f32, f16 and bf16 storage. Every operand of one key has the
// same dtype but rope's positions (i32).
//
// Reference kernels accumulate in double and round once; the SIMD siblings use the
// f32 rows of simd_rows.h. Both split work between threads by whole rows, so a
// row's bytes never depend on the thread count.
//
// Example
//   KernelFn fn = norm_kernel(OpKind::kRmsNorm, DType::kF32, 2, Variant::kRef);
#pragma once

#include "backends/cpu/kernel_util.h"

namespace switchyard::cpu {

// rms_norm or layer_norm with `inputs` operands before the output: 1 (x), 2 (x, w)
// or, for layer_norm, 3 (x, w, b). x and out contiguous, w and b of shape [D].
[[nodiscard]] KernelFn norm_kernel(OpKind op, DType dtype, int inputs, Variant variant);

// softmax of x [..., R, C], with an additive mask [R, C] when `with_mask`.
// Contiguous operands.
[[nodiscard]] KernelFn softmax_kernel(DType dtype, bool with_mask, Variant variant);

// sum, mean or max of x [..., D] into out [..., 1]; contiguous operands. The max
// of an empty row is -inf, its sum 0 and its mean NaN.
[[nodiscard]] KernelFn reduce_kernel(OpKind op, DType dtype, Variant variant);

// rope: x [..., T, H, D] (f32, f16 or bf16), pos i32 [T] -> out like x; contiguous.
// Angles are computed in double; the reference rotates in double and rounds once,
// the SIMD siblings round cos and sin to f32 and rotate in f32.
[[nodiscard]] KernelFn rope_kernel(DType dtype, Variant variant);

}  // namespace switchyard::cpu
