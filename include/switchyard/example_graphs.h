// Example graphs with synthetic weights: what `switchyard explain` shows out of the
// box, and the workloads of the planner's tests and benchmarks. Real model graphs
// (built from GGUF metadata and tensors) belong to the models layer.
//
// Weights are deterministic pseudo-random f32 values owned by the graph, so two
// builds of the same example are identical.
//
// Example
//   SWITCHYARD_ASSIGN_OR_RETURN(Graph block, transformer_block_graph({}));
//   PlanOptions options;
//   options.buckets = example_buckets();
//   SWITCHYARD_ASSIGN_OR_RETURN(ExecutionPlan plan, plan_graph(block, current_table(), options));
#pragma once

#include <cstdint>
#include <vector>

#include "switchyard/graph.h"
#include "switchyard/plan.h"

namespace switchyard {

struct TransformerBlockShape {
  std::int64_t model_dim = 64;
  std::int64_t heads = 4;
  std::int64_t kv_heads = 2;
  std::int64_t ffn_dim = 128;
  float norm_eps = 1e-5f;
  float rope_base = 10000.0f;
};

// One pre-norm decoder block of the llama family over a symbolic token count
// "tokens": inputs x f32 [tokens, model_dim] and positions i32 [tokens]; rms_norm
// times weight, q/k/v projections, rope, causal grouped-query attention, output
// projection and residual; rms_norm times weight, SwiGLU FFN and residual.
// Fails with kInvalidArgument when the heads do not divide the dimensions.
[[nodiscard]] Result<Graph> transformer_block_graph(const TransformerBlockShape& shape);

// A two-layer MLP over "tokens" using only matmul, a broadcast bias add, an
// elementwise square (mul) and a residual add: every op the built-in CPU table
// serves from the start.
[[nodiscard]] Result<Graph> mlp_graph(std::int64_t model_dim = 64, std::int64_t hidden_dim = 256);

// A chain of `nodes` elementwise ops (add, mul, alternating) over a [rows, cols]
// input, for planner and executor benchmarks.
[[nodiscard]] Result<Graph> elementwise_chain_graph(int nodes, std::int64_t rows = 1,
                                                    std::int64_t cols = 1);

// "decode" (tokens = 1) and "prefill" (tokens 2..max_tokens).
[[nodiscard]] std::vector<ShapeBucket> example_buckets(std::int64_t max_tokens = 512);

}  // namespace switchyard
