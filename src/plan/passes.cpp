// Fusion and dtype reconciliation: the passes that rewrite the graph before routes
// are picked.
#include "plan/passes.h"

#include <algorithm>
#include <bit>
#include <cmath>

#include <fmt/format.h>

namespace switchyard::detail {

BindingKey node_key(const Node& node) {
  return node.fused_key != 0 ? BindingKey(FusedOpId{node.fused_key}) : BindingKey(node.op);
}

DTypeList node_dtypes(const Graph& graph, const Node& node) {
  std::array<DType, kMaxOperands + 1> d{};
  std::size_t n = 0;
  for (ValueId in : node.inputs) {
    if (n < d.size()) d[n] = graph.value(in).dtype;
    ++n;
  }
  if (n < d.size()) d[n] = graph.value(node.output).dtype;
  ++n;
  return DTypeList(std::span<const DType>(d.data(), std::min(n, d.size())));
}

std::string node_op_label(const KernelBindingTable& table, const Node& node) {
  if (node.fused_key == 0) return std::string(name(node.op));
  const RuntimeFusedInfo* info = table.runtime_fused(FusedOpId{node.fused_key});
  return info ? "fused:" + info->name : fmt::format("fused#{}", node.fused_key);
}

namespace {

// Relative spacing of a float type (2^-mantissa bits); 0 when not a float.
double unit_roundoff(DType t) {
  switch (t) {
    case DType::kF32: return std::ldexp(1.0, -23);
    case DType::kF16: return std::ldexp(1.0, -10);
    case DType::kBF16: return std::ldexp(1.0, -7);
    default: return 0.0;
  }
}

}  // namespace

std::optional<std::pair<RejectReason, std::string>> check_floor(const PrecisionFloor& floor,
                                                                const PrecisionGuarantee& p,
                                                                DType out) {
  if (!floor.any()) return std::nullopt;
  if (p.is_unaudited()) {
    return std::pair{
        RejectReason::kPrecisionUnaudited,
        fmt::format("floor {} needs an audited claim; the claim is unaudited", describe(floor))};
  }
  if (floor.bit_stable && !p.bit_stable) {
    return std::pair{
        RejectReason::kPrecisionBelowFloor,
        fmt::format("floor {}: claim '{}' is not bit-stable", describe(floor), describe(p))};
  }
  if (floor.max_rel) {
    const bool rel_ok = p.max_rel && *p.max_rel <= *floor.max_rel;
    const double eps = unit_roundoff(out);
    const bool ulp_ok = p.max_ulp && eps > 0 && *p.max_ulp * eps <= *floor.max_rel;
    if (!rel_ok && !ulp_ok) {
      return std::pair{RejectReason::kPrecisionBelowFloor,
                       fmt::format("floor {}: claim '{}' does not bound the relative error "
                                   "that tightly",
                                   describe(floor), describe(p))};
    }
  }
  return std::nullopt;
}

Graph compact(const Graph& old, const std::vector<Value>& values, const std::vector<Node>& nodes) {
  std::vector<char> keep(values.size(), 0);
  for (std::size_t i = 0; i < values.size(); ++i) {
    keep[i] = values[i].kind == ValueKind::kInput || values[i].kind == ValueKind::kConstant;
  }
  for (const Node& n : nodes) {
    for (ValueId in : n.inputs) keep[in.index] = 1;
    for (ValueId a : n.after) keep[a.index] = 1;
    keep[n.output.index] = 1;
  }
  for (ValueId o : old.outputs()) keep[o.index] = 1;
  for (std::size_t i = 0; i < values.size(); ++i) {
    if (keep[i] && values[i].kind == ValueKind::kView) keep[values[i].source.index] = 1;
  }
  Graph g;
  for (const std::string& s : old.symbols()) g.add_symbol(s);
  g.set_precision_floor(old.precision_floor());
  std::vector<ValueId> remap(values.size());
  for (std::size_t i = 0; i < values.size(); ++i) {
    if (!keep[i]) continue;
    Value v = values[i];
    v.producer = -1;
    remap[i] = g.add_value(std::move(v));
  }
  for (std::size_t i = 0; i < values.size(); ++i) {
    if (keep[i] && values[i].kind == ValueKind::kView) {
      g.mutable_value(remap[i]).source = remap[values[i].source.index];
    }
  }
  for (Node n : nodes) {
    for (ValueId& in : n.inputs) in = remap[in.index];
    for (ValueId& a : n.after) a = remap[a.index];
    n.output = remap[n.output.index];
    g.add_node(std::move(n));
  }
  for (ValueId o : old.outputs()) g.add_output(remap[o.index]);
  return g;
}

// --- fusion ----------------------------------------------------------------------

namespace {

struct PatternNode {
  OpKind op;
  std::vector<int> inputs;  // < 0: pattern input (-1 is input 0); >= 0: pattern node
  bool commutative = false;
};

struct Pattern {
  std::string rule;
  BindingKey key = OpKind::kLinear;
  std::optional<OpKind> static_op;  // checked with infer_output when set
  int num_inputs = 0;
  std::vector<PatternNode> nodes;
  int output = 0;
  // Inputs that must be a broadcast view of a rank-1 value; the fused node reads
  // the unbroadcast vector (a bias or norm weight, as the fused op's contract says).
  std::vector<int> unbroadcast;
  // The pattern node whose params the fused node keeps (-1: defaults).
  int params_from = -1;
};

std::vector<Pattern> static_patterns() {
  std::vector<Pattern> p;
  p.push_back({"ffn_swiglu",
               OpKind::kFfnSwiglu,
               OpKind::kFfnSwiglu,
               4,
               {{OpKind::kMatmul, {-1, -2}},
                {OpKind::kMatmul, {-1, -3}},
                {OpKind::kSilu, {0}},
                {OpKind::kMul, {2, 1}, true},
                {OpKind::kMatmul, {3, -4}}},
               4,
               {},
               -1});
  p.push_back({"linear",
               OpKind::kLinear,
               OpKind::kLinear,
               3,
               {{OpKind::kMatmul, {-1, -2}}, {OpKind::kAdd, {0, -3}, true}},
               1,
               {2},
               -1});
  p.push_back({"rms_norm_mul",
               OpKind::kRmsNormMul,
               OpKind::kRmsNormMul,
               2,
               {{OpKind::kRmsNorm, {-1}}, {OpKind::kMul, {0, -2}, true}},
               1,
               {1},
               0});
  return p;
}

struct MatchState {
  std::vector<std::int32_t> node_match;
  std::vector<ValueId> inputs;
};

class Matcher {
 public:
  Matcher(const std::vector<Value>& values, const std::vector<Node>& nodes,
          const std::vector<char>& removed)
      : values_(values), nodes_(nodes), removed_(removed) {}

  bool match_node(const Pattern& p, int pn, std::int32_t g, MatchState& s) const {
    const PatternNode& want = p.nodes[pn];
    const Node& node = nodes_[g];
    if (removed_[g] || node.fused_key != 0 || node.op != want.op ||
        node.inputs.size() != want.inputs.size()) {
      return false;
    }
    if (s.node_match[pn] >= 0) return s.node_match[pn] == g;
    if (std::find(s.node_match.begin(), s.node_match.end(), g) != s.node_match.end()) return false;
    s.node_match[pn] = g;
    const int orders = want.commutative && want.inputs.size() == 2 ? 2 : 1;
    for (int o = 0; o < orders; ++o) {
      MatchState saved = s;
      bool ok = true;
      for (std::size_t i = 0; ok && i < want.inputs.size(); ++i) {
        const std::size_t from = o == 0 ? i : 1 - i;
        ok = match_operand(p, want.inputs[from], node.inputs[i], s);
      }
      if (ok) return true;
      s = std::move(saved);
    }
    s.node_match[pn] = -1;
    return false;
  }

 private:
  bool match_operand(const Pattern& p, int ref, ValueId v, MatchState& s) const {
    if (ref < 0) {
      ValueId& bound = s.inputs[-ref - 1];
      if (bound.valid()) return bound == v;
      bound = v;
      return true;
    }
    const Value& value = values_[v.index];
    if (value.kind != ValueKind::kNodeOutput || value.producer < 0) return false;
    return match_node(p, ref, value.producer, s);
  }

  const std::vector<Value>& values_;
  const std::vector<Node>& nodes_;
  const std::vector<char>& removed_;
};

std::string dtypes_text(std::span<const DType> d) {
  std::vector<std::string_view> names;
  for (DType t : d) names.push_back(name(t));
  return fmt::format("({})", fmt::join(names, ","));
}

}  // namespace

// Note [Fusion and control edges]
// A control edge (Node::after, graph.h) orders two nodes no value connects, and
// fusion must neither drop one nor let one close a cycle. Edges *into* a region
// (a region node runs after some outside node) move to the fused node: it then
// waits for everything any of its parts waited for, which keeps every order the
// edges asked for. Edges between two nodes of the region vanish with the region.
// Edges *out of* an inner node (an outside node runs after an inner node) are
// refused, the fusion skipped with its reason, exactly as an intermediate value
// read outside the pattern is: moved to the fused node, such an edge could close a
// cycle (the outside node may itself feed the region's output node), and with both
// kinds refused every path out of a region leaves from its output node, so fusing
// can create no cycle. The anchor's own outgoing edges name its output value,
// which the fused node keeps, so they need no rewriting.
Graph fuse(Graph graph, const KernelBindingTable& table, const PlanOptions& options,
           PlanReport& report) {
  std::vector<Value> values(graph.values().begin(), graph.values().end());
  std::vector<Node> nodes(graph.nodes().begin(), graph.nodes().end());
  std::vector<char> removed(nodes.size(), 0);

  std::vector<Pattern> patterns = static_patterns();
  for (const RuntimeFusedInfo& info : table.runtime_fused_ops()) {
    if (info.region.outputs.size() != 1) continue;  // one output per node
    Pattern p;
    p.rule = "runtime:" + info.name;
    p.key = info.id;
    p.num_inputs = info.region.num_inputs;
    for (const FusedRegion::Node& n : info.region.nodes) p.nodes.push_back({n.op, n.inputs});
    p.output = info.region.outputs[0];
    p.params_from = p.output;
    patterns.push_back(std::move(p));
  }

  // Readers of each value (node operands, views, graph outputs): an intermediate
  // of a region must be read by the region alone. Kept current as regions fuse.
  std::vector<int> readers(values.size(), 0);
  for (const Node& n : nodes) {
    for (ValueId in : n.inputs) ++readers[in.index];
  }
  for (const Value& v : values) {
    if (v.kind == ValueKind::kView) ++readers[v.source.index];
  }
  for (ValueId o : graph.outputs()) ++readers[o.index];
  auto uses_outside = [&](ValueId v, const std::vector<std::int32_t>& region) {
    int inside = 0;
    for (std::int32_t g : region) {
      for (ValueId in : nodes[g].inputs) inside += in == v ? 1 : 0;
    }
    return readers[v.index] > inside;
  };
  // Control edges naming each value (Node::after), kept current the same way; see
  // Note [Fusion and control edges].
  std::vector<int> ordered_before(values.size(), 0);
  for (const Node& n : nodes) {
    for (ValueId a : n.after) ++ordered_before[a.index];
  }
  auto ordered_before_outside = [&](ValueId v, const std::vector<std::int32_t>& region) {
    int inside = 0;
    for (std::int32_t g : region) {
      for (ValueId a : nodes[g].after) inside += a == v ? 1 : 0;
    }
    return ordered_before[v.index] > inside;
  };
  const std::size_t fusions_before = report.fusions.size();

  Result<std::vector<std::int32_t>> order_or = graph.topological_order();
  if (!order_or.is_ok()) return graph;
  const std::vector<std::int32_t> order = std::move(order_or).value();

  for (const Pattern& p : patterns) {
    for (std::int32_t anchor : order) {
      if (removed[anchor]) continue;
      MatchState s{std::vector<std::int32_t>(p.nodes.size(), -1),
                   std::vector<ValueId>(static_cast<std::size_t>(p.num_inputs))};
      Matcher matcher(values, nodes, removed);
      if (!matcher.match_node(p, p.output, anchor, s)) continue;
      if (std::any_of(s.inputs.begin(), s.inputs.end(), [](ValueId v) { return !v.valid(); })) {
        continue;
      }
      bool contained = true;
      const Node* ordered = nullptr;
      for (std::size_t pn = 0; pn < p.nodes.size(); ++pn) {
        if (static_cast<int>(pn) == p.output) continue;
        const Node& inner = nodes[s.node_match[pn]];
        if (uses_outside(inner.output, s.node_match)) contained = false;
        if (ordered == nullptr && ordered_before_outside(inner.output, s.node_match)) {
          ordered = &inner;
        }
      }
      const Node& out_node = nodes[anchor];
      if (!contained) {
        report.skipped_fusions.push_back(
            {p.rule, out_node.name, "an intermediate value is used outside the pattern"});
        continue;
      }
      if (ordered != nullptr) {
        report.skipped_fusions.push_back(
            {p.rule, out_node.name,
             fmt::format("a node outside the pattern must run after its inner node '{}' "
                         "(a control edge)",
                         ordered->name)});
        continue;
      }
      std::vector<ValueId> inputs = s.inputs;
      bool shaped = true;
      for (int i : p.unbroadcast) {
        const Value& v = values[inputs[i].index];
        if (v.kind != ValueKind::kView || v.view != ViewKind::kBroadcast ||
            values[v.source.index].shape.rank() != 1) {
          shaped = false;
          break;
        }
        inputs[i] = v.source;
      }
      if (!shaped) continue;  // e.g. a full-tensor add: not a bias, nothing to fuse
      Node fused;
      fused.op = p.static_op ? *p.static_op : p.nodes[p.output].op;
      fused.fused_key = p.static_op ? 0 : p.key.raw();
      fused.inputs = inputs;
      fused.output = out_node.output;
      if (p.params_from >= 0) fused.params = nodes[s.node_match[p.params_from]].params;
      // The region's control edges, less those between its own nodes.
      for (std::int32_t g : s.node_match) {
        for (ValueId a : nodes[g].after) {
          const bool internal = std::any_of(s.node_match.begin(), s.node_match.end(),
                                            [&](std::int32_t r) { return nodes[r].output == a; });
          if (!internal &&
              std::find(fused.after.begin(), fused.after.end(), a) == fused.after.end()) {
            fused.after.push_back(a);
          }
        }
      }
      fused.name = out_node.name;
      fused.role = out_node.role;
      fused.precision_floor = out_node.precision_floor;
      if (p.static_op) {
        std::vector<OperandInfo> in;
        for (ValueId v : inputs) in.push_back({values[v.index].dtype, values[v.index].shape});
        Result<OperandInfo> inferred = infer_output(*p.static_op, in, fused.params);
        const Value& out = values[out_node.output.index];
        if (!inferred.is_ok() || inferred->dtype != out.dtype || !(inferred->shape == out.shape)) {
          report.skipped_fusions.push_back(
              {p.rule, out_node.name,
               inferred.is_ok() ? "the fused op would change the output's dtype or shape"
                                : std::string(inferred.status().message())});
          continue;
        }
      }
      // The fused kernel must exist at these exact dtypes on a candidate backend,
      // with a sibling that meets the node's precision floor.
      std::vector<DType> dts;
      for (ValueId v : inputs) dts.push_back(values[v.index].dtype);
      dts.push_back(values[out_node.output.index].dtype);
      const DTypeList dtypes{std::span<const DType>(dts)};
      const PrecisionFloor floor =
          out_node.precision_floor ? *out_node.precision_floor : graph.precision_floor();
      bool served = false;
      std::vector<std::string> why;
      for (BackendId b : candidate_backends_for(fused, options.policy)) {
        for (const BindingEntry& e : table.lookup_alternatives(p.key, dtypes, b)) {
          if (!check_floor(floor, e.precision, dts.back())) served = true;
        }
        if (served) break;
        if (auto id = p.key.fused_id()) {
          const RuntimeFusedLookup found = table.unique_runtime_fused(*id, b);
          if (found.kind == RuntimeFusedLookup::Kind::kUnique) {
            why.push_back(fmt::format("{} binds it only at {}", name(b),
                                      dtypes_text(found.dtypes[0].span())));
          } else if (found.kind == RuntimeFusedLookup::Kind::kAmbiguous) {
            why.push_back(
                fmt::format("{} binds {} other dtype tuples", name(b), found.dtypes.size()));
          }
        }
      }
      if (!served) {
        report.skipped_fusions.push_back(
            {p.rule, out_node.name,
             fmt::format("no candidate backend binds {}{} meeting floor {}{}", p.rule,
                         dtypes_text(dts), describe(floor),
                         why.empty() ? "" : " (" + fmt::format("{}", fmt::join(why, "; ")) + ")")});
        continue;
      }
      AppliedFusion applied{p.rule, fused.name, {}};
      for (std::int32_t g : s.node_match) {
        applied.replaced.push_back(nodes[g].name);
        for (ValueId in : nodes[g].inputs) --readers[in.index];
        for (ValueId a : nodes[g].after) --ordered_before[a.index];
        if (g != anchor) removed[g] = 1;
      }
      for (ValueId in : fused.inputs) ++readers[in.index];
      for (ValueId a : fused.after) ++ordered_before[a.index];
      nodes[anchor] = std::move(fused);
      report.fusions.push_back(std::move(applied));
    }
  }
  if (report.fusions.size() == fusions_before) return graph;
  std::vector<Node> kept;
  for (std::size_t i = 0; i < nodes.size(); ++i) {
    if (!removed[i]) kept.push_back(std::move(nodes[i]));
  }
  return compact(graph, values, kept);
}

// --- dtype reconciliation --------------------------------------------------------------

Graph reconcile_dtypes(Graph graph, const KernelBindingTable& table, const PlanOptions& options,
                       PlanReport& report, std::map<std::string, Status>& failures) {
  // Most graphs need nothing: check every exact key first and return the graph
  // untouched when a candidate serves each.
  bool all_served = true;
  for (const Node& node : graph.nodes()) {
    const DTypeList dtypes = node_dtypes(graph, node);
    const BindingKey key = node_key(node);
    bool served = false;
    for (BackendId b : candidate_backends_for(node, options.policy)) {
      if (!table.lookup_alternatives(key, dtypes, b).empty()) {
        served = true;
        break;
      }
    }
    if (!served) {
      all_served = false;
      break;
    }
  }
  if (all_served) return graph;
  std::vector<Value> values(graph.values().begin(), graph.values().end());
  std::vector<Node> nodes(graph.nodes().begin(), graph.nodes().end());
  std::vector<Node> out_nodes;
  const BindingKey cast_key = OpKind::kCast;
  for (Node& node : nodes) {
    const BindingKey key = node_key(node);
    std::vector<DType> dts;
    for (ValueId v : node.inputs) dts.push_back(values[v.index].dtype);
    dts.push_back(values[node.output.index].dtype);
    const std::vector<BackendId> candidates = candidate_backends_for(node, options.policy);
    auto served = [&](std::span<const DType> d, BackendId b) {
      return !table.lookup_alternatives(key, DTypeList(d), b).empty();
    };
    if (std::any_of(candidates.begin(), candidates.end(),
                    [&](BackendId b) { return served(dts, b); })) {
      out_nodes.push_back(std::move(node));
      continue;
    }
    // Operands a lossless widening can promote: f16 and bf16 to f32.
    std::vector<int> promotable;
    for (std::size_t i = 0; i < dts.size(); ++i) {
      if (dts[i] == DType::kF16 || dts[i] == DType::kBF16) promotable.push_back(int(i));
    }
    std::optional<std::uint32_t> chosen;
    if (options.enable_casts && !promotable.empty() && promotable.size() < 16) {
      // Fewest casts first, then the lowest mask: deterministic and minimal.
      std::vector<std::uint32_t> masks;
      for (std::uint32_t m = 1; m < (1u << promotable.size()); ++m) masks.push_back(m);
      std::stable_sort(masks.begin(), masks.end(), [](std::uint32_t a, std::uint32_t b) {
        return std::popcount(a) < std::popcount(b);
      });
      for (std::uint32_t m : masks) {
        std::vector<DType> promoted = dts;
        for (std::size_t j = 0; j < promotable.size(); ++j) {
          if (m & (1u << j)) promoted[promotable[j]] = DType::kF32;
        }
        for (BackendId b : candidates) {
          if (!served(promoted, b)) continue;
          bool casts_ok = true;
          for (std::size_t j = 0; casts_ok && j < promotable.size(); ++j) {
            if (!(m & (1u << j))) continue;
            const int i = promotable[j];
            const bool is_output = i + 1 == static_cast<int>(dts.size());
            const DTypeList cast_dtypes =
                is_output ? DTypeList{DType::kF32, dts[i]} : DTypeList{dts[i], DType::kF32};
            casts_ok = std::any_of(candidates.begin(), candidates.end(), [&](BackendId cb) {
              return !table.lookup_alternatives(cast_key, cast_dtypes, cb).empty();
            });
          }
          if (casts_ok) {
            chosen = m;
            break;
          }
        }
        if (chosen) break;
      }
    }
    if (!chosen) {
      const BackendId first = candidates.empty() ? kHostBackend : candidates.front();
      Status miss = table.miss_error(key, DTypeList(std::span<const DType>(dts)), first);
      if (!promotable.empty()) {
        miss = miss.with_context(options.enable_casts
                                     ? "no f32 promotion of the f16/bf16 operands is served "
                                       "either"
                                     : "cast insertion is disabled");
      }
      failures.emplace(node.name, miss);
      out_nodes.push_back(std::move(node));
      continue;
    }
    std::vector<Node> after;
    for (std::size_t j = 0; j < promotable.size(); ++j) {
      if (!(*chosen & (1u << j))) continue;
      const int i = promotable[j];
      const bool is_output = i + 1 == static_cast<int>(dts.size());
      Value wide;
      wide.dtype = DType::kF32;
      wide.kind = ValueKind::kNodeOutput;
      Node cast;
      cast.op = OpKind::kCast;
      cast.role = "cast";
      if (!is_output) {
        const ValueId original = node.inputs[i];
        wide.name = fmt::format("{}.in{}.f32", node.name, i);
        wide.shape = values[original.index].shape;
        values.push_back(wide);
        const ValueId wide_id{static_cast<std::int32_t>(values.size() - 1)};
        cast.name = fmt::format("{}.cast_in{}", node.name, i);
        cast.inputs = {original};
        cast.output = wide_id;
        node.inputs[i] = wide_id;
        report.casts.push_back({cast.name, node.name, i, dts[i], DType::kF32});
        out_nodes.push_back(std::move(cast));
      } else {
        const ValueId original = node.output;
        wide.name = fmt::format("{}.f32", node.name);
        wide.shape = values[original.index].shape;
        values.push_back(wide);
        const ValueId wide_id{static_cast<std::int32_t>(values.size() - 1)};
        // Control edges naming `original` now wait for this cast, which runs
        // after the node: later still, so their order holds.
        cast.name = fmt::format("{}.cast_out", node.name);
        cast.inputs = {wide_id};
        cast.output = original;
        node.output = wide_id;
        report.casts.push_back({cast.name, node.name, -1, DType::kF32, dts[i]});
        after.push_back(std::move(cast));
      }
    }
    out_nodes.push_back(std::move(node));
    for (Node& n : after) out_nodes.push_back(std::move(n));
  }
  return compact(graph, values, out_nodes);
}

}  // namespace switchyard::detail
