// The CPU backend's kernels, best first and the portable reference last at every
// key. This file is the only place CPU kernels enter the binding table.
//
// SIMD siblings are listed only when the running CPU can execute them
// (cpu_features()); the order at a key is AVX-512, AVX2, portable reference.
//
// Every row goes through row(), which names the kernel from its key and variant
// with kernel_name (binding_table.h): "matmul_f32_q4_k_f32__cpu_avx2",
// "softmax_f16__cpu_ref_mask". No name is written by hand here.
//
// Precision claims: ULP bounds are in units of the output dtype's last place;
// relative and absolute bounds are against the exact (float64) result of the op on
// the stored input values. An element passes when it is within any one bound.
#include <array>
#include <cmath>
#include <limits>
#include <optional>
#include <source_location>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "backends/cpu/attention/attention.h"
#include "backends/cpu/cpu_features.h"
#include "backends/cpu/elementwise/elementwise.h"
#include "backends/cpu/elementwise/unary_ops.h"
#include "backends/cpu/gemm/dense_kernels.h"
#include "backends/cpu/gemm/dense_reference.h"
#include "backends/cpu/layout/layout.h"
#include "backends/cpu/quant/quant_kernels.h"
#include "backends/cpu/quant/quant_packed.h"
#include "backends/cpu/registration.h"
#include "backends/cpu/rowwise/rowwise.h"
#include "backends/cpu/simd_rows.h"

namespace switchyard::cpu {
namespace {

using Row = KernelBindingTable::Row;
constexpr DType kF32 = DType::kF32;
constexpr DType kF16 = DType::kF16;
constexpr DType kBF16 = DType::kBF16;
constexpr DType kI32 = DType::kI32;
constexpr DType kQ8_0 = DType::kQ8_0;

// A sequential f32 dot product of length K is within about K * 2^-24 of the exact
// result relative to sum |x_i * w_i|; the bound is stated at a K of a few thousand.
PrecisionGuarantee sequential_dot() {
  return PrecisionGuarantee::bounded(true, true, std::nullopt, 1e-4, std::nullopt);
}

// Every CPU row is made here, and its name with it: kernel_name(key, cpu, variant),
// never a name written by hand. `variant` is the sibling's instruction set or
// library ("ref", "avx2", "openblas"), then whatever tells it from CPU kernels
// whose names would otherwise agree ("avx2_matvec"; see variant_name). The site
// is the caller's line, so finalize() names the row that broke a rule.
Row row(BindingKey key, const DTypeList& dtypes, KernelFn fn, std::string_view variant,
        KernelOptions options, std::source_location site = std::source_location::current()) {
  options.name = kernel_name(key, dtypes, BackendId::kCpu, variant);
  return Row(key, dtypes, fn, std::move(options), site);
}

// "avx2", or "avx2_mask" with an extra part.
std::string variant_name(std::string_view isa, std::string_view extra = {}) {
  return extra.empty() ? std::string(isa) : fmt::format("{}_{}", isa, extra);
}

// The options of a portable reference kernel with the op's default cost.
KernelOptions reference(PrecisionGuarantee precision, OpKind op, KernelCaps caps = {}) {
  return {.caps = caps, .precision = precision, .cost = default_cost_for(op), .source = "portable"};
}

// ---------------------------------------------------------------------------
// Elementwise, casts, norms, softmax, reductions, rope, get_rows, layout and
// attention: the non-matmul dense kernels. Generated per (op, dtypes) from the
// family accessors, siblings best first.
// ---------------------------------------------------------------------------

constexpr DType kFloatDTypes[] = {kF32, kF16, kBF16};

// The variants this CPU runs, best first; the reference is always last.
std::vector<Variant> variants() {
  std::vector<Variant> v;
  const CpuFeatures& f = cpu_features();
  if (f.avx512) v.push_back(Variant::kAvx512);
  if (f.avx2 && f.f16c) v.push_back(Variant::kAvx2);
  v.push_back(Variant::kRef);
  return v;
}

// Relative size of half an ULP of each storage type (the error of rounding once).
double half_ulp_rel(DType t) { return t == kF16 ? 0x1p-11 : t == kBF16 ? 0x1p-8 : 0x1p-24; }
// Below f16's smallest normal the rounding error is absolute: half its subnormal step.
std::optional<double> subnormal_abs(DType t) {
  return t == kF16 ? std::optional<double>(0x1p-25) : std::nullopt;
}

// Exactly rounded: within half an ULP (casts, get_rows, max, f32 add/sub/mul/div,
// neg, relu, sqrt, scale).
PrecisionGuarantee exact() {
  return PrecisionGuarantee::bounded(true, true, 0.5, std::nullopt, std::nullopt);
}
// Computed in f32 or double and rounded once more to a narrower output: within one
// ULP of the output type.
PrecisionGuarantee rounded_once() {
  return PrecisionGuarantee::bounded(true, true, 1.0, std::nullopt, std::nullopt);
}
// An f32 computation with relative error `rel`, rounded to the output type; `abs`
// covers results near zero that the relative bound cannot (cancellation, underflow).
// Below f16's smallest normal (2^-14) the rounding's half step adds to the f32
// result's own error, at most rel * 2^-14 there: a result next to a tie between
// two subnormals may round to the far one.
PrecisionGuarantee f32_bound(double rel, std::optional<double> abs, DType out) {
  std::optional<double> a = abs;
  if (const std::optional<double> s = subnormal_abs(out)) {
    a = (a ? *a : 0.0) + *s + rel * 0x1p-14;
  }
  return PrecisionGuarantee::bounded(true, true, std::nullopt, rel + half_ulp_rel(out), a);
}

// Roofline cost: every operand read or written once, kFlops per output element, and
// the fixed cost of a call that fans out to the thread pool.
constexpr double kCallOverheadNs = 300;
// What one element of a double-precision C library function (exp, erfc, tanh)
// costs in flops of the default caps.
constexpr int kScalarLibmFlops = 200;
template <int kFlops>
CostEstimate stream_cost(const CostInputs& in) {
  double bytes = 0;
  for (std::size_t i = 0; i < in.shapes.size() && i < in.dtypes.size(); ++i) {
    bytes += static_cast<double>(in.shapes[i].numel()) * element_bytes(in.dtypes[i]);
  }
  const double out = in.shapes.empty() ? 0.0 : static_cast<double>(in.shapes.back().numel());
  return {kFlops * out, bytes, kCallOverheadNs, true};
}
// Reductions: the work is per input element.
CostEstimate reduce_cost(const CostInputs& in) {
  if (in.shapes.size() < 2) return stream_cost<1>(in);
  const double n = static_cast<double>(in.shapes[0].numel());
  return {n,
          n * element_bytes(in.dtypes[0]) +
              static_cast<double>(in.shapes[1].numel()) * element_bytes(in.dtypes[1]),
          kCallOverheadNs, true};
}
// get_rows reads only the N selected rows of the table, not all of it.
CostEstimate get_rows_cost(const CostInputs& in) {
  if (in.shapes.size() < 3) return stream_cost<0>(in);
  const double out = static_cast<double>(in.shapes[2].numel());
  return {0,
          out * (element_bytes(in.dtypes[0]) + element_bytes(in.dtypes[2])) +
              static_cast<double>(in.shapes[1].numel()) * 4.0,
          kCallOverheadNs, true};
}

KernelOptions options(Variant v, PrecisionGuarantee precision, CostFn cost, KernelCaps caps = {}) {
  return {.caps = caps,
          .precision = precision,
          .cost = cost,
          .source = std::string(v == Variant::kRef ? "portable" : variant_suffix(v))};
}

std::string variant_name(Variant v, std::string_view extra = {}) {
  return variant_name(variant_suffix(v), extra);
}

template <std::size_t... I>
constexpr auto unary_accuracies(std::index_sequence<I...>) {
  return std::array<UnaryAccuracy, sizeof...(I)>{
      unary_accuracy<kOpsOfFamily<OpFamily::kUnary>[I]>()...};
}
constexpr auto kUnaryAccuracy =
    unary_accuracies(std::make_index_sequence<kOpsOfFamily<OpFamily::kUnary>.size()>{});

void append_elementwise_rows(std::vector<Row>& rows) {
  constexpr KernelCaps kBroadcasting{.strided_input = true, .broadcast_input = true};
  constexpr KernelCaps kStrided{.strided_input = true};
  for (OpKind op : kOpsOfFamily<OpFamily::kBinary>) {
    for (DType t : kFloatDTypes) {
      for (Variant v : variants()) {
        const KernelFn fn = binary_kernel(op, t, v);
        if (fn == nullptr) continue;
        rows.push_back(
            row(op, {t, t, t}, fn, variant_name(v),
                options(v, t == kF32 ? exact() : rounded_once(), &stream_cost<1>, kBroadcasting)));
      }
    }
  }
  for (OpKind op : kOpsOfFamily<OpFamily::kUnary>) {
    const UnaryAccuracy& accuracy = kUnaryAccuracy[index_in_family(op)];
    for (DType t : kFloatDTypes) {
      for (Variant v : variants()) {
        const KernelFn fn = unary_kernel(op, t, v);
        if (fn == nullptr) continue;
        PrecisionGuarantee p = accuracy.exact && t == kF32 ? exact() : rounded_once();
        // Polynomial SIMD functions; the max_abs covers results that underflow.
        if (v != Variant::kRef && !accuracy.exact) {
          const double rel = accuracy.simd_rel + (accuracy.f16_exp && t == kF16 ? 1e-5 : 0.0);
          p = f32_bound(rel, 1e-37, t);
        }
        // The references of transcendental ops call the C library in double, one
        // element at a time: about 15 ns an element for gelu_erf on one core, some
        // forty times the streaming model (docs/kernel-packs.md measures it). They
        // are costed as such, so that a faster sibling with an honest cost of its
        // own (a kernel pack's) ranks ahead of them.
        const CostFn cost = v == Variant::kRef && !accuracy.exact ? &stream_cost<kScalarLibmFlops>
                                                                  : &stream_cost<8>;
        rows.push_back(row(op, {t, t}, fn, variant_name(v),
                           options(v, p, cost, v == Variant::kRef ? kStrided : KernelCaps{})));
      }
    }
  }
  constexpr DType kCastDTypes[] = {kF32, kF16, kBF16, kI32};
  for (DType from : kCastDTypes) {
    for (DType to : kCastDTypes) {
      for (Variant v : variants()) {
        const KernelFn fn = cast_kernel(from, to, v);
        if (fn == nullptr) continue;
        rows.push_back(row(OpKind::kCast, {from, to}, fn, variant_name(v),
                           options(v, exact(), &stream_cost<1>)));
      }
    }
  }
}

void append_rowwise_rows(std::vector<Row>& rows) {
  for (DType t : kFloatDTypes) {
    for (int inputs = 1; inputs <= 3; ++inputs) {
      // x alone, x and w, x, w and b: one dtype, so the variant says which.
      const std::string_view operands = inputs == 1 ? "" : inputs == 2 ? "w" : "wb";
      for (OpKind op : kOpsOfFamily<OpFamily::kNorm>) {
        for (Variant v : variants()) {
          const KernelFn fn = norm_kernel(op, t, inputs, v);
          if (fn == nullptr) continue;
          DTypeList dtypes = inputs == 1   ? DTypeList{t, t}
                             : inputs == 2 ? DTypeList{t, t, t}
                                           : DTypeList{t, t, t, t};
          // SIMD rows sum in f32 lanes (relative error ~ D/32 * 2^-24 for the
          // squares); layer_norm's centring adds an absolute error of a few f32
          // ulps of |mean| / std, stated for |mean| / std up to about 100.
          PrecisionGuarantee p = rounded_once();
          if (v != Variant::kRef) {
            p = op == OpKind::kRmsNorm ? f32_bound(2e-5, std::nullopt, t)
                                       : f32_bound(2e-5, 1e-4, t);
          }
          rows.push_back(
              row(op, dtypes, fn, variant_name(v, operands), options(v, p, &stream_cost<5>)));
        }
      }
    }
    for (bool mask : {false, true}) {
      for (Variant v : variants()) {
        const KernelFn fn = softmax_kernel(t, mask, v);
        if (fn == nullptr) continue;
        // SIMD: polynomial exp of an f32 logit (its rounding scales with |logit|)
        // and an f32 lane sum.
        const PrecisionGuarantee p = v == Variant::kRef ? rounded_once() : f32_bound(2e-5, 1e-6, t);
        rows.push_back(row(OpKind::kSoftmax, mask ? DTypeList{t, t, t} : DTypeList{t, t}, fn,
                           variant_name(v, mask ? "mask" : ""), options(v, p, &stream_cost<12>)));
      }
    }
    for (OpKind op : kOpsOfFamily<OpFamily::kReduce>) {
      for (Variant v : variants()) {
        const KernelFn fn = reduce_kernel(op, t, v);
        if (fn == nullptr) continue;
        // max picks an element: exact. The reference sums in double; the SIMD sum
        // in f32 lanes, whose error relative to the result is unbounded when the
        // row cancels, so it claims no bound.
        PrecisionGuarantee p = op == OpKind::kMax ? exact() : rounded_once();
        if (v != Variant::kRef && op != OpKind::kMax) p = PrecisionGuarantee::no_bound(true, true);
        rows.push_back(row(op, {t, t}, fn, variant_name(v), options(v, p, &reduce_cost)));
      }
    }
  }
}

// The double-precision attention reference is a scalar loop: its roofline counts
// eight times the default flops, so the planner ranks the f32 vector siblings
// ahead of it by cost and not only by registration order.
CostEstimate scalar_attention_cost(const CostInputs& in) {
  CostEstimate e = default_cost_for(OpKind::kAttention)(in);
  e.flops *= 8.0;
  return e;
}

void append_tensor_rows(std::vector<Row>& rows) {
  constexpr KernelCaps kStridedBroadcast{.strided_input = true, .broadcast_input = true};
  constexpr Variant kRef = Variant::kRef;
  for (DType t : kFloatDTypes) {
    // Reference: rotations in double, rounded once; a rotated pair that cancels to
    // nearly zero keeps a double-rounding error far below an f32 ulp of its
    // inputs. SIMD: cos and sin rounded to f32, one rounded product and one FMA:
    // within 3 * 2^-25 of |u c| + |v s| (the verify scale).
    // With or without per-pair frequency factors (a third input): one kernel.
    for (const DTypeList& key : {DTypeList{t, kI32, t}, DTypeList{t, kI32, DType::kF32, t}}) {
      for (Variant v : variants()) {
        rows.push_back(row(
            OpKind::kRope, key, rope_kernel(t, v), variant_name(v),
            options(v,
                    v == kRef ? PrecisionGuarantee::bounded(true, true, 1.0, std::nullopt, 1e-12)
                              : f32_bound(2e-7, std::nullopt, t),
                    &stream_cost<6>)));
      }
    }
    for (DType out : kFloatDTypes) {
      for (Variant v : variants()) {
        const KernelFn fn = get_rows_kernel(t, out, v);
        if (fn == nullptr) continue;
        rows.push_back(row(OpKind::kGetRows, {t, kI32, out}, fn, variant_name(v),
                           options(v, exact(), &get_rows_cost)));
      }
    }
    // One portable kernel: a row copy, or a conversion rounded as casts round.
    for (DType src : kFloatDTypes) {
      rows.push_back(row(OpKind::kSetRows, {t, src, kI32, t}, set_rows_kernel(t, src),
                         variant_name(kRef), options(kRef, exact(), nullptr)));
    }
  }
  // A q8_0 KV cache (Note [A q8_0 KV cache] in layout/get_rows.cpp): each value
  // within amax / 254 + 2^-11 amax of its block's largest magnitude amax (the
  // verify scale of a quantized output).
  for (DType src : kFloatDTypes) {
    rows.push_back(row(
        OpKind::kSetRows, {kQ8_0, src, kI32, kQ8_0}, set_rows_kernel(kQ8_0, src),
        variant_name(kRef),
        options(kRef, PrecisionGuarantee::bounded(true, true, std::nullopt, 4.5e-3, std::nullopt),
                nullptr)));
  }
  // Collectives: sums in f32 in rank order (Note [Sums in rank order] in
  // layout/collective.cpp), within (N - 1) 2^-24 of the sum of magnitudes for N
  // ranks, stated up to HostRankGroup::kMaxRanks; one rank is a copy.
  for (OpKind op : kOpsOfFamily<OpFamily::kCollective>) {
    for (DType t : kFloatDTypes) {
      rows.push_back(row(op, {t, t}, collective_kernel(op, t), variant_name(kRef),
                         options(kRef, f32_bound(4e-6, std::nullopt, t), nullptr)));
    }
  }
  constexpr DType kLayoutDTypes[] = {kF32, kF16, kBF16, kI32};
  for (DType t : kLayoutDTypes) {
    rows.push_back(row(OpKind::kCopy, {t, t}, copy_kernel(t), variant_name(kRef),
                       options(kRef, exact(), &stream_cost<0>, kStridedBroadcast)));
    // The SIMD siblings move the same bits as the reference (exact, at any
    // thread count) with the same caps: strided inputs take scalar paths.
    for (Variant v : variants()) {
      const KernelFn fn = transpose_kernel(t, v);
      if (fn == nullptr) continue;
      rows.push_back(row(OpKind::kTranspose, {t, t}, fn, variant_name(v),
                         options(v, exact(), &stream_cost<0>, kStridedBroadcast)));
    }
    for (int inputs = 2; inputs <= kMaxConcatInputs; ++inputs) {
      // One dtype for every input count: the variant says how many ("in3").
      const std::vector<DType> dtypes(static_cast<std::size_t>(inputs) + 1, t);
      const std::string count = fmt::format("in{}", inputs);
      for (Variant v : variants()) {
        const KernelFn fn = concat_kernel(t, inputs, v);
        if (fn == nullptr) continue;
        rows.push_back(row(OpKind::kConcat, DTypeList(dtypes), fn, variant_name(v, count),
                           options(v, exact(), &stream_cost<0>, kStridedBroadcast)));
      }
    }
  }
  // Attention in double: the only error is the final rounding, plus a double
  // rounding far below it unless the weighted sum cancels by a factor near 2^29.
  // The f32 siblings (attention_simd.inl): logits are f32 dot products (error
  // within ~(Dh/W + log2 W) 2^-24 of sum |q_e k_e| * scale, stated for that sum up
  // to ~100 and Dh up to 256), the exponentials within 2 ulp, the weighted sum an
  // f32 accumulation over the keys; relative to sum_j p_j |v_j| (the verify
  // scale), stated for up to a few thousand keys.
  // q8_0 keys and values (a q8_0 KV cache) are dequantized exactly as they are
  // read, so the claims are those of the dense siblings on the stored values.
  const std::pair<DType, DType> kAttention[] = {{kF32, kF32}, {kF32, kF16},   {kF32, kBF16},
                                                {kF16, kF16}, {kBF16, kBF16}, {kF32, kQ8_0}};
  for (auto [q, kv] : kAttention) {
    for (bool mask : {false, true}) {
      DTypeList dtypes = mask ? DTypeList{q, kv, kv, q, q} : DTypeList{q, kv, kv, q};
      for (Variant v : variants()) {
        const KernelFn fn = attention_kernel(q, kv, mask, v);
        if (fn == nullptr) continue;
        const bool ref = v == kRef;
        rows.push_back(
            row(OpKind::kAttention, dtypes, fn, variant_name(v, mask ? "mask" : ""),
                options(v,
                        ref ? PrecisionGuarantee::bounded(true, true, 1.0, std::nullopt, 1e-9)
                            : f32_bound(1e-4, std::nullopt, q),
                        ref ? &scalar_attention_cost : default_cost_for(OpKind::kAttention))));
      }
    }
  }
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

// The portable matmul family is a scalar loop: one multiply-add per instruction
// where the AVX-512 GEMM does sixteen. Its roofline counts sixteen times the
// flops, so that a SIMD sibling whose cost adds packing and a call's fan-out is
// still ranked ahead of it (`switchyard regret` measured the reference 16-34x
// slower, and chosen by the plain roofline for small products).
template <CostFn kCost>
CostEstimate scalar_dot_cost(const CostInputs& in) {
  CostEstimate e = kCost(in);
  e.flops *= 16.0;
  return e;
}
KernelOptions scalar_dot_reference(PrecisionGuarantee precision, CostFn cost) {
  return {.precision = precision, .cost = cost, .source = "portable"};
}

// OpenBLAS splits its sums differently at different thread counts.
PrecisionGuarantee openblas_dot() {
  return PrecisionGuarantee::bounded(true, false, std::nullopt, 1e-4, std::nullopt);
}

// The options of a SIMD GEMM or matvec sibling; `source` is its instruction set.
KernelOptions simd(DType out, CostFn cost, const char* source, ShapeAdmitFn admits = nullptr) {
  return {.precision = blocked_dot(out), .cost = cost, .source = source, .admits = admits};
}

template <DType A, DType W, DType O>
void add_matmul_rows(std::vector<Row>& rows, const CpuFeatures& cpu, KernelFn reference_fn) {
  constexpr OpKind kOp = OpKind::kMatmul;
  const DTypeList key{A, W, O};
  const bool avx512 = cpu.avx512 && cpu.f16c;
  const bool avx2 = cpu.avx2 && cpu.f16c;
  if (avx512) {
    rows.push_back(row(kOp, key, &matmul_gemm<Isa::kAvx512, A, W, O>, "avx512",
                       simd(O, &gemm_cost, "avx512")));
  }
  if (avx2) {
    rows.push_back(
        row(kOp, key, &matmul_gemm<Isa::kAvx2, A, W, O>, "avx2", simd(O, &gemm_cost, "avx2")));
  }
  if (avx512) {
    rows.push_back(row(kOp, key, &matmul_matvec<Isa::kAvx512, A, W, O>, "avx512_matvec",
                       simd(O, &matvec_cost, "avx512", &admits_single_row)));
  }
  if (avx2) {
    rows.push_back(row(kOp, key, &matmul_matvec<Isa::kAvx2, A, W, O>, "avx2_matvec",
                       simd(O, &matvec_cost, "avx2", &admits_single_row)));
  }
#if defined(SWITCHYARD_HAVE_OPENBLAS)
  if constexpr (A == kF32 && W == kF32 && O == kF32) {
    rows.push_back(row(kOp, key, &matmul_f32_openblas, "openblas",
                       {.precision = openblas_dot(), .cost = &gemm_cost, .source = "openblas"}));
  }
#endif
  rows.push_back(row(kOp, key, reference_fn, "ref",
                     scalar_dot_reference(O == kF32 ? sequential_dot() : blocked_dot(O),
                                          &scalar_dot_cost<&gemm_cost>)));
}

template <DType W>
void add_fused_rows(std::vector<Row>& rows, const CpuFeatures& cpu) {
  constexpr OpKind kLinear = OpKind::kLinear;
  constexpr OpKind kFfn = OpKind::kFfnSwiglu;
  const DTypeList linear_key{kF32, W, kF32, kF32};
  const DTypeList ffn_key{kF32, W, W, W, kF32};
  const bool avx512 = cpu.avx512 && cpu.f16c;
  const bool avx2 = cpu.avx2 && cpu.f16c;
  if (avx512) {
    rows.push_back(row(kLinear, linear_key, &linear_gemm<Isa::kAvx512, W>, "avx512",
                       simd(kF32, &gemm_cost, "avx512")));
  }
  if (avx2) {
    rows.push_back(row(kLinear, linear_key, &linear_gemm<Isa::kAvx2, W>, "avx2",
                       simd(kF32, &gemm_cost, "avx2")));
  }
  if (avx512) {
    rows.push_back(row(kLinear, linear_key, &linear_matvec<Isa::kAvx512, W>, "avx512_matvec",
                       simd(kF32, &matvec_cost, "avx512", &admits_single_row)));
  }
  if (avx2) {
    rows.push_back(row(kLinear, linear_key, &linear_matvec<Isa::kAvx2, W>, "avx2_matvec",
                       simd(kF32, &matvec_cost, "avx2", &admits_single_row)));
  }
  rows.push_back(row(kLinear, linear_key, &linear_ref<W>, "ref",
                     scalar_dot_reference(sequential_dot(), &scalar_dot_cost<&gemm_cost>)));
  if (avx512) {
    rows.push_back(row(kFfn, ffn_key, &ffn_swiglu_fused<Isa::kAvx512, W>, "avx512",
                       simd(kF32, &ffn_swiglu_cost, "avx512")));
  }
  if (avx2) {
    rows.push_back(row(kFfn, ffn_key, &ffn_swiglu_fused<Isa::kAvx2, W>, "avx2",
                       simd(kF32, &ffn_swiglu_cost, "avx2")));
  }
  rows.push_back(row(kFfn, ffn_key, &ffn_swiglu_ref<W>, "ref",
                     scalar_dot_reference(sequential_dot(), &scalar_dot_cost<&ffn_swiglu_cost>)));
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

// ===========================================================================
// Quantized kernels (issue 5): matmul with block-quantized weights, get_rows
// from quantized tables, casts from quantized types. Kept in one block.

// Every block-quantized dtype (kQuantizedDTypes, from dtype.def) has a portable
// matmul weight kernel, get_rows and casts, the activation formats included (a
// q8_0 / q8_k tensor is a valid, if unusual, weight). The integer-dot siblings, AVX2
// and AVX-512 VNNI, serve the weight formats (is_quantized_weight_format): a
// format added to dtype.def as a weight format needs their tiles (quant/).

// Quantized matmul costs: the default matmul roofline (weight bytes at the
// format's size) with the flops scaled by how many instructions each sibling
// spends per multiply-add relative to the AVX-512 VNNI one: AVX2 needs about
// twice as many (half the width), the portable scalar loop eight times the
// AVX2 count. Decode stays memory-bound for the SIMD siblings (equal cost, and
// the table's best-first order decides); prefill ranks AVX-512 first by cost.
template <int kFlopScale>
CostEstimate quant_matmul_cost(const CostInputs& in) {
  CostEstimate e = default_cost_for(OpKind::kMatmul)(in);
  e.flops *= kFlopScale;
  return e;
}

// The packed sibling (Note [Prepacked weights]) reads its packed bytes (1.125 to
// 1.5 per element: more than the file's for every format) and spends about 0.4
// of the AVX-512 sibling's time per activation row (BM_QuantMatmul, 2.0-2.5x
// at 512 rows on machine K; docs/benchmarks.md, table 6). It is admitted from
// four activation rows: measured (BM_QuantMatmulRows), it is slower than the
// plain sibling at one row for every format and at two for q4_k, faster from
// four rows for every format tried, which the roofline with the default rates
// cannot tell apart (it puts the crossover near 1.6 rows for every format).
bool quant_matmul_packed_admits(std::span<const Shape> shapes) {
  return !shapes.empty() && shapes[0].rank() >= 1 && shapes[0].outer() >= 4;
}

CostEstimate quant_matmul_packed_cost(const CostInputs& in) {
  CostEstimate e = default_cost_for(OpKind::kMatmul)(in);
  if (!e.known || in.shapes.size() < 2 || in.dtypes.size() < 2) return e;
  const std::int64_t packed = packed_weight_bytes(in.dtypes[1], in.shapes[1]);
  if (packed < 0) return {0, 0, std::numeric_limits<double>::infinity(), true};
  e.bytes += static_cast<double>(packed) -
             static_cast<double>(in.shapes[1].numel() / block_elems(in.dtypes[1]) *
                                 block_bytes(in.dtypes[1]));
  e.flops *= 0.4;
  return e;
}

// The 256-bit packed tiles do the 512-bit ones' instructions at half their
// width (twice as many per weight) and are admitted from the same row count.
CostEstimate quant_matmul_packed256_cost(const CostInputs& in) {
  CostEstimate e = quant_matmul_packed_cost(in);
  e.flops *= 2.0;
  return e;
}

constexpr WeightPacking kPackedWeight{
    .operand = 1, .packed_bytes = &packed_weight_bytes, .pack = &pack_weight};

// The AMX siblings unpack the weights once per call, then run tile products.
// Their costs, in units of what one activation row costs the AVX-512 sibling
// (2 N K flops): the AMX-INT8 sibling takes 0.45 of that per row and about 10
// rows' worth to unpack; the AMX-BF16 one 0.18 per row and about 25 to unpack
// and pack to bf16. So decode and up to ~18 rows stay with AVX-512, ~18 to ~55
// rows go to AMX-INT8 and longer prompts to AMX-BF16; all from
// BM_QuantMatmulRows (docs/benchmarks.md, table 6).
template <int kRowShareHundredths, int kUnpackRows>
CostEstimate quant_matmul_amx_cost(const CostInputs& in) {
  CostEstimate e = default_cost_for(OpKind::kMatmul)(in);
  if (e.known && in.shapes.size() > 1) {
    const double weight_elems = static_cast<double>(in.shapes[1].numel());
    e.flops = e.flops * kRowShareHundredths / 100.0 + 2.0 * weight_elems * kUnpackRows;
  }
  return e;
}

// bf16 rounding of both operands: each weight (exact in f32) and each activation
// moves by at most 2^-9 of itself, so each product by at most ~2^-8 of |a w|;
// the f32 accumulation over K adds at most K 2^-24 of sum |a w| (8.5e-4 at K =
// 14336). Claimed: 1/128 of sum |a w|, for K up to about 65,000. Unlike the
// integer siblings' claim it holds for any activation distribution.
PrecisionGuarantee quant_bf16_dot() {
  return PrecisionGuarantee::bounded(true, true, std::nullopt, 1.0 / 128.0, std::nullopt);
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
// once); to f16 / bf16 it rounds once more, to nearest: within half an ULP either way.
PrecisionGuarantee dequant_to(DType /*to*/) { return exact(); }

// Which encoding of the 256-bit vpdpbusd the packed 256-bit tiles run with, if any.
enum class Vnni256 { kNone, kAvxVnni, kAvx512Vnni };

template <DType W>
void add_quant_rows(std::vector<Row>& out, bool amx_bf16, bool amx, bool avx512, bool avx2,
                    Vnni256 vnni256) {
  constexpr OpKind kMatmul = OpKind::kMatmul;
  const DTypeList matmul_key{kF32, W, kF32};
  if (avx512 && is_quantized_weight_format(W)) {
    out.push_back(
        row(kMatmul, matmul_key, &matmul_quant_avx512_for<W>, "avx512",
            {.precision = quant_integer_dot(), .cost = &quant_matmul_cost<1>, .source = "avx512"}));
  }
  if (avx512 && packed_format(W).sub != 0) {
    out.push_back(row(kMatmul, matmul_key, &matmul_quant_packed_for<W, kPackedTilesAvx512>,
                      "avx512_packed",
                      {.precision = quant_integer_dot(),
                       .cost = &quant_matmul_packed_cost,
                       .source = "avx512",
                       .admits = &quant_matmul_packed_admits,
                       .packing = &kPackedWeight}));
  }
  // After the AVX-512 sibling: the planner ranks by cost and picks AMX for
  // prefill, while `lookup`'s first sibling stays the one that is never slow.
  if (amx && is_quantized_weight_format(W)) {
    out.push_back(row(kMatmul, matmul_key, &matmul_quant_amx_for<W>, "amx",
                      {.precision = quant_integer_dot(),
                       .cost = &quant_matmul_amx_cost<45, 10>,
                       .source = "amx"}));
  }
  if (amx_bf16 && is_quantized_weight_format(W)) {
    out.push_back(row(kMatmul, matmul_key, &matmul_quant_amx_bf16_for<W>, "amx_bf16",
                      {.precision = quant_bf16_dot(),
                       .cost = &quant_matmul_amx_cost<18, 25>,
                       .source = "amx_bf16"}));
  }
  if (avx2 && is_quantized_weight_format(W)) {
    out.push_back(
        row(kMatmul, matmul_key, &matmul_quant_avx2_for<W>, "avx2",
            {.precision = quant_integer_dot(), .cost = &quant_matmul_cost<2>, .source = "avx2"}));
  }
  // The same layout through 256-bit tiles: the packed sibling of CPUs with
  // AVX-VNNI and no AVX-512, and on AVX-512 VNNI machines a narrower one that
  // ranks behind the 512-bit tiles. After the AVX2 sibling, so that `lookup`'s
  // first sibling is one that needs no packing and admits every row count.
  if (vnni256 != Vnni256::kNone && packed_format(W).sub != 0) {
    const bool evex = vnni256 == Vnni256::kAvx512Vnni;
    out.push_back(row(kMatmul, matmul_key,
                      evex ? &matmul_quant_packed_for<W, kPackedTiles256Avx512Vnni>
                           : &matmul_quant_packed_for<W, kPackedTiles256AvxVnni>,
                      evex ? "avx512_vnni_packed256" : "avx_vnni_packed256",
                      {.precision = quant_integer_dot(),
                       .cost = &quant_matmul_packed256_cost,
                       .source = evex ? "avx512_vnni" : "avx_vnni",
                       .admits = &quant_matmul_packed_admits,
                       .packing = &kPackedWeight}));
  }
  out.push_back(row(
      kMatmul, matmul_key, &matmul_quant_ref_for<W>, "ref",
      {.precision = quant_reference_dot(), .cost = &quant_matmul_cost<16>, .source = "portable"}));
  out.push_back(row(OpKind::kGetRows, {W, kI32, kF32}, &get_rows_quant_ref_for<W, kF32>, "ref",
                    reference(dequant_to(kF32), OpKind::kGetRows)));
  out.push_back(row(OpKind::kGetRows, {W, kI32, kF16}, &get_rows_quant_ref_for<W, kF16>, "ref",
                    reference(dequant_to(kF16), OpKind::kGetRows)));
  out.push_back(row(OpKind::kGetRows, {W, kI32, kBF16}, &get_rows_quant_ref_for<W, kBF16>, "ref",
                    reference(dequant_to(kBF16), OpKind::kGetRows)));
  out.push_back(row(OpKind::kCast, {W, kF32}, &cast_quant_ref_for<W, kF32>, "ref",
                    reference(dequant_to(kF32), OpKind::kCast)));
  out.push_back(row(OpKind::kCast, {W, kF16}, &cast_quant_ref_for<W, kF16>, "ref",
                    reference(dequant_to(kF16), OpKind::kCast)));
  out.push_back(row(OpKind::kCast, {W, kBF16}, &cast_quant_ref_for<W, kBF16>, "ref",
                    reference(dequant_to(kBF16), OpKind::kCast)));
}

template <std::size_t... I>
void add_all_quant_rows(std::vector<Row>& out, bool amx_bf16, bool amx, bool avx512, bool avx2,
                        Vnni256 vnni256, std::index_sequence<I...>) {
  (add_quant_rows<kQuantizedDTypes[I]>(out, amx_bf16, amx, avx512, avx2, vnni256), ...);
}

// Built per process: which SIMD siblings exist depends on the running CPU.
const std::vector<Row>& quant_rows() {
  static const std::vector<Row> kRows = [] {
    std::vector<Row> out;
    const CpuFeatures& cpu = cpu_features();
    // The AVX-512 sibling needs VNNI besides F/BW/VL/DQ (vpdpbusd, vpdpwssd); the
    // AMX-BF16 one AMX-INT8 too (the weights' unpacking is in the AMX-INT8 file).
    const bool avx512_vnni = cpu.avx512 && cpu.avx512_vnni && cpu.f16c;
    const Vnni256 vnni256 = avx512_vnni                ? Vnni256::kAvx512Vnni
                            : cpu.avx_vnni && cpu.f16c ? Vnni256::kAvxVnni
                                                       : Vnni256::kNone;
    add_all_quant_rows(out, cpu.amx_bf16 && cpu.amx_int8 && cpu.f16c, cpu.amx_int8 && cpu.f16c,
                       avx512_vnni, cpu.avx2 && cpu.f16c, vnni256,
                       std::make_index_sequence<kQuantizedDTypes.size()>{});
    return out;
  }();
  return kRows;
}
// === end of the quantized kernels block ====================================

}  // namespace

const std::vector<Row>& registration_rows() {
  static const std::vector<Row> kRows = [] {
    std::vector<Row> r;
    append_elementwise_rows(r);
    append_rowwise_rows(r);
    append_tensor_rows(r);
    for (const std::vector<Row>* block : {&dense_rows(), &quant_rows()}) {
      r.insert(r.end(), block->begin(), block->end());
    }
    return r;
  }();
  return kRows;
}

void register_backend(KernelBindingTable& table) {
  table.add_backend(BackendId::kCpu, host_memory());
  table.register_rows(BackendId::kCpu, registration_rows());
  // Every CPU row above states its cost; the fill is a safety net for rows added
  // without one, and the lint test insists that it never has anything to do.
  table.fill_unset_cost(BackendId::kCpu, &default_cost_for);
}

}  // namespace switchyard::cpu
