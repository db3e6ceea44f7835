// OpKind and OpFamily: the static operations and their families, generated from
// op.def.
#pragma once

#include <array>
#include <cstdint>
#include <string_view>

#include "switchyard/status.h"

namespace switchyard {

enum class OpFamily : std::uint8_t {
#define SWITCHYARD_OP_FAMILY(ident, name) ident,
#include "switchyard/op.def"
#undef SWITCHYARD_OP_FAMILY
};

enum class OpKind : std::uint16_t {
#define SWITCHYARD_OP(ident, name, family) ident,
#include "switchyard/op.def"
#undef SWITCHYARD_OP
};

inline constexpr int kOpFamilyCount = 0
#define SWITCHYARD_OP_FAMILY(ident, name) +1
#include "switchyard/op.def"
#undef SWITCHYARD_OP_FAMILY
    ;

inline constexpr int kOpCount = 0
#define SWITCHYARD_OP(ident, name, family) +1
#include "switchyard/op.def"
#undef SWITCHYARD_OP
    ;

inline constexpr std::array<OpFamily, kOpFamilyCount> kAllOpFamilies = {
#define SWITCHYARD_OP_FAMILY(ident, name) OpFamily::ident,
#include "switchyard/op.def"
#undef SWITCHYARD_OP_FAMILY
};

inline constexpr std::array<OpKind, kOpCount> kAllOps = {
#define SWITCHYARD_OP(ident, name, family) OpKind::ident,
#include "switchyard/op.def"
#undef SWITCHYARD_OP
};

namespace detail {
struct OpInfo {
  std::string_view name;
  OpFamily family;
};
inline constexpr std::array<OpInfo, kOpCount> kOpInfos = {{
#define SWITCHYARD_OP(ident, name, family) {name, OpFamily::family},
#include "switchyard/op.def"
#undef SWITCHYARD_OP
}};
inline constexpr std::array<std::string_view, kOpFamilyCount> kOpFamilyNames = {
#define SWITCHYARD_OP_FAMILY(ident, name) name,
#include "switchyard/op.def"
#undef SWITCHYARD_OP_FAMILY
};
}  // namespace detail

[[nodiscard]] constexpr std::string_view name(OpKind op) {
  return detail::kOpInfos[static_cast<std::size_t>(op)].name;
}
[[nodiscard]] constexpr OpFamily op_family(OpKind op) {
  return detail::kOpInfos[static_cast<std::size_t>(op)].family;
}
[[nodiscard]] constexpr std::string_view name(OpFamily family) {
  return detail::kOpFamilyNames[static_cast<std::size_t>(family)];
}

// Parse by the spellings in op.def; case-insensitive.
[[nodiscard]] Result<OpKind> parse_op(std::string_view text);
[[nodiscard]] Result<OpFamily> parse_op_family(std::string_view text);

}  // namespace switchyard
