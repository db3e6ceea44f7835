// KernelMask: hide bindings from the published table to see what a missing kernel
// does.
//
// Overview
//   A mask is a list of `backend:op:dtype` patterns. Every binding that a pattern
//   matches is left out of the table that `current_table()` publishes, so probes,
//   lookups and dispatch all see exactly what a build without that kernel would see:
//   the probe becomes a miss, the seal report lists it, strict mode refuses it.
//   Nothing is hidden silently: `masked_bindings()` (dispatch.h) lists every binding
//   the mask removed and the seal report prints that list.
//
// Pattern rule
//   backend  a backend name ("cpu", "cuda") or `*`.
//   op       a static op name ("matmul", "rms_norm") or `*`. Runtime-fused ids have
//            no stable name across processes, so only `*` matches them.
//   dtype    a dtype name ("f32", "q4_k") or `*`. It matches a binding when ANY
//            operand dtype of the key equals it: `cuda:matmul:q4_k` hides the
//            (f32, q4_k, f32) weight matmul, `cpu:*:f16` every CPU binding that
//            reads or writes f16. A key has no single "the dtype", so the rule that
//            needs no per-op knowledge is the one a user can predict.
//   Names are case-insensitive; surrounding spaces are ignored. Several patterns
//   are separated by commas. A pattern with other than three fields, an empty
//   field or an unknown name is refused with an error that lists the valid names.
//
// Example
//   SWITCHYARD_ASSIGN_OR_RETURN(KernelMask mask, KernelMask::parse("cpu:matmul:f32"));
//   SWITCHYARD_RETURN_IF_ERROR(set_kernel_mask(mask).status());
//   // current_table()->backend_supports(OpKind::kMatmul, {f32, f32, f32}, cpu) is
//   // now false; clear_kernel_mask() restores it.
#pragma once

#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "switchyard/backend.h"
#include "switchyard/binding_table.h"
#include "switchyard/dtype.h"
#include "switchyard/op.h"
#include "switchyard/status.h"

namespace switchyard {

// One `backend:op:dtype` pattern; an empty optional is the `*` wildcard.
struct KernelMaskPattern {
  std::optional<BackendId> backend;
  std::optional<OpKind> op;
  std::optional<DType> dtype;

  // Whether the pattern hides bindings at (key, dtypes, backend), by the rule in
  // the file comment.
  [[nodiscard]] bool matches(BindingKey key, const DTypeList& dtypes, BackendId b) const;
  // The canonical spelling: "cpu:matmul:f32", "*:*:q4_k".
  [[nodiscard]] std::string to_string() const;

  friend bool operator==(const KernelMaskPattern&, const KernelMaskPattern&) = default;
};

// Parses one pattern. kInvalidArgument naming the pattern and, for an unknown name,
// every valid spelling of that field.
[[nodiscard]] Result<KernelMaskPattern> parse_kernel_mask_pattern(std::string_view text);

// A set of patterns. Empty masks nothing.
class KernelMask {
 public:
  KernelMask() = default;
  explicit KernelMask(std::vector<KernelMaskPattern> patterns) : patterns_(std::move(patterns)) {}

  // Parses a comma-separated list of patterns. An empty or all-blank string is the
  // empty mask; any malformed pattern fails the whole parse (a mask that is half
  // applied would hide less than the user asked for, silently).
  [[nodiscard]] static Result<KernelMask> parse(std::string_view spec);

  // Whether any pattern matches.
  [[nodiscard]] bool matches(BindingKey key, const DTypeList& dtypes, BackendId backend) const;
  [[nodiscard]] bool empty() const { return patterns_.empty(); }
  [[nodiscard]] std::span<const KernelMaskPattern> patterns() const { return patterns_; }
  // The patterns joined by commas; "" for the empty mask.
  [[nodiscard]] std::string to_string() const;

  friend bool operator==(const KernelMask&, const KernelMask&) = default;

 private:
  std::vector<KernelMaskPattern> patterns_;
};

// Removes every binding `mask` matches from `table` and returns what was removed,
// in table order. The table stays finalizable: keys left with no sibling disappear.
std::vector<CoverageBinding> apply_kernel_mask(const KernelMask& mask, KernelBindingTable& table);

}  // namespace switchyard
