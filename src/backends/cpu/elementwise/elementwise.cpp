#include "backends/cpu/elementwise/elementwise.h"

#include <cmath>
#include <cstdint>
#include <limits>
#include <utility>

#include "backends/cpu/elementwise/unary_ops.h"
#include "backends/cpu/simd_rows.h"

namespace switchyard::cpu {
namespace {

const ElementwiseSimd& simd_table(Variant v) {
  return v == Variant::kAvx512 ? elementwise_avx512() : elementwise_avx2();
}

// --- binary ------------------------------------------------------------------

// The per-op formulas follow Note [Per-op code over kOpsOfFamily] in op.h: one
// branch per op of the family, instantiated for each through by_family below.
template <OpKind kOp>
float binary_scalar(float a, float b) {
  if constexpr (kOp == OpKind::kAdd) {
    return a + b;
  } else if constexpr (kOp == OpKind::kSub) {
    return a - b;
  } else if constexpr (kOp == OpKind::kMul) {
    return a * b;
  } else if constexpr (kOp == OpKind::kDiv) {
    return a / b;
  } else {
    static_assert(kNoCodeForOp<kOp>, "a binary op of op.def has no reference formula here");
  }
}

template <OpKind kOp, typename S, Variant kVariant>
Status binary_kernel_impl(const KernelCall& call) {
  const std::string_view kernel = kernel_label(call);
  SWITCHYARD_RETURN_IF_ERROR(check_arity(call, 2, 1, kernel));
  const TensorView& a = call.inputs[0];
  const TensorView& b = call.inputs[1];
  const TensorView& out = call.outputs[0];
  for (const TensorView* t : {&a, &b, &out}) {
    SWITCHYARD_RETURN_IF_ERROR(check_dtype(*t, kDTypeOf<S>, kernel));
    SWITCHYARD_RETURN_IF_ERROR(check_same_shape(*t, out, kernel));
  }
  SWITCHYARD_RETURN_IF_ERROR(check_writable(out, kernel));
  const S* pa = static_cast<const S*>(a.data());
  const S* pb = static_cast<const S*>(b.data());
  S* po = static_cast<S*>(out.data());
  BinaryRowFn simd = nullptr;
  if constexpr (kVariant != Variant::kRef) {
    simd = simd_table(kVariant).binary[index_in_family(kOp)][static_cast<int>(kStorageOf<S>)];
  }
  // One row: SIMD where the last dimension allows it, else element by element.
  auto row = [&](std::int64_t ia, std::int64_t sa, std::int64_t ib, std::int64_t sb,
                 std::int64_t io, std::int64_t so, std::int64_t n) {
    if (simd != nullptr && (sa == 0 || sa == 1) && (sb == 0 || sb == 1) && so == 1) {
      simd(pa + ia, sa, pb + ib, sb, po + io, n);
      return;
    }
    for (std::int64_t j = 0; j < n; ++j) {
      po[io + j * so] =
          from_f32<S>(binary_scalar<kOp>(to_f32(pa[ia + j * sa]), to_f32(pb[ib + j * sb])));
    }
  };
  if (a.is_contiguous() && b.is_contiguous() && out.is_contiguous()) {
    // Dense operands are one long row, split into element chunks.
    const std::int64_t base_a = a.offset(), base_b = b.offset(), base_o = out.offset();
    call.ctx.parallel_for(out.numel(), kElementGrain, [&](std::int64_t begin, std::int64_t end) {
      row(base_a + begin, 1, base_b + begin, 1, base_o + begin, 1, end - begin);
    });
    return Status::ok();
  }
  const int rank = out.rank();
  const std::int64_t inner = out.shape().inner();
  const std::int64_t sa = rank ? a.stride(rank - 1) : 0;
  const std::int64_t sb = rank ? b.stride(rank - 1) : 0;
  const std::int64_t so = rank ? out.stride(rank - 1) : 1;
  const TensorView* const views[3] = {&a, &b, &out};
  call.ctx.parallel_for(out.shape().outer(), row_grain(inner),
                        [&](std::int64_t begin, std::int64_t end) {
                          std::int64_t off[3];
                          for (std::int64_t r = begin; r < end; ++r) {
                            row_offsets(out.shape(), views, r, off);
                            row(off[0], sa, off[1], sb, off[2], so, inner);
                          }
                        });
  return Status::ok();
}

template <OpKind kOp, Variant kVariant>
KernelFn binary_for_dtype(DType t) {
  switch (t) {
    case DType::kF32: return &binary_kernel_impl<kOp, float, kVariant>;
    case DType::kF16: return &binary_kernel_impl<kOp, F16, kVariant>;
    case DType::kBF16: return &binary_kernel_impl<kOp, BF16, kVariant>;
    default: return nullptr;
  }
}

// The kernel of `op` at `t`, through a table with one slot per op of `kFamily`
// (kOpsOfFamily): every op of the family gets its kernels, and an op of another
// family gets none.
template <OpFamily kFamily, template <OpKind, Variant> class Pick, Variant kVariant,
          std::size_t... I>
KernelFn by_family(OpKind op, DType t, std::index_sequence<I...>) {
  using PerDType = KernelFn (*)(DType);
  static constexpr PerDType kByOp[] = {&Pick<kOpsOfFamily<kFamily>[I], kVariant>::fn...};
  return op_family(op) == kFamily ? kByOp[index_in_family(op)](t) : nullptr;
}

template <OpKind kOp, Variant kVariant>
struct PickBinary {
  static KernelFn fn(DType t) { return binary_for_dtype<kOp, kVariant>(t); }
};

template <Variant kVariant>
KernelFn binary_for(OpKind op, DType t) {
  return by_family<OpFamily::kBinary, PickBinary, kVariant>(
      op, t, std::make_index_sequence<kOpsOfFamily<OpFamily::kBinary>.size()>{});
}

// --- unary -------------------------------------------------------------------

template <OpKind kOp, typename S, Variant kVariant>
Status unary_kernel_impl(const KernelCall& call) {
  const std::string_view kernel = kernel_label(call);
  SWITCHYARD_RETURN_IF_ERROR(check_arity(call, 1, 1, kernel));
  const TensorView& x = call.inputs[0];
  const TensorView& out = call.outputs[0];
  SWITCHYARD_RETURN_IF_ERROR(check_dtype(x, kDTypeOf<S>, kernel));
  SWITCHYARD_RETURN_IF_ERROR(check_dtype(out, kDTypeOf<S>, kernel));
  SWITCHYARD_RETURN_IF_ERROR(check_same_shape(x, out, kernel));
  SWITCHYARD_RETURN_IF_ERROR(check_writable(out, kernel));
  const float scale = call.params.scale;
  const S* px = static_cast<const S*>(x.data());
  S* po = static_cast<S*>(out.data());
  if constexpr (kVariant != Variant::kRef) {
    SWITCHYARD_RETURN_IF_ERROR(check_contiguous(x, kernel));
    SWITCHYARD_RETURN_IF_ERROR(check_contiguous(out, kernel));
    const UnaryRowFn fn =
        simd_table(kVariant).unary[index_in_family(kOp)][static_cast<int>(kStorageOf<S>)];
    const S* bx = px + x.offset();
    S* bo = po + out.offset();
    call.ctx.parallel_for(out.numel(), kElementGrain, [&](std::int64_t begin, std::int64_t end) {
      fn(bx + begin, bo + begin, end - begin, scale);
    });
  } else {
    const int rank = out.rank();
    const std::int64_t inner = out.shape().inner();
    const std::int64_t sx = rank ? x.stride(rank - 1) : 0;
    const std::int64_t so = rank ? out.stride(rank - 1) : 1;
    const TensorView* const views[2] = {&x, &out};
    call.ctx.parallel_for(
        out.shape().outer(), row_grain(inner), [&](std::int64_t begin, std::int64_t end) {
          std::int64_t off[2];
          for (std::int64_t r = begin; r < end; ++r) {
            row_offsets(out.shape(), views, r, off);
            for (std::int64_t j = 0; j < inner; ++j) {
              po[off[1] + j * so] =
                  from_f32<S>(unary_scalar<kOp>(to_f32(px[off[0] + j * sx]), scale));
            }
          }
        });
  }
  return Status::ok();
}

template <OpKind kOp, Variant kVariant>
KernelFn unary_for_dtype(DType t) {
  if constexpr (kVariant != Variant::kRef && !has_simd_unary_row(kOp)) {
    return nullptr;
  } else {
    switch (t) {
      case DType::kF32: return &unary_kernel_impl<kOp, float, kVariant>;
      case DType::kF16: return &unary_kernel_impl<kOp, F16, kVariant>;
      case DType::kBF16: return &unary_kernel_impl<kOp, BF16, kVariant>;
      default: return nullptr;
    }
  }
}

template <OpKind kOp, Variant kVariant>
struct PickUnary {
  static KernelFn fn(DType t) { return unary_for_dtype<kOp, kVariant>(t); }
};

template <Variant kVariant>
KernelFn unary_for(OpKind op, DType t) {
  return by_family<OpFamily::kUnary, PickUnary, kVariant>(
      op, t, std::make_index_sequence<kOpsOfFamily<OpFamily::kUnary>.size()>{});
}

// --- casts -------------------------------------------------------------------

// Float to int32: round to nearest even, saturate, NaN to 0 (docs/ops.md).
std::int32_t float_to_i32(float f) {
  if (std::isnan(f)) return 0;
  if (f >= 2147483648.0f) return std::numeric_limits<std::int32_t>::max();
  if (f <= -2147483648.0f) return std::numeric_limits<std::int32_t>::min();
  // Rounding by hand keeps the result independent of the floating-point
  // environment's rounding mode.
  const double d = f;
  double t = std::trunc(d);
  const double frac = d - t;
  if (frac > 0.5 || (frac == 0.5 && std::fmod(t, 2.0) != 0.0)) t += 1.0;
  if (frac < -0.5 || (frac == -0.5 && std::fmod(t, 2.0) != 0.0)) t -= 1.0;
  return static_cast<std::int32_t>(t);
}

// int32 to bf16 with one rounding: the double holds the integer exactly, and its
// significand is rounded to bf16's 8 bits (nearest even) on the bit pattern, so no
// intermediate f32 rounding can double-round.
std::uint16_t i32_to_bf16(std::int32_t v) {
  const auto bits = std::bit_cast<std::uint64_t>(static_cast<double>(v));
  constexpr int kDrop = 52 - 7;
  const std::uint64_t lsb = (bits >> kDrop) & 1u;
  const std::uint64_t rounded =
      (bits + ((std::uint64_t{1} << (kDrop - 1)) - 1 + lsb)) & ~((std::uint64_t{1} << kDrop) - 1);
  // The rounded value has 8 significant bits: exact in f32 and in bf16.
  return f32_to_bf16(static_cast<float>(std::bit_cast<double>(rounded)));
}

template <typename From, typename To>
To convert(From v) {
  if constexpr (std::is_same_v<To, std::int32_t>) {
    return float_to_i32(to_f32(v));
  } else if constexpr (std::is_same_v<From, std::int32_t>) {
    if constexpr (std::is_same_v<To, BF16>) {
      return BF16{i32_to_bf16(v)};
    } else {
      // f32 rounds once; for f16 the f32 value is exact up to 2^24, and every
      // integer beyond that overflows f16 to infinity either way.
      return from_f32<To>(static_cast<float>(v));
    }
  } else {
    return from_f32<To>(to_f32(v));
  }
}

template <typename From, typename To, Variant kVariant>
Status cast_kernel_impl(const KernelCall& call) {
  const std::string_view kernel = kernel_label(call);
  SWITCHYARD_RETURN_IF_ERROR(check_arity(call, 1, 1, kernel));
  const TensorView& in = call.inputs[0];
  const TensorView& out = call.outputs[0];
  SWITCHYARD_RETURN_IF_ERROR(check_dtype(in, kDTypeOf<From>, kernel));
  SWITCHYARD_RETURN_IF_ERROR(check_dtype(out, kDTypeOf<To>, kernel));
  SWITCHYARD_RETURN_IF_ERROR(check_same_shape(in, out, kernel));
  SWITCHYARD_RETURN_IF_ERROR(check_contiguous(in, kernel));
  SWITCHYARD_RETURN_IF_ERROR(check_contiguous(out, kernel));
  const From* src = in.first_as<const From>();
  To* dst = out.first_as<To>();
  if constexpr (kVariant != Variant::kRef) {
    const CastRowFn fn =
        simd_table(kVariant)
            .cast[static_cast<int>(kStorageOf<From>)][static_cast<int>(kStorageOf<To>)];
    call.ctx.parallel_for(in.numel(), kElementGrain, [&](std::int64_t begin, std::int64_t end) {
      fn(src + begin, dst + begin, end - begin);
    });
  } else {
    call.ctx.parallel_for(in.numel(), kElementGrain, [&](std::int64_t begin, std::int64_t end) {
      for (std::int64_t i = begin; i < end; ++i) dst[i] = convert<From, To>(src[i]);
    });
  }
  return Status::ok();
}

template <typename From, Variant kVariant>
KernelFn cast_from(DType to) {
  constexpr bool kFromFloat = !std::is_same_v<From, std::int32_t>;
  constexpr bool kSimd = kVariant != Variant::kRef;
  switch (to) {
    case DType::kF32:
      if constexpr (!std::is_same_v<From, float> && (!kSimd || kFromFloat)) {
        return &cast_kernel_impl<From, float, kVariant>;
      }
      return nullptr;
    case DType::kF16:
      if constexpr (!std::is_same_v<From, F16> && (!kSimd || kFromFloat)) {
        return &cast_kernel_impl<From, F16, kVariant>;
      }
      return nullptr;
    case DType::kBF16:
      if constexpr (!std::is_same_v<From, BF16> && (!kSimd || kFromFloat)) {
        return &cast_kernel_impl<From, BF16, kVariant>;
      }
      return nullptr;
    case DType::kI32:
      if constexpr (kFromFloat && !kSimd) return &cast_kernel_impl<From, std::int32_t, kVariant>;
      return nullptr;
    default: return nullptr;
  }
}

template <Variant kVariant>
KernelFn cast_for(DType from, DType to) {
  switch (from) {
    case DType::kF32: return cast_from<float, kVariant>(to);
    case DType::kF16: return cast_from<F16, kVariant>(to);
    case DType::kBF16: return cast_from<BF16, kVariant>(to);
    case DType::kI32: return cast_from<std::int32_t, kVariant>(to);
    default: return nullptr;
  }
}

}  // namespace

KernelFn binary_kernel(OpKind op, DType dtype, Variant variant) {
  switch (variant) {
    case Variant::kRef: return binary_for<Variant::kRef>(op, dtype);
    case Variant::kAvx2: return binary_for<Variant::kAvx2>(op, dtype);
    case Variant::kAvx512: return binary_for<Variant::kAvx512>(op, dtype);
  }
  return nullptr;
}

KernelFn unary_kernel(OpKind op, DType dtype, Variant variant) {
  switch (variant) {
    case Variant::kRef: return unary_for<Variant::kRef>(op, dtype);
    case Variant::kAvx2: return unary_for<Variant::kAvx2>(op, dtype);
    case Variant::kAvx512: return unary_for<Variant::kAvx512>(op, dtype);
  }
  return nullptr;
}

KernelFn cast_kernel(DType from, DType to, Variant variant) {
  switch (variant) {
    case Variant::kRef: return cast_for<Variant::kRef>(from, to);
    case Variant::kAvx2: return cast_for<Variant::kAvx2>(from, to);
    case Variant::kAvx512: return cast_for<Variant::kAvx512>(from, to);
  }
  return nullptr;
}

}  // namespace switchyard::cpu
