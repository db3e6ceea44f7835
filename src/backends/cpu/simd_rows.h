// The row functions that the instruction-set files (`*_avx2.cpp`, `*_avx512.cpp`)
// export to the portable kernels.
//
// Why the split: a kernel's argument checks, error messages and thread fan-out use
// the standard library and {fmt}; compiling those in a translation unit built with
// -mavx512f would let the linker keep a wide-ISA copy of some inline library
// function for the whole program. So the ISA files hold only intrinsics on raw
// pointers, behind these plain function-pointer tables, and the portable kernel
// files (elementwise.cpp, norm.cpp, ...) do everything else. A table is only asked
// for after cpu_features() says the running CPU can execute it.
//
// Every row function computes each element with the same vector instruction
// sequence wherever it sits in the row (a short tail goes through a padded vector),
// so a row's bytes do not depend on how the caller split the work between threads.
#pragma once

#include <cstdint>

#include "backends/cpu/storage.h"
#include "switchyard/op.h"

namespace switchyard::cpu {

// The elementwise tables have one slot per binary and per unary op of op.def,
// indexed by index_in_family(op), so the lists of ops come from op.def alone.
inline constexpr int kBinaryOpCount = family_size(OpFamily::kBinary);
inline constexpr int kUnaryOpCount = family_size(OpFamily::kUnary);

// Whether the SIMD files give a unary op a row (its slots stay null otherwise).
// gelu_erf has none: an accurate vector erfc is not worth its code while the op
// stays off hot paths. Every other unary op must have one: elementwise_simd.inl
// does not compile for an op it has no formula for.
[[nodiscard]] constexpr bool has_simd_unary_row(OpKind op) { return op != OpKind::kGeluErf; }

// out[i] = a[i * sa] op b[i * sb] for i < n; sa and sb are 0 (a broadcast scalar)
// or 1. Pointers are to the storage type of the table slot.
using BinaryRowFn = void (*)(const void* a, std::int64_t sa, const void* b, std::int64_t sb,
                             void* out, std::int64_t n);
// out[i] = f(x[i]) for i < n; `param` is scale's multiplier (ignored by the rest).
using UnaryRowFn = void (*)(const void* x, void* out, std::int64_t n, float param);
// Converts n contiguous elements between float storage types.
using CastRowFn = void (*)(const void* x, void* out, std::int64_t n);

struct ElementwiseSimd {
  BinaryRowFn binary[kBinaryOpCount][kFloatStorageCount];
  UnaryRowFn unary[kUnaryOpCount][kFloatStorageCount];
  // [from][to]; the diagonal is null.
  CastRowFn cast[kFloatStorageCount][kFloatStorageCount];
};

// Row kernels of the normalisation, softmax and reduction families. x, w, b, mask
// and out share the slot's storage type; `d` / `cols` is the row length.
struct RowwiseSimd {
  // out = x / sqrt(mean(x^2) + eps) [* w]; w may be null.
  void (*rms_norm[kFloatStorageCount])(const void* x, const void* w, void* out, std::int64_t d,
                                       float eps);
  // out = (x - mean) / sqrt(var + eps) [* w] [+ b]; w and b may be null.
  void (*layer_norm[kFloatStorageCount])(const void* x, const void* w, const void* b, void* out,
                                         std::int64_t d, float eps);
  // Softmax of x * scale [+ mask] over the first `valid` columns; columns from
  // `valid` on are written as 0 (causal masking), as is a row with nothing left
  // unmasked. mask may be null. `scratch` holds `cols` floats for the
  // exponentials; it may be null for f32 storage (out is used).
  void (*softmax[kFloatStorageCount])(const void* x, const void* mask, void* out, std::int64_t cols,
                                      std::int64_t valid, float scale, float* scratch);
  // The sum and the maximum of n elements, in f32 (NaN propagates through max).
  float (*sum[kFloatStorageCount])(const void* x, std::int64_t n);
  float (*max[kFloatStorageCount])(const void* x, std::int64_t n);
  // Rotates the first `dims` elements of each of `heads` rows of d elements (one
  // token) and copies the rest. Normal mode rotates pairs (2i, 2i + 1) with
  // tables of dims floats each: cs = [c0, c0, c1, c1, ...] then
  // [-s0, s0, -s1, s1, ...]; neox rotates (i, i + dims / 2) with cs = [c0 .. c_{h-1}]
  // then [s0 .. s_{h-1}], h = dims / 2.
  void (*rope[kFloatStorageCount])(const void* x, void* out, const float* cs, std::int64_t heads,
                                   std::int64_t d, std::int64_t dims, bool neox);
};

// One attention call for the SIMD rows (attention_simd.inl): q [B, Sq, H, Dh],
// k and v [B, Skv, Hkv, Dh], mask [Sq, Skv] or null, out like q; contiguous.
struct AttentionArgs {
  const void* q;
  const void* k;
  const void* v;
  const void* mask;
  void* out;
  std::int64_t sq, skv, heads, kv_heads, dh;
  float scale;
  bool causal;
  std::int64_t query_offset;
  // Query positions per work item (the last item of a batch and kv head may have
  // fewer).
  std::int64_t positions_per_item;
  // With a mask, per query position (null without one): key_limit, 1 + the
  // position's last key whose mask is not -inf (the keys after it weigh exactly
  // 0 and are skipped, as the causal flag skips its own); and mask_zero, 1 where
  // every mask entry before that limit is 0 (then adding the mask changes no
  // logit, and its row is not read). The driver finds both once per call.
  const std::int64_t* key_limit = nullptr;
  const std::uint8_t* mask_zero = nullptr;
};
// Computes work item `item` (batch-major, then kv head, then block of
// positions_per_item query positions, each with its H / Hkv heads). `scratch` holds
// rows * (2 * dh_pad + 3 + block) + 2 * block * dh_pad floats, rows =
// positions_per_item * H / Hkv rounded up to `width` and dh_pad = Dh rounded up
// to `width`.
using AttentionItemFn = void (*)(const AttentionArgs& args, std::int64_t item, float* scratch);
struct AttentionSimd {
  int width;
  std::int64_t block;
  // [q storage][k / v storage]; q, mask and out share a storage type.
  AttentionItemFn item[kFloatStorageCount][kFloatStorageCount];
  // [q storage] for q8_0 keys and values (Note [A q8_0 KV cache]).
  AttentionItemFn item_q8_0[kFloatStorageCount];
};

// The tables of each instruction set. Call only when cpu_features() reports the
// instruction set (avx2 also needs f16c; AVX-512 is F+BW+VL+DQ).
[[nodiscard]] const ElementwiseSimd& elementwise_avx2();
[[nodiscard]] const ElementwiseSimd& elementwise_avx512();
[[nodiscard]] const RowwiseSimd& rowwise_avx2();
[[nodiscard]] const RowwiseSimd& rowwise_avx512();
[[nodiscard]] const AttentionSimd& attention_avx2();
[[nodiscard]] const AttentionSimd& attention_avx512();

}  // namespace switchyard::cpu
