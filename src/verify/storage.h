// Host memory for the conformance harness: inputs laid out as the case asks
// (contiguous, strided or broadcast) and outputs surrounded by guard bytes.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

#include "switchyard/tensor.h"

namespace switchyard::verify_detail {

// Bytes aligned to 64 (the widest vector a CPU kernel loads), so that a kernel
// which assumes natural alignment is tested under it.
class AlignedBytes {
 public:
  AlignedBytes() = default;
  explicit AlignedBytes(std::size_t size) : storage_(size + kAlign) {
    const auto base = reinterpret_cast<std::uintptr_t>(storage_.data());
    offset_ = (kAlign - base % kAlign) % kAlign;
    size_ = size;
  }
  [[nodiscard]] std::byte* data() { return storage_.data() + offset_; }
  [[nodiscard]] const std::byte* data() const { return storage_.data() + offset_; }
  [[nodiscard]] std::size_t size() const { return size_; }
  [[nodiscard]] std::span<std::byte> span() { return {data(), size_}; }
  [[nodiscard]] std::span<const std::byte> span() const { return {data(), size_}; }

 private:
  static constexpr std::size_t kAlign = 64;
  std::vector<std::byte> storage_;
  std::size_t offset_ = 0;
  std::size_t size_ = 0;
};

// How an input is presented to the kernel.
enum class Layout : unsigned char {
  kContiguous,
  // Every stride doubled, dimensions stored in reverse order (column-major) and a
  // non-zero offset: nothing about it looks contiguous. The gaps hold NaN.
  kStrided,
  // The dims in `broadcast_mask` have stride 0 over a smaller stored tensor.
  kBroadcast,
};

// Rounds `values` to what `dtype` can store (f16/bf16/f32 rounding, integers
// rounded and saturated, bool to 0/1). Quantized dtypes are left alone: the
// harness rounds them through quantize/dequantize row by row.
void round_to_dtype(DType dtype, std::span<double> values);

// Makes `values` constant along the dims in `mask` (taking index 0 of each), as a
// broadcast view will present them.
void collapse_broadcast(const Shape& shape, std::uint32_t mask, std::span<double> values);

// An input in memory the kernel reads.
struct HostInput {
  AlignedBytes bytes;
  TensorView view;
};

// Lays out `values` (already representable in `dtype`, row-major over `shape`).
// `quantized` supplies the bytes of a block-quantized operand (contiguous only).
[[nodiscard]] Result<HostInput> make_input(DType dtype, const Shape& shape,
                                           std::span<const double> values, Layout layout,
                                           std::uint32_t broadcast_mask,
                                           std::span<const std::byte> quantized = {});

// An output with guard bytes on both sides.
class GuardedOutput {
 public:
  static constexpr std::size_t kGuardBytes = 64;
  static constexpr std::byte kGuardPattern{0xA5};
  // Poison: every bit set, a NaN in f64, f32, f16 and bf16.
  static constexpr std::byte kPoison{0xFF};

  GuardedOutput(DType dtype, const Shape& shape);
  // Fills the guards with the pattern and the output with poison.
  void reset();
  [[nodiscard]] const TensorView& view() const { return view_; }
  // The index of the first changed guard byte (negative: before the output), or
  // nullopt when both guards are intact.
  [[nodiscard]] std::optional<std::int64_t> first_damaged_guard() const;
  [[nodiscard]] std::span<const std::byte> output_bytes() const {
    return {bytes_.data() + kGuardBytes, payload_};
  }
  // The whole buffer, guards included, for a harness that mirrors it in device
  // memory: it uploads these bytes before a run and downloads them after.
  [[nodiscard]] std::span<std::byte> guarded_bytes() { return bytes_.span(); }
  // The output's elements as doubles.
  [[nodiscard]] std::vector<double> values() const;

 private:
  AlignedBytes bytes_;
  std::size_t payload_ = 0;
  TensorView view_;
};

// Element `i` of a dense buffer of `dtype`, as a double.
[[nodiscard]] double load_element(DType dtype, const std::byte* base, std::int64_t i);

// The spacing of `dtype` values near `x` (one unit in the last place); 1 for
// integer dtypes.
[[nodiscard]] double ulp_of(DType dtype, double x);

}  // namespace switchyard::verify_detail
