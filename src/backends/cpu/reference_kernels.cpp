#include "backends/cpu/reference_kernels.h"

#include <cstdint>

#include "backends/cpu/operand_checks.h"
#include "switchyard/half.h"

namespace switchyard::cpu {
namespace {

// Rows per parallel chunk: enough work per task to amortise scheduling.
constexpr std::int64_t kRowGrain = 16;

template <typename Op>
Status binary_f32(const KernelCall& call, std::string_view kernel, Op op) {
  SWITCHYARD_RETURN_IF_ERROR(check_arity(call, 2, 1, kernel));
  const TensorView& a = call.inputs[0];
  const TensorView& b = call.inputs[1];
  const TensorView& out = call.outputs[0];
  SWITCHYARD_RETURN_IF_ERROR(check_same_shape(a, out, kernel));
  SWITCHYARD_RETURN_IF_ERROR(check_same_shape(b, out, kernel));
  for (const TensorView* t : {&a, &b, &out}) {
    SWITCHYARD_RETURN_IF_ERROR(check_dtype(*t, DType::kF32, kernel));
  }
  const auto* pa = static_cast<const float*>(a.data());
  const auto* pb = static_cast<const float*>(b.data());
  auto* po = static_cast<float*>(out.data());
  const std::int64_t rows = out.shape().outer();
  call.ctx.parallel_for(rows, kRowGrain, [&](std::int64_t begin, std::int64_t end) {
    for_each_element3(
        out, a, b, begin, end,
        [&](std::int64_t io, std::int64_t ia, std::int64_t ib) { po[io] = op(pa[ia], pb[ib]); });
  });
  return Status::ok();
}

template <typename Load, typename Store>
Status cast_contiguous(const KernelCall& call, std::string_view kernel, DType from, DType to,
                       Load load, Store store) {
  SWITCHYARD_RETURN_IF_ERROR(check_arity(call, 1, 1, kernel));
  const TensorView& in = call.inputs[0];
  const TensorView& out = call.outputs[0];
  SWITCHYARD_RETURN_IF_ERROR(check_same_shape(in, out, kernel));
  SWITCHYARD_RETURN_IF_ERROR(check_dtype(in, from, kernel));
  SWITCHYARD_RETURN_IF_ERROR(check_dtype(out, to, kernel));
  if (!in.is_contiguous() || !out.is_contiguous()) {
    return invalid_argument_error(fmt::format("{}: operands must be contiguous", kernel));
  }
  const std::byte* src = in.first();
  std::byte* dst = out.first();
  call.ctx.parallel_for(in.numel(), 4096, [&](std::int64_t begin, std::int64_t end) {
    for (std::int64_t i = begin; i < end; ++i) store(dst, i, load(src, i));
  });
  return Status::ok();
}

float load_f32(const std::byte* p, std::int64_t i) { return reinterpret_cast<const float*>(p)[i]; }
float load_f16(const std::byte* p, std::int64_t i) {
  return f16_to_f32(reinterpret_cast<const std::uint16_t*>(p)[i]);
}
float load_bf16(const std::byte* p, std::int64_t i) {
  return bf16_to_f32(reinterpret_cast<const std::uint16_t*>(p)[i]);
}
void store_f32(std::byte* p, std::int64_t i, float v) { reinterpret_cast<float*>(p)[i] = v; }
void store_f16(std::byte* p, std::int64_t i, float v) {
  reinterpret_cast<std::uint16_t*>(p)[i] = f32_to_f16(v);
}
void store_bf16(std::byte* p, std::int64_t i, float v) {
  reinterpret_cast<std::uint16_t*>(p)[i] = f32_to_bf16(v);
}

}  // namespace

Status add_f32_ref(const KernelCall& call) {
  return binary_f32(call, "add_f32__cpu_ref", [](float x, float y) { return x + y; });
}

Status mul_f32_ref(const KernelCall& call) {
  return binary_f32(call, "mul_f32__cpu_ref", [](float x, float y) { return x * y; });
}

// a [..., M, K] times b [N, K] (or [..., N, K] with a's batch dims) gives
// out [..., M, N]. Each output element is one f32 dot product in index order.
Status matmul_f32_ref(const KernelCall& call) {
  constexpr std::string_view kName = "matmul_f32__cpu_ref";
  SWITCHYARD_RETURN_IF_ERROR(check_arity(call, 2, 1, kName));
  const TensorView& a = call.inputs[0];
  const TensorView& b = call.inputs[1];
  const TensorView& out = call.outputs[0];
  for (const TensorView* t : {&a, &b, &out}) {
    SWITCHYARD_RETURN_IF_ERROR(check_dtype(*t, DType::kF32, kName));
    if (t->rank() < 2 || !t->is_contiguous()) {
      return invalid_argument_error(fmt::format(
          "{}: operands must be contiguous with rank >= 2, got {}", kName, describe(*t)));
    }
  }
  const std::int64_t k = a.shape().inner();
  const std::int64_t m = a.dim(a.rank() - 2);
  const std::int64_t n = b.dim(b.rank() - 2);
  const std::int64_t batch = a.numel() / (m * k > 0 ? m * k : 1);
  const bool shared_weights = b.rank() == 2;
  if (b.shape().inner() != k || out.shape().inner() != n || out.dim(out.rank() - 2) != m ||
      out.numel() != batch * m * n || (!shared_weights && b.numel() != batch * n * k)) {
    return invalid_argument_error(
        fmt::format("{}: shapes {} x {} -> {} do not match [.., M, K] x "
                    "[N, K] -> [.., M, N]",
                    kName, a.shape().to_string(), b.shape().to_string(), out.shape().to_string()));
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

Status cast_f32_f16_ref(const KernelCall& call) {
  return cast_contiguous(call, "cast_f32_f16__cpu_ref", DType::kF32, DType::kF16, load_f32,
                         store_f16);
}
Status cast_f16_f32_ref(const KernelCall& call) {
  return cast_contiguous(call, "cast_f16_f32__cpu_ref", DType::kF16, DType::kF32, load_f16,
                         store_f32);
}
Status cast_f32_bf16_ref(const KernelCall& call) {
  return cast_contiguous(call, "cast_f32_bf16__cpu_ref", DType::kF32, DType::kBF16, load_f32,
                         store_bf16);
}
Status cast_bf16_f32_ref(const KernelCall& call) {
  return cast_contiguous(call, "cast_bf16_f32__cpu_ref", DType::kBF16, DType::kF32, load_bf16,
                         store_f32);
}
Status cast_f16_bf16_ref(const KernelCall& call) {
  return cast_contiguous(call, "cast_f16_bf16__cpu_ref", DType::kF16, DType::kBF16, load_f16,
                         store_bf16);
}
Status cast_bf16_f16_ref(const KernelCall& call) {
  return cast_contiguous(call, "cast_bf16_f16__cpu_ref", DType::kBF16, DType::kF16, load_bf16,
                         store_f16);
}

}  // namespace switchyard::cpu
