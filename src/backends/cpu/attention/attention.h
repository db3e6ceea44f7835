// The CPU backend's attention kernels: the double-precision reference
// (attention.cpp) and the f32 SIMD siblings (attention_simd.inl, compiled per
// instruction set). Work is split into fixed items of query blocks and kv-head
// groups, so results are deterministic at any thread count.
//
// Example
//   KernelFn fn = attention_kernel(DType::kF32, DType::kF16, true, Variant::kAvx2);
#pragma once

#include "backends/cpu/kernel_util.h"

namespace switchyard::cpu {

// attention: q [..., Sq, H, Dh] of `q` dtype, k and v [..., Skv, Hkv, Dh] of `kv`
// dtype, an optional mask [Sq, Skv] of `q` dtype, out like q; contiguous. The
// reference computes scores, softmax and the weighted sum in double and rounds
// once; the SIMD siblings compute in f32 with an online softmax over key blocks
// (attention_simd.inl). Null where the variant does not serve the dtypes.
[[nodiscard]] KernelFn attention_kernel(DType q, DType kv, bool with_mask, Variant variant);

}  // namespace switchyard::cpu
