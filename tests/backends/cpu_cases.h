// A valid call for any CPU binding key: operands of the key's dtypes and shapes
// that the op's contract (docs/ops.md) accepts, filled with benign values. The
// lint test launches every registered entry with it; the determinism test uses the
// large form, which spans several thread chunks.
#pragma once

#include <vector>

#include "backends/cpu_test_util.h"

namespace switchyard::test {

struct Case {
  std::vector<Tensor> inputs;
  std::vector<Tensor> outputs;
  OpParams params;

  [[nodiscard]] std::vector<TensorView> input_views() {
    std::vector<TensorView> v;
    for (Tensor& t : inputs) v.push_back(t.view());
    return v;
  }
  [[nodiscard]] std::vector<TensorView> output_views() {
    std::vector<TensorView> v;
    for (Tensor& t : outputs) v.push_back(t.view());
    return v;
  }
};

// Shapes of each operand for (op, operand count); `big` scales the leading dims.
inline std::vector<Shape> case_shapes(OpKind op, std::size_t operands, bool big) {
  const std::int64_t rows = big ? 401 : 2;
  // 256 is a multiple of every block size, so block-quantized operands fit too.
  const std::int64_t k = 256;
  switch (op_family(op)) {
    case OpFamily::kBinary: return {{rows, k}, {rows, k}, {rows, k}};
    case OpFamily::kUnary:
    case OpFamily::kCast: return {{rows, k}, {rows, k}};
    case OpFamily::kNorm: {
      std::vector<Shape> s = {{rows, k}};
      for (std::size_t i = 2; i < operands; ++i) s.push_back({k});
      s.push_back({rows, k});
      return s;
    }
    case OpFamily::kSoftmax:
      return operands == 3 ? std::vector<Shape>{{rows, 3, 33}, {3, 33}, {rows, 3, 33}}
                           : std::vector<Shape>{{rows, 3, 33}, {rows, 3, 33}};
    case OpFamily::kRope:
      if (operands == 4) return {{rows, 3, 2, 8}, {3}, {4}, {rows, 3, 2, 8}};  // with factors
      return {{rows, 3, 2, 8}, {3}, {rows, 3, 2, 8}};
    case OpFamily::kGetRows:
      if (op == OpKind::kSetRows) return {{rows + 3, k}, {rows, k}, {rows}, {rows + 3, k}};
      return {{4, k}, {rows}, {rows, k}};
    case OpFamily::kReduce: return {{rows, 37}, {rows, 1}};
    case OpFamily::kLayout:
      if (op == OpKind::kCopy) return {{rows, 5}, {rows, 5}};
      if (op == OpKind::kTranspose) return {{rows, 5}, {5, rows}};
      {
        std::vector<Shape> s(operands - 1, Shape{rows, 3});
        s.push_back({rows, 3 * static_cast<std::int64_t>(operands - 1)});
        return s;
      }
    case OpFamily::kAttention: {
      // Heads of 32: whole q8_0 blocks, for a q8_0 KV cache's keys and values.
      const std::int64_t sq = big ? 64 : 3;
      std::vector<Shape> s = {{1, sq, 4, 32}, {1, 5, 2, 32}, {1, 5, 2, 32}};
      if (operands == 5) s.push_back({sq, 5});
      s.push_back({1, sq, 4, 32});
      return s;
    }
    case OpFamily::kMatmul: return {{rows, k}, {4, k}, {rows, 4}};
    case OpFamily::kFused:
      if (op == OpKind::kLinear) return {{rows, k}, {4, k}, {4}, {rows, 4}};
      if (op == OpKind::kFfnSwiglu) return {{rows, k}, {k, k}, {k, k}, {k, k}, {rows, k}};
      return {{rows, k}, {k}, {rows, k}};                       // rms_norm_mul
    case OpFamily::kCollective: return {{rows, k}, {rows, k}};  // one rank: a copy
  }
  return {};
}

// A valid call of (op, dtypes), or an empty case when the shapes do not cover the
// operand count (the lint test reports that as a gap of this helper).
inline Case make_case(OpKind op, const DTypeList& dtypes, bool big = false) {
  Case c;
  const std::vector<Shape> shapes = case_shapes(op, dtypes.size(), big);
  if (shapes.size() != dtypes.size()) return c;
  c.params.scale = 0.5f;
  c.params.axis = -1;
  c.params.causal = op == OpKind::kAttention;
  for (std::size_t i = 0; i < dtypes.size(); ++i) {
    Tensor t(dtypes[i], shapes[i]);
    const bool index = (op == OpKind::kGetRows && i == 1) || (op == OpKind::kSetRows && i == 2);
    const bool positions = op == OpKind::kRope && i == 1;
    for (std::int64_t e = 0; e < t.numel(); ++e) {
      if (index) {
        // Distinct rows for set_rows, whose repeats have no specified winner.
        t.set(e, static_cast<double>(op == OpKind::kSetRows ? e : e % 4));
      } else if (positions) {
        t.set(e, static_cast<double>(3 * e));
      } else {
        // Positive, varied values: valid for sqrt, rsqrt and every other op.
        t.set(e, 0.25 + static_cast<double>((e * 37) % 101) / 64.0);
      }
    }
    if (i + 1 < dtypes.size()) {
      c.inputs.push_back(std::move(t));
    } else {
      c.outputs.push_back(std::move(t));
    }
  }
  return c;
}

}  // namespace switchyard::test
