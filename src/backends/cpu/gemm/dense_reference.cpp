// Portable references of the dense matmul family for every float key: scalar,
// bit-stable and deterministic at any thread count (one thread computes each output
// element, in index order). Registered last at each key, after the SIMD siblings,
// and used as the CPU's answer where no SIMD kernel can run.
#include <cmath>
#include <vector>

#include "backends/cpu/gemm/dense_kernels.h"
#include "backends/cpu/gemm/dense_reference.h"
#include "backends/cpu/gemm/gemm_support.h"
#include "backends/cpu/operand_checks.h"

namespace switchyard::cpu {
namespace {

// out[r, j] = Σ_k a[r, k] · w[j, k] (+ bias[j]) for rows [r0, r1) of one matrix.
void dot_rows(DType at, const std::byte* a, DType wt, const std::byte* w, DType ot, std::byte* out,
              const float* bias, std::int64_t r0, std::int64_t r1, std::int64_t n, std::int64_t k) {
  for (std::int64_t r = r0; r < r1; ++r) {
    for (std::int64_t j = 0; j < n; ++j) {
      float acc = 0.0f;
      for (std::int64_t p = 0; p < k; ++p) {
        acc += load_float(at, a, r * k + p) * load_float(wt, w, j * k + p);
      }
      store_float(ot, out, r * n + j, bias != nullptr ? acc + bias[j] : acc);
    }
  }
}

}  // namespace

template <DType A, DType W, DType O>
Status matmul_ref(const KernelCall& call) {
  SWITCHYARD_ASSIGN_OR_RETURN(const MatmulDims d, check_matmul(call, A, W, O));
  const std::byte* a = call.inputs[0].first();
  const std::byte* w = call.inputs[1].first();
  std::byte* out = call.outputs[0].first();
  const std::int64_t rows = d.batch * d.m;
  call.ctx.parallel_for(rows, 1, [&](std::int64_t begin, std::int64_t end) {
    for (std::int64_t row = begin; row < end; ++row) {
      const std::int64_t b = d.m > 0 ? row / d.m : 0;
      const std::byte* wb = w + (d.shared_weights ? 0 : b * d.n * d.k * float_bytes(W));
      // Row `row` of a and out, computed as row 0 of a one-row problem.
      dot_rows(A, a + row * d.k * float_bytes(A), W, wb, O, out + row * d.n * float_bytes(O),
               nullptr, 0, 1, d.n, d.k);
    }
  });
  return Status::ok();
}

template <DType W>
Status linear_ref(const KernelCall& call) {
  SWITCHYARD_RETURN_IF_ERROR(check_arity(call, 3, 1, call.name));
  const TensorView& x = call.inputs[0];
  const TensorView& w = call.inputs[1];
  const TensorView& bias = call.inputs[2];
  const TensorView& out = call.outputs[0];
  SWITCHYARD_RETURN_IF_ERROR(check_dtype(x, DType::kF32, call.name));
  SWITCHYARD_RETURN_IF_ERROR(check_dtype(w, W, call.name));
  SWITCHYARD_RETURN_IF_ERROR(check_dtype(bias, DType::kF32, call.name));
  SWITCHYARD_RETURN_IF_ERROR(check_dtype(out, DType::kF32, call.name));
  for (const TensorView* t : {&x, &w, &bias, &out}) {
    if (!t->is_contiguous()) {
      return invalid_argument_error(
          fmt::format("{}: operands must be contiguous, got {}", call.name, describe(*t)));
    }
  }
  const std::int64_t k = x.shape().inner();
  const std::int64_t n = w.rank() == 2 ? w.dim(0) : -1;
  if (x.rank() < 1 || w.rank() != 2 || w.dim(1) != k || bias.rank() != 1 || bias.dim(0) != n ||
      out.rank() != x.rank() || out.shape().inner() != n || out.numel() != x.shape().outer() * n) {
    return invalid_argument_error(fmt::format(
        "{}: shapes x {}, w {}, bias {} -> {} do not match", call.name, x.shape().to_string(),
        w.shape().to_string(), bias.shape().to_string(), out.shape().to_string()));
  }
  const float* b = bias.first_as<const float>();
  call.ctx.parallel_for(x.shape().outer(), 1, [&](std::int64_t r0, std::int64_t r1) {
    dot_rows(DType::kF32, x.first(), W, w.first(), DType::kF32, out.first(), b, r0, r1, n, k);
  });
  return Status::ok();
}

template <DType W>
Status ffn_swiglu_ref(const KernelCall& call) {
  SWITCHYARD_RETURN_IF_ERROR(check_arity(call, 4, 1, call.name));
  const TensorView& x = call.inputs[0];
  const TensorView& gate = call.inputs[1];
  const TensorView& up = call.inputs[2];
  const TensorView& down = call.inputs[3];
  const TensorView& out = call.outputs[0];
  SWITCHYARD_RETURN_IF_ERROR(check_dtype(x, DType::kF32, call.name));
  SWITCHYARD_RETURN_IF_ERROR(check_dtype(out, DType::kF32, call.name));
  for (const TensorView* t : {&gate, &up, &down}) {
    SWITCHYARD_RETURN_IF_ERROR(check_dtype(*t, W, call.name));
  }
  for (const TensorView* t : {&x, &gate, &up, &down, &out}) {
    if (!t->is_contiguous()) {
      return invalid_argument_error(
          fmt::format("{}: operands must be contiguous, got {}", call.name, describe(*t)));
    }
  }
  const std::int64_t d = x.shape().inner();
  const std::int64_t f = gate.rank() == 2 ? gate.dim(0) : -1;
  if (x.rank() < 1 || gate.rank() != 2 || gate.dim(1) != d || !(up.shape() == gate.shape()) ||
      down.rank() != 2 || down.dim(0) != d || down.dim(1) != f || !(out.shape() == x.shape())) {
    return invalid_argument_error(
        fmt::format("{}: shapes x {}, gate {}, up {}, down {} -> {} do not match", call.name,
                    x.shape().to_string(), gate.shape().to_string(), up.shape().to_string(),
                    down.shape().to_string(), out.shape().to_string()));
  }
  call.ctx.parallel_for(x.shape().outer(), 1, [&](std::int64_t r0, std::int64_t r1) {
    std::vector<float> g(static_cast<std::size_t>(f));
    std::vector<float> u(static_cast<std::size_t>(f));
    for (std::int64_t r = r0; r < r1; ++r) {
      const std::byte* xr = x.first() + r * d * 4;
      dot_rows(DType::kF32, xr, W, gate.first(), DType::kF32,
               reinterpret_cast<std::byte*>(g.data()), nullptr, 0, 1, f, d);
      dot_rows(DType::kF32, xr, W, up.first(), DType::kF32, reinterpret_cast<std::byte*>(u.data()),
               nullptr, 0, 1, f, d);
      for (std::size_t i = 0; i < g.size(); ++i) g[i] = g[i] / (1.0f + std::exp(-g[i])) * u[i];
      dot_rows(DType::kF32, reinterpret_cast<const std::byte*>(g.data()), W, down.first(),
               DType::kF32, out.first() + r * d * 4, nullptr, 0, 1, d, f);
    }
  });
  return Status::ok();
}

template Status matmul_ref<DType::kF32, DType::kF16, DType::kF32>(const KernelCall&);
template Status matmul_ref<DType::kF32, DType::kBF16, DType::kF32>(const KernelCall&);
template Status matmul_ref<DType::kF16, DType::kF16, DType::kF16>(const KernelCall&);
template Status matmul_ref<DType::kBF16, DType::kBF16, DType::kBF16>(const KernelCall&);
template Status linear_ref<DType::kF32>(const KernelCall&);
template Status linear_ref<DType::kF16>(const KernelCall&);
template Status linear_ref<DType::kBF16>(const KernelCall&);
template Status ffn_swiglu_ref<DType::kF32>(const KernelCall&);
template Status ffn_swiglu_ref<DType::kF16>(const KernelCall&);
template Status ffn_swiglu_ref<DType::kBF16>(const KernelCall&);

}  // namespace switchyard::cpu
