// Small f32 kernels and table helpers for planner and executor tests. Each kernel
// checks the operands it needs and computes in a fixed order, so a test can compare
// a planned run against calling the kernels node by node.
#pragma once

#include <cmath>
#include <memory>
#include <string>
#include <vector>

#include "switchyard/binding_table.h"
#include "switchyard/dispatch.h"
#include "switchyard/graph.h"

namespace switchyard::testing {

inline Status need_contiguous_f32(const KernelCall& call, std::size_t inputs) {
  if (call.inputs.size() != inputs || call.outputs.size() != 1) {
    return invalid_argument_error("test kernel: wrong arity");
  }
  for (const TensorView& t : call.inputs) {
    if (t.dtype() != DType::kF32) return invalid_argument_error("test kernel: not f32");
  }
  if (!call.outputs[0].is_contiguous()) return invalid_argument_error("test kernel: strided out");
  return Status::ok();
}

// Element i of a view with the output's shape (handles strides and broadcast).
inline float at(const TensorView& t, std::int64_t i) {
  std::int64_t offset = t.offset();
  for (int d = t.rank() - 1; d >= 0; --d) {
    offset += (i % t.dim(d)) * t.stride(d);
    i /= t.dim(d);
  }
  return static_cast<const float*>(t.data())[offset];
}

template <float (*F)(float)>
Status unary_kernel(const KernelCall& call) {
  SWITCHYARD_RETURN_IF_ERROR(need_contiguous_f32(call, 1));
  float* out = call.outputs[0].first_as<float>();
  for (std::int64_t i = 0; i < call.outputs[0].numel(); ++i) out[i] = F(at(call.inputs[0], i));
  return Status::ok();
}

inline float silu_f(float x) { return x / (1.0f + std::exp(-x)); }
inline float relu_f(float x) { return x > 0 ? x : 0.0f; }
inline float neg_f(float x) { return -x; }

template <int kOp>
Status binary_kernel(const KernelCall& call) {
  SWITCHYARD_RETURN_IF_ERROR(need_contiguous_f32(call, 2));
  float* out = call.outputs[0].first_as<float>();
  for (std::int64_t i = 0; i < call.outputs[0].numel(); ++i) {
    const float a = at(call.inputs[0], i), b = at(call.inputs[1], i);
    out[i] = kOp == 0 ? a + b : a * b;
  }
  return Status::ok();
}

// x [.., K] (contiguous) times w [N, K] into out [.., N], plus an optional bias [N].
inline void matmul_rows(const float* x, const float* w, const float* bias, float* out,
                        std::int64_t rows, std::int64_t n, std::int64_t k) {
  for (std::int64_t r = 0; r < rows; ++r) {
    for (std::int64_t j = 0; j < n; ++j) {
      float acc = 0.0f;
      for (std::int64_t p = 0; p < k; ++p) acc += x[r * k + p] * w[j * k + p];
      out[r * n + j] = bias ? acc + bias[j] : acc;
    }
  }
}

inline Status matmul_kernel(const KernelCall& call) {
  SWITCHYARD_RETURN_IF_ERROR(need_contiguous_f32(call, 2));
  const TensorView& x = call.inputs[0];
  const TensorView& w = call.inputs[1];
  if (!x.is_contiguous() || !w.is_contiguous()) return invalid_argument_error("strided");
  matmul_rows(x.first_as<const float>(), w.first_as<const float>(), nullptr,
              call.outputs[0].first_as<float>(), x.shape().outer(), w.dim(0), x.shape().inner());
  return Status::ok();
}

// Distinct functions with matmul's behaviour: siblings under one key must differ.
template <int kVariant>
Status matmul_variant(const KernelCall& call) {
  return matmul_kernel(call);
}

inline Status linear_kernel(const KernelCall& call) {
  SWITCHYARD_RETURN_IF_ERROR(need_contiguous_f32(call, 3));
  const TensorView& x = call.inputs[0];
  const TensorView& w = call.inputs[1];
  matmul_rows(x.first_as<const float>(), w.first_as<const float>(),
              call.inputs[2].first_as<const float>(), call.outputs[0].first_as<float>(),
              x.shape().outer(), w.dim(0), x.shape().inner());
  return Status::ok();
}

inline Status ffn_swiglu_kernel(const KernelCall& call) {
  SWITCHYARD_RETURN_IF_ERROR(need_contiguous_f32(call, 4));
  const TensorView& x = call.inputs[0];
  const std::int64_t rows = x.shape().outer(), d = x.shape().inner(), f = call.inputs[1].dim(0);
  std::vector<float> g(rows * f), u(rows * f);
  matmul_rows(x.first_as<const float>(), call.inputs[1].first_as<const float>(), nullptr, g.data(),
              rows, f, d);
  matmul_rows(x.first_as<const float>(), call.inputs[2].first_as<const float>(), nullptr, u.data(),
              rows, f, d);
  for (std::size_t i = 0; i < g.size(); ++i) g[i] = silu_f(g[i]) * u[i];
  matmul_rows(g.data(), call.inputs[3].first_as<const float>(), nullptr,
              call.outputs[0].first_as<float>(), rows, d, f);
  return Status::ok();
}

inline void rms_rows(const float* x, const float* w, float* out, std::int64_t rows, std::int64_t d,
                     float eps) {
  for (std::int64_t r = 0; r < rows; ++r) {
    float ss = 0.0f;
    for (std::int64_t i = 0; i < d; ++i) ss += x[r * d + i] * x[r * d + i];
    const float inv = 1.0f / std::sqrt(ss / static_cast<float>(d) + eps);
    for (std::int64_t i = 0; i < d; ++i) {
      const float v = x[r * d + i] * inv;
      out[r * d + i] = w ? v * w[i] : v;
    }
  }
}

inline Status rms_norm_kernel(const KernelCall& call) {
  SWITCHYARD_RETURN_IF_ERROR(need_contiguous_f32(call, 1));
  const TensorView& x = call.inputs[0];
  rms_rows(x.first_as<const float>(), nullptr, call.outputs[0].first_as<float>(), x.shape().outer(),
           x.shape().inner(), call.params.eps);
  return Status::ok();
}

inline Status rms_norm_mul_kernel(const KernelCall& call) {
  SWITCHYARD_RETURN_IF_ERROR(need_contiguous_f32(call, 2));
  const TensorView& x = call.inputs[0];
  rms_rows(x.first_as<const float>(), call.inputs[1].first_as<const float>(),
           call.outputs[0].first_as<float>(), x.shape().outer(), x.shape().inner(),
           call.params.eps);
  return Status::ok();
}

inline Status failing_kernel(const KernelCall&) {
  return data_loss_error("the test kernel failed on purpose");
}

inline PrecisionGuarantee audited() {
  return PrecisionGuarantee::bounded(true, true, std::nullopt, 1e-5, std::nullopt);
}

inline KernelOptions opts(std::string name, OpKind op, KernelCaps caps = {},
                          PrecisionGuarantee precision = audited()) {
  return {.name = std::move(name),
          .caps = caps,
          .precision = precision,
          .cost = default_cost_for(op),
          .source = "test"};
}

inline constexpr KernelCaps kBroadcastCaps{.strided_input = true, .broadcast_input = true};

inline DTypeList f32s(int n) {
  std::vector<DType> d(static_cast<std::size_t>(n), DType::kF32);
  return DTypeList(std::span<const DType>(d));
}

// The f32 kernels of a decomposed MLP/FFN on `b`: add, mul (broadcasting), silu,
// relu, matmul, rms_norm.
inline void register_basic(KernelBindingTable& t, BackendId b, std::string suffix) {
  t.register_kernel(OpKind::kAdd, f32s(3), b, &binary_kernel<0>,
                    opts("add_f32__" + suffix, OpKind::kAdd, kBroadcastCaps));
  t.register_kernel(OpKind::kMul, f32s(3), b, &binary_kernel<1>,
                    opts("mul_f32__" + suffix, OpKind::kMul, kBroadcastCaps));
  t.register_kernel(OpKind::kSilu, f32s(2), b, &unary_kernel<silu_f>,
                    opts("silu_f32__" + suffix, OpKind::kSilu));
  t.register_kernel(OpKind::kRelu, f32s(2), b, &unary_kernel<relu_f>,
                    opts("relu_f32__" + suffix, OpKind::kRelu));
  t.register_kernel(OpKind::kMatmul, f32s(3), b, &matmul_kernel,
                    opts("matmul_f32__" + suffix, OpKind::kMatmul));
  t.register_kernel(OpKind::kRmsNorm, f32s(2), b, &rms_norm_kernel,
                    opts("rms_norm_f32__" + suffix, OpKind::kRmsNorm));
}

inline void register_fused(KernelBindingTable& t, BackendId b, std::string suffix) {
  t.register_kernel(OpKind::kLinear, f32s(4), b, &linear_kernel,
                    opts("linear_f32__" + suffix, OpKind::kLinear));
  t.register_kernel(OpKind::kFfnSwiglu, f32s(5), b, &ffn_swiglu_kernel,
                    opts("ffn_swiglu_f32__" + suffix, OpKind::kFfnSwiglu));
  t.register_kernel(OpKind::kRmsNormMul, f32s(3), b, &rms_norm_mul_kernel,
                    opts("rms_norm_mul_f32__" + suffix, OpKind::kRmsNormMul));
}

inline TableSnapshot finalize(KernelBindingTable t) {
  Status s = t.finalize();
  SWITCHYARD_CHECK_MSG(s.is_ok(), s.to_string());
  return std::make_shared<const KernelBindingTable>(std::move(t));
}

// Deterministic pseudo-random values in [-1, 1).
inline std::vector<float> ramp(std::size_t n, std::uint32_t seed) {
  std::vector<float> v(n);
  std::uint32_t s = seed * 2654435761u + 1;
  for (float& x : v) {
    s = s * 1664525u + 1013904223u;
    x = static_cast<float>(s >> 8) / static_cast<float>(1u << 23) - 1.0f;
  }
  return v;
}

}  // namespace switchyard::testing
