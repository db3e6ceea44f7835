// The dot-product peaks of one core (dot_peak.h), the denominators of the
// quantized GEMM's rates in docs/benchmarks.md (table 6):
//
//   ./build/dev/bench/switchyard_bench --benchmark_filter='DotPeak'
//
// DotPeak/<isa>  one thread; counters GMAC/s (multiply-adds per second) and
//                GOP/s (two operations each, the unit GEMM rates are quoted in).
#include <benchmark/benchmark.h>

#include "backends/cpu/cpu_features.h"
#include "dot_peak.h"

namespace switchyard::bench {
namespace {

void BM_DotPeak(benchmark::State& state, double (*peak)(std::int64_t)) {
  double macs = 0.0;
  for (auto _ : state) macs = peak(std::int64_t{1} << 22);
  state.counters["GMAC/s"] = macs / 1e9;
  state.counters["GOP/s"] = 2.0 * macs / 1e9;
}

const bool kRegistered = [] {
  const cpu::CpuFeatures& f = cpu::cpu_features();
  if (f.avx2) {
    benchmark::RegisterBenchmark("BM_DotPeak/avx2", BM_DotPeak, &dot_peak_avx2)->Iterations(3);
  }
  if (f.avx512_vnni) {
    benchmark::RegisterBenchmark("BM_DotPeak/avx512_vnni", BM_DotPeak, &dot_peak_avx512vnni)
        ->Iterations(3);
  }
  // The 256-bit vpdpbusd that the *_packed256 siblings run: EVEX where
  // AVX-512 VNNI is there (as the sibling does), else AVX-VNNI's VEX form.
  if (f.avx512_vnni || f.avx_vnni) {
    benchmark::RegisterBenchmark("BM_DotPeak/vnni256", BM_DotPeak,
                                 f.avx512_vnni ? &dot_peak_avx512vnni_256 : &dot_peak_avxvnni)
        ->Iterations(3);
  }
  if (f.amx_int8) {
    benchmark::RegisterBenchmark("BM_DotPeak/amx_int8", BM_DotPeak, &dot_peak_amx_int8)
        ->Iterations(3);
  }
  if (f.amx_bf16) {
    benchmark::RegisterBenchmark("BM_DotPeak/amx_bf16", BM_DotPeak, &dot_peak_amx_bf16)
        ->Iterations(3);
  }
  return true;
}();

}  // namespace
}  // namespace switchyard::bench
