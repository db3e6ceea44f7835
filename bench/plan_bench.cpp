// Planner and executor costs: the executor's per-node overhead with trivial kernels
// (compared with a bare loop over the same function pointers and operand arrays,
// measured in the same run) and the time to plan a 1,000-node graph.
//   ./build/release/bench/switchyard_bench --benchmark_filter='Executor|Plan'
#include <benchmark/benchmark.h>

#include <ctime>
#include <memory>

#include "switchyard/dispatch.h"
#include "switchyard/example_graphs.h"
#include "switchyard/executor.h"
#include "switchyard/plan.h"

namespace switchyard {
namespace {

Status trivial_add(const KernelCall& call) {
  benchmark::DoNotOptimize(call.inputs.data());
  return Status::ok();
}
Status trivial_mul(const KernelCall& call) {
  benchmark::DoNotOptimize(call.outputs.data());
  return Status::ok();
}

TableSnapshot trivial_table() {
  KernelBindingTable t;
  const DTypeList f32x3{DType::kF32, DType::kF32, DType::kF32};
  t.register_kernel(OpKind::kAdd, f32x3, BackendId::kCpu, &trivial_add,
                    {.name = "add_trivial", .cost = default_cost_for(OpKind::kAdd)});
  t.register_kernel(OpKind::kMul, f32x3, BackendId::kCpu, &trivial_mul,
                    {.name = "mul_trivial", .cost = default_cost_for(OpKind::kMul)});
  SWITCHYARD_CHECK(t.finalize().is_ok());
  return std::make_shared<const KernelBindingTable>(std::move(t));
}

// One run() of an N-node chain of trivial kernels; reports the time per node and
// the ratio to a bare loop that calls the same kernels over prebuilt operands.
void BM_ExecutorOverheadPerNode(benchmark::State& state) {
  const int nodes = static_cast<int>(state.range(0));
  Graph g = elementwise_chain_graph(nodes, 4, 4).value();
  auto plan = std::make_shared<const ExecutionPlan>(plan_graph(g, trivial_table()).value());
  Executor exec = Executor::create(plan).value();
  std::vector<float> x(16), y(16), out(16);
  const TensorView ins[] = {TensorView::contiguous(x.data(), DType::kF32, {4, 4}),
                            TensorView::contiguous(y.data(), DType::kF32, {4, 4})};
  const TensorView outs[] = {TensorView::contiguous(out.data(), DType::kF32, {4, 4})};
  for (auto _ : state) {
    Status s = exec.run(ins, outs);
    benchmark::DoNotOptimize(s);
  }
  state.counters["per_node"] =
      benchmark::Counter(static_cast<double>(nodes), benchmark::Counter::kIsIterationInvariantRate |
                                                         benchmark::Counter::kInvert);

  // The peer: the same calls through a function-pointer array (so nothing is
  // inlined) with nothing around them.
  std::vector<TensorView> views(static_cast<std::size_t>(nodes) * 3, ins[0]);
  std::vector<KernelFn> fns;
  for (int n = 0; n < nodes; ++n) fns.push_back(n % 2 == 0 ? &trivial_add : &trivial_mul);
  benchmark::DoNotOptimize(fns.data());
  ExecContext ctx;
  OpParams params;
  const auto iterations = static_cast<std::int64_t>(state.iterations());
  // Thread CPU time, like the CPU column the executor's figure is read from: the
  // machine is shared, so wall time would charge other processes' work to us.
  const auto cpu_ns = [] {
    timespec ts{};
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return static_cast<double>(ts.tv_sec) * 1e9 + static_cast<double>(ts.tv_nsec);
  };
  const double start = cpu_ns();
  for (std::int64_t it = 0; it < iterations; ++it) {
    for (int n = 0; n < nodes; ++n) {
      const TensorView* ops = views.data() + 3 * n;
      const KernelCall call{{ops, 2}, {ops + 2, 1}, params, ctx};
      Status s = fns[static_cast<std::size_t>(n)](call);
      if (!s.is_ok()) state.SkipWithError("kernel failed");
    }
  }
  const double bare_ns = cpu_ns() - start;
  state.counters["bare_loop_per_node_ns"] =
      bare_ns / static_cast<double>(iterations) / static_cast<double>(nodes);
}
BENCHMARK(BM_ExecutorOverheadPerNode)->Arg(100)->Arg(1000);

// Planning a 1,000-node graph (fusion matching, reconciliation, route picking with
// cost estimates, buffer plan) against the built-in table.
void BM_PlanGraph(benchmark::State& state) {
  const int nodes = static_cast<int>(state.range(0));
  Graph g = elementwise_chain_graph(nodes, 64, 64).value();
  TableSnapshot table = current_table();
  for (auto _ : state) {
    Result<ExecutionPlan> plan = plan_graph(g, table);
    benchmark::DoNotOptimize(plan);
  }
  state.counters["per_node"] =
      benchmark::Counter(static_cast<double>(nodes), benchmark::Counter::kIsIterationInvariantRate |
                                                         benchmark::Counter::kInvert);
}
BENCHMARK(BM_PlanGraph)->Arg(1000)->Unit(benchmark::kMillisecond);

// The example transformer block in two buckets: what `switchyard explain` plans.
void BM_PlanTransformerBlockGraph(benchmark::State& state) {
  Graph g = transformer_block_graph({}).value();
  PlanOptions options;
  options.buckets = example_buckets();
  TableSnapshot table = current_table();
  for (auto _ : state) {
    Result<ExecutionPlan> plan = plan_graph(g, table, options);
    benchmark::DoNotOptimize(plan);
  }
}
BENCHMARK(BM_PlanTransformerBlockGraph)->Unit(benchmark::kMicrosecond);

}  // namespace
}  // namespace switchyard
