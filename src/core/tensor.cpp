#include "switchyard/tensor.h"

#include <cmath>
#include <cstring>
#include <limits>

#include <fmt/format.h>

#include "switchyard/half.h"

namespace switchyard {

Shape::Shape(std::initializer_list<std::int64_t> dims)
    : Shape(std::span<const std::int64_t>(dims.begin(), dims.size())) {}

Shape::Shape(std::span<const std::int64_t> dims) {
  SWITCHYARD_CHECK_MSG(dims.size() <= kMaxRank, "rank exceeds kMaxRank");
  rank_ = static_cast<int>(dims.size());
  for (int i = 0; i < rank_; ++i) dims_[i] = dims[i];
}

std::int64_t Shape::numel() const {
  std::int64_t n = 1;
  for (int i = 0; i < rank_; ++i) n *= dims_[i];
  return n;
}

std::int64_t Shape::outer() const {
  std::int64_t n = 1;
  for (int i = 0; i + 1 < rank_; ++i) n *= dims_[i];
  return n;
}

std::string Shape::to_string() const { return fmt::format("[{}]", fmt::join(dims(), ", ")); }

Result<Shape> make_shape(std::span<const std::int64_t> dims) {
  if (dims.size() > kMaxRank) {
    return invalid_argument_error(
        fmt::format("rank {} exceeds the maximum of {}", dims.size(), kMaxRank));
  }
  std::int64_t n = 1;
  for (std::int64_t d : dims) {
    if (d < 0) return invalid_argument_error(fmt::format("negative dimension {}", d));
    if (d != 0 && n > std::numeric_limits<std::int64_t>::max() / d) {
      return out_of_range_error(
          fmt::format("shape [{}] has more elements than fit in int64", fmt::join(dims, ", ")));
    }
    n *= d;
  }
  return Shape(dims);
}

std::array<std::int64_t, kMaxRank> contiguous_strides(const Shape& shape) {
  std::array<std::int64_t, kMaxRank> strides{};
  std::int64_t step = 1;
  for (int i = shape.rank() - 1; i >= 0; --i) {
    strides[i] = step;
    step *= shape[i];
  }
  return strides;
}

TensorView TensorView::contiguous(void* data, DType dtype, Shape shape, BackendId backend) {
  TensorView v;
  v.data_ = data;
  v.dtype_ = dtype;
  v.backend_ = backend;
  v.shape_ = shape;
  v.strides_ = contiguous_strides(shape);
  return v;
}

TensorView TensorView::strided(void* data, DType dtype, Shape shape,
                               std::span<const std::int64_t> strides, std::int64_t offset,
                               BackendId backend) {
  SWITCHYARD_CHECK_MSG(strides.size() == static_cast<std::size_t>(shape.rank()),
                       "one stride per dimension");
  TensorView v;
  v.data_ = data;
  v.dtype_ = dtype;
  v.backend_ = backend;
  v.shape_ = shape;
  for (std::size_t i = 0; i < strides.size(); ++i) v.strides_[i] = strides[i];
  v.offset_ = offset;
  return v;
}

bool TensorView::is_contiguous() const {
  std::int64_t expected = 1;
  for (int i = rank() - 1; i >= 0; --i) {
    if (shape_[i] != 1 && strides_[i] != expected) return false;
    expected *= shape_[i];
  }
  return true;
}

bool TensorView::has_broadcast() const {
  for (int i = 0; i < rank(); ++i) {
    if (shape_[i] > 1 && strides_[i] == 0) return true;
  }
  return false;
}

bool TensorView::inner_contiguous() const {
  return rank() == 0 || shape_[rank() - 1] <= 1 || strides_[rank() - 1] == 1;
}

std::int64_t TensorView::byte_offset(std::int64_t elem) const {
  const std::int64_t per_block = block_elems(dtype_);
  SWITCHYARD_CHECK_MSG(elem % per_block == 0, "element index is inside a quantized block");
  return elem / per_block * block_bytes(dtype_);
}

std::byte* TensorView::first() const {
  return static_cast<std::byte*>(data_) + byte_offset(offset_);
}

Result<TensorView> TensorView::reshaped(Shape shape) const {
  if (!is_contiguous()) {
    return failed_precondition_error("only a contiguous view can be reshaped");
  }
  if (shape.numel() != numel()) {
    return invalid_argument_error(fmt::format("cannot reshape {} elements {} to {}", numel(),
                                              shape_.to_string(), shape.to_string()));
  }
  TensorView v = contiguous(data_, dtype_, shape, backend_);
  v.offset_ = offset_;
  return v;
}

std::string describe(const TensorView& view) {
  std::string text = fmt::format("{}{}", name(view.dtype()), view.shape().to_string());
  if (!view.is_contiguous()) {
    text += fmt::format(" strides [{}]", fmt::join(view.strides(), ", "));
  }
  if (view.offset() != 0) text += fmt::format(" offset {}", view.offset());
  return text;
}

std::optional<NonFinite> first_non_finite(const TensorView& view) {
  const DType t = view.dtype();
  if (t != DType::kF32 && t != DType::kF16 && t != DType::kBF16) return std::nullopt;
  const int rank = view.rank();
  const std::int64_t n = view.numel();
  const auto* base = static_cast<const std::byte*>(view.data());
  const std::int64_t size = dense_bytes(t);
  std::array<std::int64_t, kMaxRank> index{};
  std::int64_t at = view.offset();  // element offset of `index`
  for (std::int64_t i = 0; i < n; ++i) {
    const std::byte* p = base + at * size;
    float value;
    if (t == DType::kF32) {
      std::memcpy(&value, p, sizeof value);
    } else {
      std::uint16_t half;
      std::memcpy(&half, p, sizeof half);
      value = t == DType::kF16 ? f16_to_f32(half) : bf16_to_f32(half);
    }
    if (!std::isfinite(value)) return NonFinite{i, value};
    // Advance the index like an odometer, innermost dimension first.
    for (int d = rank - 1; d >= 0; --d) {
      at += view.stride(d);
      if (++index[static_cast<std::size_t>(d)] < view.dim(d)) break;
      at -= view.stride(d) * view.dim(d);
      index[static_cast<std::size_t>(d)] = 0;
    }
  }
  return std::nullopt;
}

}  // namespace switchyard
