#include <cmath>
#include <limits>

#include "backends/cpu/rowwise/rowwise.h"
#include "backends/cpu/simd_rows.h"

namespace switchyard::cpu {
namespace {

const RowwiseSimd& simd_table(Variant v) {
  return v == Variant::kAvx512 ? rowwise_avx512() : rowwise_avx2();
}

template <OpKind kOp, typename S>
float reduce_ref_row(const S* x, std::int64_t d) {
  if constexpr (kOp == OpKind::kMax) {
    float m = -std::numeric_limits<float>::infinity();
    for (std::int64_t j = 0; j < d; ++j) {
      const float v = to_f32(x[j]);
      if (std::isnan(v)) return v;
      m = v > m ? v : m;
    }
    return m;
  } else {
    double sum = 0.0;
    for (std::int64_t j = 0; j < d; ++j) sum += to_f32(x[j]);
    if constexpr (kOp == OpKind::kMean) sum /= static_cast<double>(d);
    return static_cast<float>(sum);
  }
}

template <OpKind kOp, typename S, Variant kVariant>
Status reduce_kernel_impl(const KernelCall& call) {
  const std::string_view kernel = kernel_label(call);
  SWITCHYARD_RETURN_IF_ERROR(check_arity(call, 1, 1, kernel));
  const TensorView& x = call.inputs[0];
  const TensorView& out = call.outputs[0];
  SWITCHYARD_RETURN_IF_ERROR(check_dtype(x, kDTypeOf<S>, kernel));
  SWITCHYARD_RETURN_IF_ERROR(check_dtype(out, kDTypeOf<S>, kernel));
  SWITCHYARD_RETURN_IF_ERROR(check_contiguous(x, kernel));
  SWITCHYARD_RETURN_IF_ERROR(check_contiguous(out, kernel));
  bool shape_ok = x.rank() >= 1 && out.rank() == x.rank() && out.shape().inner() == 1;
  for (int i = 0; shape_ok && i + 1 < x.rank(); ++i) shape_ok = x.dim(i) == out.dim(i);
  if (!shape_ok) {
    return invalid_argument_error(fmt::format("{}: output {} is not {} with the last dim 1", kernel,
                                              out.shape().to_string(), x.shape().to_string()));
  }
  const std::int64_t d = x.shape().inner();
  const S* px = x.first_as<const S>();
  S* po = out.first_as<S>();
  call.ctx.parallel_for(x.shape().outer(), row_grain(d), [&](std::int64_t begin, std::int64_t end) {
    for (std::int64_t r = begin; r < end; ++r) {
      float v;
      if constexpr (kVariant == Variant::kRef) {
        v = reduce_ref_row<kOp, S>(px + r * d, d);
      } else {
        const RowwiseSimd& t = simd_table(kVariant);
        const int s = static_cast<int>(kStorageOf<S>);
        if constexpr (kOp == OpKind::kMax) {
          v = t.max[s](px + r * d, d);
        } else {
          v = t.sum[s](px + r * d, d);
          if constexpr (kOp == OpKind::kMean) v /= static_cast<float>(d);
        }
      }
      po[r] = from_f32<S>(v);
    }
  });
  return Status::ok();
}

template <OpKind kOp, Variant kVariant>
KernelFn reduce_for_dtype(DType t) {
  switch (t) {
    case DType::kF32: return &reduce_kernel_impl<kOp, float, kVariant>;
    case DType::kF16: return &reduce_kernel_impl<kOp, F16, kVariant>;
    case DType::kBF16: return &reduce_kernel_impl<kOp, BF16, kVariant>;
    default: return nullptr;
  }
}

template <Variant kVariant>
KernelFn reduce_for(OpKind op, DType t) {
  switch (op) {
    case OpKind::kSum: return reduce_for_dtype<OpKind::kSum, kVariant>(t);
    case OpKind::kMean: return reduce_for_dtype<OpKind::kMean, kVariant>(t);
    case OpKind::kMax: return reduce_for_dtype<OpKind::kMax, kVariant>(t);
    default: return nullptr;
  }
}

}  // namespace

KernelFn reduce_kernel(OpKind op, DType dtype, Variant variant) {
  switch (variant) {
    case Variant::kRef: return reduce_for<Variant::kRef>(op, dtype);
    case Variant::kAvx2: return reduce_for<Variant::kAvx2>(op, dtype);
    case Variant::kAvx512: return reduce_for<Variant::kAvx512>(op, dtype);
  }
  return nullptr;
}

}  // namespace switchyard::cpu
