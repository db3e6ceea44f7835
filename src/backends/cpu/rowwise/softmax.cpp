#include <algorithm>
#include <cmath>
#include <limits>
#include <type_traits>
#include <vector>

#include "backends/cpu/rowwise/rowwise.h"
#include "backends/cpu/simd_rows.h"

namespace switchyard::cpu {
namespace {

const RowwiseSimd& simd_table(Variant v) {
  return v == Variant::kAvx512 ? rowwise_avx512() : rowwise_avx2();
}

// Softmax of the first `valid` columns in double; the rest, or a row with
// nothing unmasked, become zeros. A NaN logit makes the row NaN (the sum of its
// exponentials is NaN; a row of nothing but NaN is not a masked row).
template <typename S>
void softmax_ref_row(const S* x, const S* mask, S* out, std::int64_t cols, std::int64_t valid,
                     float scale, std::vector<double>& logits) {
  logits.resize(static_cast<std::size_t>(valid));
  double m = -std::numeric_limits<double>::infinity();
  for (std::int64_t j = 0; j < valid; ++j) {
    double v = static_cast<double>(to_f32(x[j])) * scale;
    if (mask != nullptr) v += to_f32(mask[j]);
    logits[j] = v;
    m = std::isnan(v) ? v : std::max(m, v);
    if (std::isnan(m)) break;
  }
  std::int64_t written = 0;
  if (std::isnan(m)) {
    std::fill(out, out + valid, from_f32<S>(std::numeric_limits<float>::quiet_NaN()));
    written = valid;
  } else if (valid > 0 && m != -std::numeric_limits<double>::infinity()) {
    double sum = 0.0;
    for (std::int64_t j = 0; j < valid; ++j) sum += std::exp(logits[j] - m);
    for (std::int64_t j = 0; j < valid; ++j) {
      out[j] = from_f32<S>(static_cast<float>(std::exp(logits[j] - m) / sum));
    }
    written = valid;
  }
  for (std::int64_t j = written; j < cols; ++j) out[j] = from_f32<S>(0.0f);
}

template <typename S, bool kMask, Variant kVariant>
Status softmax_kernel_impl(const KernelCall& call) {
  const std::string_view kernel = kernel_label(call);
  SWITCHYARD_RETURN_IF_ERROR(check_arity(call, kMask ? 2 : 1, 1, kernel));
  const TensorView& x = call.inputs[0];
  const TensorView& out = call.outputs[0];
  SWITCHYARD_RETURN_IF_ERROR(check_dtype(x, kDTypeOf<S>, kernel));
  SWITCHYARD_RETURN_IF_ERROR(check_dtype(out, kDTypeOf<S>, kernel));
  SWITCHYARD_RETURN_IF_ERROR(check_same_shape(x, out, kernel));
  SWITCHYARD_RETURN_IF_ERROR(check_contiguous(x, kernel));
  SWITCHYARD_RETURN_IF_ERROR(check_contiguous(out, kernel));
  if (x.rank() < 1) {
    return invalid_argument_error(fmt::format("{}: x must have rank >= 1", kernel));
  }
  const std::int64_t cols = x.shape().inner();
  const std::int64_t rows_per_matrix = x.rank() >= 2 ? x.dim(x.rank() - 2) : 1;
  const S* pmask = nullptr;
  if constexpr (kMask) {
    const TensorView& mask = call.inputs[1];
    SWITCHYARD_RETURN_IF_ERROR(check_dtype(mask, kDTypeOf<S>, kernel));
    SWITCHYARD_RETURN_IF_ERROR(check_contiguous(mask, kernel));
    if (mask.rank() != 2 || mask.dim(0) != rows_per_matrix || mask.dim(1) != cols) {
      return invalid_argument_error(fmt::format("{}: mask must have shape [{}, {}], got {}", kernel,
                                                rows_per_matrix, cols, mask.shape().to_string()));
    }
    pmask = mask.first_as<const S>();
  }
  const float scale = call.params.scale;
  const bool causal = call.params.causal;
  const std::int64_t query_offset = call.params.query_offset;
  const S* px = x.first_as<const S>();
  S* po = out.first_as<S>();
  call.ctx.parallel_for(
      x.shape().outer(), row_grain(cols), [&](std::int64_t begin, std::int64_t end) {
        std::vector<double> logits;
        // The SIMD rows keep their f32 exponentials here unless out is f32 (then
        // in out itself: that sweep writes it while computing, which overlaps).
        std::vector<float> scratch;
        if (kVariant != Variant::kRef && !std::is_same_v<S, float>) {
          scratch.resize(static_cast<std::size_t>(cols));
        }
        for (std::int64_t r = begin; r < end; ++r) {
          const std::int64_t i = rows_per_matrix > 0 ? r % rows_per_matrix : 0;
          std::int64_t valid = cols;
          if (causal) valid = std::clamp<std::int64_t>(i + query_offset + 1, 0, cols);
          const S* mrow = pmask != nullptr ? pmask + i * cols : nullptr;
          if constexpr (kVariant == Variant::kRef) {
            softmax_ref_row(px + r * cols, mrow, po + r * cols, cols, valid, scale, logits);
          } else {
            simd_table(kVariant).softmax[static_cast<int>(kStorageOf<S>)](
                px + r * cols, mrow, po + r * cols, cols, valid, scale,
                scratch.empty() ? nullptr : scratch.data());
          }
        }
      });
  return Status::ok();
}

template <bool kMask, Variant kVariant>
KernelFn softmax_for(DType t) {
  switch (t) {
    case DType::kF32: return &softmax_kernel_impl<float, kMask, kVariant>;
    case DType::kF16: return &softmax_kernel_impl<F16, kMask, kVariant>;
    case DType::kBF16: return &softmax_kernel_impl<BF16, kMask, kVariant>;
    default: return nullptr;
  }
}

template <Variant kVariant>
KernelFn softmax_for(DType t, bool with_mask) {
  return with_mask ? softmax_for<true, kVariant>(t) : softmax_for<false, kVariant>(t);
}

}  // namespace

KernelFn softmax_kernel(DType dtype, bool with_mask, Variant variant) {
  switch (variant) {
    case Variant::kRef: return softmax_for<Variant::kRef>(dtype, with_mask);
    case Variant::kAvx2: return softmax_for<Variant::kAvx2>(dtype, with_mask);
    case Variant::kAvx512: return softmax_for<Variant::kAvx512>(dtype, with_mask);
  }
  return nullptr;
}

}  // namespace switchyard::cpu
