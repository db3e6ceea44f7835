// The CPU backend's elementwise kernels: binary arithmetic with broadcasting, the
// unary functions, scale and casts, for f32, f16 and bf16 storage (casts also to
// and from i32).
//
// Each accessor returns the kernel of one variant at one key, or null where that
// variant does not serve the key (registration.cpp skips nulls). Reference kernels
// compute in f32 for add/sub/mul/div/neg/relu/scale and in double for the
// transcendental functions, rounding once to the output type; SIMD kernels compute
// in f32 through the rows of simd_rows.h.
//
// Example
//   KernelFn fn = binary_kernel(OpKind::kAdd, DType::kF16, Variant::kAvx2);
//   if (fn != nullptr) table.register_kernel(OpKind::kAdd, {kF16, kF16, kF16}, ...);
#pragma once

#include "backends/cpu/kernel_util.h"

namespace switchyard::cpu {

// Every binary op of op.def (kOpsOfFamily<OpFamily::kBinary>: add, sub, mul, div);
// null for any other op. a, b -> out, one float dtype, same shape (broadcast inputs
// have stride 0). Both variants accept broadcast and strided inputs; the SIMD rows
// run where the last dimension is unit-stride or broadcast, other rows go through
// the same arithmetic one element at a time (exact ops, so the bytes agree).
[[nodiscard]] KernelFn binary_kernel(OpKind op, DType dtype, Variant variant);

// Every unary op of op.def (kOpsOfFamily<OpFamily::kUnary>: neg, exp, silu, gelu,
// gelu_erf, relu, sqrt, rsqrt, sigmoid, tanh, scale); null for any other op. The
// reference takes strided input; SIMD kernels need contiguous operands and exist
// where has_simd_unary_row (simd_rows.h) says so.
[[nodiscard]] KernelFn unary_kernel(OpKind op, DType dtype, Variant variant);

// cast between f32, f16, bf16 and i32 (not i32 to i32), contiguous operands. SIMD
// siblings exist for the float-to-float casts.
[[nodiscard]] KernelFn cast_kernel(DType from, DType to, Variant variant);

}  // namespace switchyard::cpu
