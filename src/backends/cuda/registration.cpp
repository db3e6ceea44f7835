// The CUDA backend's kernels, best first at every key. This file is the only place
// CUDA kernels enter the binding table; its keys are the CPU backend's for f32,
// f16 and bf16 (and i32 where the CPU's layout ops and casts take it), so a graph
// that runs on the CPU in those dtypes runs here, and so does every GGUF weight
// format's matmul, get_rows and casts to the float types.
//
// Every row goes through row(), which names the kernel from its key and variant
// with kernel_name (binding_table.h): "matmul_f32__cuda_cublaslt",
// "softmax_f16__cuda_simt_mask". The variants: "cublaslt" (and
// "cublaslt_tf32") for cuBLASLt, "nccl" for the collectives, "simt" for this
// backend's own kernels.
//
// Note [CUDA precision claims]
// The claims are in the CPU backend's terms (ULP bounds in the output dtype's last
// place; relative and absolute bounds against the float64 result on the stored
// inputs; an element passes within any one bound):
//   - one IEEE operation in f32 (f32 add/sub/mul/div, neg, relu, sqrt, scale),
//     casts, get_rows and the layout ops: exact (half an ULP);
//   - the same in f16 / bf16, and every transcendental unary op (evaluated in
//     double, Note [Unary ops in double] in elementwise.cu): one ULP;
//   - the row kernels sum in f32 over a fixed tree (block_sum), as the CPU's SIMD
//     rows sum in f32 lanes, and claim those rows' bounds; rope rounds cos and sin
//     to f32 and uses one product and one FMA, as the CPU's SIMD rope does;
//   - attention: f32 logits and an online softmax in f32, the CPU SIMD rows' bound;
//   - matmul: the tiled kernel is one FMA chain per output in k order (the CPU
//     reference's sequential bound); cuBLASLt in f32 compute is bounded like
//     OpenBLAS; TF32 rounds each operand to 10 bits (within 2^-10 relative, so a
//     product within 2^-9) and claims 4e-3 of sum |a w|; f16 / bf16 accumulate in
//     f32 and round once, as the CPU's blocked sums.
// Device code may contract a multiply and an add into an FMA (nvcc's default);
// the kernels whose claims are exact spell their arithmetic with the _rn
// intrinsics, which never contract. Nothing depends on a CPU thread count, so
// every row claims determinism across threads; every kernel sums in a fixed order
// and cuBLASLt is run to run reproducible on one GPU (its atomics mode is off), so
// every row claims bit stability.
//
// Note [TF32 is a precision trade]
// The TF32 sibling of the f32 product rounds its operands to 10-bit mantissas,
// seven times as fast as the exact f32 one (table 13 of docs/benchmarks.md) with a
// weaker claim. It is flagged as a precision trade (Note [Precision trades] in
// binding_table.h): plans take it only when they admit trades, and then by its
// cost, which models that speed.
#include "backends/cuda/registration.h"

#include <algorithm>
#include <cmath>
#include <optional>
#include <source_location>
#include <string>
#include <string_view>
#include <utility>

#include <fmt/format.h>

#include "backends/cuda/collective/nccl.h"
#include "backends/cuda/cuda_memory.h"
#include "backends/cuda/kernels.h"

namespace switchyard::cuda {
namespace {

using Row = KernelBindingTable::Row;
constexpr DType kF32 = DType::kF32;
constexpr DType kF16 = DType::kF16;
constexpr DType kBF16 = DType::kBF16;
constexpr DType kI32 = DType::kI32;
constexpr DType kQ8_0 = DType::kQ8_0;
constexpr DType kFloatDTypes[] = {kF32, kF16, kBF16};
constexpr DType kLayoutDTypes[] = {kF32, kF16, kBF16, kI32};

// Every CUDA row is made here, its name with it (kernel_name: key, cuda, variant).
// The site is the caller's line, so finalize() names the row that broke a rule.
Row row(BindingKey key, const DTypeList& dtypes, KernelFn fn, std::string_view variant,
        PrecisionGuarantee precision, std::string_view source, KernelCaps caps = {},
        ShapeAdmitFn admits = nullptr,
        std::source_location site = std::source_location::current()) {
  KernelOptions options{.name = kernel_name(key, dtypes, BackendId::kCuda, variant),
                        .caps = caps,
                        .precision = precision,
                        .source = std::string(source),
                        .admits = admits};
  return Row(key, dtypes, fn, std::move(options), site);
}

// Relative size of half an ULP of each storage type (the error of rounding once).
double half_ulp_rel(DType t) { return t == kF16 ? 0x1p-11 : t == kBF16 ? 0x1p-8 : 0x1p-24; }

PrecisionGuarantee exact() {
  return PrecisionGuarantee::bounded(true, true, 0.5, std::nullopt, std::nullopt);
}
PrecisionGuarantee rounded_once() {
  return PrecisionGuarantee::bounded(true, true, 1.0, std::nullopt, std::nullopt);
}
// An f32 computation with relative error `rel`, rounded to the output type; below
// f16's smallest normal the rounding's half step adds to the f32 result's error,
// as in the CPU backend's claims of the same name.
PrecisionGuarantee f32_bound(double rel, std::optional<double> abs, DType out) {
  std::optional<double> a = abs;
  if (out == kF16) a = (a ? *a : 0.0) + 0x1p-25 + rel * 0x1p-14;
  return PrecisionGuarantee::bounded(true, true, std::nullopt, rel + half_ulp_rel(out), a);
}
// An f32 FMA chain in k order (the tiled kernel), rounded to the output type.
PrecisionGuarantee dot(DType out) {
  if (out == kF32) return PrecisionGuarantee::bounded(true, true, std::nullopt, 1e-4, std::nullopt);
  const double rel = out == kF16 ? 1e-3 : 8e-3;
  const std::optional<double> abs = out == kF16 ? std::optional<double>(0x1p-24) : std::nullopt;
  return PrecisionGuarantee::bounded(true, true, std::nullopt, rel, abs);
}
PrecisionGuarantee tf32_dot() {
  return PrecisionGuarantee::bounded(true, true, std::nullopt, 4e-3, std::nullopt);
}
// Quantized weights against 8-bit activations: the CPU integer siblings' claim
// (quant_integer_dot in the CPU's registration.cpp), 1/64 of sum |a w| while no
// activation block of 32 is dominated by one outlier (Note [Quantized
// matrix-vector products] in quant/quant.cu).
PrecisionGuarantee quant_integer_dot() {
  return PrecisionGuarantee::bounded(true, true, std::nullopt, 1.0 / 64.0, std::nullopt);
}
// Both operands rounded to bf16 once, f32 accumulation: 1/128 of sum |a w| for any
// activations (Note [Quantized prompts on the tensor cores] in quant/quant_kernels.cpp);
// also the claim of bf16 weights against activations rounded to bf16 (Note [One
// bf16 pass is a precision trade] in gemm/matmul.cpp).
PrecisionGuarantee quant_bf16_dot() {
  return PrecisionGuarantee::bounded(true, true, std::nullopt, 1.0 / 128.0, std::nullopt);
}

// The tensor-core attention (Note [Prompt attention on the tensor cores] in
// attention/attention_tc.cu): scores off by at most u * scale * sum |q k| when f32
// queries are rounded to the compute type (f16 for f16 K and V, bf16 for bf16; u
// its half ULP), probabilities rounded once, so the output is within
// 2 (u * scale * sum |q k|) + 2u of sum p |v|. The claim takes scale * sum |q k| up
// to 4 (head dimension 128 with entries in [-1, 1] gives 2.8 on average), plus the
// output's rounding.
PrecisionGuarantee tensor_core_attention_bound(DType q, DType kv) {
  const double u = half_ulp_rel(kv);
  const double score = q == kF32 ? u * 4.0 : 0.0;
  return f32_bound(2.0 * score + 2.0 * u, std::nullopt, q);
}

// The TF32 product: the matmul roofline with its arithmetic seven times as fast
// as the exact f32 sibling's (353 against 50 TFLOP/s measured at 4096^3).
CostEstimate tf32_matmul_cost(const CostInputs& in) {
  CostEstimate e = default_cost_for(OpKind::kMatmul)(in);
  e.flops /= 7.0;
  return e;
}

// The rounded bf16 product: the roofline of the split sibling, which takes two
// tensor-core passes, with half its arithmetic.
CostEstimate one_pass_bf16_cost(const CostInputs& in) {
  CostEstimate e = default_cost_for(in.op)(in);
  e.flops /= 2.0;
  return e;
}

// Ranks the tensor-core attention against the SIMT kernels: its blocks take 64
// query rows of one head (rows padded up, K and V read once per block and per
// query head), and its two products run on the tensor cores, taken as 16 times the
// SIMT rate the backend's peak describes; the softmax stays on the SIMT units. A
// decode step (one query row) so costs several times the grouped SIMT kernel, and
// a prompt a fraction of it.
CostEstimate tensor_core_attention_cost(const CostInputs& in) {
  if (in.shapes.size() < 3 || in.shapes[0].rank() < 3 || in.shapes[1].rank() < 3) {
    return default_cost_for(OpKind::kAttention)(in);
  }
  const Shape& q = in.shapes[0];
  const Shape& k = in.shapes[1];
  const double heads = static_cast<double>(q[q.rank() - 2]);
  const double kv_heads = std::max<double>(1.0, static_cast<double>(k[k.rank() - 2]));
  const double head_dim = static_cast<double>(q.inner());
  const double rows = static_cast<double>(q.numel()) / (heads * head_dim);  // batch * sq
  const double sq = static_cast<double>(q[q.rank() - 3]);
  const double batch = sq > 0 ? rows / sq : 0.0;
  const double blocks = std::ceil(sq / 64.0);
  const double padded = batch * blocks * 64.0;
  const double skv = static_cast<double>(k[k.rank() - 3]);
  const double kv_bytes = 2.0 * static_cast<double>(k.numel()) * element_bytes(in.dtypes[1]);
  const double q_bytes = static_cast<double>(q.numel()) * element_bytes(in.dtypes[0]);
  return {4.0 * padded * skv * heads * head_dim / 16.0 + 5.0 * padded * skv * heads,
          2.0 * q_bytes + kv_bytes * blocks * heads / kv_heads, 0, true};
}

constexpr std::string_view kOwn = "cuda";
constexpr std::string_view kCublasLt = "cublaslt";
constexpr std::string_view kNccl = "nccl";

void append_elementwise_rows(std::vector<Row>& rows) {
  constexpr KernelCaps kBroadcasting{.strided_input = true, .broadcast_input = true};
  for (OpKind op : kOpsOfFamily<OpFamily::kBinary>) {
    for (DType t : kFloatDTypes) {
      rows.push_back(row(op, {t, t, t}, binary_kernel(op), "simt",
                         t == kF32 ? exact() : rounded_once(), kOwn, kBroadcasting));
    }
  }
  for (OpKind op : kOpsOfFamily<OpFamily::kUnary>) {
    const bool one_operation =
        op == OpKind::kNeg || op == OpKind::kRelu || op == OpKind::kSqrt || op == OpKind::kScale;
    for (DType t : kFloatDTypes) {
      rows.push_back(row(op, {t, t}, unary_kernel(op), "simt",
                         one_operation && t == kF32 ? exact() : rounded_once(), kOwn,
                         kBroadcasting));
    }
  }
  for (DType from : kLayoutDTypes) {
    for (DType to : kLayoutDTypes) {
      rows.push_back(
          row(OpKind::kCast, {from, to}, &cast_kernel, "simt", exact(), kOwn, kBroadcasting));
    }
  }
}

void append_rowwise_rows(std::vector<Row>& rows) {
  for (DType t : kFloatDTypes) {
    for (OpKind op : kOpsOfFamily<OpFamily::kNorm>) {
      const int most = op == OpKind::kRmsNorm ? 2 : 3;
      for (int inputs = 1; inputs <= most; ++inputs) {
        // x alone, x and w, x, w and b: one dtype, so the variant says which.
        const std::string_view variant = inputs == 1 ? "simt" : inputs == 2 ? "simt_w" : "simt_wb";
        const std::vector<DType> dtypes(static_cast<std::size_t>(inputs) + 1, t);
        rows.push_back(row(
            op, DTypeList(dtypes), norm_kernel(op), variant,
            op == OpKind::kRmsNorm ? f32_bound(2e-5, std::nullopt, t) : f32_bound(2e-5, 1e-4, t),
            kOwn));
      }
    }
    for (bool mask : {false, true}) {
      rows.push_back(row(OpKind::kSoftmax, mask ? DTypeList{t, t, t} : DTypeList{t, t},
                         &softmax_kernel, mask ? "simt_mask" : "simt", f32_bound(2e-5, 1e-6, t),
                         kOwn));
    }
    for (OpKind op : kOpsOfFamily<OpFamily::kReduce>) {
      // max picks an element; the f32 tree sum's error relative to a cancelling
      // row's result is unbounded, so sum and mean claim no bound (as the CPU's SIMD).
      rows.push_back(row(op, {t, t}, reduce_kernel(op), "simt",
                         op == OpKind::kMax ? exact() : PrecisionGuarantee::no_bound(true, true),
                         kOwn));
    }
  }
}

void append_tensor_rows(std::vector<Row>& rows) {
  constexpr KernelCaps kStridedBroadcast{.strided_input = true, .broadcast_input = true};
  for (DType t : kFloatDTypes) {
    // With or without per-pair frequency factors (a third input): one kernel.
    for (const DTypeList& key : {DTypeList{t, kI32, t}, DTypeList{t, kI32, DType::kF32, t}}) {
      rows.push_back(
          row(OpKind::kRope, key, &rope_kernel, "simt", f32_bound(2e-7, std::nullopt, t), kOwn));
    }
    for (DType out : kFloatDTypes) {
      rows.push_back(
          row(OpKind::kGetRows, {t, kI32, out}, &get_rows_kernel, "simt", exact(), kOwn));
    }
    for (DType src : kFloatDTypes) {
      rows.push_back(
          row(OpKind::kSetRows, {t, src, kI32, t}, &set_rows_kernel, "simt", exact(), kOwn));
    }
  }
  // Collectives (collective/collective.cpp): NCCL's sums, in f32 for f32 and in
  // the narrow type for f16 and bf16, each of N - 1 additions rounded: within
  // (N - 1) units of rounding of the sum of magnitudes, stated for the eight
  // ranks of one host (2^-11 for f16, 2^-8 for bf16); one rank is a copy.
  for (OpKind op : kOpsOfFamily<OpFamily::kCollective>) {
    for (DType t : kFloatDTypes) {
      const double rel = t == kF32 ? 4e-6 : t == kF16 ? 7 * 0x1p-11 : 7 * 0x1p-8;
      const PrecisionGuarantee sums =
          PrecisionGuarantee::bounded(true, true, std::nullopt, rel, std::nullopt);
      rows.push_back(row(op, {t, t}, collective_kernel(op), "nccl", sums, kNccl));
    }
  }
  for (DType t : kLayoutDTypes) {
    rows.push_back(
        row(OpKind::kCopy, {t, t}, &copy_kernel, "simt", exact(), kOwn, kStridedBroadcast));
    rows.push_back(row(OpKind::kTranspose, {t, t}, &transpose_kernel, "simt", exact(), kOwn,
                       kStridedBroadcast));
    for (int inputs = 2; inputs <= kMaxConcatInputs; ++inputs) {
      const std::vector<DType> dtypes(static_cast<std::size_t>(inputs) + 1, t);
      rows.push_back(row(OpKind::kConcat, DTypeList(dtypes), &concat_kernel,
                         fmt::format("simt_in{}", inputs), exact(), kOwn, kStridedBroadcast));
    }
  }
  // A q8_0 KV cache (Note [A q8_0 cache on the device] in tensor/tensor.cu):
  // set_rows quantizes as the CPU does (its claim), attention reads each value
  // exactly (the f32 claim; no tensor-core sibling).
  for (DType src : kFloatDTypes) {
    rows.push_back(row(OpKind::kSetRows, {kQ8_0, src, kI32, kQ8_0}, &set_rows_kernel, "simt",
                       PrecisionGuarantee::bounded(true, true, std::nullopt, 4.5e-3, std::nullopt),
                       kOwn));
  }
  const std::pair<DType, DType> kAttention[] = {{kF32, kF32}, {kF32, kF16},   {kF32, kBF16},
                                                {kF16, kF16}, {kBF16, kBF16}, {kF32, kQ8_0}};
  for (auto [q, kv] : kAttention) {
    for (bool mask : {false, true}) {
      const DTypeList key = mask ? DTypeList{q, kv, kv, q, q} : DTypeList{q, kv, kv, q};
      rows.push_back(row(OpKind::kAttention, key, &attention_kernel, mask ? "simt_mask" : "simt",
                         f32_bound(1e-4, std::nullopt, q), kOwn));
      if (kv == kF32 || kv == kQ8_0) continue;
      Row tc = row(OpKind::kAttention, key, &attention_tc_kernel, mask ? "tc_mask" : "tc",
                   tensor_core_attention_bound(q, kv), kOwn, {}, &admits_tensor_core_attention);
      tc.options.cost = &tensor_core_attention_cost;
      rows.push_back(std::move(tc));
    }
  }
}

// Per key, best first: cuBLASLt (exact f32 compute; then TF32, Note [TF32 is a
// precision trade]; the split product for f32 x bf16) where it takes the key's
// dtypes, the tiled kernel last.
void append_matmul_rows(std::vector<Row>& rows) {
  constexpr OpKind kOp = OpKind::kMatmul;
  for (DType t : kFloatDTypes) {
    const DTypeList key{t, t, t};
    rows.push_back(row(kOp, key, &matmul_cublaslt_kernel, "cublaslt", dot(t), kCublasLt));
    if (t == kF32) {
      Row tf32 = row(kOp, key, &matmul_cublaslt_tf32_kernel, "cublaslt_tf32", tf32_dot(), kCublasLt,
                     {.trades_precision = true});
      tf32.options.cost = &tf32_matmul_cost;
      rows.push_back(std::move(tf32));
    }
    rows.push_back(row(kOp, key, &matmul_simt_kernel, "simt", dot(t), kOwn));
  }
  // f32 x bf16 on the tensor cores keeps the f32 claim (Note [Exact f32 products on
  // bf16 tensor cores] in gemm/matmul.cpp), from kSplitMinRows rows.
  rows.push_back(row(kOp, {kF32, kBF16, kF32}, &matmul_split_bf16_kernel, "cublaslt_split",
                     dot(kF32), kCublasLt, {}, &admits_split_rows));
  // One pass of the activations rounded to bf16: a precision trade (Note [One bf16
  // pass is a precision trade] in gemm/matmul.cpp), for the product and the fused
  // ops alike.
  const auto rounded = [&](OpKind op, const DTypeList& key, KernelFn fn, ShapeAdmitFn admit) {
    Row r = row(op, key, fn, "cublaslt_rounded", quant_bf16_dot(), kCublasLt,
                {.trades_precision = true}, admit);
    r.options.cost = &one_pass_bf16_cost;
    rows.push_back(std::move(r));
  };
  rounded(kOp, {kF32, kBF16, kF32}, &matmul_rounded_bf16_kernel, &admits_split_rows);
  for (DType w : {kF16, kBF16}) {
    rows.push_back(row(kOp, {kF32, w, kF32}, &matmul_simt_kernel, "simt", dot(kF32), kOwn));
  }
  // The fused ops, as compositions (Note [Composite fused kernels] in gemm/fused.cpp).
  for (DType w : kFloatDTypes) {
    const std::string_view variant =
        w == kF32 ? "cublaslt" : (w == kBF16 ? "cublaslt_split" : "simt");
    const std::string_view source = w == kF16 ? kOwn : kCublasLt;
    rows.push_back(
        row(OpKind::kLinear, {kF32, w, kF32, kF32}, &linear_kernel, variant, dot(kF32), source));
    rows.push_back(row(OpKind::kFfnSwiglu, {kF32, w, w, w, kF32}, &ffn_swiglu_kernel, variant,
                       dot(kF32), source));
  }
  rounded(OpKind::kLinear, {kF32, kBF16, kF32, kF32}, &linear_rounded_kernel, nullptr);
  rounded(OpKind::kFfnSwiglu, {kF32, kBF16, kBF16, kBF16, kF32}, &ffn_swiglu_rounded_kernel,
          nullptr);
}

// Every GGUF weight format, under the CPU's keys: matmul with f32 activations
// (bf16 tiles on the tensor cores for prompts, admitted from kSplitMinRows rows;
// the matrix-vector kernel for any number), get_rows and casts to each float
// type, whose values are the exact dequantization rounded once (Note [Levels fit
// a signed byte] in quant/quant_formats.cuh).
void append_quant_rows(std::vector<Row>& rows) {
  for (DType w : kQuantizedWeightDTypes) {
    const DTypeList matmul_key{kF32, w, kF32};
    rows.push_back(row(OpKind::kMatmul, matmul_key, &quant_matmul_bf16_kernel, "cublaslt_bf16",
                       quant_bf16_dot(), kCublasLt, {}, &admits_split_rows));
    rows.push_back(row(OpKind::kMatmul, matmul_key, &quant_matmul_matvec_kernel, "dp4a",
                       quant_integer_dot(), kOwn));
    for (DType out : kFloatDTypes) {
      rows.push_back(
          row(OpKind::kGetRows, {w, kI32, out}, &quant_get_rows_kernel, "simt", exact(), kOwn));
      rows.push_back(row(OpKind::kCast, {w, out}, &quant_cast_kernel, "simt", exact(), kOwn));
    }
  }
}

}  // namespace

const std::vector<Row>& registration_rows() {
  static const std::vector<Row> kRows = [] {
    std::vector<Row> r;
    append_elementwise_rows(r);
    append_rowwise_rows(r);
    append_tensor_rows(r);
    append_matmul_rows(r);
    append_quant_rows(r);
    return r;
  }();
  return kRows;
}

void register_backend(KernelBindingTable& table) {
  table.add_backend(BackendId::kCuda, cuda_memory());
  table.register_rows(BackendId::kCuda, registration_rows());
  // The rows name no cost of their own yet: each op's default roofline.
  table.fill_unset_cost(BackendId::kCuda, &default_cost_for);
}

}  // namespace switchyard::cuda
