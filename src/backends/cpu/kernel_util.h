// Shared plumbing of the CPU backend's portable kernel files: which instruction set
// a sibling uses, dtype dispatch to storage types, and the walk over the rows of
// (possibly strided or broadcast) operands.
#pragma once

#include <fmt/format.h>

#include <cstdint>
#include <string_view>

#include "backends/cpu/operand_checks.h"
#include "backends/cpu/storage.h"
#include "switchyard/kernel.h"
#include "switchyard/op.h"

namespace switchyard::cpu {

// The variant of a CPU kernel: the portable reference or a SIMD sibling.
enum class Variant : std::uint8_t { kRef, kAvx2, kAvx512 };

// "ref", "avx2", "avx512": the suffix of a kernel name and its source tag.
[[nodiscard]] constexpr std::string_view variant_suffix(Variant v) {
  return v == Variant::kRef ? "ref" : v == Variant::kAvx2 ? "avx2" : "avx512";
}

// Elements per parallel chunk of streaming kernels: large enough to amortise a
// task (tens of microseconds), small enough to balance a few threads.
inline constexpr std::int64_t kElementGrain = 1 << 15;

// Rows per chunk for a row length `inner`, so that a chunk holds about
// kElementGrain elements.
[[nodiscard]] inline std::int64_t row_grain(std::int64_t inner) {
  return inner >= kElementGrain ? 1 : kElementGrain / (inner > 0 ? inner : 1);
}

// A float dtype's storage index, or -1.
[[nodiscard]] constexpr int float_storage_index(DType t) {
  return t == DType::kF32 ? 0 : t == DType::kF16 ? 1 : t == DType::kBF16 ? 2 : -1;
}

// Element offsets of row `row` (over all but the last dimension of `shape`) in
// each of `views`, which share `shape` (broadcast dims have stride 0).
template <int N>
void row_offsets(const Shape& shape, const TensorView* const (&views)[N], std::int64_t row,
                 std::int64_t (&offsets)[N]) {
  for (int v = 0; v < N; ++v) offsets[v] = views[v]->offset();
  std::int64_t rem = row;
  for (int d = shape.rank() - 2; d >= 0; --d) {
    const std::int64_t i = rem % shape[d];
    rem /= shape[d];
    for (int v = 0; v < N; ++v) offsets[v] += i * views[v]->stride(d);
  }
}

// The output must not write one element twice (no stride 0 where the dim is > 1).
inline Status check_writable(const TensorView& out, std::string_view kernel) {
  if (out.has_broadcast()) {
    return invalid_argument_error(
        fmt::format("{}: output {} is a broadcast view", kernel, describe(out)));
  }
  return Status::ok();
}

inline Status check_contiguous(const TensorView& t, std::string_view kernel) {
  if (!t.is_contiguous()) {
    return invalid_argument_error(
        fmt::format("{}: operand {} must be contiguous", kernel, describe(t)));
  }
  return Status::ok();
}

}  // namespace switchyard::cpu
