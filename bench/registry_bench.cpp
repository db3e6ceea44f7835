// The registry's hot-path costs: a repeat miss at a dispatch site and an entry
// point with the registry disabled.
//   ./build/dev/bench/switchyard_bench --benchmark_filter=Registry --benchmark_min_time=0.2
//
// Each benchmark times its own loop and reports `ns_per_call` and `vs_lookup_miss`:
// its cost over the cost of the peer measured in the same run, a binding-table
// backend_supports() miss. That is the lookup a dispatch site has already paid to
// discover it must fall back, so the ratio says how much the bookkeeping adds to
// the miss itself (targets: repeat miss <= 50 ns, disabled entry point <= 2 ns).
#include <chrono>
#include <ctime>

#include <benchmark/benchmark.h>

#include "switchyard/dispatch.h"
#include "switchyard/registry.h"

namespace switchyard {
namespace {

const DTypeList kMissing{DType::kF32, DType::kQ4_K, DType::kF32};
const Lookup kLookup{.backend = BackendId::kCuda, .op = OpKind::kMatmul, .dtype = DType::kQ4_K};

// Thread CPU time, not wall time: the benchmark machines are shared, and a
// descheduled thread must not count as a slow registry.
struct Clock {
  using time_point = std::chrono::nanoseconds;
  static time_point now() {
    timespec ts{};
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return std::chrono::seconds(ts.tv_sec) + std::chrono::nanoseconds(ts.tv_nsec);
  }
};

// The peer: ns per backend_supports() miss on the built-in table.
double lookup_miss_ns() {
  static const double ns = [] {
    const TableSnapshot table = current_table();
    constexpr int kIters = 2'000'000;
    const Clock::time_point start = Clock::now();
    for (int i = 0; i < kIters; ++i) {
      benchmark::DoNotOptimize(table->backend_supports(OpKind::kMatmul, kMissing, BackendId::kCpu));
    }
    return std::chrono::duration<double, std::nano>(Clock::now() - start).count() / kIters;
  }();
  return ns;
}

void report(benchmark::State& state, Clock::time_point start) {
  const double ns = std::chrono::duration<double, std::nano>(Clock::now() - start).count() /
                    static_cast<double>(state.iterations());
  // Averaged, not summed, over the threads of a multi-threaded run.
  state.counters["ns_per_call"] = benchmark::Counter(ns, benchmark::Counter::kAvgThreads);
  state.counters["vs_lookup_miss"] =
      benchmark::Counter(ns / lookup_miss_ns(), benchmark::Counter::kAvgThreads);
}

Registry& sealed_registry() {
  static Registry* r = [] {
    auto* registry = new Registry({.sink = [](std::string_view) {}});
    registry->seal();
    return registry;
  }();
  return *r;
}

// A dispatch site taking the same fallback again after sealing: shared lock, hash
// probe, one relaxed increment. With 2 threads the shared lock's cache line is
// contended.
void BM_RegistryRepeatMiss(benchmark::State& state) {
  (void)lookup_miss_ns();
  Registry& r = sealed_registry();
  r.note_fallback(kLookup, "matmul_q4_k__cpu");
  const Clock::time_point start = Clock::now();
  for (auto _ : state) {
    r.note_fallback(kLookup, "matmul_q4_k__cpu");
  }
  report(state, start);
}
BENCHMARK(BM_RegistryRepeatMiss)->Threads(1)->Threads(2);

// The same with a runtime role string (a tensor name) in the key.
void BM_RegistryRepeatMissWithRole(benchmark::State& state) {
  (void)lookup_miss_ns();
  Registry& r = sealed_registry();
  Lookup lookup = kLookup;
  lookup.role = "blk.17.ffn_down.weight";
  r.note_fallback(lookup, "matmul_q4_k__cpu");
  const Clock::time_point start = Clock::now();
  for (auto _ : state) {
    r.note_fallback(lookup, "matmul_q4_k__cpu");
  }
  report(state, start);
}
BENCHMARK(BM_RegistryRepeatMissWithRole);

// A disabled registry instance: one relaxed load and a return.
void BM_RegistryDisabledEntryPoint(benchmark::State& state) {
  (void)lookup_miss_ns();
  static Registry disabled({.enabled = false});
  const Clock::time_point start = Clock::now();
  for (auto _ : state) {
    disabled.note_fallback(kLookup, "matmul_q4_k__cpu");
    benchmark::ClobberMemory();
  }
  report(state, start);
}
BENCHMARK(BM_RegistryDisabledEntryPoint);

// The peer of the disabled entry point: the same loop with nothing in it, so the
// difference is what the entry point itself costs.
void BM_RegistryEmptyLoopBaseline(benchmark::State& state) {
  (void)lookup_miss_ns();
  const Clock::time_point start = Clock::now();
  for (auto _ : state) {
    benchmark::ClobberMemory();
  }
  report(state, start);
}
BENCHMARK(BM_RegistryEmptyLoopBaseline);

// The process-wide entry point; disabled when run with SWITCHYARD_KERNEL_REGISTRY=0
// (the label says which mode was measured).
void BM_RegistryGlobalNoteFallback(benchmark::State& state) {
  (void)lookup_miss_ns();
  state.SetLabel(registry_enabled() ? "enabled" : "disabled");
  const Clock::time_point start = Clock::now();
  for (auto _ : state) {
    note_fallback(kLookup, "matmul_q4_k__cpu");
    benchmark::ClobberMemory();
  }
  report(state, start);
}
BENCHMARK(BM_RegistryGlobalNoteFallback);

}  // namespace
}  // namespace switchyard
