// Roofline estimates and the per-family default cost functions.
#include <algorithm>
#include <utility>

#include "switchyard/cost.h"
#include "switchyard/kernel.h"

namespace switchyard {
namespace {

double operand_bytes(const CostInputs& in, std::size_t i) {
  return static_cast<double>(in.shapes[i].numel()) * element_bytes(in.dtypes[i]);
}

double all_bytes(const CostInputs& in) {
  double total = 0;
  for (std::size_t i = 0; i < in.shapes.size() && i < in.dtypes.size(); ++i) {
    total += operand_bytes(in, i);
  }
  return total;
}

double last_numel(const CostInputs& in) {
  return in.shapes.empty() ? 0.0 : static_cast<double>(in.shapes.back().numel());
}

// Every operand read or written once, `flops_per_element` per output element.
template <int kFlopsPerElement>
CostEstimate streaming_cost(const CostInputs& in) {
  return {kFlopsPerElement * last_numel(in), all_bytes(in), 0, true};
}

// [M, K] x [N, K] -> [M, N] (batched over leading dims of the activations).
CostEstimate matmul_cost(const CostInputs& in) {
  if (in.shapes.size() < 3) return {0, all_bytes(in), 0, true};
  const double m = static_cast<double>(in.shapes[0].outer());
  const double k = static_cast<double>(in.shapes[0].inner());
  const double n = static_cast<double>(in.shapes[1].outer());
  return {2 * m * n * k, all_bytes(in), 0, true};
}

// x[M, D]; gate, up [F, D]; down [D, F]: three matmuls and the gating.
CostEstimate ffn_cost(const CostInputs& in) {
  if (in.shapes.size() < 5) return {0, all_bytes(in), 0, true};
  const double m = static_cast<double>(in.shapes[0].outer());
  const double d = static_cast<double>(in.shapes[0].inner());
  const double f = static_cast<double>(in.shapes[1].outer());
  return {6 * m * d * f + 4 * m * f, all_bytes(in), 0, true};
}

// q [.., Sq, H, D] against k, v [.., Skv, Hkv, D]: two matmuls per head.
CostEstimate attention_cost(const CostInputs& in) {
  if (in.shapes.size() < 3 || in.shapes[0].rank() < 3 || in.shapes[1].rank() < 3) {
    return {0, all_bytes(in), 0, true};
  }
  const Shape& q = in.shapes[0];
  const Shape& k = in.shapes[1];
  const double heads = static_cast<double>(q[q.rank() - 2]);
  const double head_dim = static_cast<double>(q.inner());
  const double sq = static_cast<double>(q.numel()) / (heads * head_dim);
  const double skv = static_cast<double>(k[k.rank() - 3]);
  return {4 * sq * skv * heads * head_dim + 5 * sq * skv * heads, all_bytes(in), 0, true};
}

// dst [R, C], src [N, C], idx [N]: costed as the in-place update it exists for
// (the output is dst's memory), which reads and writes the N rows only.
CostEstimate set_rows_cost(const CostInputs& in) {
  if (in.shapes.size() < 4) return streaming_cost<0>(in);
  const double n = static_cast<double>(in.shapes[1].numel());
  return {0, n * (element_bytes(in.dtypes[1]) + element_bytes(in.dtypes[3])) + operand_bytes(in, 2),
          0, true};
}

// Note [Collective cost]
// The ring algorithms: an all_reduce of B bytes over N ranks sends and receives
// 2 (N - 1) / N B per rank in 2 (N - 1) steps; all_gather and reduce_scatter move
// (N - 1) / N of their larger operand in N - 1 steps. Each step costs a hop of
// the link (BackendCaps::link_hop_ns). One rank is a copy.
CostEstimate collective_cost(const CostInputs& in) {
  const int ranks = in.params != nullptr ? in.params->ranks : 1;
  if (ranks <= 1 || in.shapes.size() < 2) return streaming_cost<0>(in);
  const double hop_ns = in.caps != nullptr ? in.caps->link_hop_ns : BackendCaps{}.link_hop_ns;
  const double share = static_cast<double>(ranks - 1) / ranks;
  const double larger = std::max(operand_bytes(in, 0), operand_bytes(in, 1));
  const bool all_reduce = in.op == OpKind::kAllReduce;
  const double steps = (all_reduce ? 2.0 : 1.0) * (ranks - 1);
  // Additions per rank: an all_reduce's 1/N of the elements from each of the
  // other N - 1 ranks; a reduce_scatter's output from each of them.
  const double sums = in.op == OpKind::kAllGather   ? 0.0
                      : in.op == OpKind::kAllReduce ? share * last_numel(in)
                                                    : (ranks - 1) * last_numel(in);
  return {sums, (all_reduce ? 4.0 : 2.0) * share * larger, steps * hop_ns, true};
}

}  // namespace

CostEstimate unknown_cost(const CostInputs& /*in*/) { return CostEstimate::unknown(); }

double CostEstimate::time_ns(const BackendCaps& caps) const {
  // GFLOP/s is flops per ns; GB/s is bytes per ns.
  const double compute_ns = flops / std::max(caps.peak_gflops, 1e-9);
  const double memory_ns = bytes / std::max(caps.memory_gbps, 1e-9);
  return std::max(compute_ns, memory_ns) + overhead_ns + caps.call_overhead_ns;
}

double element_bytes(DType t) {
  return static_cast<double>(block_bytes(t)) / static_cast<double>(block_elems(t));
}

namespace {

// A fused op has no family model: each names its own (Note [Per-op code over
// kOpsOfFamily] in op.h), so a fused op added to op.def does not compile until
// it does.
template <OpKind kOp>
constexpr CostFn fused_cost_of() {
  if constexpr (kOp == OpKind::kFfnSwiglu) {
    return &ffn_cost;
  } else if constexpr (kOp == OpKind::kLinear) {
    return &matmul_cost;
  } else if constexpr (kOp == OpKind::kRmsNormMul) {
    return &streaming_cost<6>;
  } else {
    static_assert(kNoCodeForOp<kOp>, "a fused op of op.def has no default cost model");
    return &unknown_cost;
  }
}

template <std::size_t... I>
CostFn fused_cost(OpKind op, std::index_sequence<I...>) {
  static constexpr CostFn kByOp[] = {fused_cost_of<kOpsOfFamily<OpFamily::kFused>[I]>()...};
  return kByOp[index_in_family(op)];
}

CostFn fused_cost(OpKind op) {
  return fused_cost(op, std::make_index_sequence<kOpsOfFamily<OpFamily::kFused>.size()>{});
}

}  // namespace

CostFn default_cost_for(OpKind op) {
  switch (op_family(op)) {
    case OpFamily::kGetRows: return op == OpKind::kSetRows ? &set_rows_cost : &streaming_cost<1>;
    case OpFamily::kBinary:
    case OpFamily::kCast:
    case OpFamily::kLayout: return &streaming_cost<1>;
    case OpFamily::kUnary: return &streaming_cost<4>;
    case OpFamily::kNorm:
    case OpFamily::kSoftmax:
    case OpFamily::kRope:
    case OpFamily::kReduce: return &streaming_cost<5>;
    case OpFamily::kMatmul: return &matmul_cost;
    case OpFamily::kAttention: return &attention_cost;
    case OpFamily::kFused: return fused_cost(op);
    case OpFamily::kCollective: return &collective_cost;
  }
  return &unknown_cost;
}

}  // namespace switchyard
