// TensorView: a non-owning description of tensor memory that kernels read and
// write: a base pointer, dtype, shape, strides, element offset and the backend whose
// memory it is.
//
// Strides and the offset count elements, not bytes, for every dtype. A
// block-quantized tensor must be contiguous in its last dimension and keep every
// row start on a block boundary; `byte_offset` refuses an element index that is not.
//
// Example
//   float data[6] = {};
//   TensorView v = TensorView::contiguous(data, DType::kF32, {2, 3});
//   // v.is_contiguous(), v.numel() == 6, v.strides() == {3, 1}
#pragma once

#include <array>
#include <cstdint>
#include <initializer_list>
#include <optional>
#include <span>
#include <string>

#include "switchyard/backend.h"
#include "switchyard/dtype.h"

namespace switchyard {

inline constexpr int kMaxRank = 6;

// Dimensions of a tensor, outermost first. Rank 0 is a scalar.
class Shape {
 public:
  Shape() = default;
  Shape(std::initializer_list<std::int64_t> dims);
  explicit Shape(std::span<const std::int64_t> dims);

  [[nodiscard]] int rank() const { return rank_; }
  [[nodiscard]] std::int64_t operator[](int i) const { return dims_[i]; }
  [[nodiscard]] std::span<const std::int64_t> dims() const {
    return {dims_.data(), static_cast<std::size_t>(rank_)};
  }
  // Product of the dimensions (1 for a scalar).
  [[nodiscard]] std::int64_t numel() const;
  // The last dimension, or 1 for a scalar.
  [[nodiscard]] std::int64_t inner() const { return rank_ == 0 ? 1 : dims_[rank_ - 1]; }
  // Product of all but the last dimension.
  [[nodiscard]] std::int64_t outer() const;
  // "[2, 3]".
  [[nodiscard]] std::string to_string() const;

  friend bool operator==(const Shape& a, const Shape& b) {
    if (a.rank_ != b.rank_) return false;
    for (int i = 0; i < a.rank_; ++i) {
      if (a.dims_[i] != b.dims_[i]) return false;
    }
    return true;
  }

 private:
  int rank_ = 0;
  std::array<std::int64_t, kMaxRank> dims_{};
};

// Validates dimensions: every one >= 0, rank <= kMaxRank, element count fits int64.
[[nodiscard]] Result<Shape> make_shape(std::span<const std::int64_t> dims);

class TensorView {
 public:
  TensorView() = default;

  // A contiguous (row-major) view. Aborts if `shape` has more than kMaxRank dims.
  static TensorView contiguous(void* data, DType dtype, Shape shape,
                               BackendId backend = BackendId::kCpu);
  // A view with explicit strides (elements) and element offset.
  static TensorView strided(void* data, DType dtype, Shape shape,
                            std::span<const std::int64_t> strides, std::int64_t offset = 0,
                            BackendId backend = BackendId::kCpu);

  [[nodiscard]] void* data() const { return data_; }
  [[nodiscard]] DType dtype() const { return dtype_; }
  [[nodiscard]] BackendId backend() const { return backend_; }
  [[nodiscard]] const Shape& shape() const { return shape_; }
  [[nodiscard]] int rank() const { return shape_.rank(); }
  [[nodiscard]] std::int64_t dim(int i) const { return shape_[i]; }
  [[nodiscard]] std::int64_t numel() const { return shape_.numel(); }
  [[nodiscard]] std::span<const std::int64_t> strides() const {
    return {strides_.data(), static_cast<std::size_t>(shape_.rank())};
  }
  [[nodiscard]] std::int64_t stride(int i) const { return strides_[i]; }
  [[nodiscard]] std::int64_t offset() const { return offset_; }

  // Row-major with no gaps (and no broadcast): element i lives at offset + i.
  [[nodiscard]] bool is_contiguous() const;
  // Some dimension longer than 1 has stride 0 (a broadcast operand).
  [[nodiscard]] bool has_broadcast() const;
  // The last dimension is unit-stride (or has length <= 1).
  [[nodiscard]] bool inner_contiguous() const;

  // Byte offset of element index `elem` (counted from the base pointer). For a
  // quantized dtype `elem` must sit on a block boundary; anything else aborts.
  [[nodiscard]] std::int64_t byte_offset(std::int64_t elem) const;
  // Pointer to the first element (base + offset).
  [[nodiscard]] std::byte* first() const;
  // Typed pointer to the first element; checks nothing about T.
  template <typename T>
  [[nodiscard]] T* first_as() const {
    return reinterpret_cast<T*>(first());
  }
  // A view of the same memory with another shape; the view must be contiguous.
  [[nodiscard]] Result<TensorView> reshaped(Shape shape) const;

 private:
  void* data_ = nullptr;
  DType dtype_ = DType::kF32;
  BackendId backend_ = BackendId::kCpu;
  Shape shape_;
  std::array<std::int64_t, kMaxRank> strides_{};
  std::int64_t offset_ = 0;
};

// Row-major strides for `shape`.
[[nodiscard]] std::array<std::int64_t, kMaxRank> contiguous_strides(const Shape& shape);

// "f32[2, 3]" with strides when not contiguous.
[[nodiscard]] std::string describe(const TensorView& view);

// The first element (in row-major order of the view's shape) of an f32, f16 or
// bf16 view in host memory that is NaN or infinite, with its value; nullopt when
// every element is finite or the dtype is not one of those three.
struct NonFinite {
  std::int64_t index = 0;
  double value = 0;
};
[[nodiscard]] std::optional<NonFinite> first_non_finite(const TensorView& view);

}  // namespace switchyard
