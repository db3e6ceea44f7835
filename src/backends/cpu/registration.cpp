// The CPU backend's kernels, best first and the portable reference last at every
// key. This file is the only place CPU kernels enter the binding table.
#include "backends/backend_list.h"
#include "backends/cpu/reference_kernels.h"

namespace switchyard::cpu {
namespace {

using Row = KernelBindingTable::Row;
constexpr DType kF32 = DType::kF32;
constexpr DType kF16 = DType::kF16;
constexpr DType kBF16 = DType::kBF16;

// Exactly rounded elementwise arithmetic: within half an ULP of the exact result.
PrecisionGuarantee exact_elementwise() {
  return PrecisionGuarantee::bounded(true, true, 0.5, std::nullopt, std::nullopt);
}

// A sequential f32 dot product of length K is within about K * 2^-24 of the exact
// result relative to sum |x_i * w_i|; the bound is stated at a K of a few thousand.
PrecisionGuarantee sequential_dot() {
  return PrecisionGuarantee::bounded(true, true, std::nullopt, 1e-4, std::nullopt);
}

// A conversion to a narrower float type rounds once, to nearest even.
PrecisionGuarantee rounding_cast() {
  return PrecisionGuarantee::bounded(true, true, 0.5, std::nullopt, std::nullopt);
}

KernelOptions reference(std::string name, PrecisionGuarantee precision, OpKind op,
                        KernelCaps caps = {}) {
  return {.name = std::move(name),
          .caps = caps,
          .precision = precision,
          .cost = default_cost_for(op),
          .source = "portable"};
}

const std::vector<Row>& rows() {
  constexpr KernelCaps kBroadcasting{.strided_input = true, .broadcast_input = true};
  static const std::vector<Row> kRows = {
      {OpKind::kAdd,
       {kF32, kF32, kF32},
       &add_f32_ref,
       reference("add_f32__cpu_ref", exact_elementwise(), OpKind::kAdd, kBroadcasting)},
      {OpKind::kMul,
       {kF32, kF32, kF32},
       &mul_f32_ref,
       reference("mul_f32__cpu_ref", exact_elementwise(), OpKind::kMul, kBroadcasting)},
      {OpKind::kMatmul,
       {kF32, kF32, kF32},
       &matmul_f32_ref,
       reference("matmul_f32__cpu_ref", sequential_dot(), OpKind::kMatmul)},
      {OpKind::kCast,
       {kF32, kF16},
       &cast_f32_f16_ref,
       reference("cast_f32_f16__cpu_ref", rounding_cast(), OpKind::kCast)},
      {OpKind::kCast,
       {kF16, kF32},
       &cast_f16_f32_ref,
       reference("cast_f16_f32__cpu_ref", exact_elementwise(), OpKind::kCast)},
      {OpKind::kCast,
       {kF32, kBF16},
       &cast_f32_bf16_ref,
       reference("cast_f32_bf16__cpu_ref", rounding_cast(), OpKind::kCast)},
      {OpKind::kCast,
       {kBF16, kF32},
       &cast_bf16_f32_ref,
       reference("cast_bf16_f32__cpu_ref", exact_elementwise(), OpKind::kCast)},
      {OpKind::kCast,
       {kF16, kBF16},
       &cast_f16_bf16_ref,
       reference("cast_f16_bf16__cpu_ref", rounding_cast(), OpKind::kCast)},
      {OpKind::kCast,
       {kBF16, kF16},
       &cast_bf16_f16_ref,
       reference("cast_bf16_f16__cpu_ref", rounding_cast(), OpKind::kCast)},
  };
  return kRows;
}

}  // namespace

void register_kernels(KernelBindingTable& table) {
  table.register_rows(BackendId::kCpu, rows());
  // Every CPU row above states its cost; the fill is a safety net for rows added
  // without one, and the lint test insists that it never has anything to do.
  table.fill_unset_cost(BackendId::kCpu, &default_cost_for);
}

}  // namespace switchyard::cpu
