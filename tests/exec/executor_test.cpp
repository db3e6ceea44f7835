#include "switchyard/executor.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <functional>
#include <map>
#include <memory>
#include <set>

#include "backends/cpu/elementwise/elementwise.h"
#include "plan/test_kernels.h"
#include "switchyard/backends.h"
#include "switchyard/bucket_plan.h"
#include "switchyard/half.h"
#include "switchyard/thread_pool.h"

namespace switchyard {
namespace {

using namespace switchyard::testing;
using ::testing::HasSubstr;

// Runs `graph` node by node with the kernel `kernels` names for each op, each
// output in its own vector: the reference a planned run must reproduce.
std::vector<std::vector<float>> run_node_by_node(const Graph& graph,
                                                 const std::map<OpKind, KernelFn>& kernels,
                                                 const std::vector<std::vector<float>>& inputs,
                                                 std::vector<std::int64_t> sizes = {}) {
  std::vector<std::vector<float>> store(graph.values().size());
  std::vector<ValueId> in_ids = graph.inputs();
  for (std::size_t i = 0; i < in_ids.size(); ++i) store[in_ids[i].index] = inputs[i];
  auto view = [&](ValueId id) {
    const Value& v = graph.value(id);
    const ValueId base = v.kind == ValueKind::kView ? v.source : id;
    const Value& bv = graph.value(base);
    void* data =
        bv.kind == ValueKind::kConstant ? const_cast<void*>(bv.data) : store[base.index].data();
    ViewLayout l = operand_layout(graph, id, sizes).value();
    return TensorView::strided(
        data, v.dtype, l.shape,
        std::span<const std::int64_t>(l.strides.data(), std::size_t(l.shape.rank())));
  };
  ExecContext ctx;
  const std::vector<std::int32_t> order = graph.topological_order().value();
  for (std::int32_t n : order) {
    const Node& node = graph.node(n);
    std::vector<TensorView> in;
    for (ValueId id : node.inputs) in.push_back(view(id));
    const Shape out_shape = concrete_shape(graph.value(node.output).shape, sizes);
    store[node.output.index].assign(static_cast<std::size_t>(out_shape.numel()), 0.0f);
    std::vector<TensorView> out = {view(node.output)};
    const KernelCall call{in, out, node.params, ctx};
    SWITCHYARD_CHECK(kernels.at(node.op)(call).is_ok());
  }
  std::vector<std::vector<float>> outs;
  for (ValueId o : graph.outputs()) outs.push_back(store[o.index]);
  return outs;
}

std::shared_ptr<const ExecutionPlan> plan_or_die(const Graph& g, TableSnapshot table,
                                                 const PlanOptions& options = {}) {
  Result<ExecutionPlan> plan = plan_graph(g, std::move(table), options);
  SWITCHYARD_CHECK_MSG(plan.is_ok(), plan.status().to_string());
  return std::make_shared<const ExecutionPlan>(std::move(plan).value());
}

// x [T, 8] -> fc1 (16) + bias -> h * h -> fc2 (8) + x: the ops the built-in CPU
// table has (add, mul, matmul).
Graph builtin_mlp(std::int64_t tokens) {
  GraphBuilder b;
  ValueId x = b.input("x", DType::kF32, {tokens, 8});
  ValueId w1 = b.constant_f32("w1", {16, 8}, ramp(128, 1));
  ValueId b1 = b.constant_f32("b1", {16}, ramp(16, 2));
  ValueId w2 = b.constant_f32("w2", {8, 16}, ramp(128, 3));
  ValueId h = b.add(b.matmul(x, w1, "fc1"), b.broadcast(b1, {tokens, 16}), "fc1_bias");
  ValueId sq = b.mul(h, h, "square");
  b.output(b.add(b.matmul(sq, w2, "fc2"), x, "residual"));
  return std::move(b).build().value();
}

// The kernel the plan runs for every node of `op` (they must agree).
KernelFn chosen_fn(const ExecutionPlan& plan, OpKind op) {
  KernelFn fn = nullptr;
  for (const PlannedStep& step : plan.bucket(0).steps) {
    if (step.kind != StepKind::kKernel || plan.graph().node(step.node).op != op) continue;
    SWITCHYARD_CHECK_MSG(fn == nullptr || fn == step.fn, "the nodes of one op differ");
    fn = step.fn;
  }
  SWITCHYARD_CHECK_MSG(fn != nullptr, "no node of the op");
  return fn;
}

TEST(Executor, BuiltinMlpMatchesItsKernelsNodeByNode) {
  const Graph g = builtin_mlp(5);
  auto plan = plan_or_die(g, current_table());
  const KernelFn matmul = chosen_fn(*plan, OpKind::kMatmul);
  Result<Executor> exec = Executor::create(plan);
  ASSERT_TRUE(exec.is_ok()) << exec.status().to_string();
  std::vector<float> x = ramp(40, 9), y(40, 0.0f);
  const TensorView in = TensorView::contiguous(x.data(), DType::kF32, {5, 8});
  const TensorView out = TensorView::contiguous(y.data(), DType::kF32, {5, 8});
  ASSERT_TRUE(exec->run({&in, 1}, {&out, 1}).is_ok());
  const auto expect = run_node_by_node(
      g,
      {{OpKind::kMatmul, matmul},
       {OpKind::kAdd, cpu::binary_kernel(OpKind::kAdd, DType::kF32, cpu::Variant::kRef)},
       {OpKind::kMul, cpu::binary_kernel(OpKind::kMul, DType::kF32, cpu::Variant::kRef)}},
      {x});
  // The same matmul kernel, in the same order: the same bytes (the elementwise
  // siblings round exactly, so the reference's add and mul give the same bits).
  EXPECT_EQ(y, expect[0]);
  EXPECT_EQ(exec->stats().runs, 1u);
  EXPECT_EQ(exec->stats().unplanned_runs, 0u);
  // A second run with other data reuses the pre-built operand arrays.
  std::vector<float> x2 = ramp(40, 10);
  const TensorView in2 = TensorView::contiguous(x2.data(), DType::kF32, {5, 8});
  ASSERT_TRUE(exec->run({&in2, 1}, {&out, 1}).is_ok());
  const auto expect2 = run_node_by_node(
      g,
      {{OpKind::kMatmul, matmul},
       {OpKind::kAdd, cpu::binary_kernel(OpKind::kAdd, DType::kF32, cpu::Variant::kRef)},
       {OpKind::kMul, cpu::binary_kernel(OpKind::kMul, DType::kF32, cpu::Variant::kRef)}},
      {x2});
  EXPECT_EQ(y, expect2[0]);
}

TEST(Executor, InsertedCastsRunOnTheBuiltinTable) {
  // The built-in CPU table without its bf16 add keeps f32 add and the bf16 <-> f32
  // casts: the planner widens, adds in f32 and rounds once, as ops.md defines add.
  auto table = std::make_shared<KernelBindingTable>(*current_table());
  const DTypeList bf16_add{DType::kBF16, DType::kBF16, DType::kBF16};
  table->remove_if([&](const KernelBindingTable::Slot& s, const BindingEntry&) {
    return s.key == BindingKey(OpKind::kAdd) && s.dtypes == bf16_add;
  });
  ASSERT_TRUE(table->finalize().is_ok());
  GraphBuilder b;
  ValueId x = b.input("x", DType::kBF16, {2, 3});
  ValueId y = b.input("y", DType::kBF16, {2, 3});
  b.output(b.add(x, y, "sum"));
  auto plan = plan_or_die(std::move(b).build().value(), table);
  EXPECT_EQ(plan->report().casts.size(), 3u);
  std::vector<std::uint16_t> xs(6), ys(6), out(6);
  const std::vector<float> xv = ramp(6, 1), yv = ramp(6, 2);
  for (std::size_t i = 0; i < 6; ++i) {
    xs[i] = f32_to_bf16(xv[i] * 100.0f);
    ys[i] = f32_to_bf16(yv[i]);
  }
  const TensorView ins[] = {TensorView::contiguous(xs.data(), DType::kBF16, {2, 3}),
                            TensorView::contiguous(ys.data(), DType::kBF16, {2, 3})};
  const TensorView o = TensorView::contiguous(out.data(), DType::kBF16, {2, 3});
  ASSERT_TRUE(Executor::create(plan)->run(ins, {&o, 1}).is_ok());
  for (std::size_t i = 0; i < 6; ++i) {
    EXPECT_EQ(out[i], f32_to_bf16(bf16_to_f32(xs[i]) + bf16_to_f32(ys[i]))) << i;
  }
}

TEST(ExecutorConcurrent, ThreadPoolRunnerGivesTheSerialBytes) {
  const Graph g = builtin_mlp(64);
  auto plan = plan_or_die(g, current_table());
  ThreadPool pool(2);
  Result<Executor> serial = Executor::create(plan);
  Result<Executor> parallel = Executor::create(plan, {.runner = &pool});
  ASSERT_TRUE(serial.is_ok() && parallel.is_ok());
  std::vector<float> x = ramp(64 * 8, 4), a(64 * 8), b(64 * 8);
  const TensorView in = TensorView::contiguous(x.data(), DType::kF32, {64, 8});
  const TensorView out_a = TensorView::contiguous(a.data(), DType::kF32, {64, 8});
  const TensorView out_b = TensorView::contiguous(b.data(), DType::kF32, {64, 8});
  ASSERT_TRUE(serial->run({&in, 1}, {&out_a, 1}).is_ok());
  ASSERT_TRUE(parallel->run({&in, 1}, {&out_b, 1}).is_ok());
  EXPECT_EQ(a, b);
}

// The FFN block of a transformer: rms_norm * w, swiglu FFN, residual add.
Graph ffn_block(std::int64_t tokens_dim, bool symbolic) {
  GraphBuilder b;
  const std::int64_t t = symbolic ? b.symbol("tokens") : tokens_dim;
  ValueId x = b.input("x", DType::kF32, {t, 8});
  ValueId nw = b.constant_f32("norm_w", {8}, ramp(8, 1));
  ValueId wg = b.constant_f32("wg", {12, 8}, ramp(96, 2));
  ValueId wu = b.constant_f32("wu", {12, 8}, ramp(96, 3));
  ValueId wd = b.constant_f32("wd", {8, 12}, ramp(96, 4));
  ValueId wo = b.constant_f32("wo", {8, 8}, ramp(64, 5));
  ValueId bo = b.constant_f32("bo", {8}, ramp(8, 6));
  ValueId n = b.mul(b.rms_norm(x, 1e-5f, "norm"), b.broadcast(nw, {t, 8}), "norm_w");
  ValueId act = b.mul(b.silu(b.matmul(n, wg, "gate"), "gate_act"), b.matmul(n, wu, "up"), "gated");
  ValueId ffn = b.matmul(act, wd, "down");
  ValueId proj = b.add(b.matmul(ffn, wo, "out_proj"), b.broadcast(bo, {t, 8}), "out_bias");
  b.output(b.add(proj, x, "residual"));
  return std::move(b).build().value();
}

const std::map<OpKind, KernelFn> kTestKernels = {
    {OpKind::kAdd, &binary_kernel<0>},      {OpKind::kMul, &binary_kernel<1>},
    {OpKind::kSilu, &unary_kernel<silu_f>}, {OpKind::kRelu, &unary_kernel<relu_f>},
    {OpKind::kMatmul, &matmul_kernel},      {OpKind::kRmsNorm, &rms_norm_kernel}};

TEST(Executor, FusedAndDecomposedBlocksMatchNodeByNode) {
  const Graph g = ffn_block(3, false);
  KernelBindingTable t;
  t.add_backend(BackendId::kCpu, host_memory());
  register_basic(t, BackendId::kCpu, "test");
  register_fused(t, BackendId::kCpu, "test");
  TableSnapshot table = finalize(std::move(t));
  PlanOptions unfused;
  unfused.enable_fusion = false;
  auto fused_plan = plan_or_die(g, table);
  auto plain_plan = plan_or_die(g, table, unfused);
  ASSERT_EQ(fused_plan->report().fusions.size(), 3u);
  std::vector<float> x = ramp(24, 7), y1(24), y2(24);
  const TensorView in = TensorView::contiguous(x.data(), DType::kF32, {3, 8});
  const TensorView o1 = TensorView::contiguous(y1.data(), DType::kF32, {3, 8});
  const TensorView o2 = TensorView::contiguous(y2.data(), DType::kF32, {3, 8});
  ASSERT_TRUE(Executor::create(fused_plan)->run({&in, 1}, {&o1, 1}).is_ok());
  ASSERT_TRUE(Executor::create(plain_plan)->run({&in, 1}, {&o2, 1}).is_ok());
  const auto expect = run_node_by_node(g, kTestKernels, {x});
  EXPECT_EQ(y2, expect[0]);
  // The fused kernels compute the same sums in the same order.
  EXPECT_EQ(y1, expect[0]);
}

TEST(Executor, ShapeBucketsAndUnplannedShapes) {
  const Graph g = ffn_block(0, true);
  KernelBindingTable t;
  t.add_backend(BackendId::kCpu, host_memory());
  register_basic(t, BackendId::kCpu, "test");
  PlanOptions options;
  options.buckets = {{"decode", {{"tokens", 1, 1}}}, {"prefill", {{"tokens", 2, 16}}}};
  auto plan = plan_or_die(g, finalize(std::move(t)), options);
  Result<Executor> exec = Executor::create(plan);
  ASSERT_TRUE(exec.is_ok()) << exec.status().to_string();
  for (std::int64_t tokens : {1, 7, 16, 3, 40, 40}) {
    std::vector<float> x = ramp(static_cast<std::size_t>(tokens * 8), 11), y(x.size());
    const TensorView in = TensorView::contiguous(x.data(), DType::kF32, {tokens, 8});
    const TensorView out = TensorView::contiguous(y.data(), DType::kF32, {tokens, 8});
    Status s = exec->run({&in, 1}, {&out, 1});
    ASSERT_TRUE(s.is_ok()) << tokens << ": " << s.to_string();
    EXPECT_EQ(y, run_node_by_node(g, kTestKernels, {x}, {tokens})[0]) << tokens;
    EXPECT_EQ(exec->stats().last_bucket, tokens == 1    ? "decode"
                                         : tokens <= 16 ? "prefill"
                                                        : "unplanned(tokens=40)");
  }
  EXPECT_EQ(exec->stats().runs, 6u);
  EXPECT_EQ(exec->stats().unplanned_runs, 2u);

  Result<Executor> strict = Executor::create(plan, {.allow_unplanned_shapes = false});
  std::vector<float> x(40 * 8), y(40 * 8);
  const TensorView in = TensorView::contiguous(x.data(), DType::kF32, {40, 8});
  const TensorView out = TensorView::contiguous(y.data(), DType::kF32, {40, 8});
  Status s = strict->run({&in, 1}, {&out, 1});
  EXPECT_EQ(s.code(), StatusCode::kFailedPrecondition);
  EXPECT_THAT(std::string(s.message()), HasSubstr("outside every planned bucket"));
}

TEST(Executor, RejectsMismatchedTensors) {
  auto plan = plan_or_die(builtin_mlp(2), current_table());
  Result<Executor> exec = Executor::create(plan);
  std::vector<float> x(16), y(16);
  const TensorView in = TensorView::contiguous(x.data(), DType::kF32, {2, 8});
  const TensorView bad_shape = TensorView::contiguous(y.data(), DType::kF32, {8, 2});
  const TensorView bad_dtype = TensorView::contiguous(y.data(), DType::kF16, {2, 8});
  const TensorView out = TensorView::contiguous(y.data(), DType::kF32, {2, 8});
  EXPECT_EQ(exec->run({&in, 1}, {&bad_shape, 1}).code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(exec->run({&bad_dtype, 1}, {&out, 1}).code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(exec->run({}, {&out, 1}).code(), StatusCode::kInvalidArgument);
  EXPECT_TRUE(exec->run({&in, 1}, {&out, 1}).is_ok());
}

TEST(Executor, KernelErrorsNameTheFailingNode) {
  KernelBindingTable t;
  t.add_backend(BackendId::kCpu, host_memory());
  register_basic(t, BackendId::kCpu, "test");
  t.register_kernel(OpKind::kTanh, f32s(2), BackendId::kCpu, &failing_kernel,
                    opts("tanh_broken", OpKind::kTanh));
  GraphBuilder b;
  ValueId x = b.input("x", DType::kF32, {4});
  b.output(b.op(OpKind::kTanh, {b.relu(x, "r")}, "squash"));
  auto plan = plan_or_die(std::move(b).build().value(), finalize(std::move(t)));
  Result<Executor> exec = Executor::create(plan);
  std::vector<float> xs(4), ys(4);
  const TensorView in = TensorView::contiguous(xs.data(), DType::kF32, {4});
  const TensorView out = TensorView::contiguous(ys.data(), DType::kF32, {4});
  Status s = exec->run({&in, 1}, {&out, 1});
  EXPECT_EQ(s.code(), StatusCode::kDataLoss);
  EXPECT_THAT(std::string(s.message()), HasSubstr("node 'squash' (tanh, kernel tanh_broken"));
}

TEST(Executor, RefusesAStalePlan) {
  auto plan = plan_or_die(builtin_mlp(2), current_table());
  Result<Executor> exec = Executor::create(plan);
  std::vector<float> x(16), y(16);
  const TensorView in = TensorView::contiguous(x.data(), DType::kF32, {2, 8});
  const TensorView out = TensorView::contiguous(y.data(), DType::kF32, {2, 8});
  ASSERT_TRUE(exec->run({&in, 1}, {&out, 1}).is_ok());
  // Publishing a new snapshot (the same kernels) moves the generation on.
  ASSERT_TRUE(publish_table(make_builtin_table().value()).is_ok());
  Status s = exec->run({&in, 1}, {&out, 1});
  EXPECT_EQ(s.code(), StatusCode::kFailedPrecondition);
  EXPECT_THAT(std::string(s.message()), HasSubstr("plan again"));
  auto fresh = plan_or_die(builtin_mlp(2), current_table());
  EXPECT_TRUE(Executor::create(fresh)->run({&in, 1}, {&out, 1}).is_ok());
}

// A stand-in device: host memory that claims not to be, and counts what it is
// asked to do, to check that the executor drives copies from the device side.
class CountingDeviceMemory final : public BackendMemory {
 public:
  Result<void*> allocate(std::int64_t bytes) override {
    ++allocations;
    return host_memory().allocate(bytes);
  }
  void deallocate(void* pointer) override { host_memory().deallocate(pointer); }
  Status copy(const TensorView& src, const TensorView& dst, void* stream) override {
    ++copies;
    return host_memory().copy(src, dst, stream);
  }
  bool host_addressable() const override { return false; }
  int allocations = 0;
  int copies = 0;
};

// The basic kernels on the cpu and on a stand-in cuda whose memory is `device`.
TableSnapshot cpu_and_device(BackendMemory& device) {
  KernelBindingTable t;
  t.add_backend(BackendId::kCpu, host_memory());
  t.add_backend(BackendId::kCuda, device);
  register_basic(t, BackendId::kCpu, "cpu");
  register_basic(t, BackendId::kCuda, "cuda");
  return finalize(std::move(t));
}

// Options that put ffn_block's two matmuls on the stand-in device.
PlanOptions ffn_on_the_device() {
  PlanOptions options;
  options.policy.fallbacks = {BackendId::kCuda};
  options.policy.pinned = {{"up", BackendId::kCuda}, {"down", BackendId::kCuda}};
  return options;
}

TEST(Executor, MemoryComesFromTheBackendSectionOfTheTable) {
  CountingDeviceMemory device;
  const Graph g = ffn_block(4, false);
  PlanOptions options = ffn_on_the_device();
  auto plan = plan_or_die(g, cpu_and_device(device), options);
  Result<Executor> exec = Executor::create(plan);
  ASSERT_TRUE(exec.is_ok()) << exec.status().to_string();
  EXPECT_GT(device.allocations, 0) << "the cuda arena must come from the cuda section";
  std::vector<float> x = ramp(32, 3), y(32);
  const TensorView in = TensorView::contiguous(x.data(), DType::kF32, {4, 8});
  const TensorView out = TensorView::contiguous(y.data(), DType::kF32, {4, 8});
  const int copies_before = device.copies;
  ASSERT_TRUE(exec->run({&in, 1}, {&out, 1}).is_ok());
  // Copies in both directions go through the side that is not host memory.
  EXPECT_EQ(device.copies - copies_before, plan->report().buckets[0].copies);
  EXPECT_EQ(y, run_node_by_node(g, kTestKernels, {x})[0]);
}

// A stand-in device with streams: records every stream it makes, waits on and
// destroys, and which stream each copy was queued on.
class StreamDeviceMemory final : public BackendMemory {
 public:
  Result<void*> allocate(std::int64_t bytes) override { return host_memory().allocate(bytes); }
  void deallocate(void* pointer) override { host_memory().deallocate(pointer); }
  Status copy(const TensorView& src, const TensorView& dst, void* stream) override {
    copy_streams.push_back(stream);
    return host_memory().copy(src, dst, stream);
  }
  bool host_addressable() const override { return false; }
  Result<void*> create_stream() override {
    ++made;
    return static_cast<void*>(&streams[made - 1]);
  }
  void destroy_stream(void* stream) override { destroyed.push_back(stream); }
  Status synchronize(void* stream) override {
    synchronized.push_back(stream);
    return sync_error;
  }
  int streams[4] = {};
  int made = 0;
  std::vector<void*> copy_streams, synchronized, destroyed;
  Status sync_error;
};

// Note [One stream per executor]: the executor makes one stream for the device
// backend its plan uses, queues every copy there (both directions), waits on it
// once per run, destroys it with itself; an error the stream reports fails the run.
TEST(Executor, OneStreamPerExecutorMadeThroughTheBackendsMemory) {
  StreamDeviceMemory device;
  const Graph g = ffn_block(4, false);
  PlanOptions options = ffn_on_the_device();
  auto plan = plan_or_die(g, cpu_and_device(device), options);
  {
    Result<Executor> exec = Executor::create(plan);
    ASSERT_TRUE(exec.is_ok()) << exec.status().to_string();
    ASSERT_EQ(device.made, 1);
    void* const stream = &device.streams[0];
    std::vector<float> x = ramp(32, 3), y(32);
    const TensorView in = TensorView::contiguous(x.data(), DType::kF32, {4, 8});
    const TensorView out = TensorView::contiguous(y.data(), DType::kF32, {4, 8});
    device.copy_streams.clear();
    device.synchronized.clear();
    ASSERT_TRUE(exec->run({&in, 1}, {&out, 1}).is_ok());
    EXPECT_EQ(y, run_node_by_node(g, kTestKernels, {x})[0]);
    EXPECT_EQ(device.made, 1) << "a run makes no stream of its own";
    ASSERT_FALSE(device.copy_streams.empty());
    for (void* s : device.copy_streams) EXPECT_EQ(s, stream);
    EXPECT_EQ(device.synchronized, std::vector<void*>{stream});
    device.sync_error = internal_error("a launch failed on the device");
    const Status failed = exec->run({&in, 1}, {&out, 1});
    EXPECT_EQ(failed.code(), StatusCode::kInternal);
    EXPECT_THAT(std::string(failed.message()), HasSubstr("cuda"));
    device.sync_error = Status::ok();
    EXPECT_TRUE(device.destroyed.empty());
  }
  EXPECT_EQ(device.destroyed, std::vector<void*>{&device.streams[0]});

  // A stream the caller gives is used and left to the caller.
  int callers = 0;
  ExecutorOptions eo;
  eo.streams[static_cast<std::size_t>(BackendId::kCuda)] = &callers;
  device.destroyed.clear();
  {
    Result<Executor> exec = Executor::create(plan, eo);
    ASSERT_TRUE(exec.is_ok()) << exec.status().to_string();
    EXPECT_EQ(device.made, 1);
  }
  EXPECT_TRUE(device.destroyed.empty());
}

// Note [Profiling a device]: a profiled run that waits for devices waits on the
// device's stream after every step that ran there (kernels and the copies it
// drove), and a plain profiled run only once, at the end.
TEST(Executor, ADeviceProfileWaitsAfterEveryDeviceStep) {
  StreamDeviceMemory device;
  const Graph g = ffn_block(4, false);
  PlanOptions options = ffn_on_the_device();
  auto plan = plan_or_die(g, cpu_and_device(device), options);
  std::size_t device_steps = 0;
  for (const PlannedStep& step : plan->bucket(0).steps) {
    device_steps += step.kind != StepKind::kKernel || step.backend == BackendId::kCuda;
  }
  ASSERT_GE(device_steps, 4u);  // two kernels, a copy in and a copy out
  for (bool wait : {false, true}) {
    ExecProfile profile;
    profile.wait_for_devices = wait;
    ExecutorOptions eo;
    eo.profile = &profile;
    Result<Executor> exec = Executor::create(plan, eo);
    ASSERT_TRUE(exec.is_ok()) << exec.status().to_string();
    std::vector<float> x = ramp(32, 3), y(32);
    const TensorView in = TensorView::contiguous(x.data(), DType::kF32, {4, 8});
    const TensorView out = TensorView::contiguous(y.data(), DType::kF32, {4, 8});
    device.synchronized.clear();
    ASSERT_TRUE(exec->run({&in, 1}, {&out, 1}).is_ok());
    EXPECT_EQ(y, run_node_by_node(g, kTestKernels, {x})[0]);
    EXPECT_EQ(device.synchronized.size(), wait ? device_steps + 1 : 1u) << wait;
    // A failure the wait reports names the step.
    device.sync_error = internal_error("a launch failed on the device");
    const Status failed = exec->run({&in, 1}, {&out, 1});
    device.sync_error = Status::ok();
    EXPECT_EQ(failed.code(), StatusCode::kInternal);
    if (wait) {
      EXPECT_THAT(std::string(failed.message()), HasSubstr("copy to"));
    }
  }
}

// A stand-in device that records streams (Note [Replaying captured steps]): its
// kernels, wrapped by taped<>, append themselves to the stream's tape while it
// records and run at once otherwise; a replay runs the tape.
struct TapeStream {
  bool recording = false;
  std::vector<std::function<Status()>>* tape = nullptr;
};

class TapeDeviceMemory final : public BackendMemory {
 public:
  Result<void*> allocate(std::int64_t bytes) override { return host_memory().allocate(bytes); }
  void deallocate(void* pointer) override { host_memory().deallocate(pointer); }
  Status copy(const TensorView& src, const TensorView& dst, void* stream) override {
    return host_memory().copy(src, dst, stream);
  }
  bool host_addressable() const override { return false; }
  Result<void*> create_stream() override { return static_cast<void*>(&stream_); }
  bool can_capture() const override { return true; }
  Status begin_capture(void* stream) override {
    ++begun;
    auto* s = static_cast<TapeStream*>(stream);
    s->recording = true;
    s->tape = new std::vector<std::function<Status()>>();
    return Status::ok();
  }
  Result<void*> end_capture(void* stream) override {
    auto* s = static_cast<TapeStream*>(stream);
    s->recording = false;
    std::unique_ptr<std::vector<std::function<Status()>>> tape(s->tape);
    s->tape = nullptr;
    if (!capture_error.is_ok()) return capture_error;
    return static_cast<void*>(tape.release());
  }
  Status replay(void* recording, void* /*stream*/) override {
    ++replayed;
    for (const auto& step : *static_cast<std::vector<std::function<Status()>>*>(recording)) {
      SWITCHYARD_RETURN_IF_ERROR(step());
    }
    return Status::ok();
  }
  void destroy_recording(void* recording) override {
    ++destroyed;
    delete static_cast<std::vector<std::function<Status()>>*>(recording);
  }
  int begun = 0, replayed = 0, destroyed = 0;
  Status capture_error;

 private:
  TapeStream stream_;
};

template <KernelFn kFn>
Status taped(const KernelCall& call) {
  auto* s = static_cast<TapeStream*>(call.ctx.stream);
  if (s == nullptr || !s->recording) return kFn(call);
  // What a recording keeps: the operands' addresses and shapes, not their values.
  std::vector<TensorView> in(call.inputs.begin(), call.inputs.end());
  std::vector<TensorView> out(call.outputs.begin(), call.outputs.end());
  s->tape->push_back([in, out, params = call.params, name = std::string(call.name)] {
    ExecContext ctx{};
    return kFn(KernelCall{in, out, params, ctx, name});
  });
  return Status::ok();
}

// ffn_block wholly on the stand-in device, its input and output kept there by
// the caller, so that every step is a device kernel.
std::shared_ptr<const ExecutionPlan> ffn_recordable(TapeDeviceMemory& device) {
  KernelBindingTable t;
  t.add_backend(BackendId::kCpu, host_memory());
  t.add_backend(BackendId::kCuda, device);
  register_basic(t, BackendId::kCpu, "cpu");
  const KernelFn kernels[] = {&taped<&binary_kernel<0>>, &taped<&binary_kernel<1>>,
                              &taped<&unary_kernel<silu_f>>, &taped<&matmul_kernel>,
                              &taped<&rms_norm_kernel>};
  const OpKind ops[] = {OpKind::kAdd, OpKind::kMul, OpKind::kSilu, OpKind::kMatmul,
                        OpKind::kRmsNorm};
  const KernelCaps caps[] = {kBroadcastCaps, kBroadcastCaps, {}, {}, {}};
  const std::size_t arity[] = {3, 3, 2, 3, 2};
  for (std::size_t i = 0; i < std::size(ops); ++i) {
    KernelOptions o = opts(fmt::format("{}_f32__tape", name(ops[i])), ops[i], caps[i]);
    t.register_kernel(ops[i], f32s(arity[i]), BackendId::kCuda, kernels[i], std::move(o));
  }
  PlanOptions options;
  options.policy.preferred = {BackendId::kCuda};
  options.external_backends = {{"x", BackendId::kCuda}, {"residual", BackendId::kCuda}};
  return plan_or_die(ffn_block(4, false), finalize(std::move(t)), options);
}

// Note [Recorded runs]: the third run of a binding is recorded and replayed, and
// so is every later one while the binding holds (reading the values the caller
// put there since); a new binding runs plainly and drops the recording.
TEST(Executor, ARepeatedBindingIsRecordedThenReplayed) {
  TapeDeviceMemory device;
  auto plan = ffn_recordable(device);
  for (const PlannedStep& step : plan->bucket(0).steps) {
    ASSERT_EQ(step.kind, StepKind::kKernel);
    ASSERT_EQ(step.backend, BackendId::kCuda);
  }
  Result<Executor> exec = Executor::create(plan);
  ASSERT_TRUE(exec.is_ok()) << exec.status().to_string();
  const Graph g = ffn_block(4, false);
  std::vector<float> x(32), y(32), y2(32);
  const TensorView in = TensorView::contiguous(x.data(), DType::kF32, {4, 8}, BackendId::kCuda);
  const TensorView out = TensorView::contiguous(y.data(), DType::kF32, {4, 8}, BackendId::kCuda);
  const TensorView out2 = TensorView::contiguous(y2.data(), DType::kF32, {4, 8}, BackendId::kCuda);
  struct Expect {
    const TensorView* out;
    std::uint64_t recordings, replays;
  };
  const Expect runs[] = {{&out, 0, 0},  {&out, 0, 0},  {&out, 1, 1}, {&out, 1, 2},
                         {&out2, 1, 2}, {&out2, 1, 2}, {&out2, 2, 3}};
  int seed = 1;
  for (const Expect& e : runs) {
    const std::vector<float> values = ramp(32, seed++);
    std::copy(values.begin(), values.end(), x.begin());  // same buffer, new values
    ASSERT_TRUE(exec->run({&in, 1}, {e.out, 1}).is_ok());
    const std::vector<float>& got = e.out == &out ? y : y2;
    EXPECT_EQ(got, run_node_by_node(g, kTestKernels, {x})[0]) << seed;
    EXPECT_EQ(exec->stats().recordings, e.recordings) << seed;
    EXPECT_EQ(exec->stats().replays, e.replays) << seed;
    EXPECT_GT(exec->stats().last_queue_ns, 0.0);
  }
  EXPECT_EQ(device.destroyed, 1) << "the new binding dropped the first recording";
  EXPECT_EQ(device.replayed, 3);

  // Turned off, or profiled: never recorded.
  ExecProfile profile;
  for (ExecutorOptions o :
       {ExecutorOptions{.record_runs = false}, ExecutorOptions{.profile = &profile}}) {
    Result<Executor> plain = Executor::create(plan, o);
    ASSERT_TRUE(plain.is_ok()) << plain.status().to_string();
    for (int i = 0; i < 3; ++i) ASSERT_TRUE(plain->run({&in, 1}, {&out, 1}).is_ok());
    EXPECT_EQ(plain->stats().recordings + plain->stats().replays, 0u);
  }
}

// A recording the backend cannot make is counted and said once, and the bucket
// runs plainly from then on, with correct results.
TEST(Executor, AFailedRecordingFallsBackToPlainRuns) {
  TapeDeviceMemory device;
  device.capture_error = unimplemented_error("a kernel waited while recording");
  auto plan = ffn_recordable(device);
  Result<Executor> exec = Executor::create(plan);
  ASSERT_TRUE(exec.is_ok()) << exec.status().to_string();
  const Graph g = ffn_block(4, false);
  std::vector<float> x = ramp(32, 3), y(32);
  const TensorView out = TensorView::contiguous(y.data(), DType::kF32, {4, 8}, BackendId::kCuda);
  const TensorView bound = TensorView::contiguous(x.data(), DType::kF32, {4, 8}, BackendId::kCuda);
  for (int i = 0; i < 4; ++i) {
    ASSERT_TRUE(exec->run({&bound, 1}, {&out, 1}).is_ok()) << i;
    EXPECT_EQ(y, run_node_by_node(g, kTestKernels, {x})[0]) << i;
  }
  EXPECT_EQ(device.begun, 1);
  EXPECT_EQ(exec->stats().recording_failures, 1u);
  EXPECT_THAT(exec->stats().last_recording_failure, HasSubstr("waited while recording"));
  EXPECT_EQ(exec->stats().replays, 0u);
}

// Note [Uploaded constants]: a weight that device kernels read is copied to the
// device once, however many buckets the plan has, and lives outside the arenas.
TEST(Executor, ConstantsAreUploadedOnceForAllBuckets) {
  CountingDeviceMemory device;
  const Graph g = ffn_block(0, true);
  PlanOptions options = ffn_on_the_device();
  options.buckets = {{"one", {{"tokens", 1, 1}}}, {"many", {{"tokens", 2, 8}}}};
  auto plan = plan_or_die(g, cpu_and_device(device), options);
  ASSERT_EQ(plan->bucket_count(), 2u);
  std::vector<std::pair<std::int64_t, std::int64_t>> progress;
  ExecutorOptions eo;
  eo.on_upload = [&](std::int64_t done, std::int64_t total) { progress.emplace_back(done, total); };
  Result<Executor> exec = Executor::create(plan, eo);
  ASSERT_TRUE(exec.is_ok()) << exec.status().to_string();
  // Each bucket lists the weights its device kernels read; each is copied once.
  std::set<std::int32_t> distinct;
  std::size_t listed = 0;
  std::int64_t bytes = 0;
  for (std::size_t i = 0; i < plan->bucket_count(); ++i) {
    for (const BufferPlan& b : plan->bucket(i).buffers) {
      if (!b.upload.valid()) continue;
      if (distinct.insert(b.upload.index).second) bytes += b.bytes;
      ++listed;
    }
  }
  ASSERT_GE(distinct.size(), 2u) << "wu and wd at least";
  EXPECT_EQ(listed, 2 * distinct.size()) << "both buckets read the same weights";
  EXPECT_EQ(device.copies, static_cast<int>(distinct.size()));
  // The progress callback: once per upload, rising to the total, which is right.
  ASSERT_EQ(progress.size(), distinct.size());
  for (std::size_t i = 0; i < progress.size(); ++i) {
    EXPECT_EQ(progress[i].second, bytes);
    if (i > 0) {
      EXPECT_GT(progress[i].first, progress[i - 1].first);
    }
  }
  EXPECT_EQ(progress.back().first, bytes);
  for (std::int64_t tokens : {1, 5}) {
    const auto n = static_cast<std::size_t>(tokens * 8);
    std::vector<float> x = ramp(n, 3), y(n);
    const TensorView in = TensorView::contiguous(x.data(), DType::kF32, {tokens, 8});
    const TensorView out = TensorView::contiguous(y.data(), DType::kF32, {tokens, 8});
    ASSERT_TRUE(exec->run({&in, 1}, {&out, 1}).is_ok());
    EXPECT_EQ(y, run_node_by_node(ffn_block(tokens, false), kTestKernels, {x})[0]);
  }
}

// Note [Caller tensors on a device]: an input and an output kept on the device
// are read and written in place by kernels there, and copied only for kernels
// elsewhere; the executor takes them only on that backend.
TEST(Executor, CallerTensorsOnTheDeviceAreUsedInPlace) {
  CountingDeviceMemory device;
  const TableSnapshot table = cpu_and_device(device);
  const Graph g = ffn_block(4, false);
  const std::vector<float> x = ramp(32, 3);
  const std::vector<float> want = run_node_by_node(g, kTestKernels, {x})[0];

  for (const BackendId preferred : {BackendId::kCuda, BackendId::kCpu}) {
    SCOPED_TRACE(name(preferred));
    PlanOptions options;
    options.policy.preferred = {preferred};
    options.external_backends = {{"x", BackendId::kCuda}, {"residual", BackendId::kCuda}};
    auto plan = plan_or_die(g, table, options);
    // On the device, nothing crosses; on the host, x comes over once and the
    // result goes back once.
    EXPECT_EQ(plan->report().buckets[0].copies, preferred == BackendId::kCuda ? 0 : 2);
    ASSERT_EQ(plan->input_backends().size(), 1u);
    EXPECT_EQ(plan->input_backends()[0], BackendId::kCuda);
    EXPECT_EQ(plan->output_backends()[0], BackendId::kCuda);
    Result<Executor> exec = Executor::create(plan);
    ASSERT_TRUE(exec.is_ok()) << exec.status().to_string();
    // The stand-in device's memory is host memory, so the test can fill and read it.
    std::vector<float> dx = x, dy(32);
    const TensorView in = TensorView::contiguous(dx.data(), DType::kF32, {4, 8}, BackendId::kCuda);
    const TensorView out = TensorView::contiguous(dy.data(), DType::kF32, {4, 8}, BackendId::kCuda);
    const int copies_before = device.copies;
    ASSERT_TRUE(exec->run({&in, 1}, {&out, 1}).is_ok());
    EXPECT_EQ(device.copies - copies_before, plan->report().buckets[0].copies);
    EXPECT_EQ(dy, want);

    // A host tensor where the plan keeps the input on the device is refused.
    std::vector<float> hx = x;
    const TensorView host_in = TensorView::contiguous(hx.data(), DType::kF32, {4, 8});
    const Status wrong = exec->run({&host_in, 1}, {&out, 1});
    EXPECT_EQ(wrong.code(), StatusCode::kInvalidArgument);
    EXPECT_THAT(std::string(wrong.message()), HasSubstr("on cuda"));
  }

  // A name that is no input or output is an error, not a tensor silently kept on
  // the host.
  PlanOptions typo;
  typo.external_backends = {{"x_cache", BackendId::kCuda}};
  Result<ExecutionPlan> refused = plan_graph(g, table, typo);
  ASSERT_FALSE(refused.is_ok());
  EXPECT_EQ(refused.status().code(), StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(refused.status().message()), HasSubstr("'x_cache'"));
}

TEST(Executor, WithoutAHostSectionNothingRuns) {
  KernelBindingTable t;
  register_basic(t, BackendId::kCpu, "cpu");
  auto plan = plan_or_die(ffn_block(4, false), finalize(std::move(t)));
  Result<Executor> exec = Executor::create(plan);
  ASSERT_FALSE(exec.is_ok());
  EXPECT_EQ(exec.status().code(), StatusCode::kUnavailable);
  EXPECT_THAT(exec.status().message(), ::testing::HasSubstr("cpu"));
}

TEST(Executor, CrossBackendPlanRunsWithCopies) {
  KernelBindingTable t;
  t.add_backend(BackendId::kCpu, host_memory());
  register_basic(t, BackendId::kCpu, "cpu");
  register_basic(t, BackendId::kCuda, "cuda");
  const Graph g = ffn_block(4, false);
  PlanOptions options = ffn_on_the_device();
  auto plan = plan_or_die(g, finalize(std::move(t)), options);
  EXPECT_GT(plan->report().buckets[0].copies, 0);
  // Without memory for cuda the executor cannot be set up.
  EXPECT_EQ(Executor::create(plan).status().code(), StatusCode::kUnavailable);
  ExecutorOptions eo;
  eo.memory[static_cast<std::size_t>(BackendId::kCuda)] = &host_memory();  // a stand-in device
  Result<Executor> exec = Executor::create(plan, eo);
  ASSERT_TRUE(exec.is_ok()) << exec.status().to_string();
  std::vector<float> x = ramp(32, 3), y(32);
  const TensorView in = TensorView::contiguous(x.data(), DType::kF32, {4, 8});
  const TensorView out = TensorView::contiguous(y.data(), DType::kF32, {4, 8});
  ASSERT_TRUE(exec->run({&in, 1}, {&out, 1}).is_ok());
  EXPECT_EQ(y, run_node_by_node(g, kTestKernels, {x})[0]);
}

// Note [One device per rank] in backend_memory.h: the host has one device, 0, and
// asking for another is an error rather than a silent no-op.
TEST(HostMemory, HasOneDevice) {
  BackendMemory& host = host_memory();
  EXPECT_EQ(host.device_count(), 1);
  EXPECT_TRUE(host.use_device(0).is_ok());
  EXPECT_EQ(host.use_device(1).code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(host.use_device(-1).code(), StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace switchyard
