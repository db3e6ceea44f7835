// The CPU backend's kernels, best first and the portable reference last at every
// key. This file is the only place CPU kernels enter the binding table.
#include <fmt/format.h>

#include "backends/backend_list.h"
#include "backends/cpu/cpu_features.h"
#include "backends/cpu/dense_kernels.h"
#include "backends/cpu/dense_reference.h"
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

// --- dense matmul family: matmul, linear, ffn_swiglu ---------------------------
//
// Per key, best first: the AVX-512 GEMM, the AVX2 GEMM, the matvec siblings (they
// admit one activation row per weight matrix, where streaming the weights beats
// packing them), OpenBLAS for f32, the portable reference last. SIMD rows are
// listed only when cpu_features() says the CPU runs them; both SIMD sets also need
// F16C for their f16 conversions.

// Blocked f32 sums: within a K block in k order with FMA, across blocks in block
// order. The error is within a few K * 2^-24 of sum |a_k * w_k|; the bound is
// stated at a K of a few thousand, as for the reference.
PrecisionGuarantee blocked_dot(DType out) {
  // Rounding the f32 sum once to f16 (2^-11) or bf16 (2^-8) adds its half-ULP; f16
  // results below its normal range round to its subnormal step, 2^-24, instead.
  const double rel = out == kF16 ? 1e-3 : out == kBF16 ? 8e-3 : 1e-4;
  const std::optional<double> abs = out == kF16 ? std::optional<double>(0x1p-24) : std::nullopt;
  return PrecisionGuarantee::bounded(true, true, std::nullopt, rel, abs);
}

// OpenBLAS splits its sums differently at different thread counts.
PrecisionGuarantee openblas_dot() {
  return PrecisionGuarantee::bounded(true, false, std::nullopt, 1e-4, std::nullopt);
}

KernelOptions simd(std::string name, DType out, CostFn cost, const char* source,
                   ShapeAdmitFn admits = nullptr) {
  return {.name = std::move(name),
          .precision = blocked_dot(out),
          .cost = cost,
          .source = source,
          .admits = admits};
}

std::string dense_name(std::string_view op, DType a, DType w, DType o, std::string_view variant) {
  if (a == w && w == o) return fmt::format("{}_{}__cpu_{}", op, name(a), variant);
  return fmt::format("{}_{}_{}_{}__cpu_{}", op, name(a), name(w), name(o), variant);
}

template <DType A, DType W, DType O>
void add_matmul_rows(std::vector<Row>& rows, const CpuFeatures& cpu, KernelFn reference_fn) {
  const DTypeList key{A, W, O};
  if (cpu.avx512 && cpu.f16c) {
    rows.push_back({OpKind::kMatmul, key, &matmul_gemm<Isa::kAvx512, A, W, O>,
                    simd(dense_name("matmul", A, W, O, "avx512"), O, &gemm_cost, "avx512")});
  }
  if (cpu.avx2 && cpu.f16c) {
    rows.push_back({OpKind::kMatmul, key, &matmul_gemm<Isa::kAvx2, A, W, O>,
                    simd(dense_name("matmul", A, W, O, "avx2"), O, &gemm_cost, "avx2")});
  }
  if (cpu.avx512 && cpu.f16c) {
    rows.push_back({OpKind::kMatmul, key, &matmul_matvec<Isa::kAvx512, A, W, O>,
                    simd(dense_name("matmul", A, W, O, "avx512_matvec"), O, &matvec_cost, "avx512",
                         &admits_single_row)});
  }
  if (cpu.avx2 && cpu.f16c) {
    rows.push_back({OpKind::kMatmul, key, &matmul_matvec<Isa::kAvx2, A, W, O>,
                    simd(dense_name("matmul", A, W, O, "avx2_matvec"), O, &matvec_cost, "avx2",
                         &admits_single_row)});
  }
#if defined(SWITCHYARD_HAVE_OPENBLAS)
  if constexpr (A == kF32 && W == kF32 && O == kF32) {
    rows.push_back({OpKind::kMatmul,
                    key,
                    &matmul_f32_openblas,
                    {.name = "matmul_f32__cpu_openblas",
                     .precision = openblas_dot(),
                     .cost = &gemm_cost,
                     .source = "openblas"}});
  }
#endif
  rows.push_back({OpKind::kMatmul, key, reference_fn,
                  reference(dense_name("matmul", A, W, O, "ref"),
                            O == kF32 ? sequential_dot() : blocked_dot(O), OpKind::kMatmul)});
}

template <DType W>
void add_fused_rows(std::vector<Row>& rows, const CpuFeatures& cpu) {
  const DTypeList linear_key{kF32, W, kF32, kF32};
  const DTypeList ffn_key{kF32, W, W, W, kF32};
  const std::string linear =
      W == kF32 ? "linear_f32" : fmt::format("linear_f32_{}_f32_f32", name(W));
  const std::string ffn = W == kF32 ? "ffn_swiglu_f32" : fmt::format("ffn_swiglu_f32_{}", name(W));
  if (cpu.avx512 && cpu.f16c) {
    rows.push_back({OpKind::kLinear, linear_key, &linear_gemm<Isa::kAvx512, W>,
                    simd(linear + "__cpu_avx512", kF32, &gemm_cost, "avx512")});
  }
  if (cpu.avx2 && cpu.f16c) {
    rows.push_back({OpKind::kLinear, linear_key, &linear_gemm<Isa::kAvx2, W>,
                    simd(linear + "__cpu_avx2", kF32, &gemm_cost, "avx2")});
  }
  if (cpu.avx512 && cpu.f16c) {
    rows.push_back(
        {OpKind::kLinear, linear_key, &linear_matvec<Isa::kAvx512, W>,
         simd(linear + "__cpu_avx512_matvec", kF32, &matvec_cost, "avx512", &admits_single_row)});
  }
  if (cpu.avx2 && cpu.f16c) {
    rows.push_back(
        {OpKind::kLinear, linear_key, &linear_matvec<Isa::kAvx2, W>,
         simd(linear + "__cpu_avx2_matvec", kF32, &matvec_cost, "avx2", &admits_single_row)});
  }
  rows.push_back({OpKind::kLinear, linear_key, &linear_ref<W>,
                  reference(linear + "__cpu_ref", sequential_dot(), OpKind::kLinear)});
  if (cpu.avx512 && cpu.f16c) {
    rows.push_back({OpKind::kFfnSwiglu, ffn_key, &ffn_swiglu_fused<Isa::kAvx512, W>,
                    simd(ffn + "__cpu_avx512", kF32, &ffn_swiglu_cost, "avx512")});
  }
  if (cpu.avx2 && cpu.f16c) {
    rows.push_back({OpKind::kFfnSwiglu, ffn_key, &ffn_swiglu_fused<Isa::kAvx2, W>,
                    simd(ffn + "__cpu_avx2", kF32, &ffn_swiglu_cost, "avx2")});
  }
  KernelOptions ffn_reference = reference(ffn + "__cpu_ref", sequential_dot(), OpKind::kFfnSwiglu);
  ffn_reference.cost = &ffn_swiglu_cost;
  rows.push_back({OpKind::kFfnSwiglu, ffn_key, &ffn_swiglu_ref<W>, std::move(ffn_reference)});
}

const std::vector<Row>& dense_rows() {
  static const std::vector<Row> kDenseRows = [] {
    const CpuFeatures& cpu = cpu_features();
    std::vector<Row> rows;
    add_matmul_rows<kF32, kF32, kF32>(rows, cpu, &matmul_f32_ref);
    add_matmul_rows<kF32, kF16, kF32>(rows, cpu, &matmul_ref<kF32, kF16, kF32>);
    add_matmul_rows<kF32, kBF16, kF32>(rows, cpu, &matmul_ref<kF32, kBF16, kF32>);
    add_matmul_rows<kF16, kF16, kF16>(rows, cpu, &matmul_ref<kF16, kF16, kF16>);
    add_matmul_rows<kBF16, kBF16, kBF16>(rows, cpu, &matmul_ref<kBF16, kBF16, kBF16>);
    add_fused_rows<kF32>(rows, cpu);
    add_fused_rows<kF16>(rows, cpu);
    add_fused_rows<kBF16>(rows, cpu);
    return rows;
  }();
  return kDenseRows;
}

// --- end of the dense matmul family ----------------------------------------------

}  // namespace

void register_kernels(KernelBindingTable& table) {
  table.register_rows(BackendId::kCpu, rows());
  table.register_rows(BackendId::kCpu, dense_rows());
  // Every CPU row above states its cost; the fill is a safety net for rows added
  // without one, and the lint test insists that it never has anything to do.
  table.fill_unset_cost(BackendId::kCpu, &default_cost_for);
}

}  // namespace switchyard::cpu
