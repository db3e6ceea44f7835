// Route picking, copy steps and buffer plans per shape bucket, and plan_graph, which
// runs every pass in order.
#include <algorithm>
#include <charconv>
#include <cmath>
#include <limits>
#include <map>
#include <tuple>

#include <fmt/format.h>

#include "plan/passes.h"
#include "switchyard/bucket_plan.h"

namespace switchyard {

std::string_view name(RejectReason reason) {
  switch (reason) {
    case RejectReason::kLayoutUnsupported: return "layout_unsupported";
    case RejectReason::kRequiresBroadcast: return "requires_broadcast";
    case RejectReason::kPrecisionUnaudited: return "precision_unaudited";
    case RejectReason::kPrecisionBelowFloor: return "precision_below_floor";
    case RejectReason::kPrecisionTrade: return "precision_trade";
    case RejectReason::kShapeNotAdmitted: return "shape_not_admitted";
    case RejectReason::kCostError: return "cost_error";
    case RejectReason::kNotBound: return "not_bound";
    case RejectReason::kOperandNotConstant: return "operand_not_constant";
    case RejectReason::kPackingOff: return "packing_off";
  }
  return "?";
}

CostEstimate not_admitted_cost() { return {0, 0, std::numeric_limits<double>::infinity(), true}; }

std::vector<BackendId> candidate_backends_for(const Node& node, const PlacementPolicy& policy) {
  for (const PlacementPolicy::Pin& pin : policy.pinned) {
    if (pin.node == node.name) return {pin.backend};
  }
  std::vector<BackendId> out;
  auto add = [&](BackendId b) {
    if (std::find(out.begin(), out.end(), b) == out.end()) out.push_back(b);
  };
  for (BackendId b : policy.preferred) add(b);
  for (BackendId b : policy.fallbacks) add(b);
  return out;
}

ExecutionPlan::ExecutionPlan() = default;
ExecutionPlan::~ExecutionPlan() = default;
ExecutionPlan::ExecutionPlan(ExecutionPlan&&) noexcept = default;
ExecutionPlan& ExecutionPlan::operator=(ExecutionPlan&&) noexcept = default;

Shape concrete_shape(const Shape& shape, std::span<const std::int64_t> sizes) {
  std::array<std::int64_t, kMaxRank> d{};
  for (int i = 0; i < shape.rank(); ++i) {
    d[i] = is_symbolic(shape[i]) ? sizes[symbol_index(shape[i])] : shape[i];
  }
  return Shape(std::span<const std::int64_t>(d.data(), static_cast<std::size_t>(shape.rank())));
}

Result<ViewLayout> operand_layout(const Graph& graph, ValueId value,
                                  std::span<const std::int64_t> sizes) {
  const Value& v = graph.value(value);
  const Shape shape = concrete_shape(v.shape, sizes);
  if (v.kind != ValueKind::kView) return ViewLayout{shape, contiguous_strides(shape)};
  const Shape source = concrete_shape(graph.value(v.source).shape, sizes);
  if (v.view == ViewKind::kReshape && source.numel() != shape.numel()) {
    return invalid_argument_error(fmt::format("reshape view '{}': {} does not hold {} elements",
                                              v.name, source.to_string(), shape.numel()));
  }
  return view_layout(v.view, source, shape);
}

namespace detail {

namespace {

constexpr std::int32_t kNotResident = -2;
constexpr std::int32_t kOwnStorage = -1;
constexpr std::int64_t kAlignment = 64;

bool layout_contiguous(const ViewLayout& l) {
  const auto dense = contiguous_strides(l.shape);
  for (int i = 0; i < l.shape.rank(); ++i) {
    if (l.shape[i] > 1 && l.strides[i] != dense[i]) return false;
  }
  return true;
}

bool layout_broadcast(const ViewLayout& l) {
  for (int i = 0; i < l.shape.rank(); ++i) {
    if (l.shape[i] > 1 && l.strides[i] == 0) return true;
  }
  return false;
}

ValueId base_of(const Graph& g, ValueId v) {
  const Value& value = g.value(v);
  return value.kind == ValueKind::kView ? value.source : v;
}

int backend_rank(const std::vector<BackendId>& candidates, BackendId b) {
  return static_cast<int>(std::find(candidates.begin(), candidates.end(), b) - candidates.begin());
}

// "[2, 3] x [3] -> [2, 3]", built without a formatting library call per dim:
// every node of every bucket gets one.
void append_shape(std::string& out, const Shape& shape) {
  out += '[';
  char buf[24];
  for (int i = 0; i < shape.rank(); ++i) {
    if (i) out += ", ";
    auto [end, ec] = std::to_chars(buf, buf + sizeof buf, shape[i]);
    (void)ec;
    out.append(buf, end);
  }
  out += ']';
}

std::string join_shapes(const std::vector<Shape>& shapes, std::size_t inputs) {
  std::string text;
  text.reserve(16 * shapes.size());
  for (std::size_t i = 0; i < shapes.size(); ++i) {
    if (i) text += i == inputs ? " -> " : " x ";
    append_shape(text, shapes[i]);
  }
  return text;
}

std::string signature(const DTypeList& d) {
  std::string text;
  for (std::size_t i = 0; i < d.size(); ++i) {
    if (i) text += i + 1 == d.size() ? "->" : ",";
    text += name(d[i]);
  }
  return text;
}

// Assigns offsets in each backend's arena: a buffer may reuse the bytes of one
// whose last reader ran before its first writer (first fit, in step order).
void assign_offsets(BucketPlan& plan) {
  plan.arena_bytes.fill(0);
  std::vector<std::size_t> order(plan.buffers.size());
  for (std::size_t i = 0; i < order.size(); ++i) order[i] = i;
  std::stable_sort(order.begin(), order.end(), [&](std::size_t a, std::size_t b) {
    return plan.buffers[a].first_step < plan.buffers[b].first_step;
  });
  for (BackendId backend : kAllBackends) {
    std::vector<std::size_t> live;
    for (std::size_t i : order) {
      BufferPlan& buf = plan.buffers[i];
      if (buf.backend != backend || buf.upload.valid()) continue;
      std::erase_if(live,
                    [&](std::size_t j) { return plan.buffers[j].last_step < buf.first_step; });
      std::sort(live.begin(), live.end(), [&](std::size_t a, std::size_t b) {
        return plan.buffers[a].offset < plan.buffers[b].offset;
      });
      const std::int64_t size = (buf.bytes + kAlignment - 1) / kAlignment * kAlignment;
      std::int64_t offset = 0;
      for (std::size_t j : live) {
        const BufferPlan& other = plan.buffers[j];
        const std::int64_t other_size = (other.bytes + kAlignment - 1) / kAlignment * kAlignment;
        if (offset + size <= other.offset) break;
        offset = std::max(offset, other.offset + other_size);
      }
      buf.offset = offset;
      live.push_back(i);
      auto& arena = plan.arena_bytes[static_cast<std::size_t>(backend)];
      arena = std::max(arena, offset + size);
    }
  }
}

struct Router {
  const Graph& graph;
  const KernelBindingTable& table;
  const PlanOptions& options;
  const std::map<std::string, Status>& failures;
  std::span<const std::int64_t> sizes;
  BucketPlan& plan;
  // Per value: the backend where the caller keeps it (Note [Caller tensors on a
  // device]); the host for values that are not the caller's.
  std::span<const BackendId> homes;
  // Per value and backend: kNotResident, kOwnStorage or a buffer index.
  std::vector<std::array<std::int32_t, kBackendCount>> resident;
  // Per (constant, backend, packing): its packed buffer.
  std::map<std::tuple<std::int32_t, BackendId, const WeightPacking*>, std::int32_t> packed;
  Status first_failure;

  std::int32_t new_buffer(BackendId b, ValueId v, std::int32_t step) {
    const Value& value = graph.value(v);
    Result<std::int64_t> bytes = row_bytes(value.dtype, concrete_shape(value.shape, sizes).numel());
    BufferPlan buf;
    buf.backend = b;
    buf.bytes = bytes.is_ok() ? *bytes : 0;
    buf.first_step = step;
    buf.last_step = step;
    plan.buffers.push_back(buf);
    return static_cast<std::int32_t>(plan.buffers.size() - 1);
  }

  // The packed copy of constant `value` on `b` that `packing` makes once per
  // executor (Note [Prepacked weights]): a buffer like a device upload, shared by
  // every node of the bucket that reads it packed.
  std::int32_t make_packed(ValueId value, BackendId b, const WeightPacking* packing,
                           std::int64_t bytes) {
    const auto key = std::make_tuple(value.index, b, packing);
    if (auto it = packed.find(key); it != packed.end()) return it->second;
    const std::int32_t buf = new_buffer(b, value, 0);
    BufferPlan& plan_buf = plan.buffers[buf];
    plan_buf.upload = value;
    plan_buf.packing = packing;
    plan_buf.bytes = bytes;
    plan_buf.last_step = std::numeric_limits<std::int32_t>::max();
    packed.emplace(key, buf);
    return buf;
  }

  void touch(std::int32_t buffer, std::int32_t step) {
    if (buffer >= 0) {
      BufferPlan& b = plan.buffers[buffer];
      b.last_step = std::max(b.last_step, step);
    }
  }

  double transfer_ns(double bytes) const {
    return bytes / std::max(options.transfer.gbps, 1e-9) + options.transfer.latency_ns;
  }

  // Makes `base` resident on `b` (a copy step, or a once-only upload for a
  // constant) and returns its storage there.
  std::int32_t make_resident(ValueId base, BackendId b) {
    auto& where = resident[base.index];
    if (where[static_cast<std::size_t>(b)] != kNotResident) {
      return where[static_cast<std::size_t>(b)];
    }
    const auto step = static_cast<std::int32_t>(plan.steps.size());
    const Value& value = graph.value(base);
    if (value.kind == ValueKind::kConstant) {
      const std::int32_t buf = new_buffer(b, base, 0);
      plan.buffers[buf].upload = base;
      plan.buffers[buf].last_step = std::numeric_limits<std::int32_t>::max();
      where[static_cast<std::size_t>(b)] = buf;
      return buf;
    }
    BackendId from = homes[static_cast<std::size_t>(base.index)];
    for (BackendId c : kAllBackends) {
      if (where[static_cast<std::size_t>(c)] != kNotResident) {
        from = c;
        break;
      }
    }
    const std::int32_t src = where[static_cast<std::size_t>(from)];
    const std::int32_t dst = new_buffer(b, base, step);
    touch(src, step);
    PlannedStep copy;
    copy.kind = StepKind::kCopy;
    copy.backend = b;
    copy.num_inputs = 1;
    copy.first_operand = static_cast<std::uint32_t>(plan.operands.size());
    plan.operands.push_back({base, from, src});
    plan.operands.push_back({base, b, dst});
    plan.steps.push_back(copy);
    ++plan.report.copies;
    where[static_cast<std::size_t>(b)] = dst;
    return dst;
  }

  void route(std::int32_t index) {
    const Node& node = graph.node(index);
    NodeReport nr;
    nr.node = index;
    nr.name = node.name;
    nr.role = node.role;
    nr.op = node_op_label(table, node);
    const DTypeList dtypes = node_dtypes(graph, node);
    nr.signature = signature(dtypes);
    nr.floor = graph.floor_for(node);
    const BindingKey key = node_key(node);
    const std::vector<BackendId> candidates = candidate_backends_for(node, options.policy);

    std::vector<Shape> shapes;
    bool any_strided = false, any_broadcast = false;
    Status layout_error;
    for (ValueId in : node.inputs) {
      Result<ViewLayout> l = operand_layout(graph, in, sizes);
      if (!l.is_ok()) {
        layout_error = l.status();
        break;
      }
      shapes.push_back(l->shape);
      any_broadcast |= layout_broadcast(*l);
      any_strided |= !layout_contiguous(*l) && !layout_broadcast(*l);
    }
    shapes.push_back(concrete_shape(graph.value(node.output).shape, sizes));
    nr.shapes = join_shapes(shapes, node.inputs.size());

    auto fail = [&](const Status& status) {
      // The plan is not executable; let consumers see the value wherever they
      // run, so their reports show no copies of a value that never existed.
      for (BackendId b : candidates) {
        resident[node.output.index][static_cast<std::size_t>(b)] = kOwnStorage;
      }
      nr.resolved = false;
      nr.failure = std::string(status.message());
      if (first_failure.is_ok()) first_failure = status.with_context("node '" + node.name + "'");
      plan.report.nodes.push_back(std::move(nr));
    };
    if (!layout_error.is_ok()) return fail(layout_error);
    if (auto it = failures.find(node.name); it != failures.end()) return fail(it->second);

    CostInputs cost_in;
    cost_in.op = node.op;
    cost_in.shapes = shapes;
    cost_in.dtypes = dtypes.span();
    cost_in.params = &node.params;

    std::vector<RouteCandidate> viable;
    std::vector<const BindingEntry*> viable_entries;
    bool any_bound = false;
    for (BackendId b : candidates) {
      const std::span<const BindingEntry> alts = table.lookup_alternatives(key, dtypes, b);
      if (alts.empty()) {
        nr.rejected.push_back(
            {b, "", RejectReason::kNotBound, "no kernel at " + describe_key(key, dtypes, b)});
        continue;
      }
      any_bound = true;
      const BackendCaps& caps = options.backend_caps[static_cast<std::size_t>(b)];
      double move_ns = 0;
      std::vector<std::int32_t> counted;
      for (ValueId in : node.inputs) {
        const ValueId base = base_of(graph, in);
        if (std::find(counted.begin(), counted.end(), base.index) != counted.end()) continue;
        counted.push_back(base.index);
        const Value& bv = graph.value(base);
        // Constants are uploaded once per executor, not per run.
        if (bv.kind == ValueKind::kConstant) continue;
        if (resident[base.index][static_cast<std::size_t>(b)] != kNotResident) continue;
        const Shape s = concrete_shape(bv.shape, sizes);
        move_ns += transfer_ns(static_cast<double>(s.numel()) * element_bytes(bv.dtype));
      }
      cost_in.caps = &caps;
      for (std::size_t s = 0; s < alts.size(); ++s) {
        const BindingEntry& e = alts[s];
        auto reject = [&](RejectReason reason, std::string detail) {
          nr.rejected.push_back({b, e.name, reason, std::move(detail)});
        };
        if (e.caps.requires_broadcast && !any_broadcast) {
          reject(RejectReason::kRequiresBroadcast,
                 "takes only broadcast operands; these are dense");
          continue;
        }
        if (any_broadcast && !e.caps.broadcast_input) {
          reject(RejectReason::kLayoutUnsupported, "an operand is broadcast (stride 0)");
          continue;
        }
        if (any_strided && !e.caps.strided_input) {
          reject(RejectReason::kLayoutUnsupported, "an operand is strided (not contiguous)");
          continue;
        }
        if (auto why = check_floor(nr.floor, e.precision, dtypes[dtypes.size() - 1])) {
          reject(why->first, why->second);
          continue;
        }
        if (e.caps.trades_precision && !options.admit_precision_trades) {
          reject(RejectReason::kPrecisionTrade,
                 "trades precision for speed; the plan does not admit precision trades");
          continue;
        }
        std::int64_t packed_bytes = 0;
        if (e.packing != nullptr && !options.pack_weights) {
          reject(RejectReason::kPackingOff,
                 "packs its weight at load, and the plan does not pack weights");
          continue;
        }
        if (e.packing != nullptr) {
          const auto op = static_cast<std::size_t>(e.packing->operand);
          const Value& operand = graph.value(node.inputs[op]);
          if (operand.kind != ValueKind::kConstant) {
            reject(RejectReason::kOperandNotConstant,
                   fmt::format("packs input {} once at load, and '{}' is computed at run time", op,
                               operand.name));
            continue;
          }
          packed_bytes = e.packing->packed_bytes(operand.dtype, cost_in.shapes[op]);
          if (packed_bytes < 0) {
            reject(RejectReason::kShapeNotAdmitted,
                   fmt::format("cannot pack input {} of shape {}", op,
                               cost_in.shapes[op].to_string()));
            continue;
          }
        }
        if (!e.admits_shapes(cost_in.shapes)) {
          reject(RejectReason::kShapeNotAdmitted,
                 fmt::format("the kernel does not admit shapes {}", nr.shapes));
          continue;
        }
        CostEstimate est;
        if (e.cost_expr) {
          Result<CostEstimate> r = e.cost_expr->evaluate(cost_in);
          if (!r.is_ok()) {
            reject(RejectReason::kCostError, std::string(r.status().message()));
            continue;
          }
          est = *r;
        } else {
          est = e.cost(cost_in);
        }
        const double modelled_ns = est.known ? est.time_ns(caps) : 0.0;
        double kernel_ns = modelled_ns;
        const FittedCost* measured =
            est.known && options.calibration ? options.calibration->find(e.revision_hash) : nullptr;
        if (measured != nullptr) kernel_ns = measured->predict_ns(est.bytes, est.flops);
        if (est.known && !std::isfinite(kernel_ns)) {
          reject(RejectReason::kShapeNotAdmitted,
                 fmt::format("its cost function refuses shapes {}", nr.shapes));
          continue;
        }
        RouteCandidate c;
        c.backend = b;
        c.kernel = e.name;
        c.source = e.source;
        c.sibling = static_cast<int>(s);
        c.cost_known = est.known;
        c.kernel_ns = kernel_ns;
        c.modelled_ns = modelled_ns;
        c.measured = measured != nullptr;
        c.transfer_ns = move_ns;
        c.total_ns = kernel_ns + move_ns;
        c.precision = e.precision;
        c.packed_bytes = packed_bytes;
        viable.push_back(c);
        viable_entries.push_back(&e);
      }
    }
    if (viable.empty()) {
      if (!any_bound) {
        return fail(
            table.miss_error(key, dtypes, candidates.empty() ? kHostBackend : candidates.front()));
      }
      std::string text = fmt::format("every sibling of {} was rejected:", nr.op);
      for (const RejectedCandidate& r : nr.rejected) {
        text += fmt::format("\n  {} on {}: {} ({})", r.kernel.empty() ? "-" : r.kernel,
                            name(r.backend), name(r.reason), r.detail);
      }
      return fail(failed_precondition_error(text));
    }
    // Rank: an estimate beats none; then lower total; then the backend's rank in the
    // policy; then sibling order (the backend's own best-first order).
    std::vector<std::size_t> rank(viable.size());
    for (std::size_t i = 0; i < rank.size(); ++i) rank[i] = i;
    std::stable_sort(rank.begin(), rank.end(), [&](std::size_t a, std::size_t b) {
      const RouteCandidate& x = viable[a];
      const RouteCandidate& y = viable[b];
      if (x.cost_known != y.cost_known) return x.cost_known;
      if (x.total_ns != y.total_ns) return x.total_ns < y.total_ns;
      const int rx = backend_rank(candidates, x.backend);
      const int ry = backend_rank(candidates, y.backend);
      if (rx != ry) return rx < ry;
      return x.sibling < y.sibling;
    });
    nr.resolved = true;
    nr.chosen = viable[rank[0]];
    for (std::size_t i = 1; i < rank.size(); ++i) nr.runners_up.push_back(viable[rank[i]]);
    nr.fallback = std::find(options.policy.preferred.begin(), options.policy.preferred.end(),
                            nr.chosen.backend) == options.policy.preferred.end();
    const BindingEntry* entry = viable_entries[rank[0]];
    const BackendId b = nr.chosen.backend;

    // Steps: copies in, the kernel, and a copy out for a graph output computed
    // off the host.
    std::vector<OperandRef> refs;
    for (std::size_t i = 0; i < node.inputs.size(); ++i) {
      const ValueId in = node.inputs[i];
      const bool reads_packed =
          entry->packing != nullptr && static_cast<std::size_t>(entry->packing->operand) == i;
      refs.push_back({in, b,
                      reads_packed ? make_packed(in, b, entry->packing, nr.chosen.packed_bytes)
                                   : make_resident(base_of(graph, in), b)});
    }
    const auto step_index = static_cast<std::int32_t>(plan.steps.size());
    for (const OperandRef& r : refs) touch(r.buffer, step_index);
    const bool is_output = std::find(graph.outputs().begin(), graph.outputs().end(), node.output) !=
                           graph.outputs().end();
    const BackendId home = homes[static_cast<std::size_t>(node.output.index)];
    std::int32_t out_storage = kOwnStorage;
    if (!(is_output && b == home)) out_storage = new_buffer(b, node.output, step_index);
    resident[node.output.index][static_cast<std::size_t>(b)] = out_storage;
    refs.push_back({node.output, b, out_storage});

    PlannedStep step;
    step.kind = StepKind::kKernel;
    step.backend = b;
    step.num_inputs = static_cast<std::uint16_t>(node.inputs.size());
    step.first_operand = static_cast<std::uint32_t>(plan.operands.size());
    step.node = index;
    step.fn = entry->fn;
    step.entry = entry;
    step.params = &node.params;
    plan.operands.insert(plan.operands.end(), refs.begin(), refs.end());
    plan.steps.push_back(step);

    if (is_output && b != home) {
      const auto copy_index = static_cast<std::int32_t>(plan.steps.size());
      touch(out_storage, copy_index);
      PlannedStep copy;
      copy.kind = StepKind::kCopy;
      copy.backend = home;
      copy.num_inputs = 1;
      copy.first_operand = static_cast<std::uint32_t>(plan.operands.size());
      plan.operands.push_back({node.output, b, out_storage});
      plan.operands.push_back({node.output, home, kOwnStorage});
      plan.steps.push_back(copy);
      ++plan.report.copies;
      resident[node.output.index][static_cast<std::size_t>(home)] = kOwnStorage;
    }
    plan.report.nodes.push_back(std::move(nr));
  }
};

}  // namespace

// Routes every node of `graph` (already fused and reconciled) at the sizes of one
// bucket. Unresolved nodes are reported; the first one's error is returned beside.
std::unique_ptr<BucketPlan> build_bucket(const Graph& graph, std::span<const std::int32_t> order,
                                         std::span<const BackendId> homes,
                                         const KernelBindingTable& table,
                                         const PlanOptions& options,
                                         const std::map<std::string, Status>& failures,
                                         std::string bucket_name, std::vector<std::int64_t> min,
                                         std::vector<std::int64_t> max, Status& failure) {
  auto plan = std::make_unique<BucketPlan>();
  plan->name = std::move(bucket_name);
  plan->min = std::move(min);
  plan->max = std::move(max);
  plan->report.name = plan->name;
  for (std::size_t i = 0; i < graph.symbols().size(); ++i) {
    plan->report.sizes.emplace_back(graph.symbols()[i], plan->max[i]);
  }
  Router router{graph, table, options, failures, plan->max, *plan, homes, {}, {}, Status::ok()};
  router.resident.assign(graph.values().size(), {});
  for (auto& r : router.resident) r.fill(kNotResident);
  for (std::size_t i = 0; i < graph.values().size(); ++i) {
    const ValueKind kind = graph.values()[i].kind;
    if (kind == ValueKind::kInput || kind == ValueKind::kConstant) {
      router.resident[i][static_cast<std::size_t>(homes[i])] = kOwnStorage;
    }
  }
  plan->report.nodes.reserve(order.size());
  plan->steps.reserve(order.size());
  plan->operands.reserve(order.size() * 3);
  for (std::int32_t n : order) router.route(n);
  assign_offsets(*plan);
  for (const NodeReport& nr : plan->report.nodes) {
    if (!nr.resolved) continue;
    auto it = std::find_if(plan->report.per_backend.begin(), plan->report.per_backend.end(),
                           [&](const BackendTotal& t) { return t.backend == nr.chosen.backend; });
    if (it == plan->report.per_backend.end()) {
      plan->report.per_backend.push_back({nr.chosen.backend, 0, 0, 0});
      it = plan->report.per_backend.end() - 1;
    }
    ++it->nodes;
    it->estimated_ns += nr.chosen.total_ns;
    plan->report.estimated_ns += nr.chosen.total_ns;
  }
  for (BackendId b : kAllBackends) {
    const std::int64_t bytes = plan->arena_bytes[static_cast<std::size_t>(b)];
    if (bytes == 0) continue;
    auto it = std::find_if(plan->report.per_backend.begin(), plan->report.per_backend.end(),
                           [&](const BackendTotal& t) { return t.backend == b; });
    if (it == plan->report.per_backend.end()) {
      plan->report.per_backend.push_back({b, 0, 0, 0});
      it = plan->report.per_backend.end() - 1;
    }
    it->peak_bytes = bytes;
  }
  std::sort(plan->report.per_backend.begin(), plan->report.per_backend.end(),
            [](const BackendTotal& a, const BackendTotal& b) { return a.backend < b.backend; });
  failure = router.first_failure;
  return plan;
}

}  // namespace detail

namespace {

Status check_buckets(const Graph& graph, const std::vector<ShapeBucket>& buckets) {
  const auto symbols = graph.symbols();
  if (buckets.empty() && !symbols.empty()) {
    return invalid_argument_error(fmt::format(
        "the graph has symbolic dimension '{}'; give shape buckets with its range", symbols[0]));
  }
  for (const ShapeBucket& b : buckets) {
    for (const SymbolRange& r : b.ranges) {
      if (std::find(symbols.begin(), symbols.end(), r.symbol) == symbols.end()) {
        return invalid_argument_error(
            fmt::format("bucket '{}': the graph has no symbol '{}'", b.name, r.symbol));
      }
      if (r.min < 0 || r.max < r.min) {
        return invalid_argument_error(fmt::format("bucket '{}': range [{}, {}] of '{}' is empty",
                                                  b.name, r.min, r.max, r.symbol));
      }
    }
    for (const std::string& s : symbols) {
      if (std::none_of(b.ranges.begin(), b.ranges.end(),
                       [&](const SymbolRange& r) { return r.symbol == s; })) {
        return invalid_argument_error(
            fmt::format("bucket '{}' gives no range for symbol '{}'", b.name, s));
      }
    }
  }
  return Status::ok();
}

void add_violations(PlanReport& report, const PlacementPolicy& policy) {
  for (const BucketReport& b : report.buckets) {
    for (const NodeReport& n : b.nodes) {
      if (!n.resolved) {
        const std::string first = n.failure.substr(0, n.failure.find('\n'));
        report.violations.push_back(
            fmt::format("[{}] node '{}' ({}): no route: {}", b.name, n.name, n.op, first));
        continue;
      }
      if (n.fallback) {
        std::vector<std::string_view> preferred;
        for (BackendId p : policy.preferred) preferred.push_back(name(p));
        report.violations.push_back(
            fmt::format("[{}] node '{}' ({}) runs on fallback backend {} (preferred: {})", b.name,
                        n.name, n.op, name(n.chosen.backend), fmt::join(preferred, ", ")));
      }
      if (!n.chosen.cost_known) {
        report.violations.push_back(fmt::format("[{}] node '{}': kernel {} has no cost estimate",
                                                b.name, n.name, n.chosen.kernel));
      }
    }
  }
}

// One bucket's resolutions as registry lookups on the policy's first preferred
// backend: a hit where the node runs there, a by-design choice where a kernel
// exists there but another backend was cheaper, a slow-path miss otherwise. The
// recorded answer is the planner's own resolution, the very kernel the executor
// will launch, so the registry cannot disagree with what runs. `build`: a
// prediction made while planning; otherwise a run-phase record (Note [Run-phase
// lookups]), where a hit records nothing.
void record_bucket(const ExecutionPlan& plan, const BucketReport& bucket, Registry& registry,
                   bool build) {
  const PlanOptions& options = plan.options();
  const BackendId selected =
      options.policy.preferred.empty() ? kHostBackend : options.policy.preferred.front();
  const Graph& graph = plan.graph();
  for (const NodeReport& n : bucket.nodes) {
    const Node& node = graph.nodes()[static_cast<std::size_t>(n.node)];
    const DTypeList dtypes = detail::node_dtypes(graph, node);
    const Lookup lookup{.backend = selected,
                        .op = detail::node_key(node),
                        .dtype = representative_dtype(dtypes),
                        .role = n.role.empty() ? std::string_view(n.name) : n.role};
    Outcome outcome = Outcome::make_hit();
    if (n.resolved && n.chosen.backend == selected) {
      if (!build) continue;
    } else if (n.resolved && plan.table()->backend_supports(lookup.op, dtypes, selected)) {
      // A kernel exists there; the route picker chose another backend by cost
      // (the operands live there, say): a decision, not a missing kernel.
      outcome = Outcome::by_design(n.chosen.kernel);
    } else {
      outcome = Outcome::slow_path(n.resolved ? std::string_view(n.chosen.kernel)
                                              : std::string_view("no kernel"));
    }
    if (build) {
      registry.record_build(lookup, outcome);
    } else {
      registry.record_dispatch(lookup, outcome);
    }
  }
}

// See PlanOptions::registry.
Status record_in_registry(const ExecutionPlan& plan, const PlanOptions& options) {
  Registry& registry = options.registry != nullptr ? *options.registry : global_registry();
  for (const BucketReport& bucket : plan.report().buckets) {
    record_bucket(plan, bucket, registry, /*build=*/true);
  }
  const std::vector<CoverageBinding> masked = masked_bindings();
  Result<SealReport> sealed = registry.seal_or_error(masked);
  return sealed.is_ok() ? Status::ok() : sealed.status();
}

// Per value of `g`: the backend where its caller keeps it
// (PlanOptions::external_backends), the host for every other value. A name that
// is no graph input or output is an error: a typo must not put a tensor back on
// the host without a word.
Result<std::vector<BackendId>> external_homes(const Graph& g, const PlanOptions& options) {
  std::vector<BackendId> homes(g.values().size(), kHostBackend);
  for (const auto& [wanted, backend] : options.external_backends) {
    bool found = false;
    for (ValueId id : g.inputs()) {
      if (g.value(id).name != wanted) continue;
      homes[static_cast<std::size_t>(id.index)] = backend;
      found = true;
    }
    for (ValueId id : g.outputs()) {
      const Value& v = g.value(id);
      if (v.name != wanted && (v.producer < 0 || g.node(v.producer).name != wanted)) continue;
      if (v.kind == ValueKind::kInput || v.kind == ValueKind::kConstant) {
        return invalid_argument_error(fmt::format(
            "external_backends: output '{}' is a graph input or constant; it cannot live on {}",
            wanted, name(backend)));
      }
      homes[static_cast<std::size_t>(id.index)] = backend;
      found = true;
    }
    if (!found) {
      return invalid_argument_error(
          fmt::format("external_backends: the graph has no input or output named '{}'", wanted));
    }
  }
  return homes;
}

}  // namespace

Result<ExecutionPlan> plan_graph(const Graph& graph, TableSnapshot table,
                                 const PlanOptions& options) {
  if (table == nullptr) return invalid_argument_error("plan_graph: no table");
  SWITCHYARD_RETURN_IF_ERROR(graph.validate());
  SWITCHYARD_RETURN_IF_ERROR(check_buckets(graph, options.buckets));
  ExecutionPlan plan;
  plan.options_ = options;
  plan.table_ = std::move(table);
  const KernelBindingTable& tbl = *plan.table_;
  plan.report_.table_generation = tbl.generation();
  Graph g = graph;
  if (options.enable_fusion) g = detail::fuse(std::move(g), tbl, options, plan.report_);
  std::map<std::string, Status> failures;
  g = detail::reconcile_dtypes(std::move(g), tbl, options, plan.report_, failures);
  // The passes keep the graph valid; check again only when they changed it.
  if (!plan.report_.fusions.empty() || !plan.report_.casts.empty()) {
    SWITCHYARD_RETURN_IF_ERROR(g.validate().with_context("planned graph"));
  }
  SWITCHYARD_ASSIGN_OR_RETURN(std::vector<std::int32_t> order, g.topological_order());
  plan.graph_ = std::move(g);
  plan.inputs_ = plan.graph_.inputs();
  SWITCHYARD_ASSIGN_OR_RETURN(const std::vector<BackendId> homes,
                              external_homes(plan.graph_, options));
  for (ValueId id : plan.inputs_) plan.input_backends_.push_back(homes[std::size_t(id.index)]);
  for (ValueId id : plan.outputs()) plan.output_backends_.push_back(homes[std::size_t(id.index)]);

  std::vector<ShapeBucket> buckets = options.buckets;
  if (buckets.empty()) buckets.push_back({"default", {}});
  Status first_failure;
  for (const ShapeBucket& b : buckets) {
    const std::size_t n = plan.graph_.symbols().size();
    std::vector<std::int64_t> min(n), max(n);
    for (const SymbolRange& r : b.ranges) {
      const auto it =
          std::find(plan.graph_.symbols().begin(), plan.graph_.symbols().end(), r.symbol);
      const auto i = static_cast<std::size_t>(it - plan.graph_.symbols().begin());
      min[i] = r.min;
      max[i] = r.max;
    }
    Status failure;
    std::unique_ptr<BucketPlan> bp =
        detail::build_bucket(plan.graph_, order, homes, tbl, options, failures, b.name,
                             std::move(min), std::move(max), failure);
    if (first_failure.is_ok() && !failure.is_ok()) first_failure = failure;
    // The report lives in the plan's report; the bucket keeps only what runs.
    plan.report_.buckets.push_back(std::move(bp->report));
    plan.buckets_.push_back(std::move(bp));
  }
  add_violations(plan.report_, options.policy);
  // Recorded even when planning failed, so the seal report shows the misses.
  const Status sealed =
      options.record_in_registry ? record_in_registry(plan, options) : Status::ok();
  if (!first_failure.is_ok()) {
    auto payload = std::make_shared<PlanFailure>();
    payload->report = plan.report_;
    payload->cause = first_failure;
    return Status(first_failure.code(), "planning failed: " + std::string(first_failure.message()),
                  std::move(payload));
  }
  SWITCHYARD_RETURN_IF_ERROR(sealed);
  return plan;
}

Result<std::unique_ptr<BucketPlan>> plan_bucket_for_sizes(const ExecutionPlan& plan,
                                                          std::span<const std::int64_t> sizes) {
  const Graph& g = plan.graph();
  if (sizes.size() != g.symbols().size()) {
    return invalid_argument_error(
        fmt::format("{} sizes for {} symbols", sizes.size(), g.symbols().size()));
  }
  SWITCHYARD_ASSIGN_OR_RETURN(std::vector<std::int32_t> order, g.topological_order());
  std::vector<std::int64_t> exact(sizes.begin(), sizes.end());
  std::vector<std::string> parts;
  for (std::size_t i = 0; i < sizes.size(); ++i) {
    parts.push_back(fmt::format("{}={}", g.symbols()[i], sizes[i]));
  }
  Status failure;
  // Casts and fusions were decided at planning time and are part of the graph;
  // their failures would have failed plan_graph, so none are passed on here.
  SWITCHYARD_ASSIGN_OR_RETURN(const std::vector<BackendId> homes,
                              external_homes(g, plan.options()));
  std::unique_ptr<BucketPlan> bp = detail::build_bucket(
      g, order, homes, *plan.table(), plan.options(), {},
      fmt::format("unplanned({})", fmt::join(parts, ",")), exact, exact, failure);
  // Note [Run-phase lookups]
  // A bucket planned here is a dispatch decision the seal did not see. Its
  // resolutions go to the registry's run-phase entry point: a node that falls off
  // the selected backend at these sizes (a kernel that does not admit them, say)
  // becomes a run-phase slow-path row with its role, in every later report; one
  // whose (backend, op, dtype) no build record predicted is also a surprise,
  // warned about once with its call site. Within one graph every node was
  // planned at load, so its shapes are predicted: the row, not a surprise, is
  // what an unplanned bucket of the same graph leaves.
  if (plan.options().record_in_registry) {
    Registry& registry =
        plan.options().registry != nullptr ? *plan.options().registry : global_registry();
    record_bucket(plan, bp->report, registry, /*build=*/false);
  }
  if (!failure.is_ok()) return failure;
  return bp;
}

}  // namespace switchyard
