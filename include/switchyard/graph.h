// Graph: the computation the planner maps onto kernels. Values (graph inputs,
// constant tensors such as weights, node outputs and views of other values) flow
// between nodes; each node applies one op (docs/ops.md) and produces one value.
//
// Overview
//   A graph is a plain value built with GraphBuilder, which infers each node's
//   output dtype and shape from its operands and remembers the first mistake so a
//   builder chain reads like the model it describes; `build()` reports that
//   mistake. Graph's own mutators are lower level (they accept any value ids, so a
//   caller can wire a cycle or a dangling input) and `validate()` finds those.
//
//   Shapes may name symbolic dimensions (a token count that differs between a
//   one-token decode and a long prefill). A symbolic dimension is a negative number
//   handed out by `GraphBuilder::symbol`; shape inference treats two dims as equal
//   only when they are the same number, and the planner substitutes concrete sizes
//   per shape bucket (plan.h).
//
//   Views do not copy: a broadcast view presents a [N] bias as [M, N] with stride 0
//   (ops.md's explicit broadcasting), a transpose view swaps the last two
//   dimensions, a reshape view re-reads contiguous memory with another shape.
//
//   Control edges order two nodes that no value connects. A graph's data edges are
//   all the planner knows about, and they miss effects the caller arranges around
//   the graph: a model whose new key/value rows (a graph output) land in the very
//   cache memory that an attention node reads (a graph input) needs the write to
//   run first, though no value flows between the two nodes. `run_after(later,
//   earlier)` says so; every node order the planner makes respects it (fusion
//   moves an edge onto the fused node, or skips a fusion that would lose one; see
//   Note [Fusion and control edges] in src/plan/passes.cpp), and an edge that
//   closes a cycle is refused like a data cycle.
//
// Example
//   GraphBuilder b;
//   const std::int64_t t = b.symbol("tokens");
//   ValueId x = b.input("x", DType::kF32, {t, 64});
//   ValueId w = b.constant("w1", DType::kF32, {128, 64}, w1_data);
//   ValueId bias = b.constant("b1", DType::kF32, {128}, b1_data);
//   ValueId h = b.add(b.matmul(x, w, "fc1"), b.broadcast(bias, {t, 128}), "fc1_bias");
//   b.output(b.relu(h, "act"));
//   SWITCHYARD_ASSIGN_OR_RETURN(Graph graph, std::move(b).build());
//
//   // A cache writer and its reader, ordered by a control edge:
//   ValueId write = b.op(OpKind::kCopy, {k_new}, "k_write");
//   ValueId read = b.op(OpKind::kAttention, {q, k_cache, v_cache}, "attention");
//   b.run_after(read, write);  // "attention" runs after "k_write"
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "switchyard/dtype.h"
#include "switchyard/kernel.h"
#include "switchyard/op.h"
#include "switchyard/status.h"
#include "switchyard/tensor.h"

namespace switchyard {

// Index of a value in its graph; -1 is "no value".
struct ValueId {
  std::int32_t index = -1;
  [[nodiscard]] bool valid() const { return index >= 0; }
  friend bool operator==(ValueId, ValueId) = default;
};

enum class ValueKind : std::uint8_t {
  kInput,       // bound by the caller at each run
  kConstant,    // data owned by the graph or borrowed for its lifetime (weights)
  kNodeOutput,  // produced by exactly one node
  kView,        // another value's memory, seen with another shape or strides
};

enum class ViewKind : std::uint8_t {
  kBroadcast,  // right-aligned; source dims of 1 (or missing) become stride 0
  kTranspose,  // the last two dimensions swapped
  kReshape,    // the same contiguous elements with another shape
};

[[nodiscard]] std::string_view name(ValueKind kind);
[[nodiscard]] std::string_view name(ViewKind kind);

// The accuracy a node (or a whole graph) requires of its kernel. A kernel meets
// the floor only with a claim that is not unaudited (precision.h): bit_stable needs
// a bit-stable claim; max_rel needs a claimed relative bound <= max_rel, or a ULP
// bound that is at most that relative error for the output's dtype.
struct PrecisionFloor {
  bool bit_stable = false;
  std::optional<double> max_rel;

  [[nodiscard]] bool any() const { return bit_stable || max_rel.has_value(); }
  [[nodiscard]] static PrecisionFloor none() { return {}; }
  [[nodiscard]] static PrecisionFloor bit_stable_only() { return {true, std::nullopt}; }
  [[nodiscard]] static PrecisionFloor relative(double bound) { return {false, bound}; }
  friend bool operator==(const PrecisionFloor&, const PrecisionFloor&) = default;
};

// "none", "bit-stable", "rel<=0.001", "bit-stable rel<=0.001".
[[nodiscard]] std::string describe(const PrecisionFloor& floor);

struct Value {
  std::string name;
  DType dtype = DType::kF32;
  // May hold symbolic (negative) dimensions.
  Shape shape;
  ValueKind kind = ValueKind::kInput;
  // kNodeOutput: the producing node; -1 until a node claims the value.
  std::int32_t producer = -1;
  // kConstant: contiguous data, kept alive by `owner` when the graph owns it.
  const void* data = nullptr;
  std::shared_ptr<const void> owner;
  // kView: the viewed value and how it is seen.
  ValueId source;
  ViewKind view = ViewKind::kBroadcast;
};

struct Node {
  // A static op. Runtime-fused nodes (created by the planner's fusion pass) carry
  // the op of their region's last node here and their id in `fused_key`.
  OpKind op = OpKind::kCopy;
  // Raw BindingKey value of a runtime-fused region, 0 for static ops.
  std::uint16_t fused_key = 0;
  std::vector<ValueId> inputs;
  ValueId output;
  // Control edges: node outputs whose producers run before this node although it
  // does not read them (see the file comment). Each must be a kNodeOutput value of
  // the graph; validate() refuses anything else, and a cycle through one.
  std::vector<ValueId> after;
  OpParams params;
  std::string name;
  // What the node is for in the model ("attn_q", "ffn_down", "cast"): strict
  // policies and reports group by role.
  std::string role;
  // Overrides the graph's floor when set.
  std::optional<PrecisionFloor> precision_floor;
};

// True when `dim` names a symbolic dimension.
[[nodiscard]] constexpr bool is_symbolic(std::int64_t dim) { return dim < 0; }
// The index of the symbol a symbolic dim names (dims -1, -2, ... are symbols 0, 1, ...).
[[nodiscard]] constexpr int symbol_index(std::int64_t dim) { return static_cast<int>(-dim - 1); }
[[nodiscard]] constexpr std::int64_t symbol_dim(int index) { return -1 - index; }

class Graph {
 public:
  Graph() = default;

  // --- construction (low level; GraphBuilder is the readable way) -------------

  // Declares a symbolic dimension and returns its (negative) dim value. Declaring
  // a name twice returns the same dim.
  std::int64_t add_symbol(std::string_view name);
  ValueId add_value(Value value);
  // Appends a node; `node.output` becomes the node's product (its producer is
  // set here unless another node already produces it, which validate() reports).
  std::int32_t add_node(Node node);
  // Marks a value as a graph output.
  void add_output(ValueId value) { outputs_.push_back(value); }
  void set_precision_floor(PrecisionFloor floor) { precision_floor_ = floor; }

  // --- access --------------------------------------------------------------------

  [[nodiscard]] std::span<const Value> values() const { return values_; }
  [[nodiscard]] std::span<const Node> nodes() const { return nodes_; }
  [[nodiscard]] std::span<const ValueId> outputs() const { return outputs_; }
  [[nodiscard]] std::span<const std::string> symbols() const { return symbols_; }
  [[nodiscard]] const Value& value(ValueId id) const { return values_[id.index]; }
  [[nodiscard]] Value& mutable_value(ValueId id) { return values_[id.index]; }
  [[nodiscard]] const Node& node(std::int32_t index) const { return nodes_[index]; }
  [[nodiscard]] Node& mutable_node(std::int32_t index) { return nodes_[index]; }
  [[nodiscard]] const PrecisionFloor& precision_floor() const { return precision_floor_; }
  // The graph inputs, in declaration order.
  [[nodiscard]] std::vector<ValueId> inputs() const;
  // The floor that applies to a node: its own, else the graph's.
  [[nodiscard]] PrecisionFloor floor_for(const Node& node) const {
    return node.precision_floor ? *node.precision_floor : precision_floor_;
  }
  // The index of the node with this name, or -1.
  [[nodiscard]] std::int32_t find_node(std::string_view name) const;
  // "[tokens, 64]": a shape with its symbols named.
  [[nodiscard]] std::string shape_string(const Shape& shape) const;

  // Checks the whole graph and reports the first problem, naming the node or
  // value: an input id out of range (dangling), a node output that is not a
  // kNodeOutput value or has two producers, a node-output value no node produces,
  // a control edge that names no node output, a cycle through data or control
  // edges (naming a node on it), a view of a view or a malformed view, a
  // constant without data, an output that is not produced by a node, and every
  // operand dtype or shape that disagrees with ops.md (kInvalidArgument).
  [[nodiscard]] Status validate() const;
  // Node indices in an order where every node follows the producers of its inputs
  // and of its control edges (`Node::after`); stable: among ready nodes the lowest
  // index first. Fails with kInvalidArgument on a dangling input, on a control edge
  // that names no node output, and on a cycle, naming a node on it (the message
  // says so when the cycle runs through a control edge).
  [[nodiscard]] Result<std::vector<std::int32_t>> topological_order() const;

 private:
  std::vector<Value> values_;
  std::vector<Node> nodes_;
  std::vector<ValueId> outputs_;
  std::vector<std::string> symbols_;
  PrecisionFloor precision_floor_;
};

// What ops.md says a node with these operands produces: the output dtype and
// shape, or kInvalidArgument naming the mismatch. `cast_to` is the destination
// dtype of a cast (ignored otherwise); `rows_to` the output dtype of get_rows.
// Shapes may be symbolic; symbols compare by identity.
struct OperandInfo {
  DType dtype;
  Shape shape;
};
[[nodiscard]] Result<OperandInfo> infer_output(OpKind op, std::span<const OperandInfo> inputs,
                                               const OpParams& params,
                                               std::optional<DType> out_dtype = std::nullopt);

// The shape and element strides a view presents, given the source's shape
// (symbols allowed); fails when the view does not fit its source.
struct ViewLayout {
  Shape shape;
  std::array<std::int64_t, kMaxRank> strides{};
};
[[nodiscard]] Result<ViewLayout> view_layout(ViewKind kind, const Shape& source,
                                             const Shape& target);

// Builds a Graph with shape inference. Every method returns the new value; after
// the first error every later call returns an invalid id and build() returns that
// first error, so a chain of calls needs no error check per line.
class GraphBuilder {
 public:
  GraphBuilder() = default;

  // A symbolic dimension (a negative dim value) for input shapes.
  std::int64_t symbol(std::string_view name) { return graph_.add_symbol(name); }

  ValueId input(std::string name, DType dtype, Shape shape);
  // A constant the graph keeps alive: `data` holds numel elements of `dtype`
  // (row_bytes for block types).
  ValueId constant(std::string name, DType dtype, Shape shape, std::shared_ptr<const void> data);
  // A constant borrowed from the caller, who keeps it alive while any graph,
  // plan or executor built from this graph exists.
  ValueId constant_borrowed(std::string name, DType dtype, Shape shape, const void* data);
  // A constant of f32 values, copied.
  ValueId constant_f32(std::string name, Shape shape, std::span<const float> values);

  ValueId broadcast(ValueId x, Shape shape, std::string name = {});
  ValueId transpose_view(ValueId x, std::string name = {});
  ValueId reshape(ValueId x, Shape shape, std::string name = {});

  // Any op of ops.md; output dtype and shape inferred. `out_dtype` is required for
  // cast and optional for get_rows (default f32).
  ValueId op(OpKind op, std::span<const ValueId> inputs, std::string name, OpParams params = {},
             std::string role = {}, std::optional<DType> out_dtype = std::nullopt);
  ValueId op(OpKind kind, std::initializer_list<ValueId> inputs, std::string name,
             OpParams params = {}, std::string role = {},
             std::optional<DType> out_dtype = std::nullopt) {
    return op(kind, std::span<const ValueId>(inputs.begin(), inputs.size()), std::move(name),
              params, std::move(role), out_dtype);
  }

  ValueId add(ValueId a, ValueId b, std::string name, std::string role = {}) {
    return op(OpKind::kAdd, {a, b}, std::move(name), {}, std::move(role));
  }
  ValueId mul(ValueId a, ValueId b, std::string name, std::string role = {}) {
    return op(OpKind::kMul, {a, b}, std::move(name), {}, std::move(role));
  }
  ValueId matmul(ValueId a, ValueId w, std::string name, std::string role = {}) {
    return op(OpKind::kMatmul, {a, w}, std::move(name), {}, std::move(role));
  }
  ValueId silu(ValueId x, std::string name, std::string role = {}) {
    return op(OpKind::kSilu, {x}, std::move(name), {}, std::move(role));
  }
  ValueId relu(ValueId x, std::string name, std::string role = {}) {
    return op(OpKind::kRelu, {x}, std::move(name), {}, std::move(role));
  }
  ValueId cast(ValueId x, DType to, std::string name, std::string role = {}) {
    return op(OpKind::kCast, {x}, std::move(name), {}, std::move(role), to);
  }
  ValueId rms_norm(ValueId x, float eps, std::string name, std::string role = {}) {
    OpParams p;
    p.eps = eps;
    return op(OpKind::kRmsNorm, {x}, std::move(name), p, std::move(role));
  }

  // Sets the precision floor of the node that produced `v` (must be a node output).
  void require_precision(ValueId v, PrecisionFloor floor);
  // Adds a control edge: the node that produces `later` runs after the node that
  // produces `earlier`, in every order the planner makes, although `later` need
  // not read `earlier`. Both must be node outputs of this builder (not inputs,
  // constants or views: a view's order is its source's, so name that). An invalid
  // id, a value that is not a node output, or `later == earlier` is this builder's
  // error (kInvalidArgument); an edge that closes a longer cycle is found by
  // build(), which reports the cycle and the control edge through it. Adding the
  // same edge twice is harmless.
  void run_after(ValueId later, ValueId earlier);
  void set_graph_precision(PrecisionFloor floor) { graph_.set_precision_floor(floor); }
  void output(ValueId v);

  // The graph, validated; or the first error.
  [[nodiscard]] Result<Graph> build() &&;
  // The first error so far (ok when none).
  [[nodiscard]] const Status& status() const { return status_; }
  [[nodiscard]] const Graph& graph() const { return graph_; }

 private:
  bool usable(std::span<const ValueId> ids, std::string_view what);
  Graph graph_;
  Status status_;
};

}  // namespace switchyard
