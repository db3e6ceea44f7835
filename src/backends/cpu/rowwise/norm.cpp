#include <cmath>

#include "backends/cpu/rowwise/rowwise.h"
#include "backends/cpu/simd_rows.h"

namespace switchyard::cpu {
namespace {

const RowwiseSimd& simd_table(Variant v) {
  return v == Variant::kAvx512 ? rowwise_avx512() : rowwise_avx2();
}

template <typename S>
void rms_norm_ref_row(const S* x, const S* w, S* out, std::int64_t d, float eps) {
  double sumsq = 0.0;
  for (std::int64_t j = 0; j < d; ++j) {
    const double v = to_f32(x[j]);
    sumsq += v * v;
  }
  const double inv = 1.0 / std::sqrt(sumsq / static_cast<double>(d) + eps);
  for (std::int64_t j = 0; j < d; ++j) {
    double v = to_f32(x[j]) * inv;
    if (w != nullptr) v *= to_f32(w[j]);
    out[j] = from_f32<S>(static_cast<float>(v));
  }
}

template <typename S>
void layer_norm_ref_row(const S* x, const S* w, const S* b, S* out, std::int64_t d, float eps) {
  double sum = 0.0;
  for (std::int64_t j = 0; j < d; ++j) sum += to_f32(x[j]);
  const double mean = sum / static_cast<double>(d);
  double var = 0.0;
  for (std::int64_t j = 0; j < d; ++j) {
    const double c = to_f32(x[j]) - mean;
    var += c * c;
  }
  const double inv = 1.0 / std::sqrt(var / static_cast<double>(d) + eps);
  for (std::int64_t j = 0; j < d; ++j) {
    double v = (to_f32(x[j]) - mean) * inv;
    if (w != nullptr) v *= to_f32(w[j]);
    if (b != nullptr) v += to_f32(b[j]);
    out[j] = from_f32<S>(static_cast<float>(v));
  }
}

template <OpKind kOp, typename S, int kInputs, Variant kVariant>
Status norm_kernel_impl(const KernelCall& call) {
  const std::string_view kernel = kernel_label(call);
  SWITCHYARD_RETURN_IF_ERROR(check_arity(call, kInputs, 1, kernel));
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
  const std::int64_t d = x.shape().inner();
  const S* params[2] = {nullptr, nullptr};
  for (int i = 1; i < kInputs; ++i) {
    const TensorView& p = call.inputs[i];
    SWITCHYARD_RETURN_IF_ERROR(check_dtype(p, kDTypeOf<S>, kernel));
    SWITCHYARD_RETURN_IF_ERROR(check_contiguous(p, kernel));
    if (p.rank() != 1 || p.dim(0) != d) {
      return invalid_argument_error(fmt::format("{}: {} must have shape [{}], got {}", kernel,
                                                i == 1 ? "weight" : "bias", d,
                                                p.shape().to_string()));
    }
    params[i - 1] = p.first_as<const S>();
  }
  const float eps = call.params.eps;
  const S* px = x.first_as<const S>();
  S* po = out.first_as<S>();
  call.ctx.parallel_for(x.shape().outer(), row_grain(d), [&](std::int64_t begin, std::int64_t end) {
    for (std::int64_t r = begin; r < end; ++r) {
      const S* xr = px + r * d;
      S* orow = po + r * d;
      if constexpr (kVariant == Variant::kRef) {
        if constexpr (kOp == OpKind::kRmsNorm) {
          rms_norm_ref_row(xr, params[0], orow, d, eps);
        } else {
          layer_norm_ref_row(xr, params[0], params[1], orow, d, eps);
        }
      } else {
        const RowwiseSimd& t = simd_table(kVariant);
        const int s = static_cast<int>(kStorageOf<S>);
        if constexpr (kOp == OpKind::kRmsNorm) {
          t.rms_norm[s](xr, params[0], orow, d, eps);
        } else {
          t.layer_norm[s](xr, params[0], params[1], orow, d, eps);
        }
      }
    }
  });
  return Status::ok();
}

template <OpKind kOp, int kInputs, Variant kVariant>
KernelFn norm_for_dtype(DType t) {
  switch (t) {
    case DType::kF32: return &norm_kernel_impl<kOp, float, kInputs, kVariant>;
    case DType::kF16: return &norm_kernel_impl<kOp, F16, kInputs, kVariant>;
    case DType::kBF16: return &norm_kernel_impl<kOp, BF16, kInputs, kVariant>;
    default: return nullptr;
  }
}

template <Variant kVariant>
KernelFn norm_for(OpKind op, DType t, int inputs) {
  if (op == OpKind::kRmsNorm) {
    if (inputs == 1) return norm_for_dtype<OpKind::kRmsNorm, 1, kVariant>(t);
    if (inputs == 2) return norm_for_dtype<OpKind::kRmsNorm, 2, kVariant>(t);
  } else if (op == OpKind::kLayerNorm) {
    if (inputs == 1) return norm_for_dtype<OpKind::kLayerNorm, 1, kVariant>(t);
    if (inputs == 2) return norm_for_dtype<OpKind::kLayerNorm, 2, kVariant>(t);
    if (inputs == 3) return norm_for_dtype<OpKind::kLayerNorm, 3, kVariant>(t);
  }
  return nullptr;
}

}  // namespace

KernelFn norm_kernel(OpKind op, DType dtype, int inputs, Variant variant) {
  switch (variant) {
    case Variant::kRef: return norm_for<Variant::kRef>(op, dtype, inputs);
    case Variant::kAvx2: return norm_for<Variant::kAvx2>(op, dtype, inputs);
    case Variant::kAvx512: return norm_for<Variant::kAvx512>(op, dtype, inputs);
  }
  return nullptr;
}

}  // namespace switchyard::cpu
