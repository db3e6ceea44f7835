// What the CPU backend knows about each unary op of op.def, but its SIMD formula
// (apply_unary in elementwise_simd.inl): the scalar formula of the reference
// kernels and the accuracy its siblings claim (registration.cpp). With those two
// files, a new unary op touches op.def, the float64 reference in
// src/verify/reference.cpp, this header and the SIMD body: docs/adding.md.
//
// Per-op code is a chain of `if constexpr` over OpKind ending in a static_assert,
// so a unary op of op.def without its line here does not compile (Note [Per-op
// code over kOpsOfFamily] in op.h).
#pragma once

#include <cmath>

#include "backends/cpu/simd_rows.h"
#include "switchyard/op.h"

namespace switchyard::cpu {

// The value of a unary op, for the reference kernels. Transcendental functions
// are evaluated in double so the only error left is the final rounding.
template <OpKind kOp>
float unary_scalar(float xf, float scale) {
  const double x = xf;
  if constexpr (kOp == OpKind::kNeg) {
    return -xf;
  } else if constexpr (kOp == OpKind::kRelu) {
    return xf > 0.0f || std::isnan(xf) ? xf : 0.0f;
  } else if constexpr (kOp == OpKind::kScale) {
    return xf * scale;
  } else if constexpr (kOp == OpKind::kSqrt) {
    return std::sqrt(xf);
  } else if constexpr (kOp == OpKind::kRsqrt) {
    return static_cast<float>(1.0 / std::sqrt(x));
  } else if constexpr (kOp == OpKind::kExp) {
    return static_cast<float>(std::exp(x));
  } else if constexpr (kOp == OpKind::kSigmoid) {
    return static_cast<float>(1.0 / (1.0 + std::exp(-x)));
  } else if constexpr (kOp == OpKind::kSilu) {
    return static_cast<float>(x / (1.0 + std::exp(-x)));
  } else if constexpr (kOp == OpKind::kTanh) {
    return static_cast<float>(std::tanh(x));
  } else if constexpr (kOp == OpKind::kGelu) {
    // 0.5 x (1 + tanh(y)) written as x / (1 + e^(-2y)), which does not cancel.
    const double y = 0.7978845608028654 * (x + 0.044715 * x * x * x);
    return static_cast<float>(x / (1.0 + std::exp(-2.0 * y)));
  } else if constexpr (kOp == OpKind::kGeluQuick) {
    return static_cast<float>(x / (1.0 + std::exp(-1.702 * x)));
  } else if constexpr (kOp == OpKind::kGeluErf) {
    // 0.5 x (1 + erf(x / sqrt 2)) == 0.5 x erfc(-x / sqrt 2), exact for negative x.
    return static_cast<float>(0.5 * x * std::erfc(-x * 0.7071067811865476));
  } else {
    static_assert(kNoCodeForOp<kOp>, "a unary op of op.def has no reference formula here");
  }
}

// How a unary op's siblings compute, for their precision claims.
struct UnaryAccuracy {
  // One correctly rounded f32 operation (neg, relu, sqrt, scale): exact in f32 and
  // in the SIMD rows alike.
  bool exact = false;
  // Otherwise the f32 relative error of the SIMD rows (simd_vec.h), measured over
  // the whole f32 range by cpu_elementwise_test with a margin; gelu's argument is
  // itself rounded, which scales the exp error by up to |2y| where the result is
  // tiny.
  double simd_rel = 0;
  // Rows that store f16 evaluate the exponential to f16 accuracy (Note
  // [Exponentials for f16 results]): 1e-5 more, checked on every f16 input.
  bool f16_exp = false;
};

// One per unary op of op.def with a SIMD row; an op added there without a line
// here does not compile (Note [Per-op code over kOpsOfFamily] in op.h).
template <OpKind kOp>
constexpr UnaryAccuracy unary_accuracy() {
  if constexpr (kOp == OpKind::kNeg || kOp == OpKind::kRelu || kOp == OpKind::kSqrt ||
                kOp == OpKind::kScale) {
    return {.exact = true};
  } else if constexpr (kOp == OpKind::kExp) {
    return {.simd_rel = 4e-7, .f16_exp = true};
  } else if constexpr (kOp == OpKind::kSigmoid || kOp == OpKind::kSilu) {
    return {.simd_rel = 6e-7, .f16_exp = true};
  } else if constexpr (kOp == OpKind::kTanh) {
    return {.simd_rel = 6e-7};
  } else if constexpr (kOp == OpKind::kGelu) {
    return {.simd_rel = 2e-5, .f16_exp = true};
  } else if constexpr (kOp == OpKind::kGeluQuick) {
    // silu's error, and the rounded argument -1.702 x scales the exponential's
    // error by up to |1.702 x| where the result is tiny, as gelu's does.
    return {.simd_rel = 2e-5, .f16_exp = true};
  } else if constexpr (kOp == OpKind::kRsqrt) {
    return {.simd_rel = 1.2e-7};
  } else {
    // gelu_erf has no SIMD row (has_simd_unary_row); a new op must say how its rows
    // compute.
    static_assert(!has_simd_unary_row(kOp), "a unary op with a SIMD row has no stated accuracy");
    return {};
  }
}

}  // namespace switchyard::cpu
