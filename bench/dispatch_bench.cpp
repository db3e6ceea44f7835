// Binding-table lookups and snapshot acquisition: the costs every dispatch pays.
//   ./build/release/bench/switchyard_bench --benchmark_filter='Lookup|Snapshot'
#include <benchmark/benchmark.h>

#include "switchyard/dispatch.h"

namespace switchyard {
namespace {

const DTypeList kF32x3{DType::kF32, DType::kF32, DType::kF32};
const DTypeList kMissing{DType::kQ4_K, DType::kF32, DType::kF32};

void BM_LookupHit(benchmark::State& state) {
  const TableSnapshot table = current_table();
  for (auto _ : state) {
    Result<const BindingEntry*> r = table->lookup(OpKind::kMatmul, kF32x3, BackendId::kCpu);
    benchmark::DoNotOptimize(r);
  }
}
BENCHMARK(BM_LookupHit);

void BM_LookupWithCapsHit(benchmark::State& state) {
  const TableSnapshot table = current_table();
  for (auto _ : state) {
    Result<const BindingEntry*> r = table->lookup_with_caps(OpKind::kAdd, kF32x3, BackendId::kCpu);
    benchmark::DoNotOptimize(r);
  }
}
BENCHMARK(BM_LookupWithCapsHit);

void BM_BackendSupportsMiss(benchmark::State& state) {
  const TableSnapshot table = current_table();
  for (auto _ : state) {
    benchmark::DoNotOptimize(table->backend_supports(OpKind::kMatmul, kMissing, BackendId::kCpu));
  }
}
BENCHMARK(BM_BackendSupportsMiss);

// A full miss builds the diagnostic (what exists, where): off the hot path by design.
void BM_LookupMissWithDiagnostic(benchmark::State& state) {
  const TableSnapshot table = current_table();
  for (auto _ : state) {
    Result<const BindingEntry*> r = table->lookup(OpKind::kMatmul, kMissing, BackendId::kCpu);
    benchmark::DoNotOptimize(r);
  }
}
BENCHMARK(BM_LookupMissWithDiagnostic);

void BM_SnapshotAcquire(benchmark::State& state) {
  (void)current_table();
  for (auto _ : state) {
    TableSnapshot snap = current_table();
    benchmark::DoNotOptimize(snap);
  }
}
BENCHMARK(BM_SnapshotAcquire)->Threads(1)->Threads(2);

}  // namespace
}  // namespace switchyard
