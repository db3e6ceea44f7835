// OpKind and OpFamily: the static operations and their families, generated from
// op.def, with the per-op columns (family, binding) and the lists filtered by them.
//
// Example
//   for (OpKind op : kOpsOfFamily<OpFamily::kUnary>) ...   // neg, exp, ... scale
//   index_in_family(OpKind::kExp);                         // 1: exp is the 2nd unary op
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

// Whether every build must bind an op (op.def's `binding` column).
enum class OpBinding : std::uint8_t {
  // The CPU backend binds it: a graph containing it always runs somewhere.
  kRequired,
  // A fused op the planner forms only where the chosen backend binds it.
  kOptional,
};

enum class OpKind : std::uint16_t {
#define SWITCHYARD_OP(ident, name, family, binding) ident,
#include "switchyard/op.def"
#undef SWITCHYARD_OP
};

inline constexpr int kOpFamilyCount = 0
#define SWITCHYARD_OP_FAMILY(ident, name) +1
#include "switchyard/op.def"
#undef SWITCHYARD_OP_FAMILY
    ;

inline constexpr int kOpCount = 0
#define SWITCHYARD_OP(ident, name, family, binding) +1
#include "switchyard/op.def"
#undef SWITCHYARD_OP
    ;

inline constexpr std::array<OpFamily, kOpFamilyCount> kAllOpFamilies = {
#define SWITCHYARD_OP_FAMILY(ident, name) OpFamily::ident,
#include "switchyard/op.def"
#undef SWITCHYARD_OP_FAMILY
};

inline constexpr std::array<OpKind, kOpCount> kAllOps = {
#define SWITCHYARD_OP(ident, name, family, binding) OpKind::ident,
#include "switchyard/op.def"
#undef SWITCHYARD_OP
};

namespace detail {
struct OpInfo {
  std::string_view name;
  OpFamily family;
  OpBinding binding;
};
inline constexpr std::array<OpInfo, kOpCount> kOpInfos = {{
#define SWITCHYARD_OP(ident, name, family, binding) {name, OpFamily::family, OpBinding::binding},
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
[[nodiscard]] constexpr OpBinding op_binding(OpKind op) {
  return detail::kOpInfos[static_cast<std::size_t>(op)].binding;
}
[[nodiscard]] constexpr std::string_view name(OpFamily family) {
  return detail::kOpFamilyNames[static_cast<std::size_t>(family)];
}

// The number of ops in `family`.
[[nodiscard]] constexpr int family_size(OpFamily family) {
  int n = 0;
  for (OpKind op : kAllOps) n += op_family(op) == family ? 1 : 0;
  return n;
}

// The position of `op` among the ops of its family, in op.def order: what a table
// with one slot per op of a family (kOpsOfFamily) is indexed by.
[[nodiscard]] constexpr int index_in_family(OpKind op) {
  int i = 0;
  for (OpKind other : kAllOps) {
    if (other == op) break;
    i += op_family(other) == op_family(op) ? 1 : 0;
  }
  return i;
}

// Note [Per-op code over kOpsOfFamily]
// Code that has something per op of a family (a kernel formula, a SIMD row, a
// precision claim) is written as one template over the op, an `if constexpr`
// chain whose last branch is a static_assert, and instantiated for every op of
// kOpsOfFamily<F> through an index_sequence. An op added to op.def then fails to
// compile at each place that has nothing for it, the way an exhaustive switch over
// OpKind fails with -Wswitch, without a second list of the family's ops kept in
// step by hand and without a `default:` that would quietly compute something.

// The condition of the static_assert that ends such a chain (a plain `false`
// would fire in every instantiation).
template <OpKind>
inline constexpr bool kNoCodeForOp = false;

// The ops of `family` in op.def order: the one way a list of ops is written
// outside op.def. kOpsOfFamily<F>[index_in_family(op)] == op for every op of F.
template <OpFamily F>
[[nodiscard]] consteval auto ops_of_family() {
  std::array<OpKind, static_cast<std::size_t>(family_size(F))> out{};
  std::size_t i = 0;
  for (OpKind op : kAllOps) {
    if (op_family(op) == F) out[i++] = op;
  }
  return out;
}
template <OpFamily F>
inline constexpr auto kOpsOfFamily = ops_of_family<F>();

// Parse by the spellings in op.def; case-insensitive.
[[nodiscard]] Result<OpKind> parse_op(std::string_view text);
[[nodiscard]] Result<OpFamily> parse_op_family(std::string_view text);

}  // namespace switchyard
