// The example kernel pack (examples/kernel_pack/) against the built-in kernel the
// planner would otherwise pick, over tensor sizes on both sides of the crossover
// its cost formulas predict.
//
//   SWITCHYARD_THREADS=2 ./build/release/bench/switchyard_bench
//       --benchmark_filter=KernelPack --benchmark_min_time=0.2
//   (one command line)
//
// Each case calls one kernel the way the executor does (through the process-wide
// thread pool, with the entry's data). Counters:
//   modelled_ns  the planner's estimate for this kernel and shape (default
//                BackendCaps), the figure it ranks the two by;
//   best_ns      the fastest call, which filters out lost time slices.
// The pack is meant to win where its modelled time is the smaller one.
#include <benchmark/benchmark.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "switchyard/backends.h"
#include "switchyard/kernel_packs.h"
#include "switchyard/thread_pool.h"

#ifdef SWITCHYARD_EXAMPLE_PACK

namespace switchyard {
namespace {

const DTypeList kF32x2{DType::kF32, DType::kF32};

// The built-in table plus the example pack, loaded once.
const KernelBindingTable* table_with_pack() {
  static const std::unique_ptr<KernelBindingTable> table = [] {
    auto t = std::make_unique<KernelBindingTable>(make_builtin_table().value());
    if (!load_kernel_pack(*t, SWITCHYARD_EXAMPLE_PACK).is_ok() || !t->finalize().is_ok()) {
      return std::unique_ptr<KernelBindingTable>();
    }
    return t;
  }();
  return table.get();
}

// which = 0: the pack's kernel; 1: the first built-in sibling (the best one on this
// CPU, the one the route takes when the pack loses).
void BM_KernelPackGeluErf(benchmark::State& state) {
  const std::int64_t n = state.range(0);
  const KernelBindingTable* table = table_with_pack();
  if (table == nullptr) {
    state.SkipWithError("the example pack did not load");
    return;
  }
  std::span<const BindingEntry> siblings =
      table->lookup_alternatives(OpKind::kGeluErf, kF32x2, BackendId::kCpu);
  const BindingEntry* entry = nullptr;
  for (const BindingEntry& e : siblings) {
    const bool is_pack = e.source.starts_with("pack:");
    if (state.range(1) == 0 ? is_pack : !is_pack) {
      entry = &e;
      break;
    }
  }
  if (entry == nullptr) {
    state.SkipWithError("no such sibling");
    return;
  }
  std::vector<float> a(static_cast<std::size_t>(n)), out(a.size());
  for (std::size_t i = 0; i < a.size(); ++i)
    a[i] = -6.0f + 12.0f * static_cast<float>(i % 1000) / 1000.0f;
  const TensorView views[] = {TensorView::contiguous(a.data(), DType::kF32, {n}),
                              TensorView::contiguous(out.data(), DType::kF32, {n})};
  OpParams params;
  ExecContext ctx{.runner = &default_thread_pool()};
  const KernelCall call{std::span(views, 1), std::span(views + 1, 1), params, ctx,
                        entry->name,         entry->data.get()};
  double best = 1e30;
  for (auto _ : state) {
    const auto t0 = std::chrono::steady_clock::now();
    const Status s = entry->fn(call);
    best = std::min(best,
                    std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
    if (!s.is_ok()) {
      state.SkipWithError(s.to_string().c_str());
      return;
    }
  }
  const Shape shapes[] = {Shape{n}, Shape{n}};
  const DType dtypes[] = {DType::kF32, DType::kF32};
  const BackendCaps caps;
  const CostEstimate est = entry->estimate({OpKind::kGeluErf, shapes, dtypes, &params, &caps});
  state.SetLabel(entry->name);
  state.counters["best_ns"] = best * 1e9;
  state.counters["modelled_ns"] = est.time_ns(caps);
}
BENCHMARK(BM_KernelPackGeluErf)
    ->ArgsProduct({{256, 4096, 65536, 1 << 20}, {0, 1}})
    ->ArgNames({"n", "builtin"});

}  // namespace
}  // namespace switchyard

#endif  // SWITCHYARD_EXAMPLE_PACK
