#include <cmath>
#include <vector>

#include "backends/cpu/rowwise/rowwise.h"
#include "backends/cpu/simd_rows.h"

namespace switchyard::cpu {
namespace {

// rope: the reference rotates in double and rounds once; the SIMD siblings take the
// same double-precision angles, round cos and sin to f32 and rotate in f32
// (rowwise_simd.inl). Both split work by (batch, token) rows.
template <typename S, Variant kVariant>
Status rope_kernel_impl(const KernelCall& call) {
  const std::string_view kernel = kernel_label(call);
  // x, positions, and optionally frequency factors.
  const bool factored = call.inputs.size() == 3;
  SWITCHYARD_RETURN_IF_ERROR(check_arity(call, factored ? 3 : 2, 1, kernel));
  const TensorView& x = call.inputs[0];
  const TensorView& pos = call.inputs[1];
  const TensorView& out = call.outputs[0];
  SWITCHYARD_RETURN_IF_ERROR(check_dtype(x, kDTypeOf<S>, kernel));
  SWITCHYARD_RETURN_IF_ERROR(check_dtype(pos, DType::kI32, kernel));
  SWITCHYARD_RETURN_IF_ERROR(check_dtype(out, kDTypeOf<S>, kernel));
  SWITCHYARD_RETURN_IF_ERROR(check_same_shape(x, out, kernel));
  for (const TensorView* t : {&x, &pos, &out}) {
    SWITCHYARD_RETURN_IF_ERROR(check_contiguous(*t, kernel));
  }
  if (x.rank() < 3) {
    return invalid_argument_error(
        fmt::format("{}: x must be [..., T, H, D], got {}", kernel, x.shape().to_string()));
  }
  const std::int64_t d = x.dim(x.rank() - 1);
  const std::int64_t heads = x.dim(x.rank() - 2);
  const std::int64_t tokens = x.dim(x.rank() - 3);
  if (pos.rank() != 1 || pos.dim(0) != tokens) {
    return invalid_argument_error(fmt::format("{}: positions must have shape [{}], got {}", kernel,
                                              tokens, pos.shape().to_string()));
  }
  const std::int64_t dims = call.params.rope_dims == 0 ? d : call.params.rope_dims;
  if (dims < 0 || dims > d || dims % 2 != 0) {
    return invalid_argument_error(
        fmt::format("{}: rope_dims {} must be even and within the head size {}", kernel, dims, d));
  }
  const std::int64_t half = dims / 2;
  const bool neox = call.params.rope_mode == RopeMode::kNeox;
  const double base = call.params.rope_base;
  const S* px = x.first_as<const S>();
  const std::int32_t* pp = pos.first_as<const std::int32_t>();
  S* po = out.first_as<S>();
  // One row is one (batch, token): its angles are shared by every head.
  const std::int64_t rows = tokens > 0 && heads > 0 && d > 0 ? x.numel() / (heads * d) : 0;
  // The frequencies depend only on the pair index: base^(-2i / dims), divided by
  // the pair's factor when there are factors, once a call.
  const float* factors = nullptr;
  if (factored) {
    const TensorView& f = call.inputs[2];
    SWITCHYARD_RETURN_IF_ERROR(check_dtype(f, DType::kF32, kernel));
    SWITCHYARD_RETURN_IF_ERROR(check_contiguous(f, kernel));
    if (f.rank() != 1 || f.dim(0) != half) {
      return invalid_argument_error(
          fmt::format("{}: frequency factors must have shape [{}], got {}", kernel, half,
                      f.shape().to_string()));
    }
    factors = f.first_as<const float>();
  }
  std::vector<double> inv_freq(static_cast<std::size_t>(half));
  for (std::int64_t i = 0; i < half; ++i) {
    inv_freq[i] = std::pow(base, -2.0 * static_cast<double>(i) / static_cast<double>(dims));
    if (factors != nullptr) inv_freq[i] /= static_cast<double>(factors[i]);
  }
  call.ctx.parallel_for(rows, row_grain(heads * d), [&](std::int64_t begin, std::int64_t end) {
    std::vector<double> cos_t(static_cast<std::size_t>(half)), sin_t(cos_t.size());
    // The SIMD rows' f32 tables (layout in simd_rows.h).
    std::vector<float> cs(kVariant == Variant::kRef ? 0 : static_cast<std::size_t>(2 * dims));
    for (std::int64_t r = begin; r < end; ++r) {
      const double p = pp[r % tokens];
      for (std::int64_t i = 0; i < half; ++i) {
        const double theta = p * inv_freq[i];
        cos_t[i] = std::cos(theta);
        sin_t[i] = std::sin(theta);
      }
      if constexpr (kVariant != Variant::kRef) {
        for (std::int64_t i = 0; i < half; ++i) {
          const auto c = static_cast<float>(cos_t[i]);
          const auto sn = static_cast<float>(sin_t[i]);
          if (neox) {
            cs[i] = c;
            cs[half + i] = sn;
          } else {
            cs[2 * i] = c;
            cs[2 * i + 1] = c;
            cs[dims + 2 * i] = -sn;
            cs[dims + 2 * i + 1] = sn;
          }
        }
        const RowwiseSimd& t = kVariant == Variant::kAvx512 ? rowwise_avx512() : rowwise_avx2();
        t.rope[static_cast<int>(kStorageOf<S>)](px + r * heads * d, po + r * heads * d, cs.data(),
                                                heads, d, dims, neox);
        continue;
      }
      for (std::int64_t h = 0; h < heads; ++h) {
        const S* xi = px + (r * heads + h) * d;
        S* oi = po + (r * heads + h) * d;
        for (std::int64_t i = 0; i < half; ++i) {
          const std::int64_t iu = neox ? i : 2 * i;
          const std::int64_t iv = neox ? i + half : 2 * i + 1;
          const double u = to_f32(xi[iu]);
          const double v = to_f32(xi[iv]);
          oi[iu] = from_f32<S>(static_cast<float>(u * cos_t[i] - v * sin_t[i]));
          oi[iv] = from_f32<S>(static_cast<float>(u * sin_t[i] + v * cos_t[i]));
        }
        for (std::int64_t j = dims; j < d; ++j) oi[j] = xi[j];
      }
    }
  });
  return Status::ok();
}

template <Variant kVariant>
KernelFn rope_for(DType dtype) {
  switch (dtype) {
    case DType::kF32: return &rope_kernel_impl<float, kVariant>;
    case DType::kF16: return &rope_kernel_impl<F16, kVariant>;
    case DType::kBF16: return &rope_kernel_impl<BF16, kVariant>;
    default: return nullptr;
  }
}

}  // namespace

KernelFn rope_kernel(DType dtype, Variant variant) {
  switch (variant) {
    case Variant::kRef: return rope_for<Variant::kRef>(dtype);
    case Variant::kAvx2: return rope_for<Variant::kAvx2>(dtype);
    case Variant::kAvx512: return rope_for<Variant::kAvx512>(dtype);
  }
  return nullptr;
}

}  // namespace switchyard::cpu
