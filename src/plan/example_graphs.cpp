// Example graphs with synthetic weights.
#include "switchyard/example_graphs.h"

#include <cmath>
#include <string>

#include <fmt/format.h>

namespace switchyard {
namespace {

// Deterministic values in [-scale, scale): a linear congruential sequence.
std::vector<float> synthetic(std::int64_t n, std::uint32_t seed, float scale) {
  std::vector<float> v(static_cast<std::size_t>(n));
  std::uint32_t s = seed * 747796405u + 2891336453u;
  for (float& x : v) {
    s = s * 1664525u + 1013904223u;
    x = (static_cast<float>(s >> 8) / static_cast<float>(1u << 23) - 1.0f) * scale;
  }
  return v;
}

ValueId weight(GraphBuilder& b, const std::string& name, Shape shape, std::uint32_t seed) {
  const float scale = 1.0f / std::sqrt(static_cast<float>(shape.inner()));
  return b.constant_f32(name, shape, synthetic(shape.numel(), seed, scale));
}

ValueId norm_weight(GraphBuilder& b, const std::string& name, std::int64_t d, std::uint32_t seed) {
  std::vector<float> w = synthetic(d, seed, 0.1f);
  for (float& x : w) x += 1.0f;
  return b.constant_f32(name, Shape{d}, w);
}

}  // namespace

Result<Graph> transformer_block_graph(const TransformerBlockShape& s) {
  if (s.heads <= 0 || s.kv_heads <= 0 || s.model_dim % s.heads != 0 || s.heads % s.kv_heads != 0 ||
      s.model_dim <= 0 || s.ffn_dim <= 0) {
    return invalid_argument_error(fmt::format(
        "transformer block: model_dim {} must split into {} heads and heads into {} kv heads",
        s.model_dim, s.heads, s.kv_heads));
  }
  const std::int64_t d = s.model_dim;
  const std::int64_t dh = d / s.heads;
  const std::int64_t kv = s.kv_heads * dh;
  GraphBuilder b;
  const std::int64_t t = b.symbol("tokens");
  ValueId x = b.input("x", DType::kF32, {t, d});
  ValueId pos = b.input("pos", DType::kI32, {t});

  ValueId attn_norm_w = norm_weight(b, "attn_norm.weight", d, 1);
  ValueId n1 = b.mul(b.rms_norm(x, s.norm_eps, "attn_norm", "attn_norm"),
                     b.broadcast(attn_norm_w, {t, d}), "attn_norm_mul", "attn_norm");
  ValueId q = b.matmul(n1, weight(b, "attn_q.weight", {d, d}, 2), "attn_q", "attn_q");
  ValueId k = b.matmul(n1, weight(b, "attn_k.weight", {kv, d}, 3), "attn_k", "attn_k");
  ValueId v = b.matmul(n1, weight(b, "attn_v.weight", {kv, d}, 4), "attn_v", "attn_v");
  OpParams rope;
  rope.rope_mode = RopeMode::kNeox;
  rope.rope_base = s.rope_base;
  ValueId q3 = b.reshape(q, {t, s.heads, dh}, "attn_q.heads");
  ValueId k3 = b.reshape(k, {t, s.kv_heads, dh}, "attn_k.heads");
  ValueId v3 = b.reshape(v, {t, s.kv_heads, dh}, "attn_v.heads");
  ValueId qr = b.op(OpKind::kRope, {q3, pos}, "rope_q", rope, "rope");
  ValueId kr = b.op(OpKind::kRope, {k3, pos}, "rope_k", rope, "rope");
  OpParams attn;
  attn.scale = 1.0f / std::sqrt(static_cast<float>(dh));
  attn.causal = true;
  ValueId a = b.op(OpKind::kAttention, {qr, kr, v3}, "attention", attn, "attention");
  ValueId a2 = b.reshape(a, {t, d}, "attention.flat");
  ValueId o =
      b.matmul(a2, weight(b, "attn_output.weight", {d, d}, 5), "attn_output", "attn_output");
  ValueId h = b.add(x, o, "attn_residual", "residual");

  ValueId ffn_norm_w = norm_weight(b, "ffn_norm.weight", d, 6);
  ValueId n2 = b.mul(b.rms_norm(h, s.norm_eps, "ffn_norm", "ffn_norm"),
                     b.broadcast(ffn_norm_w, {t, d}), "ffn_norm_mul", "ffn_norm");
  ValueId gate =
      b.matmul(n2, weight(b, "ffn_gate.weight", {s.ffn_dim, d}, 7), "ffn_gate", "ffn_gate");
  ValueId up = b.matmul(n2, weight(b, "ffn_up.weight", {s.ffn_dim, d}, 8), "ffn_up", "ffn_up");
  ValueId act = b.mul(b.silu(gate, "ffn_silu", "ffn_gate"), up, "ffn_gated", "ffn_up");
  ValueId down =
      b.matmul(act, weight(b, "ffn_down.weight", {d, s.ffn_dim}, 9), "ffn_down", "ffn_down");
  b.output(b.add(h, down, "ffn_residual", "residual"));
  return std::move(b).build();
}

Result<Graph> mlp_graph(std::int64_t model_dim, std::int64_t hidden_dim) {
  if (model_dim <= 0 || hidden_dim <= 0) return invalid_argument_error("mlp: empty dimensions");
  GraphBuilder b;
  const std::int64_t t = b.symbol("tokens");
  ValueId x = b.input("x", DType::kF32, {t, model_dim});
  ValueId w1 = weight(b, "fc1.weight", {hidden_dim, model_dim}, 11);
  ValueId b1 = b.constant_f32("fc1.bias", {hidden_dim}, synthetic(hidden_dim, 12, 0.1f));
  ValueId w2 = weight(b, "fc2.weight", {model_dim, hidden_dim}, 13);
  ValueId h = b.add(b.matmul(x, w1, "fc1", "ffn_up"), b.broadcast(b1, {t, hidden_dim}), "fc1_bias",
                    "ffn_up");
  ValueId sq = b.mul(h, h, "square", "activation");
  b.output(b.add(b.matmul(sq, w2, "fc2", "ffn_down"), x, "residual", "residual"));
  return std::move(b).build();
}

Result<Graph> elementwise_chain_graph(int nodes, std::int64_t rows, std::int64_t cols) {
  if (nodes < 1) return invalid_argument_error("elementwise chain: at least one node");
  GraphBuilder b;
  ValueId x = b.input("x", DType::kF32, {rows, cols});
  ValueId y = b.input("y", DType::kF32, {rows, cols});
  ValueId v = x;
  for (int i = 0; i < nodes; ++i) {
    const std::string name = fmt::format("n{}", i);
    v = i % 2 == 0 ? b.add(v, y, name) : b.mul(v, y, name);
  }
  b.output(v);
  return std::move(b).build();
}

std::vector<ShapeBucket> example_buckets(std::int64_t max_tokens) {
  return {{"decode", {{"tokens", 1, 1}}}, {"prefill", {{"tokens", 2, max_tokens}}}};
}

}  // namespace switchyard
