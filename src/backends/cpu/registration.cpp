// The CPU backend's kernels, best first and the portable reference last at every
// key. This file is the only place CPU kernels enter the binding table.
#include <algorithm>
#include <iterator>
#include <utility>

#include "backends/backend_list.h"
#include "backends/cpu/reference_kernels.h"
// --- quantized kernels (issue 5) ---
#include "backends/cpu/cpu_features.h"
#include "backends/cpu/quant_kernels.h"
// --- end quantized kernels ---

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

// ===========================================================================
// Quantized kernels (issue 5): matmul with block-quantized weights, get_rows
// from quantized tables, casts from quantized types. Kept in one block.

// The quantized dtypes with a matmul weight kernel, get_rows and casts: every
// block format GGUF stores, including the activation formats (a q8_0 / q8_k
// tensor is a valid, if unusual, weight).
constexpr DType kQuantTypes[] = {DType::kQ4_0,   DType::kQ4_1,   DType::kQ5_0, DType::kQ5_1,
                                 DType::kQ8_0,   DType::kQ8_1,   DType::kQ2_K, DType::kQ3_K,
                                 DType::kQ4_K,   DType::kQ5_K,   DType::kQ6_K, DType::kQ8_K,
                                 DType::kIQ4_NL, DType::kIQ4_XS, DType::kMXFP4};

// The weight formats with an AVX2 integer dot product.
constexpr DType kQuantAvx2Types[] = {DType::kQ4_0, DType::kQ4_1, DType::kQ5_0,   DType::kQ5_1,
                                     DType::kQ8_0, DType::kQ2_K, DType::kQ3_K,   DType::kQ4_K,
                                     DType::kQ5_K, DType::kQ6_K, DType::kIQ4_NL, DType::kIQ4_XS,
                                     DType::kMXFP4};

// The portable quantized matmul is a scalar loop (no SIMD): its roofline uses the
// default matmul estimate with eight times the flops, so the planner ranks the
// SIMD sibling ahead by cost and not only by registration order.
CostEstimate scalar_quant_matmul_cost(const CostInputs& in) {
  CostEstimate e = default_cost_for(OpKind::kMatmul)(in);
  e.flops *= 8.0;
  return e;
}

// The reference dequantizes the weights exactly (the float64 reference is
// computed on the same dequantized values), so only the f32 dot remains.
PrecisionGuarantee quant_reference_dot() { return sequential_dot(); }

// The integer path quantizes each activation block to 8 bits: an element moves by
// at most amax_block / 254, so the result moves by at most
// sum_i |w_i| * amax_block(i) / 254. Relative to sum |a_i * w_i| that is <= 1/64
// whenever each activation block's largest magnitude is at most 4x its mean
// magnitude (Gaussian-like activations: ~2.8x); an activation block dominated by
// one outlier can exceed it. The f32 block accumulation adds ~1e-6.
PrecisionGuarantee quant_integer_dot() {
  return PrecisionGuarantee::bounded(true, true, std::nullopt, 1.0 / 64.0, std::nullopt);
}

// Dequantization is exact to f32 (block scale times a small integer, rounded
// once); to f16 / bf16 it rounds once more.
PrecisionGuarantee dequant_to(DType to) {
  return to == kF32 ? exact_elementwise() : rounding_cast();
}

template <DType W>
void add_quant_rows(std::vector<Row>& out, bool avx2) {
  const std::string w(name(W));
  if (avx2 && std::find(std::begin(kQuantAvx2Types), std::end(kQuantAvx2Types), W) !=
                  std::end(kQuantAvx2Types)) {
    out.push_back({OpKind::kMatmul,
                   {kF32, W, kF32},
                   &matmul_quant_avx2_for<W>,
                   {.name = "matmul_f32_" + w + "_f32__cpu_avx2",
                    .precision = quant_integer_dot(),
                    .cost = default_cost_for(OpKind::kMatmul),
                    .source = "avx2"}});
  }
  out.push_back({OpKind::kMatmul,
                 {kF32, W, kF32},
                 &matmul_quant_ref_for<W>,
                 {.name = "matmul_f32_" + w + "_f32__cpu_ref",
                  .precision = quant_reference_dot(),
                  .cost = &scalar_quant_matmul_cost,
                  .source = "portable"}});
  out.push_back(
      {OpKind::kGetRows,
       {W, DType::kI32, kF32},
       &get_rows_quant_ref_for<W, kF32>,
       reference("get_rows_" + w + "_i32_f32__cpu_ref", dequant_to(kF32), OpKind::kGetRows)});
  out.push_back(
      {OpKind::kGetRows,
       {W, DType::kI32, kF16},
       &get_rows_quant_ref_for<W, kF16>,
       reference("get_rows_" + w + "_i32_f16__cpu_ref", dequant_to(kF16), OpKind::kGetRows)});
  out.push_back(
      {OpKind::kGetRows,
       {W, DType::kI32, kBF16},
       &get_rows_quant_ref_for<W, kBF16>,
       reference("get_rows_" + w + "_i32_bf16__cpu_ref", dequant_to(kBF16), OpKind::kGetRows)});
  out.push_back({OpKind::kCast,
                 {W, kF32},
                 &cast_quant_ref_for<W, kF32>,
                 reference("cast_" + w + "_f32__cpu_ref", dequant_to(kF32), OpKind::kCast)});
  out.push_back({OpKind::kCast,
                 {W, kF16},
                 &cast_quant_ref_for<W, kF16>,
                 reference("cast_" + w + "_f16__cpu_ref", dequant_to(kF16), OpKind::kCast)});
  out.push_back({OpKind::kCast,
                 {W, kBF16},
                 &cast_quant_ref_for<W, kBF16>,
                 reference("cast_" + w + "_bf16__cpu_ref", dequant_to(kBF16), OpKind::kCast)});
}

template <std::size_t... I>
void add_all_quant_rows(std::vector<Row>& out, bool avx2, std::index_sequence<I...>) {
  (add_quant_rows<kQuantTypes[I]>(out, avx2), ...);
}

// Built per process: which SIMD siblings exist depends on the running CPU.
const std::vector<Row>& quant_rows() {
  static const std::vector<Row> kRows = [] {
    std::vector<Row> out;
    const CpuFeatures& cpu = cpu_features();
    add_all_quant_rows(out, cpu.avx2 && cpu.f16c,
                       std::make_index_sequence<std::size(kQuantTypes)>{});
    return out;
  }();
  return kRows;
}
// === end of the quantized kernels block ====================================

}  // namespace

void register_kernels(KernelBindingTable& table) {
  table.register_rows(BackendId::kCpu, rows());
  table.register_rows(BackendId::kCpu, quant_rows());
  // Every CPU row above states its cost; the fill is a safety net for rows added
  // without one, and the lint test insists that it never has anything to do.
  table.fill_unset_cost(BackendId::kCpu, &default_cost_for);
}

}  // namespace switchyard::cpu
