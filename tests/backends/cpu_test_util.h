// Helpers of the CPU kernel tests: owned tensors of any dtype filled from doubles,
// calls through the published binding table, and checks of results against a
// double-precision expectation under a kernel's declared precision bound.
#pragma once

#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "switchyard/binding_table.h"
#include "switchyard/dispatch.h"
#include "switchyard/half.h"
#include "switchyard/thread_pool.h"

namespace switchyard::test {

// An owned, contiguous tensor. Storage is 64-byte aligned and padded, so a view
// with an offset or custom strides can be made over it.
class Tensor {
 public:
  Tensor(DType dtype, Shape shape) : dtype_(dtype), shape_(shape) {
    const double bytes =
        static_cast<double>(shape.numel()) * block_bytes(dtype) / block_elems(dtype);
    bytes_ = static_cast<std::size_t>(std::ceil(bytes));
    storage_.assign(bytes_ / 8 + 16, 0);
  }
  // A tensor filled with `values` (converted to the dtype, rounding to nearest).
  static Tensor of(DType dtype, Shape shape, const std::vector<double>& values) {
    Tensor t(dtype, shape);
    EXPECT_EQ(static_cast<std::int64_t>(values.size()), shape.numel());
    for (std::size_t i = 0; i < values.size(); ++i) t.set(static_cast<std::int64_t>(i), values[i]);
    return t;
  }
  [[nodiscard]] void* data() { return storage_.data(); }
  [[nodiscard]] const void* data() const { return storage_.data(); }
  [[nodiscard]] DType dtype() const { return dtype_; }
  [[nodiscard]] const Shape& shape() const { return shape_; }
  [[nodiscard]] std::int64_t numel() const { return shape_.numel(); }
  [[nodiscard]] std::size_t bytes() const { return bytes_; }
  [[nodiscard]] TensorView view() { return TensorView::contiguous(data(), dtype_, shape_); }

  void set(std::int64_t i, double v) {
    auto* p = static_cast<std::byte*>(data());
    switch (dtype_) {
      case DType::kF32: reinterpret_cast<float*>(p)[i] = static_cast<float>(v); break;
      case DType::kF16:
        reinterpret_cast<std::uint16_t*>(p)[i] = f32_to_f16(static_cast<float>(v));
        break;
      case DType::kBF16:
        reinterpret_cast<std::uint16_t*>(p)[i] = f32_to_bf16(static_cast<float>(v));
        break;
      case DType::kI32: reinterpret_cast<std::int32_t*>(p)[i] = static_cast<std::int32_t>(v); break;
      default: break;  // block types stay zero-filled
    }
  }
  [[nodiscard]] double get(std::int64_t i) const {
    const auto* p = static_cast<const std::byte*>(data());
    switch (dtype_) {
      case DType::kF32: return reinterpret_cast<const float*>(p)[i];
      case DType::kF16: return f16_to_f32(reinterpret_cast<const std::uint16_t*>(p)[i]);
      case DType::kBF16: return bf16_to_f32(reinterpret_cast<const std::uint16_t*>(p)[i]);
      case DType::kI32: return reinterpret_cast<const std::int32_t*>(p)[i];
      default: return 0;
    }
  }
  [[nodiscard]] std::vector<double> values() const {
    std::vector<double> v(static_cast<std::size_t>(numel()));
    for (std::int64_t i = 0; i < numel(); ++i) v[static_cast<std::size_t>(i)] = get(i);
    return v;
  }
  // The stored value of `v` in this tensor's dtype (what a kernel reads).
  [[nodiscard]] double stored(double v) const {
    Tensor one(dtype_, Shape{1});
    one.set(0, v);
    return one.get(0);
  }
  [[nodiscard]] bool same_bytes(const Tensor& other) const {
    return bytes_ == other.bytes_ && std::memcmp(data(), other.data(), bytes_) == 0;
  }

 private:
  DType dtype_;
  Shape shape_;
  std::size_t bytes_ = 0;
  std::vector<std::uint64_t> storage_;
};

// Uniform values in [lo, hi), from a fixed seed.
inline std::vector<double> random_values(std::int64_t n, double lo, double hi,
                                         std::uint32_t seed = 7) {
  std::mt19937 gen(seed);
  std::uniform_real_distribution<double> dist(lo, hi);
  std::vector<double> v(static_cast<std::size_t>(n));
  for (double& x : v) x = dist(gen);
  return v;
}

// The CPU entries at a key, best first; empty on a miss.
inline std::vector<BindingEntry> cpu_entries(BindingKey key, const DTypeList& dtypes) {
  const TableSnapshot table = current_table();
  const std::span<const BindingEntry> alts =
      table->lookup_alternatives(key, dtypes, BackendId::kCpu);
  return {alts.begin(), alts.end()};
}

// Calls `entry` with the views, on `threads` threads (0: no runner, serial); a
// sibling that reads a weight packed at load gets it packed, as an executor
// gives it (Note [Prepacked weights]).
inline Status call_entry(const BindingEntry& entry, std::vector<TensorView> inputs,
                         std::vector<TensorView> outputs, const OpParams& params = {},
                         int threads = 0) {
  std::unique_ptr<ThreadPool> pool;
  ExecContext ctx;
  if (threads > 0) {
    pool = std::make_unique<ThreadPool>(threads);
    ctx.runner = pool.get();
  }
  std::shared_ptr<void> packed;
  if (entry.packing != nullptr) {
    SWITCHYARD_ASSIGN_OR_RETURN(
        packed, pack_operand(*entry.packing,
                             inputs[static_cast<std::size_t>(entry.packing->operand)], ctx));
  }
  KernelCall call{inputs, outputs, params, ctx, entry.name};
  return entry.fn(call);
}

// One ULP of the dtype at the magnitude of v.
inline double ulp_of(double v, DType t) {
  const int mantissa = t == DType::kF16 ? 10 : t == DType::kBF16 ? 7 : 23;
  const int min_exp = t == DType::kF16 ? -14 : -126;
  const double a = std::fabs(v);
  int e = a > 0 ? std::ilogb(a) : min_exp;
  if (e < min_exp) e = min_exp;
  return std::ldexp(1.0, e - mantissa);
}

// Whether `got` is within the claim's bounds of `expected` for output dtype `t`.
// Two NaNs, and two equal infinities, agree.
inline bool within(double got, double expected, const PrecisionGuarantee& p, DType t) {
  if (std::isnan(expected) || std::isnan(got)) return std::isnan(expected) && std::isnan(got);
  if (std::isinf(expected) || std::isinf(got)) {
    if (got == expected) return true;
    // A result that overflows the dtype rounds to infinity.
    const double max = t == DType::kF16 ? 65504.0 : t == DType::kBF16 ? 3.3895e38 : 3.4028234e38;
    return std::isinf(got) && !std::isinf(expected) && std::fabs(expected) >= max &&
           std::signbit(got) == std::signbit(expected);
  }
  const double err = std::fabs(got - expected);
  if (err == 0) return true;
  if (p.max_ulp && err <= *p.max_ulp * ulp_of(expected, t)) return true;
  if (p.max_rel && err <= *p.max_rel * std::fabs(expected)) return true;
  if (p.max_abs && err <= *p.max_abs) return true;
  return false;
}

// Expects every element of `got` within `entry`'s claim of `expected`.
inline void expect_within(const Tensor& got, const std::vector<double>& expected,
                          const BindingEntry& entry, const std::string& what = "") {
  ASSERT_EQ(got.numel(), static_cast<std::int64_t>(expected.size())) << entry.name;
  int failures = 0;
  for (std::int64_t i = 0; i < got.numel() && failures < 5; ++i) {
    const double g = got.get(i);
    const double e = expected[static_cast<std::size_t>(i)];
    if (!within(g, e, entry.precision, got.dtype())) {
      ++failures;
      ADD_FAILURE() << entry.name << " " << what << " element " << i << ": got " << g
                    << ", expected " << e << " (" << describe(entry.precision) << ")";
    }
  }
}

}  // namespace switchyard::test
