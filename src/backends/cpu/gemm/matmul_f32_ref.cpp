#include "backends/cpu/gemm/dense_reference.h"

#include <cstdint>

#include "backends/cpu/operand_checks.h"

namespace switchyard::cpu {
// a [..., M, K] times b [N, K] (or [..., N, K] with a's batch dims) gives
// out [..., M, N]. Each output element is one f32 dot product in index order.
Status matmul_f32_ref(const KernelCall& call) {
  SWITCHYARD_RETURN_IF_ERROR(check_arity(call, 2, 1, call.name));
  const TensorView& a = call.inputs[0];
  const TensorView& b = call.inputs[1];
  const TensorView& out = call.outputs[0];
  for (const TensorView* t : {&a, &b, &out}) {
    SWITCHYARD_RETURN_IF_ERROR(check_dtype(*t, DType::kF32, call.name));
    if (t->rank() < 2 || !t->is_contiguous()) {
      return invalid_argument_error(fmt::format(
          "{}: operands must be contiguous with rank >= 2, got {}", call.name, describe(*t)));
    }
  }
  const std::int64_t k = a.shape().inner();
  const std::int64_t m = a.dim(a.rank() - 2);
  const std::int64_t n = b.dim(b.rank() - 2);
  const std::int64_t batch = a.numel() / (m * k > 0 ? m * k : 1);
  const bool shared_weights = b.rank() == 2;
  if (b.shape().inner() != k || out.shape().inner() != n || out.dim(out.rank() - 2) != m ||
      out.numel() != batch * m * n || (!shared_weights && b.numel() != batch * n * k)) {
    return invalid_argument_error(fmt::format(
        "{}: shapes {} x {} -> {} do not match [.., M, K] x "
        "[N, K] -> [.., M, N]",
        call.name, a.shape().to_string(), b.shape().to_string(), out.shape().to_string()));
  }
  const float* pa = a.first_as<const float>();
  const float* pb = b.first_as<const float>();
  float* po = out.first_as<float>();
  call.ctx.parallel_for(batch * m, 1, [&](std::int64_t begin, std::int64_t end) {
    for (std::int64_t row = begin; row < end; ++row) {
      const std::int64_t bi = row / (m > 0 ? m : 1);
      const float* x = pa + row * k;
      const float* w = pb + (shared_weights ? 0 : bi * n * k);
      for (std::int64_t j = 0; j < n; ++j) {
        float acc = 0.0f;
        for (std::int64_t p = 0; p < k; ++p) acc += x[p] * w[j * k + p];
        po[row * n + j] = acc;
      }
    }
  });
  return Status::ok();
}

}  // namespace switchyard::cpu
