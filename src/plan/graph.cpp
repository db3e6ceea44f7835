// Graph construction, validation and the op shape rules of docs/ops.md.
#include "switchyard/graph.h"

#include <algorithm>
#include <cstring>
#include <queue>

#include <fmt/format.h>

namespace switchyard {
namespace {

std::string shape_text(const Shape& s) {
  std::vector<std::string> dims;
  for (std::int64_t d : s.dims()) {
    dims.push_back(is_symbolic(d) ? fmt::format("${}", symbol_index(d)) : fmt::format("{}", d));
  }
  return fmt::format("[{}]", fmt::join(dims, ", "));
}

Status mismatch(OpKind op, std::string what) {
  return invalid_argument_error(fmt::format("{}: {}", name(op), what));
}

Status check_arity(OpKind op, std::size_t got, std::size_t min, std::size_t max) {
  if (got < min || got > max) {
    return mismatch(op, min == max ? fmt::format("takes {} operands, got {}", min, got)
                                   : fmt::format("takes {} to {} operands, got {}", min, max, got));
  }
  return Status::ok();
}

Status same_dtype(OpKind op, std::span<const OperandInfo> in) {
  for (std::size_t i = 1; i < in.size(); ++i) {
    if (in[i].dtype != in[0].dtype) {
      return mismatch(op, fmt::format("operand {} is {}, operand 0 is {}", i, name(in[i].dtype),
                                      name(in[0].dtype)));
    }
  }
  return Status::ok();
}

Status float_dtype(OpKind op, const OperandInfo& x, std::string_view what) {
  if (!is_float(x.dtype)) {
    return mismatch(op, fmt::format("{} must be a float type, is {}", what, name(x.dtype)));
  }
  return Status::ok();
}

Status min_rank(OpKind op, const OperandInfo& x, int rank, std::string_view what) {
  if (x.shape.rank() < rank) {
    return mismatch(
        op, fmt::format("{} needs rank >= {}, has shape {}", what, rank, shape_text(x.shape)));
  }
  return Status::ok();
}

// A [D] vector matching the last dim of x (norm weights, biases).
Status vector_of(OpKind op, const OperandInfo& v, std::int64_t d, std::string_view what) {
  if (v.shape.rank() != 1 || v.shape[0] != d) {
    return mismatch(
        op, fmt::format("{} must be [{}], is {}", what, shape_text(Shape{d}), shape_text(v.shape)));
  }
  return Status::ok();
}

Shape with_last(const Shape& s, std::int64_t last) {
  std::array<std::int64_t, kMaxRank> d{};
  for (int i = 0; i < s.rank(); ++i) d[i] = s[i];
  d[s.rank() - 1] = last;
  return Shape(std::span<const std::int64_t>(d.data(), static_cast<std::size_t>(s.rank())));
}

}  // namespace

std::string_view name(ValueKind kind) {
  switch (kind) {
    case ValueKind::kInput: return "input";
    case ValueKind::kConstant: return "constant";
    case ValueKind::kNodeOutput: return "node_output";
    case ValueKind::kView: return "view";
  }
  return "?";
}

std::string_view name(ViewKind kind) {
  switch (kind) {
    case ViewKind::kBroadcast: return "broadcast";
    case ViewKind::kTranspose: return "transpose";
    case ViewKind::kReshape: return "reshape";
  }
  return "?";
}

std::string describe(const PrecisionFloor& floor) {
  if (!floor.any()) return "none";
  std::string text;
  if (floor.bit_stable) text = "bit-stable";
  if (floor.max_rel) text += fmt::format("{}rel<={:g}", text.empty() ? "" : " ", *floor.max_rel);
  return text;
}

Result<OperandInfo> infer_output(OpKind op, std::span<const OperandInfo> in, const OpParams& params,
                                 std::optional<DType> out_dtype) {
  switch (op_family(op)) {
    case OpFamily::kBinary: {
      SWITCHYARD_RETURN_IF_ERROR(check_arity(op, in.size(), 2, 2));
      SWITCHYARD_RETURN_IF_ERROR(same_dtype(op, in));
      SWITCHYARD_RETURN_IF_ERROR(float_dtype(op, in[0], "operand"));
      if (!(in[0].shape == in[1].shape)) {
        return mismatch(op, fmt::format("operand shapes {} and {} differ (broadcast explicitly)",
                                        shape_text(in[0].shape), shape_text(in[1].shape)));
      }
      return in[0];
    }
    case OpFamily::kUnary:
      SWITCHYARD_RETURN_IF_ERROR(check_arity(op, in.size(), 1, 1));
      SWITCHYARD_RETURN_IF_ERROR(float_dtype(op, in[0], "operand"));
      return in[0];
    case OpFamily::kCast:
      SWITCHYARD_RETURN_IF_ERROR(check_arity(op, in.size(), 1, 1));
      if (!out_dtype) return mismatch(op, "needs a destination dtype");
      return OperandInfo{*out_dtype, in[0].shape};
    case OpFamily::kMatmul: {
      SWITCHYARD_RETURN_IF_ERROR(check_arity(op, in.size(), 2, 2));
      const OperandInfo& a = in[0];
      const OperandInfo& w = in[1];
      SWITCHYARD_RETURN_IF_ERROR(min_rank(op, a, 2, "activations"));
      SWITCHYARD_RETURN_IF_ERROR(min_rank(op, w, 2, "weights"));
      SWITCHYARD_RETURN_IF_ERROR(float_dtype(op, a, "activations"));
      if (a.shape.inner() != w.shape.inner()) {
        return mismatch(op, fmt::format("inner dims differ: activations {} and weights {} "
                                        "(weights are [N, K])",
                                        shape_text(a.shape), shape_text(w.shape)));
      }
      if (w.shape.rank() > 2) {
        bool ok = w.shape.rank() == a.shape.rank();
        for (int i = 0; ok && i + 2 < a.shape.rank(); ++i) ok = a.shape[i] == w.shape[i];
        if (!ok) {
          return mismatch(op, fmt::format("batched weights {} do not match activations {}",
                                          shape_text(w.shape), shape_text(a.shape)));
        }
      }
      if (!is_quantized(w.dtype) && w.dtype != a.dtype && a.dtype != DType::kF32) {
        return mismatch(op, fmt::format("dtypes {} x {} are not a matmul combination",
                                        name(a.dtype), name(w.dtype)));
      }
      return OperandInfo{a.dtype, with_last(a.shape, w.shape[w.shape.rank() - 2])};
    }
    case OpFamily::kNorm: {
      const std::size_t max = op == OpKind::kLayerNorm ? 3 : 2;
      SWITCHYARD_RETURN_IF_ERROR(check_arity(op, in.size(), 1, max));
      SWITCHYARD_RETURN_IF_ERROR(min_rank(op, in[0], 1, "x"));
      SWITCHYARD_RETURN_IF_ERROR(float_dtype(op, in[0], "x"));
      SWITCHYARD_RETURN_IF_ERROR(same_dtype(op, in));
      for (std::size_t i = 1; i < in.size(); ++i) {
        SWITCHYARD_RETURN_IF_ERROR(
            vector_of(op, in[i], in[0].shape.inner(), i == 1 ? "weight" : "bias"));
      }
      return in[0];
    }
    case OpFamily::kSoftmax: {
      SWITCHYARD_RETURN_IF_ERROR(check_arity(op, in.size(), 1, 2));
      SWITCHYARD_RETURN_IF_ERROR(min_rank(op, in[0], 2, "x"));
      SWITCHYARD_RETURN_IF_ERROR(float_dtype(op, in[0], "x"));
      if (in.size() == 2) {
        const Shape& x = in[0].shape;
        if (in[1].shape.rank() != 2 || in[1].shape[0] != x[x.rank() - 2] ||
            in[1].shape[1] != x.inner()) {
          return mismatch(op, fmt::format("mask {} must be the last two dims of x {}",
                                          shape_text(in[1].shape), shape_text(x)));
        }
      }
      return in[0];
    }
    case OpFamily::kRope: {
      SWITCHYARD_RETURN_IF_ERROR(check_arity(op, in.size(), 2, 3));
      SWITCHYARD_RETURN_IF_ERROR(min_rank(op, in[0], 3, "x [.., T, H, D]"));
      SWITCHYARD_RETURN_IF_ERROR(float_dtype(op, in[0], "x"));
      const Shape& x = in[0].shape;
      const std::int64_t rotated = params.rope_dims == 0 ? x.inner() : params.rope_dims;
      if (in.size() == 3 && (in[2].dtype != DType::kF32 || !(in[2].shape == Shape{rotated / 2}))) {
        return mismatch(op, fmt::format("frequency factors must be f32 [{}] (one per rotated "
                                        "pair), are {}{}",
                                        rotated / 2, name(in[2].dtype), shape_text(in[2].shape)));
      }
      if (in[1].dtype != DType::kI32 || in[1].shape.rank() != 1 ||
          in[1].shape[0] != x[x.rank() - 3]) {
        return mismatch(op, fmt::format("positions must be i32 [T] with T = {}, are {}{}",
                                        shape_text(Shape{x[x.rank() - 3]}), name(in[1].dtype),
                                        shape_text(in[1].shape)));
      }
      if (params.rope_dims < 0 || (params.rope_dims % 2) != 0) {
        return mismatch(op, fmt::format("rope_dims {} must be even and >= 0", params.rope_dims));
      }
      return in[0];
    }
    case OpFamily::kGetRows: {
      if (op == OpKind::kSetRows) {
        SWITCHYARD_RETURN_IF_ERROR(check_arity(op, in.size(), 3, 3));
        const Shape& dst = in[0].shape;
        const Shape& src = in[1].shape;
        if (dst.rank() != 2 || src.rank() != 2 || src[1] != dst[1] || in[2].dtype != DType::kI32 ||
            in[2].shape.rank() != 1 || in[2].shape[0] != src[0]) {
          return mismatch(op, fmt::format("takes dst [R, C], src [N, C] and i32 indices [N], got "
                                          "{}, {} and {}{}",
                                          shape_text(dst), shape_text(src), name(in[2].dtype),
                                          shape_text(in[2].shape)));
        }
        // A quantized dst (a q8_0 KV cache) takes rows of whole blocks.
        if (!(is_float(in[0].dtype) || is_quantized(in[0].dtype)) || !is_float(in[1].dtype)) {
          return mismatch(op, "dst must be a float or quantized type, src a float type");
        }
        if (is_quantized(in[0].dtype) && !is_symbolic(dst[1]) &&
            dst[1] % block_elems(in[0].dtype) != 0) {
          return mismatch(op, fmt::format("rows of {} values are not whole {} blocks of {}", dst[1],
                                          name(in[0].dtype), block_elems(in[0].dtype)));
        }
        if (out_dtype && *out_dtype != in[0].dtype) {
          return mismatch(op, "the output has dst's dtype");
        }
        return in[0];
      }
      SWITCHYARD_RETURN_IF_ERROR(check_arity(op, in.size(), 2, 2));
      if (in[0].shape.rank() != 2 || in[1].dtype != DType::kI32 || in[1].shape.rank() != 1) {
        return mismatch(
            op, fmt::format("takes table [R, C] and i32 indices [N], got {} and {}{}",
                            shape_text(in[0].shape), name(in[1].dtype), shape_text(in[1].shape)));
      }
      const DType out = out_dtype.value_or(DType::kF32);
      if (!is_float(out)) return mismatch(op, "output must be a float type");
      return OperandInfo{out, Shape{in[1].shape[0], in[0].shape[1]}};
    }
    case OpFamily::kReduce:
      SWITCHYARD_RETURN_IF_ERROR(check_arity(op, in.size(), 1, 1));
      SWITCHYARD_RETURN_IF_ERROR(min_rank(op, in[0], 1, "x"));
      return OperandInfo{in[0].dtype, with_last(in[0].shape, 1)};
    case OpFamily::kLayout: {
      if (op == OpKind::kConcat) {
        SWITCHYARD_RETURN_IF_ERROR(check_arity(op, in.size(), 1, kMaxRank + 2));
        SWITCHYARD_RETURN_IF_ERROR(same_dtype(op, in));
        const int rank = in[0].shape.rank();
        const int axis = params.axis < 0 ? params.axis + rank : params.axis;
        if (axis < 0 || axis >= rank) {
          return mismatch(op, fmt::format("axis {} out of range for rank {}", params.axis, rank));
        }
        std::array<std::int64_t, kMaxRank> d{};
        for (int i = 0; i < rank; ++i) d[i] = in[0].shape[i];
        d[axis] = 0;
        for (const OperandInfo& x : in) {
          if (x.shape.rank() != rank) return mismatch(op, "operands differ in rank");
          for (int i = 0; i < rank; ++i) {
            if (i == axis) continue;
            if (x.shape[i] != in[0].shape[i]) {
              return mismatch(op, fmt::format("operand {} differs from {} outside axis {}",
                                              shape_text(x.shape), shape_text(in[0].shape), axis));
            }
          }
          if (is_symbolic(x.shape[axis])) {
            return mismatch(op, "cannot join along a symbolic dimension");
          }
          d[axis] += x.shape[axis];
        }
        return OperandInfo{in[0].dtype,
                           Shape(std::span<const std::int64_t>(d.data(), std::size_t(rank)))};
      }
      SWITCHYARD_RETURN_IF_ERROR(check_arity(op, in.size(), 1, 1));
      if (op == OpKind::kTranspose) {
        SWITCHYARD_RETURN_IF_ERROR(min_rank(op, in[0], 2, "x"));
        std::array<std::int64_t, kMaxRank> d{};
        const int r = in[0].shape.rank();
        for (int i = 0; i < r; ++i) d[i] = in[0].shape[i];
        std::swap(d[r - 1], d[r - 2]);
        return OperandInfo{in[0].dtype,
                           Shape(std::span<const std::int64_t>(d.data(), std::size_t(r)))};
      }
      return in[0];
    }
    case OpFamily::kAttention: {
      SWITCHYARD_RETURN_IF_ERROR(check_arity(op, in.size(), 3, 4));
      for (int i = 0; i < 3; ++i) {
        SWITCHYARD_RETURN_IF_ERROR(min_rank(op, in[i], 3, "q, k and v"));
      }
      SWITCHYARD_RETURN_IF_ERROR(float_dtype(op, in[0], "q"));
      const Shape& q = in[0].shape;
      const Shape& k = in[1].shape;
      if (!(in[1].shape == in[2].shape) || q.rank() != k.rank() || q.inner() != k.inner()) {
        return mismatch(op, fmt::format("q {}, k {}, v {} do not fit [.., S, H, Dh]", shape_text(q),
                                        shape_text(k), shape_text(in[2].shape)));
      }
      const std::int64_t h = q[q.rank() - 2];
      const std::int64_t hkv = k[k.rank() - 2];
      if (!is_symbolic(h) && !is_symbolic(hkv) && (hkv == 0 || h % hkv != 0)) {
        return mismatch(op,
                        fmt::format("{} query heads are not a multiple of {} kv heads", h, hkv));
      }
      if (in.size() == 4 && (in[3].shape.rank() != 2 || in[3].shape[0] != q[q.rank() - 3] ||
                             in[3].shape[1] != k[k.rank() - 3])) {
        return mismatch(op, fmt::format("mask {} must be [Sq, Skv]", shape_text(in[3].shape)));
      }
      return in[0];
    }
    case OpFamily::kCollective: {
      SWITCHYARD_RETURN_IF_ERROR(check_arity(op, in.size(), 1, 1));
      SWITCHYARD_RETURN_IF_ERROR(min_rank(op, in[0], 1, "x"));
      SWITCHYARD_RETURN_IF_ERROR(float_dtype(op, in[0], "x"));
      if (params.ranks < 1) {
        return mismatch(op, fmt::format("needs at least one rank, got {}", params.ranks));
      }
      if (out_dtype && *out_dtype != in[0].dtype) return mismatch(op, "the output has x's dtype");
      const std::int64_t n = in[0].shape.inner();
      if (op == OpKind::kAllReduce || params.ranks == 1) return in[0];
      if (is_symbolic(n)) return mismatch(op, "cannot split or join a symbolic last dimension");
      if (op == OpKind::kAllGather) {
        return OperandInfo{in[0].dtype, with_last(in[0].shape, n * params.ranks)};
      }
      if (n % params.ranks != 0) {
        return mismatch(op, fmt::format("{} columns do not split over {} ranks", n, params.ranks));
      }
      return OperandInfo{in[0].dtype, with_last(in[0].shape, n / params.ranks)};
    }
    case OpFamily::kFused: {
      if (op == OpKind::kLinear) {
        SWITCHYARD_RETURN_IF_ERROR(check_arity(op, in.size(), 3, 3));
        SWITCHYARD_RETURN_IF_ERROR(min_rank(op, in[0], 1, "x"));
        if (in[1].shape.rank() != 2 || in[1].shape[1] != in[0].shape.inner()) {
          return mismatch(op, fmt::format("weights {} must be [N, K] for x {}",
                                          shape_text(in[1].shape), shape_text(in[0].shape)));
        }
        SWITCHYARD_RETURN_IF_ERROR(vector_of(op, in[2], in[1].shape[0], "bias"));
        return OperandInfo{in[0].dtype, with_last(in[0].shape, in[1].shape[0])};
      }
      if (op == OpKind::kFfnSwiglu) {
        SWITCHYARD_RETURN_IF_ERROR(check_arity(op, in.size(), 4, 4));
        SWITCHYARD_RETURN_IF_ERROR(min_rank(op, in[0], 1, "x"));
        const std::int64_t d = in[0].shape.inner();
        const Shape& g = in[1].shape;
        if (g.rank() != 2 || g[1] != d || !(in[2].shape == g) || in[3].shape.rank() != 2 ||
            in[3].shape[0] != d || in[3].shape[1] != g[0]) {
          return mismatch(op, fmt::format("gate {}, up {}, down {} do not fit x {}", shape_text(g),
                                          shape_text(in[2].shape), shape_text(in[3].shape),
                                          shape_text(in[0].shape)));
        }
        return in[0];
      }
      SWITCHYARD_RETURN_IF_ERROR(check_arity(op, in.size(), 2, 2));
      SWITCHYARD_RETURN_IF_ERROR(min_rank(op, in[0], 1, "x"));
      SWITCHYARD_RETURN_IF_ERROR(vector_of(op, in[1], in[0].shape.inner(), "weight"));
      return in[0];
    }
  }
  return mismatch(op, "unknown op family");
}

Result<ViewLayout> view_layout(ViewKind kind, const Shape& source, const Shape& target) {
  ViewLayout layout;
  const auto src_strides = contiguous_strides(source);
  switch (kind) {
    case ViewKind::kBroadcast: {
      if (target.rank() < source.rank()) {
        return invalid_argument_error(fmt::format("cannot broadcast {} to lower rank {}",
                                                  shape_text(source), shape_text(target)));
      }
      const int shift = target.rank() - source.rank();
      for (int i = 0; i < target.rank(); ++i) {
        const int s = i - shift;
        if (s < 0 || (source[s] == 1 && target[i] != 1)) {
          layout.strides[i] = 0;
        } else if (source[s] == target[i]) {
          layout.strides[i] = src_strides[s];
        } else {
          return invalid_argument_error(
              fmt::format("cannot broadcast {} to {}", shape_text(source), shape_text(target)));
        }
      }
      layout.shape = target;
      return layout;
    }
    case ViewKind::kTranspose: {
      const int r = source.rank();
      if (r < 2) return invalid_argument_error("a transpose view needs rank >= 2");
      std::array<std::int64_t, kMaxRank> d{};
      for (int i = 0; i < r; ++i) {
        d[i] = source[i];
        layout.strides[i] = src_strides[i];
      }
      std::swap(d[r - 1], d[r - 2]);
      std::swap(layout.strides[r - 1], layout.strides[r - 2]);
      layout.shape = Shape(std::span<const std::int64_t>(d.data(), std::size_t(r)));
      return layout;
    }
    case ViewKind::kReshape: {
      bool symbolic = false;
      for (std::int64_t d : source.dims()) symbolic |= is_symbolic(d);
      for (std::int64_t d : target.dims()) symbolic |= is_symbolic(d);
      // With symbols the element counts cannot be compared here; the planner
      // checks them again once sizes are concrete.
      if (!symbolic && source.numel() != target.numel()) {
        return invalid_argument_error(fmt::format("cannot reshape {} ({} elements) to {}",
                                                  shape_text(source), source.numel(),
                                                  shape_text(target)));
      }
      layout.shape = target;
      layout.strides = contiguous_strides(target);
      return layout;
    }
  }
  return invalid_argument_error("unknown view kind");
}

// --- Graph -------------------------------------------------------------------------

std::int64_t Graph::add_symbol(std::string_view symbol) {
  for (std::size_t i = 0; i < symbols_.size(); ++i) {
    if (symbols_[i] == symbol) return symbol_dim(static_cast<int>(i));
  }
  symbols_.emplace_back(symbol);
  return symbol_dim(static_cast<int>(symbols_.size() - 1));
}

ValueId Graph::add_value(Value value) {
  values_.push_back(std::move(value));
  return ValueId{static_cast<std::int32_t>(values_.size() - 1)};
}

std::int32_t Graph::add_node(Node node) {
  const auto index = static_cast<std::int32_t>(nodes_.size());
  if (node.output.valid() && static_cast<std::size_t>(node.output.index) < values_.size()) {
    Value& out = values_[node.output.index];
    if (out.producer < 0) out.producer = index;
  }
  nodes_.push_back(std::move(node));
  return index;
}

std::vector<ValueId> Graph::inputs() const {
  std::vector<ValueId> ids;
  for (std::size_t i = 0; i < values_.size(); ++i) {
    if (values_[i].kind == ValueKind::kInput) ids.push_back({static_cast<std::int32_t>(i)});
  }
  return ids;
}

std::int32_t Graph::find_node(std::string_view node_name) const {
  for (std::size_t i = 0; i < nodes_.size(); ++i) {
    if (nodes_[i].name == node_name) return static_cast<std::int32_t>(i);
  }
  return -1;
}

std::string Graph::shape_string(const Shape& shape) const {
  std::vector<std::string> dims;
  for (std::int64_t d : shape.dims()) {
    const int s = symbol_index(d);
    dims.push_back(!is_symbolic(d)                                 ? fmt::format("{}", d)
                   : static_cast<std::size_t>(s) < symbols_.size() ? symbols_[s]
                                                                   : fmt::format("${}", s));
  }
  return fmt::format("[{}]", fmt::join(dims, ", "));
}

namespace {

// Why node `node` cannot have a control edge to `v`, or ok: the edge must name a
// value of the graph that some node produces.
Status check_control_edge(std::span<const Value> values, std::span<const Node> nodes,
                          const Node& node, ValueId v) {
  if (!v.valid() || static_cast<std::size_t>(v.index) >= values.size()) {
    return invalid_argument_error(
        fmt::format("node '{}' runs after value #{}, which does not exist (dangling control edge)",
                    node.name, v.index));
  }
  const Value& value = values[v.index];
  if (value.kind != ValueKind::kNodeOutput) {
    return invalid_argument_error(fmt::format(
        "node '{}' runs after '{}' ({}), which is not a node output; a control edge names one",
        node.name, value.name, name(value.kind)));
  }
  if (value.producer < 0 || static_cast<std::size_t>(value.producer) >= nodes.size()) {
    return invalid_argument_error(
        fmt::format("node '{}' runs after '{}', which no node produces (dangling control edge)",
                    node.name, value.name));
  }
  return Status::ok();
}

}  // namespace

Result<std::vector<std::int32_t>> Graph::topological_order() const {
  const std::size_t n = nodes_.size();
  auto producer_of = [&](ValueId id) -> std::int32_t {
    const Value& v = values_[id.index];
    const Value& base = v.kind == ValueKind::kView && v.source.valid() &&
                                static_cast<std::size_t>(v.source.index) < values_.size()
                            ? values_[v.source.index]
                            : v;
    return base.kind == ValueKind::kNodeOutput ? base.producer : -1;
  };
  // Per node, the nodes it waits for: data edges first, then control edges (so
  // a cycle is blamed on a control edge only when no data edge explains it).
  struct Edge {
    std::int32_t from;
    bool control;
  };
  std::vector<std::vector<Edge>> preds(n);
  std::vector<std::vector<std::int32_t>> consumers(n);
  for (std::size_t i = 0; i < n; ++i) {
    for (ValueId in : nodes_[i].inputs) {
      if (!in.valid() || static_cast<std::size_t>(in.index) >= values_.size()) {
        return invalid_argument_error(
            fmt::format("node '{}' reads value #{}, which does not exist (dangling input)",
                        nodes_[i].name, in.index));
      }
      const std::int32_t p = producer_of(in);
      if (p >= 0) {
        preds[i].push_back({p, false});
      } else if (values_[in.index].kind == ValueKind::kNodeOutput ||
                 (values_[in.index].kind == ValueKind::kView &&
                  values_[values_[in.index].source.index].kind == ValueKind::kNodeOutput)) {
        return invalid_argument_error(
            fmt::format("node '{}' reads '{}', which no node produces (dangling input)",
                        nodes_[i].name, values_[in.index].name));
      }
    }
    for (ValueId v : nodes_[i].after) {
      SWITCHYARD_RETURN_IF_ERROR(check_control_edge(values_, nodes_, nodes_[i], v));
      preds[i].push_back({values_[v.index].producer, true});
    }
  }
  std::vector<int> pending(n, 0);
  for (std::size_t i = 0; i < n; ++i) {
    pending[i] = static_cast<int>(preds[i].size());
    for (const Edge& e : preds[i]) consumers[e.from].push_back(static_cast<std::int32_t>(i));
  }
  // Kahn's algorithm with a min-heap: among ready nodes the lowest index runs first,
  // so the order is deterministic and close to the order nodes were added.
  std::priority_queue<std::int32_t, std::vector<std::int32_t>, std::greater<>> ready;
  for (std::size_t i = 0; i < n; ++i) {
    if (pending[i] == 0) ready.push(static_cast<std::int32_t>(i));
  }
  std::vector<std::int32_t> order;
  order.reserve(n);
  while (!ready.empty()) {
    const std::int32_t i = ready.top();
    ready.pop();
    order.push_back(i);
    for (std::int32_t c : consumers[i]) {
      if (--pending[c] == 0) ready.push(c);
    }
  }
  if (order.size() == n) return order;

  // Every node left over waits for another node left over; stepping back to the
  // first such predecessor n times must end on a cycle, which one more lap walks.
  auto first_waiting = [&](std::int32_t u) -> const Edge& {
    for (const Edge& e : preds[u]) {
      if (pending[e.from] > 0) return e;
    }
    SWITCHYARD_CHECK_MSG(false, "topological_order: a stuck node with no stuck predecessor");
    return preds[u].front();
  };
  std::int32_t on_cycle = 0;
  while (pending[on_cycle] == 0) ++on_cycle;
  for (std::size_t step = 0; step < n; ++step) on_cycle = first_waiting(on_cycle).from;
  std::string control_text;
  std::int32_t u = on_cycle;
  do {
    const Edge& e = first_waiting(u);
    if (e.control && control_text.empty()) {
      control_text = fmt::format("; the control edge \"'{}' runs after '{}'\" closes it",
                                 nodes_[u].name, nodes_[e.from].name);
    }
    u = e.from;
  } while (u != on_cycle);
  return invalid_argument_error(
      fmt::format("the graph has a cycle through node '{}'{} ({} of {} nodes cannot be ordered)",
                  nodes_[on_cycle].name, control_text, n - order.size(), n));
}

Status Graph::validate() const {
  for (std::size_t i = 0; i < values_.size(); ++i) {
    const Value& v = values_[i];
    // Built only when reporting: validation runs on every plan.
    auto label_of = [&] { return v.name.empty() ? fmt::format("#{}", i) : "'" + v.name + "'"; };
    if (v.shape.rank() > kMaxRank) return invalid_argument_error("value " + label_of() + ": rank");
    for (std::int64_t d : v.shape.dims()) {
      if (is_symbolic(d) && static_cast<std::size_t>(symbol_index(d)) >= symbols_.size()) {
        return invalid_argument_error(
            fmt::format("value {} uses undeclared symbolic dimension {}", label_of(), d));
      }
    }
    switch (v.kind) {
      case ValueKind::kConstant:
        if (v.data == nullptr)
          return invalid_argument_error("constant " + label_of() + " has no data");
        for (std::int64_t d : v.shape.dims()) {
          if (is_symbolic(d)) {
            return invalid_argument_error("constant " + label_of() + " has a symbolic dimension");
          }
        }
        break;
      case ValueKind::kNodeOutput:
        if (v.producer < 0 || static_cast<std::size_t>(v.producer) >= nodes_.size() ||
            !(nodes_[v.producer].output == ValueId{static_cast<std::int32_t>(i)})) {
          return invalid_argument_error("value " + label_of() +
                                        " is a node output that no node produces");
        }
        break;
      case ValueKind::kView: {
        if (!v.source.valid() || static_cast<std::size_t>(v.source.index) >= values_.size()) {
          return invalid_argument_error("view " + label_of() + " has no source (dangling)");
        }
        const Value& src = values_[v.source.index];
        if (src.kind == ValueKind::kView) {
          return invalid_argument_error("view " + label_of() + " views another view; view '" +
                                        src.name + "'s source instead");
        }
        if (src.dtype != v.dtype) {
          return invalid_argument_error(fmt::format("view {} is {}, its source '{}' is {}",
                                                    label_of(), name(v.dtype), src.name,
                                                    name(src.dtype)));
        }
        Result<ViewLayout> layout = view_layout(v.view, src.shape, v.shape);
        if (!layout.is_ok()) return layout.status().with_context("view " + label_of());
        if (!(layout->shape == v.shape)) {
          return invalid_argument_error(fmt::format("view {} declares {}, its layout gives {}",
                                                    label_of(), shape_string(v.shape),
                                                    shape_string(layout->shape)));
        }
        break;
      }
      case ValueKind::kInput: break;
    }
  }
  for (std::size_t i = 0; i < nodes_.size(); ++i) {
    const Node& node = nodes_[i];
    auto label_of = [&] { return fmt::format("node '{}' ({})", node.name, name(node.op)); };
    if (!node.output.valid() || static_cast<std::size_t>(node.output.index) >= values_.size()) {
      return invalid_argument_error(label_of() + " has no output value");
    }
    const Value& out = values_[node.output.index];
    if (out.kind != ValueKind::kNodeOutput) {
      return invalid_argument_error(label_of() + " writes '" + out.name + "', which is a " +
                                    std::string(name(out.kind)) + ", not a node output");
    }
    if (out.producer != static_cast<std::int32_t>(i)) {
      return invalid_argument_error(fmt::format("{} writes '{}', which node '{}' also produces",
                                                label_of(), out.name, nodes_[out.producer].name));
    }
    for (ValueId v : node.after) {
      SWITCHYARD_RETURN_IF_ERROR(check_control_edge(values_, nodes_, node, v));
    }
  }
  SWITCHYARD_ASSIGN_OR_RETURN(std::vector<std::int32_t> order, topological_order());
  (void)order;
  std::vector<OperandInfo> in;
  for (const Node& node : nodes_) {
    if (node.fused_key != 0) continue;  // region recipes are checked by the table
    in.clear();
    for (ValueId id : node.inputs) in.push_back({values_[id.index].dtype, values_[id.index].shape});
    const Value& out = values_[node.output.index];
    Result<OperandInfo> inferred = infer_output(node.op, in, node.params, out.dtype);
    if (!inferred.is_ok()) return inferred.status().with_context("node '" + node.name + "'");
    if (inferred->dtype != out.dtype || !(inferred->shape == out.shape)) {
      return invalid_argument_error(
          fmt::format("node '{}': output '{}' is declared {}{}, the operands give {}{}", node.name,
                      out.name, name(out.dtype), shape_string(out.shape), name(inferred->dtype),
                      shape_string(inferred->shape)));
    }
  }
  for (ValueId o : outputs_) {
    if (!o.valid() || static_cast<std::size_t>(o.index) >= values_.size()) {
      return invalid_argument_error(fmt::format("graph output #{} does not exist", o.index));
    }
    if (std::count(outputs_.begin(), outputs_.end(), o) > 1) {
      return invalid_argument_error(
          fmt::format("graph output '{}' is listed twice", values_[o.index].name));
    }
    if (values_[o.index].kind != ValueKind::kNodeOutput) {
      return invalid_argument_error(
          fmt::format("graph output '{}' is a {}; outputs must be produced by a node (add a copy)",
                      values_[o.index].name, name(values_[o.index].kind)));
    }
  }
  return Status::ok();
}

// --- GraphBuilder ------------------------------------------------------------------

bool GraphBuilder::usable(std::span<const ValueId> ids, std::string_view what) {
  if (!status_.is_ok()) return false;
  for (ValueId id : ids) {
    if (!id.valid() || static_cast<std::size_t>(id.index) >= graph_.values().size()) {
      status_ =
          invalid_argument_error(fmt::format("{}: operand #{} does not exist", what, id.index));
      return false;
    }
  }
  return true;
}

ValueId GraphBuilder::input(std::string value_name, DType dtype, Shape shape) {
  if (!status_.is_ok()) return {};
  Value v;
  v.name = std::move(value_name);
  v.dtype = dtype;
  v.shape = shape;
  v.kind = ValueKind::kInput;
  return graph_.add_value(std::move(v));
}

ValueId GraphBuilder::constant(std::string value_name, DType dtype, Shape shape,
                               std::shared_ptr<const void> data) {
  if (!status_.is_ok()) return {};
  if (data == nullptr) {
    status_ = invalid_argument_error("constant '" + value_name + "' has no data");
    return {};
  }
  Value v;
  v.name = std::move(value_name);
  v.dtype = dtype;
  v.shape = shape;
  v.kind = ValueKind::kConstant;
  v.data = data.get();
  v.owner = std::move(data);
  return graph_.add_value(std::move(v));
}

ValueId GraphBuilder::constant_borrowed(std::string value_name, DType dtype, Shape shape,
                                        const void* data) {
  if (!status_.is_ok()) return {};
  if (data == nullptr) {
    status_ = invalid_argument_error("constant '" + value_name + "' has no data");
    return {};
  }
  Value v;
  v.name = std::move(value_name);
  v.dtype = dtype;
  v.shape = shape;
  v.kind = ValueKind::kConstant;
  v.data = data;
  return graph_.add_value(std::move(v));
}

ValueId GraphBuilder::constant_f32(std::string value_name, Shape shape,
                                   std::span<const float> values) {
  if (!status_.is_ok()) return {};
  if (static_cast<std::int64_t>(values.size()) != shape.numel()) {
    status_ = invalid_argument_error(fmt::format("constant '{}': {} values for shape {}",
                                                 value_name, values.size(), shape.to_string()));
    return {};
  }
  auto data = std::make_shared<std::vector<float>>(values.begin(), values.end());
  const void* raw = data->data();
  return constant(std::move(value_name), DType::kF32, shape,
                  std::shared_ptr<const void>(std::move(data), raw));
}

namespace {
ValueId add_view(Graph& graph, Status& status, ValueId x, ViewKind kind, Shape target,
                 std::string view_name) {
  const Value& src = graph.value(x);
  if (src.kind == ValueKind::kView) {
    status = invalid_argument_error("'" + src.name + "' is a view; view its source instead");
    return {};
  }
  Result<ViewLayout> layout = view_layout(kind, src.shape, target);
  if (!layout.is_ok()) {
    status = layout.status().with_context(fmt::format("{} view of '{}'", name(kind), src.name));
    return {};
  }
  Value v;
  v.name = view_name.empty() ? fmt::format("{}.{}", src.name, name(kind)) : std::move(view_name);
  v.dtype = src.dtype;
  v.shape = layout->shape;
  v.kind = ValueKind::kView;
  v.source = x;
  v.view = kind;
  return graph.add_value(std::move(v));
}
}  // namespace

ValueId GraphBuilder::broadcast(ValueId x, Shape shape, std::string view_name) {
  const ValueId ids[] = {x};
  if (!usable(ids, "broadcast")) return {};
  return add_view(graph_, status_, x, ViewKind::kBroadcast, shape, std::move(view_name));
}

ValueId GraphBuilder::transpose_view(ValueId x, std::string view_name) {
  const ValueId ids[] = {x};
  if (!usable(ids, "transpose_view")) return {};
  return add_view(graph_, status_, x, ViewKind::kTranspose, Shape{}, std::move(view_name));
}

ValueId GraphBuilder::reshape(ValueId x, Shape shape, std::string view_name) {
  const ValueId ids[] = {x};
  if (!usable(ids, "reshape")) return {};
  return add_view(graph_, status_, x, ViewKind::kReshape, shape, std::move(view_name));
}

ValueId GraphBuilder::op(OpKind kind, std::span<const ValueId> inputs, std::string node_name,
                         OpParams params, std::string role, std::optional<DType> out_dtype) {
  if (!usable(inputs, node_name)) return {};
  std::vector<OperandInfo> in;
  for (ValueId id : inputs) in.push_back({graph_.value(id).dtype, graph_.value(id).shape});
  Result<OperandInfo> out = infer_output(kind, in, params, out_dtype);
  if (!out.is_ok()) {
    status_ = out.status().with_context(fmt::format("node '{}'", node_name));
    return {};
  }
  if (graph_.find_node(node_name) >= 0) {
    status_ = already_exists_error(fmt::format("a node named '{}' exists already", node_name));
    return {};
  }
  Value v;
  v.name = node_name;
  v.dtype = out->dtype;
  v.shape = out->shape;
  v.kind = ValueKind::kNodeOutput;
  const ValueId id = graph_.add_value(std::move(v));
  Node node;
  node.op = kind;
  node.inputs.assign(inputs.begin(), inputs.end());
  node.output = id;
  node.params = params;
  node.name = std::move(node_name);
  node.role = std::move(role);
  graph_.add_node(std::move(node));
  return id;
}

void GraphBuilder::require_precision(ValueId v, PrecisionFloor floor) {
  const ValueId ids[] = {v};
  if (!usable(ids, "require_precision")) return;
  const Value& value = graph_.value(v);
  if (value.kind != ValueKind::kNodeOutput) {
    status_ =
        invalid_argument_error("require_precision: '" + value.name + "' is not a node output");
    return;
  }
  graph_.mutable_node(value.producer).precision_floor = floor;
}

void GraphBuilder::run_after(ValueId later, ValueId earlier) {
  const ValueId ids[] = {later, earlier};
  if (!usable(ids, "run_after")) return;
  for (ValueId v : ids) {
    const Value& value = graph_.value(v);
    if (value.kind != ValueKind::kNodeOutput) {
      status_ = invalid_argument_error(fmt::format(
          "run_after: '{}' ({}) is not a node output; a control edge orders nodes, so it "
          "names the values they produce{}",
          value.name, name(value.kind),
          value.kind == ValueKind::kView ? " (here, the view's source)" : ""));
      return;
    }
  }
  if (later == earlier) {
    status_ = invalid_argument_error(
        fmt::format("run_after: node '{}' cannot run after itself", graph_.value(later).name));
    return;
  }
  std::vector<ValueId>& after = graph_.mutable_node(graph_.value(later).producer).after;
  if (std::find(after.begin(), after.end(), earlier) == after.end()) after.push_back(earlier);
}

void GraphBuilder::output(ValueId v) {
  const ValueId ids[] = {v};
  if (!usable(ids, "output")) return;
  graph_.add_output(v);
}

Result<Graph> GraphBuilder::build() && {
  if (!status_.is_ok()) return status_;
  SWITCHYARD_RETURN_IF_ERROR(graph_.validate());
  return std::move(graph_);
}

}  // namespace switchyard
