// The executor: arenas, operand arrays and the dispatch loop.
#include "switchyard/executor.h"

#include <chrono>
#include <cstdlib>
#include <cstring>
#include <map>
#include <new>
#include <set>
#include <tuple>

#include <fmt/format.h>

#include "switchyard/bucket_plan.h"
#include "switchyard/dispatch.h"

namespace switchyard {
namespace {

// One bucket, ready to run: arenas, the operand views and what to patch per run.
struct Instance {
  const BucketPlan* plan = nullptr;
  std::unique_ptr<BucketPlan> owned;  // for unplanned sizes
  std::array<std::byte*, kBackendCount> arena{};
  std::vector<TensorView> views;
  std::vector<ViewLayout> layouts;
  // Per caller tensor (inputs then outputs): the operands that read or write it,
  // and the pointer they were last built with. A run re-points only the operands of
  // tensors whose pointer changed, so reusing buffers costs nothing per node.
  std::vector<std::vector<std::uint32_t>> external;
  std::vector<void*> external_bound;
  std::vector<std::int64_t> bound_sizes;
  bool bound = false;
  // Whether this run's binding (sizes or caller tensors) differs from the last
  // run's: set by prepare_run.
  bool rebound = false;
  // Note [Recorded runs]: the backend whose memory records every step (-1: the
  // bucket cannot be recorded), the runs in a row with the current binding (this
  // one included), and the recording of that binding, if made.
  int record_backend = -1;
  int binding_runs = 0;
  void* recording = nullptr;
};

}  // namespace

// Note [Recorded runs]: the run of a binding that is recorded.
constexpr int kRecordOnRun = 3;

struct Executor::State {
  std::shared_ptr<const ExecutionPlan> plan;
  ExecutorOptions options;
  std::array<BackendMemory*, kBackendCount> memory{};
  // Per backend: the stream its kernels and copies run on (the caller's from
  // ExecutorOptions::streams, else one this executor created), and whether it was
  // created here, for the backends the plan uses (Note [One stream per executor]).
  std::array<void*, kBackendCount> streams{};
  std::array<bool, kBackendCount> stream_made{};
  std::array<bool, kBackendCount> used{};
  std::vector<std::unique_ptr<Instance>> planned;
  std::vector<std::unique_ptr<Instance>> unplanned;
  // Per graph value: its index among the external tensors, or -1.
  std::vector<std::int32_t> external_index;
  std::vector<void*> external_ptrs;
  std::vector<std::int64_t> sizes;
  // Note [Uploaded constants]
  // A constant that a kernel on another backend reads (a weight, on the GPU) is
  // copied there once, when the first bucket that needs it is prepared, into an
  // allocation of its own that every bucket shares: a model's weights live on
  // the device once, however many shape buckets the plan has. Per graph value
  // and backend: the copy, or null.
  std::vector<std::array<void*, kBackendCount>> uploaded;
  // Constants packed for the siblings that read them packed (Note [Prepacked
  // weights]), made like uploads: once, shared by every bucket.
  using PackedKey = std::tuple<std::int32_t, BackendId, const WeightPacking*>;
  std::map<PackedKey, void*> packed;
  // Bytes of constants uploaded and to upload while the executor is created
  // (ExecutorOptions::on_upload).
  std::int64_t upload_done = 0, upload_total = 0;
  ExecStats stats;
  std::chrono::steady_clock::time_point run_start;

  ~State() {
    for (BackendId b : kAllBackends) {
      const auto i = static_cast<std::size_t>(b);
      if (stream_made[i] && streams[i] != nullptr) memory[i]->destroy_stream(streams[i]);
    }
    for (auto* list : {&planned, &unplanned}) {
      for (auto& inst : *list) release(*inst);
    }
    for (const auto& copies : uploaded) {
      for (BackendId b : kAllBackends) {
        void* p = copies[static_cast<std::size_t>(b)];
        if (p != nullptr) memory[static_cast<std::size_t>(b)]->deallocate(p);
      }
    }
    for (const auto& [key, p] : packed) {
      if (p != nullptr) memory[static_cast<std::size_t>(std::get<1>(key))]->deallocate(p);
    }
  }

  // Note [One stream per executor]
  // A device backend runs an executor's kernels and copies in order on one stream,
  // so steps need no events between them; the host waits once, at the end of a run
  // (finish). The stream is made through the backend's memory hooks the first time
  // a bucket that uses the backend is prepared, so that exec names no device API
  // and an executor of a CPU-only plan makes none. A caller may pass its own in
  // ExecutorOptions::streams; this executor then neither makes nor destroys one.
  Status use_backend(BackendId b) {
    const auto i = static_cast<std::size_t>(b);
    if (used[i]) return Status::ok();
    if (memory[i] == nullptr) {
      return unavailable_error(fmt::format(
          "the plan puts work on backend {}, and the executor has no memory for it", name(b)));
    }
    if (streams[i] == nullptr) {
      Result<void*> stream = memory[i]->create_stream();
      if (!stream.is_ok()) {
        return stream.status().with_context(fmt::format("making a stream on {}", name(b)));
      }
      streams[i] = *stream;
      stream_made[i] = true;
    }
    used[i] = true;
    return Status::ok();
  }

  // Waits for every stream the plan uses: a run returns with its outputs written.
  Status finish() {
    for (BackendId b : kAllBackends) {
      const auto i = static_cast<std::size_t>(b);
      if (!used[i] || streams[i] == nullptr) continue;
      SWITCHYARD_RETURN_IF_ERROR(
          memory[i]
              ->synchronize(streams[i])
              .with_context(fmt::format("waiting for the work queued on {}", name(b))));
    }
    return Status::ok();
  }

  void release(Instance& inst) {
    drop_recording(inst);
    for (BackendId b : kAllBackends) {
      auto i = static_cast<std::size_t>(b);
      if (inst.arena[i] != nullptr) memory[i]->deallocate(inst.arena[i]);
      inst.arena[i] = nullptr;
    }
  }

  BackendMemory* memory_for(BackendId b) const { return memory[static_cast<std::size_t>(b)]; }

  // The backend that drives a copy step: the side that is not host memory
  // (backend_memory.h), on its own stream.
  BackendId copy_driver(const TensorView* ops) const {
    return memory_for(ops[0].backend())->host_addressable() ? ops[1].backend() : ops[0].backend();
  }

  void drop_recording(Instance& inst) {
    if (inst.recording == nullptr) return;
    memory_for(static_cast<BackendId>(inst.record_backend))->destroy_recording(inst.recording);
    inst.recording = nullptr;
  }

  // The backend that can record every step of the bucket, or -1: all steps are
  // kernels of one backend, and its memory records streams.
  int recordable_backend(const BucketPlan& bp) const {
    if (bp.steps.empty()) return -1;
    const BackendId b = bp.steps.front().backend;
    for (const PlannedStep& s : bp.steps) {
      if (s.kind != StepKind::kKernel || s.backend != b) return -1;
    }
    BackendMemory* m = memory_for(b);
    return m != nullptr && m->can_capture() ? static_cast<int>(b) : -1;
  }

  void* storage(const Instance& inst, const OperandRef& ref) const {
    const Graph& g = plan->graph();
    const Value& v = g.value(ref.value);
    const ValueId base = v.kind == ValueKind::kView ? v.source : ref.value;
    if (ref.buffer >= 0) {
      const BufferPlan& buf = inst.plan->buffers[ref.buffer];
      if (buf.packing != nullptr) {
        const auto it = packed.find({buf.upload.index, buf.backend, buf.packing});
        return it != packed.end() ? it->second : nullptr;
      }
      if (buf.upload.valid()) {
        return uploaded[static_cast<std::size_t>(buf.upload.index)]
                       [static_cast<std::size_t>(buf.backend)];
      }
      return inst.arena[static_cast<std::size_t>(buf.backend)] + buf.offset;
    }
    const Value& bv = g.value(base);
    if (bv.kind == ValueKind::kConstant) return const_cast<void*>(bv.data);
    const std::int32_t ext = external_index[base.index];
    return ext >= 0 ? external_ptrs[ext] : nullptr;
  }

  static TensorView make_view(void* data, DType dtype, const ViewLayout& l, BackendId b) {
    return TensorView::strided(
        data, dtype, l.shape,
        std::span<const std::int64_t>(l.strides.data(), std::size_t(l.shape.rank())), 0, b);
  }

  Status prepare(Instance& inst) {
    const BucketPlan& bp = *inst.plan;
    for (BackendId b : kAllBackends) {
      const auto i = static_cast<std::size_t>(b);
      if (bp.arena_bytes[i] == 0) continue;
      SWITCHYARD_RETURN_IF_ERROR(use_backend(b));
      SWITCHYARD_ASSIGN_OR_RETURN(void* p, memory[i]->allocate(bp.arena_bytes[i]));
      inst.arena[i] = static_cast<std::byte*>(p);
    }
    for (const PlannedStep& s : bp.steps) SWITCHYARD_RETURN_IF_ERROR(use_backend(s.backend));
    inst.record_backend = options.record_runs ? recordable_backend(bp) : -1;
    inst.views.resize(bp.operands.size());
    inst.layouts.resize(bp.operands.size());
    inst.external.assign(external_ptrs.size(), {});
    inst.external_bound.assign(external_ptrs.size(), nullptr);
    for (std::uint32_t i = 0; i < bp.operands.size(); ++i) {
      const OperandRef& ref = bp.operands[i];
      const Value& v = plan->graph().value(ref.value);
      const ValueId base = v.kind == ValueKind::kView ? v.source : ref.value;
      if (ref.buffer < 0 && external_index[base.index] >= 0) {
        inst.external[static_cast<std::size_t>(external_index[base.index])].push_back(i);
      }
    }
    // Constants needed on other backends, once for all buckets (Note [Uploaded
    // constants]).
    for (const BufferPlan& buf : bp.buffers) {
      if (buf.packing != nullptr) {
        SWITCHYARD_RETURN_IF_ERROR(pack(buf));
        continue;
      }
      if (!buf.upload.valid()) continue;
      void*& copy = uploaded[static_cast<std::size_t>(buf.upload.index)]
                            [static_cast<std::size_t>(buf.backend)];
      if (copy != nullptr) continue;
      const Value& c = plan->graph().value(buf.upload);
      auto context = [&] {
        return fmt::format("uploading constant '{}' ({} bytes) to {}", c.name, buf.bytes,
                           name(buf.backend));
      };
      Result<void*> p = memory_for(buf.backend)->allocate(buf.bytes);
      if (!p.is_ok()) return p.status().with_context(context());
      copy = *p;
      const TensorView src = TensorView::contiguous(const_cast<void*>(c.data), c.dtype, c.shape);
      const TensorView dst = TensorView::contiguous(copy, c.dtype, c.shape, buf.backend);
      SWITCHYARD_RETURN_IF_ERROR(memory_for(buf.backend)
                                     ->copy(src, dst, streams[std::size_t(buf.backend)])
                                     .with_context(context()));
      upload_done += buf.bytes;
      if (options.on_upload && upload_total > 0) options.on_upload(upload_done, upload_total);
    }
    return finish();
  }

  // Note [Prepacked weights]: packs constant buf.upload for the sibling that
  // reads it packed, unless an earlier bucket did. The packing reads the
  // constant where it lives (host memory) and writes memory the backend can
  // address from the host, on this executor's threads.
  Status pack(const BufferPlan& buf) {
    void*& copy = packed[{buf.upload.index, buf.backend, buf.packing}];
    if (copy != nullptr) return Status::ok();
    const Value& c = plan->graph().value(buf.upload);
    auto context = [&] {
      return fmt::format("packing constant '{}' ({} bytes) for {}", c.name, buf.bytes,
                         name(buf.backend));
    };
    BackendMemory* m = memory_for(buf.backend);
    if (!m->host_addressable()) {
      return unimplemented_error(fmt::format(
          "{}: packing at load writes host memory, and {}'s is not", context(), name(buf.backend)));
    }
    Result<void*> p = m->allocate(buf.bytes);
    if (!p.is_ok()) return p.status().with_context(context());
    copy = *p;
    const TensorView src = TensorView::contiguous(const_cast<void*>(c.data), c.dtype, c.shape);
    ExecContext ctx{.runner = options.runner, .comm = nullptr};
    SWITCHYARD_RETURN_IF_ERROR(buf.packing->pack(src, copy, ctx).with_context(context()));
    stats.packed_weights += 1;
    stats.packed_bytes += buf.bytes;
    upload_done += buf.bytes;
    if (options.on_upload && upload_total > 0) options.on_upload(upload_done, upload_total);
    return Status::ok();
  }

  // Rebuilds every operand view for new symbol sizes (once per change of sizes).
  Status bind_sizes(Instance& inst) {
    const BucketPlan& bp = *inst.plan;
    for (std::size_t i = 0; i < bp.operands.size(); ++i) {
      const OperandRef& ref = bp.operands[i];
      SWITCHYARD_ASSIGN_OR_RETURN(inst.layouts[i], operand_layout(plan->graph(), ref.value, sizes));
      inst.views[i] = make_view(storage(inst, ref), plan->graph().value(ref.value).dtype,
                                inst.layouts[i], ref.backend);
    }
    inst.bound_sizes = sizes;
    inst.bound = true;
    inst.external_bound = external_ptrs;
    return Status::ok();
  }

  // The dispatch loop: pre-resolved function pointers over pre-built operand spans.
  // kProfile adds a clock read around each step (ExecutorOptions::profile) and
  // kCheckFinite a scan of each kernel's output (run_checking_finite); the plain
  // instantiation has neither.
  template <bool kProfile, bool kCheckFinite = false>
  Status run_steps(Instance& inst) {
    SWITCHYARD_RETURN_IF_ERROR((queue_steps<kProfile, kCheckFinite>(inst)));
    return finish_run();
  }

  // The end of a run: its host time so far (ExecStats::last_queue_ns), then the
  // wait for the devices.
  Status finish_run() {
    stats.last_queue_ns =
        std::chrono::duration<double, std::nano>(std::chrono::steady_clock::now() - run_start)
            .count();
    return finish();
  }

  // Note [Recorded runs]. The third consecutive run of a binding is recorded
  // (nothing runs while recording) and the recording replayed; a recording stays
  // while the binding does.
  Status run_recorded(Instance& inst) {
    const auto b = static_cast<BackendId>(inst.record_backend);
    BackendMemory* m = memory_for(b);
    void* stream = streams[static_cast<std::size_t>(b)];
    if (inst.rebound) {
      drop_recording(inst);
      inst.binding_runs = 0;
    }
    if (inst.recording == nullptr && ++inst.binding_runs < kRecordOnRun) {
      return run_steps<false>(inst);
    }
    if (inst.recording == nullptr) {
      SWITCHYARD_RETURN_IF_ERROR(m->begin_capture(stream).with_context(
          fmt::format("recording bucket '{}' on {}", inst.plan->name, name(b))));
      const Status queued = queue_steps<false>(inst);
      Result<void*> recording = m->end_capture(stream);
      // A kernel's own error: the plain run below reports it with its node.
      if (!queued.is_ok() || !recording.is_ok()) {
        if (recording.is_ok()) m->destroy_recording(*recording);
        if (queued.is_ok()) {
          ++stats.recording_failures;
          stats.last_recording_failure =
              fmt::format("bucket '{}': {}", inst.plan->name, recording.status().to_string());
          inst.record_backend = -1;
        }
        return run_steps<false>(inst);
      }
      inst.recording = *recording;
      ++stats.recordings;
    }
    SWITCHYARD_RETURN_IF_ERROR(
        m->replay(inst.recording, stream)
            .with_context(fmt::format("replaying bucket '{}' on {}", inst.plan->name, name(b))));
    ++stats.replays;
    return finish_run();
  }

  template <bool kProfile, bool kCheckFinite = false>
  Status queue_steps(Instance& inst) {
    using Clock = std::chrono::steady_clock;
    ExecProfile* profile = options.profile;
    if constexpr (kProfile) {
      profile->node_ns.resize(plan->graph().nodes().size(), 0.0);
    }
    ExecContext ctx{.runner = options.runner, .comm = options.comm};
    const TensorView* views = inst.views.data();
    for (const PlannedStep& step : inst.plan->steps) {
      const TensorView* ops = views + step.first_operand;
      [[maybe_unused]] Clock::time_point start;
      if constexpr (kProfile) start = Clock::now();
      if (step.kind == StepKind::kKernel) [[likely]] {
        ctx.stream = streams[static_cast<std::size_t>(step.backend)];
        const KernelCall call{std::span<const TensorView>(ops, step.num_inputs),
                              std::span<const TensorView>(ops + step.num_inputs, 1),
                              *step.params,
                              ctx,
                              step.entry->name,
                              step.entry->data.get()};
        Status st = step.fn(call);
        if (!st.is_ok()) [[unlikely]]
          return node_error(step, st);
        if constexpr (kCheckFinite) {
          SWITCHYARD_RETURN_IF_ERROR(check_finite(step, ops[step.num_inputs]));
        }
      } else {
        const BackendId driver = copy_driver(ops);
        Status st =
            memory_for(driver)->copy(ops[0], ops[1], streams[static_cast<std::size_t>(driver)]);
        if (!st.is_ok()) [[unlikely]]
          return node_error(step, st);
      }
      if constexpr (kProfile) {
        if (profile->wait_for_devices) {
          // Note [Profiling a device]: the driver of a copy, or the kernel's backend.
          const BackendId b = step.kind == StepKind::kKernel ? step.backend : copy_driver(ops);
          void* stream = streams[static_cast<std::size_t>(b)];
          if (stream != nullptr) {
            Status st = memory_for(b)->synchronize(stream);
            if (!st.is_ok()) [[unlikely]]
              return node_error(step, st);
          }
        }
        const double ns = std::chrono::duration<double, std::nano>(Clock::now() - start).count();
        if (step.node >= 0) {
          profile->node_ns[static_cast<std::size_t>(step.node)] += ns;
        } else {
          profile->copy_ns += ns;
        }
      }
    }
    return Status::ok();
  }

  // Binds the caller's tensors and picks the bucket: everything a run does before
  // its steps.
  Result<Instance*> prepare_run(std::span<const TensorView> inputs,
                                std::span<const TensorView> outputs) {
    const std::uint64_t generation = plan->table_generation();
    if (generation != 0 && generation != current_generation()) {
      return failed_precondition_error(
          fmt::format("run: the plan was made against table generation {}, the published table is "
                      "generation {}; plan again",
                      generation, current_generation()));
    }
    SWITCHYARD_RETURN_IF_ERROR(bind_external(inputs, outputs));
    SWITCHYARD_ASSIGN_OR_RETURN(Instance * inst, select());
    inst->rebound = !inst->bound || inst->bound_sizes != sizes;
    if (inst->rebound) {
      SWITCHYARD_RETURN_IF_ERROR(bind_sizes(*inst));
    } else {
      for (std::size_t ext = 0; ext < inst->external.size(); ++ext) {
        if (inst->external_bound[ext] == external_ptrs[ext]) continue;
        inst->rebound = true;
        for (std::uint32_t operand : inst->external[ext]) {
          const OperandRef& ref = inst->plan->operands[operand];
          inst->views[operand] = make_view(external_ptrs[ext], plan->graph().value(ref.value).dtype,
                                           inst->layouts[operand], ref.backend);
        }
        inst->external_bound[ext] = external_ptrs[ext];
      }
    }
    ++stats.runs;
    if (stats.last_bucket != inst->plan->name) stats.last_bucket = inst->plan->name;
    return inst;
  }

  Status check_finite(const PlannedStep& s, const TensorView& out) const {
    if (!memory_for(s.backend)->host_addressable()) return Status::ok();
    const std::optional<NonFinite> bad = first_non_finite(out);
    if (!bad) return Status::ok();
    return node_error(s, failed_precondition_error(fmt::format(
                             "wrote {} at element {} of {}, the first non-finite value of the run",
                             bad->value, bad->index, out.shape().to_string())));
  }

  Status node_error(const PlannedStep& s, const Status& st) const {
    if (s.node < 0) return st.with_context(fmt::format("copy to {}", name(s.backend)));
    const Node& n = plan->graph().node(s.node);
    return st.with_context(fmt::format("node '{}' ({}, kernel {} on {})", n.name, name(n.op),
                                       s.entry ? s.entry->name : "?", name(s.backend)));
  }

  Status bind_external(std::span<const TensorView> inputs, std::span<const TensorView> outputs) {
    const Graph& g = plan->graph();
    const auto in_ids = plan->inputs();
    const auto out_ids = plan->outputs();
    if (inputs.size() != in_ids.size() || outputs.size() != out_ids.size()) {
      return invalid_argument_error(
          fmt::format("run: the plan takes {} inputs and {} outputs, got {} and {}", in_ids.size(),
                      out_ids.size(), inputs.size(), outputs.size()));
    }
    std::fill(sizes.begin(), sizes.end(), -1);
    // Each tensor on the backend the plan keeps it on (Note [Caller tensors on a
    // device]): the host unless the plan's options say otherwise.
    auto bind = [&](const TensorView& t, ValueId id, BackendId home, bool deduce) -> Status {
      const Value& v = g.value(id);
      if (t.dtype() != v.dtype || t.backend() != home || !t.is_contiguous() ||
          t.rank() != v.shape.rank()) {
        return invalid_argument_error(
            fmt::format("run: '{}' must be a contiguous {} tensor on {} of shape {}, got {}",
                        v.name, name(v.dtype), name(home), g.shape_string(v.shape), describe(t)));
      }
      for (int d = 0; d < t.rank(); ++d) {
        const std::int64_t want = v.shape[d];
        std::int64_t expect = want;
        if (is_symbolic(want)) {
          std::int64_t& size = sizes[symbol_index(want)];
          if (size < 0 && deduce) size = t.dim(d);
          expect = size;
        }
        if (expect != t.dim(d)) {
          return invalid_argument_error(
              fmt::format("run: '{}' has shape {}; the plan expects {} ({})", v.name,
                          t.shape().to_string(), g.shape_string(v.shape),
                          is_symbolic(want) ? "a symbol sized differently elsewhere"
                                            : "a fixed dimension differs"));
        }
      }
      return Status::ok();
    };
    for (std::size_t i = 0; i < inputs.size(); ++i) {
      SWITCHYARD_RETURN_IF_ERROR(bind(inputs[i], in_ids[i], plan->input_backends()[i], true));
      external_ptrs[i] = inputs[i].data();
    }
    for (std::int64_t s : sizes) {
      if (s < 0) return invalid_argument_error("run: a symbolic dimension appears in no input");
    }
    for (std::size_t i = 0; i < outputs.size(); ++i) {
      SWITCHYARD_RETURN_IF_ERROR(bind(outputs[i], out_ids[i], plan->output_backends()[i], false));
      external_ptrs[in_ids.size() + i] = outputs[i].data();
    }
    return Status::ok();
  }

  Result<Instance*> select() {
    for (auto& inst : planned) {
      if (inst->plan->accepts(sizes)) return inst.get();
    }
    for (auto& inst : unplanned) {
      if (inst->plan->accepts(sizes)) {
        ++stats.unplanned_runs;
        return inst.get();
      }
    }
    if (!options.allow_unplanned_shapes) {
      std::vector<std::string> names;
      for (const auto& inst : planned) names.push_back(inst->plan->name);
      return failed_precondition_error(
          fmt::format("run: sizes [{}] fall outside every planned bucket ({})",
                      fmt::join(sizes, ", "), fmt::join(names, ", ")));
    }
    // The slow path: a run-time lookup for every node at these sizes.
    SWITCHYARD_ASSIGN_OR_RETURN(std::unique_ptr<BucketPlan> bp,
                                plan_bucket_for_sizes(*plan, sizes));
    auto inst = std::make_unique<Instance>();
    inst->owned = std::move(bp);
    inst->plan = inst->owned.get();
    Status prepared = prepare(*inst);
    if (!prepared.is_ok()) {
      release(*inst);
      return prepared;
    }
    ++stats.unplanned_runs;
    unplanned.push_back(std::move(inst));
    return unplanned.back().get();
  }
};

Executor::Executor(std::unique_ptr<State> state) : state_(std::move(state)) {}
Executor::Executor(Executor&&) noexcept = default;
Executor& Executor::operator=(Executor&&) noexcept = default;
Executor::~Executor() = default;

const ExecStats& Executor::stats() const { return state_->stats; }
const ExecutionPlan& Executor::plan() const { return *state_->plan; }

Result<Executor> Executor::create(std::shared_ptr<const ExecutionPlan> plan,
                                  ExecutorOptions options) {
  if (plan == nullptr) return invalid_argument_error("Executor::create: no plan");
  auto state = std::make_unique<State>();
  state->plan = std::move(plan);
  state->options = options;
  for (BackendId b : kAllBackends) {
    const auto i = static_cast<std::size_t>(b);
    state->memory[i] =
        options.memory[i] != nullptr ? options.memory[i] : state->plan->table()->backend_memory(b);
    state->streams[i] = options.streams[i];
  }
  const Graph& g = state->plan->graph();
  state->external_index.assign(g.values().size(), -1);
  state->uploaded.assign(g.values().size(), {});
  std::int32_t next = 0;
  for (ValueId id : state->plan->inputs()) state->external_index[id.index] = next++;
  for (ValueId id : state->plan->outputs()) state->external_index[id.index] = next++;
  state->external_ptrs.assign(static_cast<std::size_t>(next), nullptr);
  state->sizes.assign(g.symbols().size(), 0);
  // What the buckets will upload, each constant once per backend (Note [Uploaded
  // constants]), for the progress callback.
  std::set<State::PackedKey> counted;
  for (std::size_t i = 0; i < state->plan->bucket_count(); ++i) {
    for (const BufferPlan& buf : state->plan->bucket(i).buffers) {
      if (!buf.upload.valid()) continue;
      if (counted.insert({buf.upload.index, buf.backend, buf.packing}).second) {
        state->upload_total += buf.bytes;
      }
    }
  }
  for (std::size_t i = 0; i < state->plan->bucket_count(); ++i) {
    auto inst = std::make_unique<Instance>();
    inst->plan = &state->plan->bucket(i);
    Status prepared = state->prepare(*inst);
    state->planned.push_back(std::move(inst));
    SWITCHYARD_RETURN_IF_ERROR(prepared);
  }
  state->upload_total = 0;  // later uploads (an unplanned bucket's) report nothing
  return Executor(std::move(state));
}

Status Executor::run(std::span<const TensorView> inputs, std::span<const TensorView> outputs) {
  state_->run_start = std::chrono::steady_clock::now();
  SWITCHYARD_ASSIGN_OR_RETURN(Instance * inst, state_->prepare_run(inputs, outputs));
  if (state_->options.profile != nullptr) [[unlikely]] {
    return state_->run_steps<true>(*inst);
  }
  if (inst->record_backend >= 0) return state_->run_recorded(*inst);
  return state_->run_steps<false>(*inst);
}

Status Executor::run_checking_finite(std::span<const TensorView> inputs,
                                     std::span<const TensorView> outputs) {
  state_->run_start = std::chrono::steady_clock::now();
  SWITCHYARD_ASSIGN_OR_RETURN(Instance * inst, state_->prepare_run(inputs, outputs));
  return state_->run_steps<false, true>(*inst);
}

}  // namespace switchyard
