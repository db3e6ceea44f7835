// The elementwise SIMD rows (binary, unary, casts), written once over simd_vec.h
// and compiled per instruction set by elementwise_avx2.cpp and
// elementwise_avx512.cpp. See simd_rows.h for the contracts and simd_vec.h for the
// rules every ISA file keeps.
#include <type_traits>
#include <utility>

#include "backends/cpu/simd_rows.h"
#include "backends/cpu/simd_vec.h"

namespace switchyard::cpu::SWITCHYARD_SIMD_NS {
namespace {

// One branch per op of the family (Note [Per-op code over kOpsOfFamily] in op.h);
// make_table instantiates each for every op of kOpsOfFamily.
template <OpKind kOp>
inline VF apply_binary(VF a, VF b) {
  if constexpr (kOp == OpKind::kAdd) {
    return vadd(a, b);
  } else if constexpr (kOp == OpKind::kSub) {
    return vsub(a, b);
  } else if constexpr (kOp == OpKind::kMul) {
    return vmul(a, b);
  } else if constexpr (kOp == OpKind::kDiv) {
    return vdiv(a, b);
  } else {
    static_assert(kNoCodeForOp<kOp>, "a binary op of op.def has no SIMD formula here");
  }
}

template <OpKind kOp, typename S>
void binary_row(const void* av, std::int64_t sa, const void* bv, std::int64_t sb, void* ov,
                std::int64_t n) {
  const S* a = static_cast<const S*>(av);
  const S* b = static_cast<const S*>(bv);
  S* out = static_cast<S*>(ov);
  // A broadcast operand is converted once, through the same vector load.
  const VF a0 = splat(a);
  const VF b0 = splat(b);
  const S zero{};
  std::int64_t i = 0;
  for (; i + kW <= n; i += kW) {
    const VF x = sa ? load(a + i) : a0;
    const VF y = sb ? load(b + i) : b0;
    store(out + i, apply_binary<kOp>(x, y));
  }
  if (i < n) {
    const VF x = sa ? load_partial(a + i, n - i, zero) : a0;
    const VF y = sb ? load_partial(b + i, n - i, zero) : b0;
    store_partial(out + i, n - i, apply_binary<kOp>(x, y));
  }
}

// The exponentials of f16 rows need only f16 accuracy: Note [Exponentials for
// f16 results] in simd_vec.h.
template <OpKind kOp, typename S>
inline VF apply_unary(VF x, VF param) {
  constexpr ExpAccuracy kAcc = std::is_same_v<S, F16> ? ExpAccuracy::kF16 : ExpAccuracy::kF32;
  if constexpr (kOp == OpKind::kNeg) {
    return vxor(x, vset(-0.0f));
  } else if constexpr (kOp == OpKind::kExp) {
    return vexp<kAcc>(x);
  } else if constexpr (kOp == OpKind::kSilu) {
    return vdiv_one_plus_exp<kAcc>(x, vxor(x, vset(-0.0f)));
  } else if constexpr (kOp == OpKind::kGelu) {
    // 0.5 x (1 + tanh(y)) == x / (1 + e^(-2y)): no cancellation for negative x.
    // -2y = x (k + k 0.044715 x^2) with k = -2 sqrt(2 / pi), the constants folded.
    constexpr double kMinus2C = -2.0 * 0.7978845608028654;
    const VF minus_2y = vmul(x, vfma(vmul(x, x), vset(static_cast<float>(kMinus2C * 0.044715)),
                                     vset(static_cast<float>(kMinus2C))));
    return vdiv_one_plus_exp<kAcc>(x, minus_2y);
  } else if constexpr (kOp == OpKind::kGeluQuick) {
    return vdiv_one_plus_exp<kAcc>(x, vmul(x, vset(-1.702f)));
  } else if constexpr (kOp == OpKind::kRelu) {
    // max(0, x) returns its second operand when either is NaN, so relu(NaN) is
    // NaN (docs/ops.md: non-finite values propagate).
    return vmax(vset(0.0f), x);
  } else if constexpr (kOp == OpKind::kSqrt) {
    return vsqrt(x);
  } else if constexpr (kOp == OpKind::kRsqrt) {
    return vdiv(vset(1.0f), vsqrt(x));
  } else if constexpr (kOp == OpKind::kSigmoid) {
    return vdiv_one_plus_exp<kAcc>(vset(1.0f), vxor(x, vset(-0.0f)));
  } else if constexpr (kOp == OpKind::kTanh) {
    return vtanh(x);
  } else if constexpr (kOp == OpKind::kScale) {
    return vmul(x, param);
  } else {
    static_assert(kNoCodeForOp<kOp>,
                  "a unary op of op.def has no SIMD formula here (or has_simd_unary_row is false)");
  }
}

// Elements ahead of the current vector that unary_row prefetches.
constexpr std::int64_t kUnaryPrefetch = 512;

template <OpKind kOp, typename S>
void unary_row(const void* xv, void* ov, std::int64_t n, float param) {
  const S* x = static_cast<const S*>(xv);
  S* out = static_cast<S*>(ov);
  const VF p = vset(param);
  std::int64_t i = 0;
  // Two vectors per step keep two independent dependency chains in flight for the
  // transcendental ops.
  for (; i + 2 * kW <= n; i += 2 * kW) {
    // The transcendental ops keep few loads in flight (each vector is a long
    // dependency chain): fetch the input a few hundred elements ahead.
    prefetch(x + i + kUnaryPrefetch);
    prefetch(x + i + kW + kUnaryPrefetch);
    const VF r0 = apply_unary<kOp, S>(load(x + i), p);
    const VF r1 = apply_unary<kOp, S>(load(x + i + kW), p);
    store(out + i, r0);
    store(out + i + kW, r1);
  }
  for (; i + kW <= n; i += kW) store(out + i, apply_unary<kOp, S>(load(x + i), p));
  if (i < n) {
    const S zero{};
    store_partial(out + i, n - i, apply_unary<kOp, S>(load_partial(x + i, n - i, zero), p));
  }
}

template <typename From, typename To>
void cast_row(const void* xv, void* ov, std::int64_t n) {
  const From* x = static_cast<const From*>(xv);
  To* out = static_cast<To*>(ov);
  std::int64_t i = 0;
  for (; i + kW <= n; i += kW) store(out + i, load(x + i));
  if (i < n) {
    const From zero{};
    store_partial(out + i, n - i, load_partial(x + i, n - i, zero));
  }
}

template <OpKind kOp>
constexpr void fill_binary(ElementwiseSimd& t) {
  const int op = index_in_family(kOp);
  t.binary[op][0] = &binary_row<kOp, float>;
  t.binary[op][1] = &binary_row<kOp, F16>;
  t.binary[op][2] = &binary_row<kOp, BF16>;
}

template <OpKind kOp>
constexpr void fill_unary(ElementwiseSimd& t) {
  if constexpr (has_simd_unary_row(kOp)) {
    const int op = index_in_family(kOp);
    t.unary[op][0] = &unary_row<kOp, float>;
    t.unary[op][1] = &unary_row<kOp, F16>;
    t.unary[op][2] = &unary_row<kOp, BF16>;
  }
}

// Every binary and unary op of op.def, through kOpsOfFamily.
template <std::size_t... B, std::size_t... U>
constexpr void fill_ops(ElementwiseSimd& t, std::index_sequence<B...>, std::index_sequence<U...>) {
  (fill_binary<kOpsOfFamily<OpFamily::kBinary>[B]>(t), ...);
  (fill_unary<kOpsOfFamily<OpFamily::kUnary>[U]>(t), ...);
}

constexpr ElementwiseSimd make_table() {
  ElementwiseSimd t{};
  fill_ops(t, std::make_index_sequence<kBinaryOpCount>{},
           std::make_index_sequence<kUnaryOpCount>{});
  t.cast[0][1] = &cast_row<float, F16>;
  t.cast[0][2] = &cast_row<float, BF16>;
  t.cast[1][0] = &cast_row<F16, float>;
  t.cast[1][2] = &cast_row<F16, BF16>;
  t.cast[2][0] = &cast_row<BF16, float>;
  t.cast[2][1] = &cast_row<BF16, F16>;
  return t;
}

constexpr ElementwiseSimd kTable = make_table();

}  // namespace
}  // namespace switchyard::cpu::SWITCHYARD_SIMD_NS
