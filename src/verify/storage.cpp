#include "verify/storage.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>

#include <fmt/format.h>

#include "switchyard/half.h"
#include "switchyard/quant.h"
#include "verify/reference.h"

namespace switchyard::verify_detail {
namespace {

template <typename T>
void store_as(std::byte* base, std::int64_t i, T v) {
  std::memcpy(base + i * static_cast<std::int64_t>(sizeof(T)), &v, sizeof(T));
}

template <typename T>
T load_as(const std::byte* base, std::int64_t i) {
  T v;
  std::memcpy(&v, base + i * static_cast<std::int64_t>(sizeof(T)), sizeof(T));
  return v;
}

// Saturating conversion of an already integral double.
template <typename T>
T to_int(double v) {
  if (std::isnan(v)) return 0;
  if (v <= static_cast<double>(std::numeric_limits<T>::min())) return std::numeric_limits<T>::min();
  // The max of int64 is not a double; anything at or above 2^63 saturates.
  if (v >= static_cast<double>(std::numeric_limits<T>::max())) return std::numeric_limits<T>::max();
  return static_cast<T>(v);
}

void store_element(DType dtype, std::byte* base, std::int64_t i, double v) {
  switch (dtype) {
    case DType::kF64: store_as<double>(base, i, v); break;
    case DType::kF32: store_as<float>(base, i, static_cast<float>(v)); break;
    case DType::kF16: store_as<std::uint16_t>(base, i, f32_to_f16(static_cast<float>(v))); break;
    case DType::kBF16: store_as<std::uint16_t>(base, i, f32_to_bf16(static_cast<float>(v))); break;
    case DType::kI64: store_as<std::int64_t>(base, i, to_int<std::int64_t>(v)); break;
    case DType::kI32: store_as<std::int32_t>(base, i, to_int<std::int32_t>(v)); break;
    case DType::kI16: store_as<std::int16_t>(base, i, to_int<std::int16_t>(v)); break;
    case DType::kI8: store_as<std::int8_t>(base, i, to_int<std::int8_t>(v)); break;
    case DType::kU8: store_as<std::uint8_t>(base, i, to_int<std::uint8_t>(v)); break;
    case DType::kBool: store_as<std::uint8_t>(base, i, v != 0.0 ? 1 : 0); break;
    default: SWITCHYARD_CHECK_MSG(false, "store_element: not a dense dtype");
  }
}

// (significand bits including the implicit one, minimum normal exponent)
std::pair<int, int> float_format(DType dtype) {
  switch (dtype) {
    case DType::kF64: return {53, -1022};
    case DType::kF32: return {24, -126};
    case DType::kF16: return {11, -14};
    default: return {8, -126};  // bf16
  }
}

}  // namespace

double load_element(DType dtype, const std::byte* base, std::int64_t i) {
  switch (dtype) {
    case DType::kF64: return load_as<double>(base, i);
    case DType::kF32: return load_as<float>(base, i);
    case DType::kF16: return f16_to_f32(load_as<std::uint16_t>(base, i));
    case DType::kBF16: return bf16_to_f32(load_as<std::uint16_t>(base, i));
    case DType::kI64: return static_cast<double>(load_as<std::int64_t>(base, i));
    case DType::kI32: return load_as<std::int32_t>(base, i);
    case DType::kI16: return load_as<std::int16_t>(base, i);
    case DType::kI8: return load_as<std::int8_t>(base, i);
    case DType::kU8:
    case DType::kBool: return load_as<std::uint8_t>(base, i);
    default: SWITCHYARD_CHECK_MSG(false, "load_element: not a dense dtype");
  }
  return 0.0;
}

double ulp_of(DType dtype, double x) {
  if (!is_float(dtype)) return 1.0;
  const auto [bits, min_exp] = float_format(dtype);
  // Zero sits in the subnormal range: its spacing is the smallest one.
  int e = min_exp;
  if (x != 0.0 && std::isfinite(x)) {
    std::frexp(x, &e);  // x = f * 2^e with f in [0.5, 1)
    e -= 1;
  }
  return std::ldexp(1.0, std::max(e, min_exp) - (bits - 1));
}

void round_to_dtype(DType dtype, std::span<double> values) {
  for (double& v : values) {
    switch (dtype) {
      case DType::kF64: break;
      case DType::kF32: v = static_cast<float>(v); break;
      case DType::kF16: v = f16_to_f32(f32_to_f16(static_cast<float>(v))); break;
      case DType::kBF16: v = bf16_to_f32(f32_to_bf16(static_cast<float>(v))); break;
      case DType::kBool: v = v != 0.0 ? 1.0 : 0.0; break;
      default:
        if (is_quantized(dtype)) break;
        v = std::isnan(v) ? 0.0 : std::nearbyint(v);
        v = std::min(std::max(v, int_dtype_min(dtype)), int_dtype_max(dtype));
        // int64's max is not a double: keep values strictly inside.
        if (dtype == DType::kI64 && v >= 0x1p63) v = 0x1p62;
        break;
    }
  }
}

void collapse_broadcast(const Shape& shape, std::uint32_t mask, std::span<double> values) {
  if (mask == 0) return;
  const auto strides = contiguous_strides(shape);
  for (std::int64_t i = 0; i < shape.numel(); ++i) {
    std::int64_t rem = i, source = 0;
    for (int d = 0; d < shape.rank(); ++d) {
      const std::int64_t idx = rem / strides[d];
      rem %= strides[d];
      if (!(mask & (1u << d))) source += idx * strides[d];
    }
    values[i] = values[source];  // source <= i, already collapsed
  }
}

Result<HostInput> make_input(DType dtype, const Shape& shape, std::span<const double> values,
                             Layout layout, std::uint32_t broadcast_mask,
                             std::span<const std::byte> quantized) {
  HostInput in;
  const int rank = shape.rank();
  if (is_quantized(dtype)) {
    if (layout != Layout::kContiguous) {
      return invalid_argument_error("a quantized operand can only be laid out contiguously");
    }
    in.bytes = AlignedBytes(quantized.size());
    std::memcpy(in.bytes.data(), quantized.data(), quantized.size());
    in.view = TensorView::contiguous(in.bytes.data(), dtype, shape);
    return in;
  }
  const std::int64_t elem = dense_bytes(dtype);
  const std::int64_t n = shape.numel();
  switch (layout) {
    case Layout::kContiguous: {
      in.bytes = AlignedBytes(static_cast<std::size_t>(std::max<std::int64_t>(n, 1) * elem));
      for (std::int64_t i = 0; i < n; ++i) store_element(dtype, in.bytes.data(), i, values[i]);
      in.view = TensorView::contiguous(in.bytes.data(), dtype, shape);
      return in;
    }
    case Layout::kStrided: {
      std::array<std::int64_t, kMaxRank> strides{};
      std::int64_t step = 2;
      for (int d = 0; d < rank; ++d) {
        strides[d] = step;
        step *= std::max<std::int64_t>(shape[d], 1);
      }
      constexpr std::int64_t kOffset = 1;
      const std::int64_t slots = kOffset + 2 * std::max<std::int64_t>(n, 1) + 1;
      in.bytes = AlignedBytes(static_cast<std::size_t>(slots * elem));
      std::memset(in.bytes.data(), 0xFF, in.bytes.size());  // gaps read as NaN
      const auto logical = contiguous_strides(shape);
      for (std::int64_t i = 0; i < n; ++i) {
        std::int64_t rem = i, at = kOffset;
        for (int d = 0; d < rank; ++d) {
          at += (rem / logical[d]) * strides[d];
          rem %= logical[d];
        }
        store_element(dtype, in.bytes.data(), at, values[i]);
      }
      in.view = TensorView::strided(in.bytes.data(), dtype, shape,
                                    std::span<const std::int64_t>(strides.data(), rank), kOffset);
      return in;
    }
    case Layout::kBroadcast: {
      std::vector<std::int64_t> stored_dims(shape.dims().begin(), shape.dims().end());
      for (int d = 0; d < rank; ++d) {
        if (broadcast_mask & (1u << d)) stored_dims[d] = 1;
      }
      const Shape stored{std::span<const std::int64_t>(stored_dims)};
      auto strides = contiguous_strides(stored);
      for (int d = 0; d < rank; ++d) {
        if (broadcast_mask & (1u << d)) strides[d] = 0;
      }
      in.bytes =
          AlignedBytes(static_cast<std::size_t>(std::max<std::int64_t>(stored.numel(), 1) * elem));
      const auto logical = contiguous_strides(shape);
      for (std::int64_t i = 0; i < n; ++i) {
        std::int64_t rem = i, at = 0;
        for (int d = 0; d < rank; ++d) {
          at += (rem / logical[d]) * strides[d];
          rem %= logical[d];
        }
        store_element(dtype, in.bytes.data(), at, values[i]);
      }
      in.view = TensorView::strided(in.bytes.data(), dtype, shape,
                                    std::span<const std::int64_t>(strides.data(), rank), 0);
      return in;
    }
  }
  return invalid_argument_error("unknown layout");
}

GuardedOutput::GuardedOutput(DType dtype, const Shape& shape) {
  // A quantized output is whole blocks (its rows are, as its generator makes them).
  payload_ = is_quantized(dtype)
                 ? static_cast<std::size_t>(shape.numel() / block_elems(dtype) * block_bytes(dtype))
                 : static_cast<std::size_t>(shape.numel() * dense_bytes(dtype));
  bytes_ = AlignedBytes(payload_ + 2 * kGuardBytes);
  view_ = TensorView::contiguous(bytes_.data() + kGuardBytes, dtype, shape);
  reset();
}

void GuardedOutput::reset() {
  std::memset(bytes_.data(), static_cast<int>(kGuardPattern), kGuardBytes);
  std::memset(bytes_.data() + kGuardBytes, static_cast<int>(kPoison), payload_);
  std::memset(bytes_.data() + kGuardBytes + payload_, static_cast<int>(kGuardPattern), kGuardBytes);
}

std::optional<std::int64_t> GuardedOutput::first_damaged_guard() const {
  const std::byte* b = bytes_.data();
  for (std::size_t i = 0; i < kGuardBytes; ++i) {
    if (b[i] != kGuardPattern) {
      return static_cast<std::int64_t>(i) - static_cast<std::int64_t>(kGuardBytes);
    }
  }
  for (std::size_t i = 0; i < kGuardBytes; ++i) {
    if (b[kGuardBytes + payload_ + i] != kGuardPattern) {
      return static_cast<std::int64_t>(payload_ + i);
    }
  }
  return std::nullopt;
}

std::vector<double> GuardedOutput::values() const {
  std::vector<double> out(static_cast<std::size_t>(view_.numel()));
  if (is_quantized(view_.dtype())) {
    // Poison bytes decode as NaN scales, so an unwritten block reads as NaN.
    std::vector<float> decoded(out.size());
    if (!dequantize(view_.dtype(), output_bytes(), decoded).is_ok()) {
      std::fill(out.begin(), out.end(), std::numeric_limits<double>::quiet_NaN());
      return out;
    }
    std::copy(decoded.begin(), decoded.end(), out.begin());
    return out;
  }
  for (std::int64_t i = 0; i < view_.numel(); ++i) {
    out[i] = load_element(view_.dtype(), view_.first(), i);
  }
  return out;
}

}  // namespace switchyard::verify_detail
