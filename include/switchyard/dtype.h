// DType: the element types Switchyard stores and computes with, dense and GGUF
// block-quantized, generated from dtype.def.
//
// A block-quantized type stores `block_elems` consecutive elements of a row in
// `block_bytes` bytes; a dense type is the degenerate case of one element per block.
// All size arithmetic goes through `row_bytes`, which refuses rows that do not split
// into whole blocks and sizes that overflow.
//
// Example
//   SWITCHYARD_ASSIGN_OR_RETURN(int64_t bytes, row_bytes(DType::kQ4_K, 4096));
//   // 4096 / 256 blocks * 144 bytes = 2304
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <string_view>

#include "switchyard/status.h"

namespace switchyard {

enum class DType : std::uint8_t {
#define SWITCHYARD_DTYPE(ident, name, gguf, elems, bytes, kind) ident,
#include "switchyard/dtype.def"
#undef SWITCHYARD_DTYPE
};

inline constexpr int kDTypeCount = 0
#define SWITCHYARD_DTYPE(ident, name, gguf, elems, bytes, kind) +1
#include "switchyard/dtype.def"
#undef SWITCHYARD_DTYPE
    ;

inline constexpr std::array<DType, kDTypeCount> kAllDTypes = {
#define SWITCHYARD_DTYPE(ident, name, gguf, elems, bytes, kind) DType::ident,
#include "switchyard/dtype.def"
#undef SWITCHYARD_DTYPE
};

enum class DTypeKind : std::uint8_t { kFloat, kInt, kBool, kQuantized };

// Static facts about one dtype.
struct DTypeInfo {
  std::string_view name;
  // GGUF's ggml_type id, or -1 where GGUF has no such type.
  int gguf_type_id;
  std::int32_t block_elems;
  std::int32_t block_bytes;
  DTypeKind kind;
};

namespace detail {
inline constexpr std::array<DTypeInfo, kDTypeCount> kDTypeInfos = {{
#define SWITCHYARD_DTYPE(ident, name, gguf, elems, bytes, kind) \
  {name, gguf, elems, bytes, DTypeKind::kind},
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
