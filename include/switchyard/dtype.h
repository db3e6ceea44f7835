// DType: the element types Switchyard stores and computes with, dense and GGUF
// block-quantized, generated from dtype.def.
//
// A block-quantized type stores `block_elems` consecutive elements of a row in
// `block_bytes` bytes; a dense type is the degenerate case of one element per block.
// All size arithmetic goes through `row_bytes`, which refuses rows that do not split
// into whole blocks and sizes that overflow.
//
// Every per-dtype fact is a column of dtype.def (kind, role, GGUF ids), and every
// list of dtypes is a filter over those columns (`dtypes_where`), never a second
// hand-written list that could drift from the first.
//
// Example
//   SWITCHYARD_ASSIGN_OR_RETURN(int64_t bytes, row_bytes(DType::kQ4_K, 4096));
//   // 4096 / 256 blocks * 144 bytes = 2304
//   for (DType w : kQuantizedWeightDTypes) ...  // q4_0 ... mxfp4, not q8_1 or q8_k
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <string_view>

#include "switchyard/status.h"

namespace switchyard {

enum class DType : std::uint8_t {
#define SWITCHYARD_DTYPE(ident, name, gguf, elems, bytes, kind, role, file_type) ident,
#include "switchyard/dtype.def"
#undef SWITCHYARD_DTYPE
};

inline constexpr int kDTypeCount = 0
#define SWITCHYARD_DTYPE(ident, name, gguf, elems, bytes, kind, role, file_type) +1
#include "switchyard/dtype.def"
#undef SWITCHYARD_DTYPE
    ;

inline constexpr std::array<DType, kDTypeCount> kAllDTypes = {
#define SWITCHYARD_DTYPE(ident, name, gguf, elems, bytes, kind, role, file_type) DType::ident,
#include "switchyard/dtype.def"
#undef SWITCHYARD_DTYPE
};

enum class DTypeKind : std::uint8_t { kFloat, kInt, kBool, kQuantized };

// What model data a dtype may hold (dtype.def's `role` column). A bit set: kWeight
// and kActivation combine into kWeightAndActivation.
enum class DTypeRole : std::uint8_t {
  kNone = 0,
  // A weight tensor may be stored in it.
  kWeight = 1,
  // A block format activation rows are quantized to for an integer dot product.
  kActivation = 2,
  kWeightAndActivation = 3,
};

// Static facts about one dtype.
struct DTypeInfo {
  std::string_view name;
  // GGUF's ggml_type id, or -1 where GGUF has no such type.
  int gguf_type_id;
  std::int32_t block_elems;
  std::int32_t block_bytes;
  DTypeKind kind;
  DTypeRole role;
  // GGUF's `general.file_type` of a model stored mostly in this type, or -1.
  int gguf_file_type;
};

namespace detail {
inline constexpr std::array<DTypeInfo, kDTypeCount> kDTypeInfos = {{
#define SWITCHYARD_DTYPE(ident, name, gguf, elems, bytes, kind, role, file_type) \
  {name, gguf, elems, bytes, DTypeKind::kind, DTypeRole::role, file_type},
#include "switchyard/dtype.def"
#undef SWITCHYARD_DTYPE
}};
}  // namespace detail

[[nodiscard]] constexpr const DTypeInfo& info(DType t) {
  return detail::kDTypeInfos[static_cast<std::size_t>(t)];
}
[[nodiscard]] constexpr std::string_view name(DType t) { return info(t).name; }
[[nodiscard]] constexpr bool is_quantized(DType t) { return info(t).kind == DTypeKind::kQuantized; }
[[nodiscard]] constexpr bool is_float(DType t) { return info(t).kind == DTypeKind::kFloat; }
[[nodiscard]] constexpr std::int32_t block_elems(DType t) { return info(t).block_elems; }
[[nodiscard]] constexpr std::int32_t block_bytes(DType t) { return info(t).block_bytes; }
// Whether a weight tensor may be stored in `t`: f32, f16, bf16 and the block formats
// other than the activation-only q8_1 and q8_k.
[[nodiscard]] constexpr bool is_weight_format(DType t) {
  return (static_cast<unsigned>(info(t).role) & static_cast<unsigned>(DTypeRole::kWeight)) != 0;
}
// Whether `t` is a block format that activations are quantized to for an integer
// dot product (q8_0, q8_1, q8_k).
[[nodiscard]] constexpr bool is_activation_format(DType t) {
  return (static_cast<unsigned>(info(t).role) & static_cast<unsigned>(DTypeRole::kActivation)) != 0;
}
[[nodiscard]] constexpr bool is_quantized_weight_format(DType t) {
  return is_quantized(t) && is_weight_format(t);
}
// GGUF's `general.file_type` for a model stored mostly as `t` (q4_0: 2, q4_k: 14),
// or nullopt when GGUF names no file type for it (f64, the integer types, q8_1, q8_k).
[[nodiscard]] constexpr std::optional<std::uint32_t> gguf_file_type(DType t) {
  const int id = info(t).gguf_file_type;
  return id < 0 ? std::nullopt : std::optional<std::uint32_t>(static_cast<std::uint32_t>(id));
}

// The dtypes for which `Pred` holds, in dtype.def order, as a constexpr array: the
// one way a list of dtypes is written outside dtype.def (a filter over its columns).
//
//   for (DType w : dtypes_where<is_quantized_weight_format>()) ...
template <bool (*Pred)(DType)>
[[nodiscard]] consteval auto dtypes_where() {
  constexpr std::size_t kCount = [] {
    std::size_t n = 0;
    for (DType t : kAllDTypes) n += Pred(t) ? 1 : 0;
    return n;
  }();
  std::array<DType, kCount> out{};
  std::size_t i = 0;
  for (DType t : kAllDTypes) {
    if (Pred(t)) out[i++] = t;
  }
  return out;
}

// Every block-quantized dtype.
inline constexpr auto kQuantizedDTypes = dtypes_where<is_quantized>();
// Every dtype a weight tensor may be stored in (dense and block-quantized).
inline constexpr auto kWeightDTypes = dtypes_where<is_weight_format>();
// The block-quantized weight formats (not the activation-only q8_1 and q8_k).
inline constexpr auto kQuantizedWeightDTypes = dtypes_where<is_quantized_weight_format>();
// The block formats activations are quantized to.
inline constexpr auto kActivationFormats = dtypes_where<is_activation_format>();

// Bytes of one element of a dense dtype. Aborts for a quantized type, whose
// elements have no size of their own: use row_bytes.
[[nodiscard]] std::int32_t dense_bytes(DType t);

// Parses a name as spelled in dtype.def ("f32", "q4_k"); case-insensitive.
[[nodiscard]] Result<DType> parse_dtype(std::string_view text);

// The dtype with a GGUF type id, or nullopt when Switchyard has none.
[[nodiscard]] std::optional<DType> dtype_from_gguf(int gguf_type_id);

// Bytes occupied by `elems` consecutive elements of `t`. Fails with
// kInvalidArgument when `elems` is negative or not a whole number of blocks, and
// with kOutOfRange when the byte count does not fit in int64.
[[nodiscard]] Result<std::int64_t> row_bytes(DType t, std::int64_t elems);

}  // namespace switchyard
