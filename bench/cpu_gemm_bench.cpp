// The CPU backend's dense matmul family against peers measured in the same run:
//   - f32 GEMM 1024^3 (each registered sibling; also 8 x 4096 x 4096, a few rows
//     against large weights, for the AVX-512 sibling) with GFLOP/s and its ratio to
//     OpenBLAS's cblas_sgemm, timed alternately with it (`vs_openblas`, and
//     `vs_openblas_cpu` in process CPU time);
//   - f16 / bf16 matvec 4096 -> 14336 (weights [14336, 4096]) with GB/s of weights
//     streamed and the ratio to the machine's read bandwidth, measured alternately
//     with it by a read sweep with the widest SIMD the CPU has (bench/roofline.h):
//     `vs_read_bw` against a sweep as large as the weights (same cache regime),
//     `vs_read_bw_dram` against a 1 GiB sweep, which also evicts the weights;
//   - ffn_swiglu (D 1024, F 2816) for a decode row and a 128-row block.
// Ratios come from interleaved medians because the machine is shared: a ratio of
// two back-to-back runs mostly measures how the neighbours' load changed.
// Threads come from SWITCHYARD_THREADS (the process-wide pool). One command line:
//   SWITCHYARD_THREADS=2 ./build/dev/bench/switchyard_bench
//     --benchmark_filter='Gemm|Matvec|ReadBandwidth|Ffn' --benchmark_repetitions=3
//     --benchmark_report_aggregates_only=true

#include <benchmark/benchmark.h>

#include <algorithm>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "roofline.h"
#include "switchyard/backends.h"
#include "switchyard/binding_table.h"
#include "switchyard/half.h"
#include "switchyard/thread_pool.h"

namespace switchyard {
namespace {

const KernelBindingTable& table() {
  static const KernelBindingTable kTable = [] {
    Result<KernelBindingTable> t = make_builtin_table();
    SWITCHYARD_CHECK(t.is_ok());
    return std::move(t).value();
  }();
  return kTable;
}

const BindingEntry* find_entry(OpKind op, const DTypeList& key, std::string_view name) {
  for (const BindingEntry& e : table().lookup_alternatives(op, key, BackendId::kCpu)) {
    if (e.name == name) return &e;
  }
  return nullptr;
}

std::vector<std::byte> random_bytes(DType t, std::int64_t count, std::uint32_t seed) {
  const std::int64_t size = t == DType::kF32 ? 4 : 2;
  std::vector<std::byte> bytes(static_cast<std::size_t>(count * size));
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  for (std::int64_t i = 0; i < count; ++i) {
    const float v = dist(rng);
    if (t == DType::kF32) {
      std::memcpy(bytes.data() + i * 4, &v, 4);
    } else {
      const std::uint16_t h = t == DType::kF16 ? f32_to_f16(v) : f32_to_bf16(v);
      std::memcpy(bytes.data() + i * 2, &h, 2);
    }
  }
  return bytes;
}

struct Call {
  std::vector<TensorView> inputs;
  TensorView output;
  OpParams params;
  ExecContext ctx{.runner = &default_thread_pool()};
  Status run(const BindingEntry& e) {
    const KernelCall call{inputs, std::span<const TensorView>(&output, 1), params, ctx, e.name};
    return e.fn(call);
  }
};

using bench::Paired;
using bench::paired_medians;
using bench::ReadSweep;

// --- read bandwidth: the roofline of the matvec kernels ------------------------------

void BM_ReadBandwidth(benchmark::State& state) {
  ReadSweep bw(bench::kDramSweepBytes);
  for (auto _ : state) benchmark::DoNotOptimize(bw.run());
  state.counters["GB/s"] =
      benchmark::Counter(static_cast<double>(bw.bytes()) * static_cast<double>(state.iterations()),
                         benchmark::Counter::kIsRate);
  state.counters["threads"] = default_thread_pool().num_threads();
}
BENCHMARK(BM_ReadBandwidth)->Unit(benchmark::kMillisecond)->UseRealTime();

// --- f32 GEMM vs OpenBLAS -------------------------------------------------------------

void BM_GemmF32(benchmark::State& state, std::string kernel) {
  const std::int64_t m = state.range(0), n = state.range(1), k = state.range(2);
  const DTypeList key{DType::kF32, DType::kF32, DType::kF32};
  const BindingEntry* entry = find_entry(OpKind::kMatmul, key, kernel);
  if (entry == nullptr) {
    state.SkipWithError(("not registered on this CPU: " + kernel).c_str());
    return;
  }
  auto a = random_bytes(DType::kF32, m * k, 1);
  auto w = random_bytes(DType::kF32, n * k, 2);
  std::vector<float> out(static_cast<std::size_t>(m * n));
  Call call{.inputs = {TensorView::contiguous(a.data(), DType::kF32, {m, k}),
                       TensorView::contiguous(w.data(), DType::kF32, {n, k})},
            .output = TensorView::contiguous(out.data(), DType::kF32, {m, n})};
  const double flops =
      2.0 * static_cast<double>(m) * static_cast<double>(n) * static_cast<double>(k);
  for (auto _ : state) {
    if (!call.run(*entry).is_ok()) state.SkipWithError("kernel failed");
    benchmark::ClobberMemory();
  }
  state.counters["GFLOP/s"] = benchmark::Counter(flops * static_cast<double>(state.iterations()),
                                                 benchmark::Counter::kIsRate);
  state.counters["threads"] = default_thread_pool().num_threads();
  // The peer, timed in this run, alternating with the kernel under test.
  if (const BindingEntry* blas = find_entry(OpKind::kMatmul, key, "matmul_f32__cpu_openblas")) {
    const Paired p = paired_medians(
        7, [&] { (void)call.run(*entry); }, [&] { (void)call.run(*blas); });
    state.counters["openblas_GFLOP/s"] = flops / p.wall_b / 1e9;
    // The wall-clock ratio (> 1: faster than OpenBLAS), and the same in process CPU
    // time, which other tenants' load disturbs less (OpenBLAS's waiting threads
    // spin, which counts against it there).
    state.counters["vs_openblas"] = p.wall_b / p.wall_a;
    state.counters["vs_openblas_cpu"] = p.cpu_b / p.cpu_a;
  }
}
BENCHMARK_CAPTURE(BM_GemmF32, avx512, std::string("matmul_f32__cpu_avx512"))
    ->Args({1024, 1024, 1024})
    ->Args({8, 4096, 4096})
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime();
BENCHMARK_CAPTURE(BM_GemmF32, avx2, std::string("matmul_f32__cpu_avx2"))
    ->Args({1024, 1024, 1024})
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime();
BENCHMARK_CAPTURE(BM_GemmF32, openblas, std::string("matmul_f32__cpu_openblas"))
    ->Args({1024, 1024, 1024})
    ->Args({8, 4096, 4096})
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime();

// --- matvec vs read bandwidth -----------------------------------------------------

void BM_Matvec(benchmark::State& state, DType at, DType wt, std::string kernel) {
  const std::int64_t k = 4096, n = 14336;
  const DType ot = at;
  const BindingEntry* entry = find_entry(OpKind::kMatmul, {at, wt, ot}, kernel);
  if (entry == nullptr) {
    state.SkipWithError(("not registered on this CPU: " + kernel).c_str());
    return;
  }
  auto x = random_bytes(at, k, 3);
  auto w = random_bytes(wt, n * k, 4);
  std::vector<std::byte> out(static_cast<std::size_t>(n * 4));
  Call call{.inputs = {TensorView::contiguous(x.data(), at, {1, k}),
                       TensorView::contiguous(w.data(), wt, {n, k})},
            .output = TensorView::contiguous(out.data(), ot, {1, n})};
  const double weight_bytes = static_cast<double>(w.size());
  for (auto _ : state) {
    if (!call.run(*entry).is_ok()) state.SkipWithError("kernel failed");
    benchmark::ClobberMemory();
  }
  state.counters["GB/s"] = benchmark::Counter(
      weight_bytes * static_cast<double>(state.iterations()), benchmark::Counter::kIsRate);
  state.counters["threads"] = default_thread_pool().num_threads();
  // The rooflines, timed in this run, alternating with the kernel under test: a
  // sweep of as many bytes as the weights (the same cache regime), and a sweep
  // beyond the last-level cache, which also evicts the weights between calls so
  // the kernel streams them from DRAM.
  for (const auto& [bytes, suffix] : {std::pair{w.size(), ""}, {bench::kDramSweepBytes, "_dram"}}) {
    ReadSweep bw(bytes);
    const Paired p = paired_medians(
        7, [&] { (void)call.run(*entry); }, [&] { benchmark::DoNotOptimize(bw.run()); });
    const double read_gbps = static_cast<double>(bw.bytes()) / p.wall_b / 1e9;
    state.counters[std::string("read_GB/s") + suffix] = read_gbps;
    state.counters[std::string("vs_read_bw") + suffix] = weight_bytes / p.wall_a / 1e9 / read_gbps;
  }
}
BENCHMARK_CAPTURE(BM_Matvec, f32_f16_avx2, DType::kF32, DType::kF16,
                  std::string("matmul_f32_f16_f32__cpu_avx2_matvec"))
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime();
BENCHMARK_CAPTURE(BM_Matvec, f32_bf16_avx2, DType::kF32, DType::kBF16,
                  std::string("matmul_f32_bf16_f32__cpu_avx2_matvec"))
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime();
BENCHMARK_CAPTURE(BM_Matvec, f16_avx2, DType::kF16, DType::kF16,
                  std::string("matmul_f16__cpu_avx2_matvec"))
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime();
BENCHMARK_CAPTURE(BM_Matvec, bf16_avx2, DType::kBF16, DType::kBF16,
                  std::string("matmul_bf16__cpu_avx2_matvec"))
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime();
BENCHMARK_CAPTURE(BM_Matvec, f32_f16_avx512, DType::kF32, DType::kF16,
                  std::string("matmul_f32_f16_f32__cpu_avx512_matvec"))
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime();
BENCHMARK_CAPTURE(BM_Matvec, f32_bf16_avx512, DType::kF32, DType::kBF16,
                  std::string("matmul_f32_bf16_f32__cpu_avx512_matvec"))
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime();
BENCHMARK_CAPTURE(BM_Matvec, bf16_avx512, DType::kBF16, DType::kBF16,
                  std::string("matmul_bf16__cpu_avx512_matvec"))
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime();

// --- fused ops ------------------------------------------------------------------------

void BM_FfnSwiglu(benchmark::State& state, DType wt, std::string kernel) {
  const std::int64_t rows = state.range(0), d = 1024, f = 2816;
  const BindingEntry* entry =
      find_entry(OpKind::kFfnSwiglu, {DType::kF32, wt, wt, wt, DType::kF32}, kernel);
  if (entry == nullptr) {
    state.SkipWithError(("not registered on this CPU: " + kernel).c_str());
    return;
  }
  auto x = random_bytes(DType::kF32, rows * d, 5);
  auto gate = random_bytes(wt, f * d, 6);
  auto up = random_bytes(wt, f * d, 7);
  auto down = random_bytes(wt, d * f, 8);
  std::vector<float> out(static_cast<std::size_t>(rows * d));
  Call call{.inputs = {TensorView::contiguous(x.data(), DType::kF32, {rows, d}),
                       TensorView::contiguous(gate.data(), wt, {f, d}),
                       TensorView::contiguous(up.data(), wt, {f, d}),
                       TensorView::contiguous(down.data(), wt, {d, f})},
            .output = TensorView::contiguous(out.data(), DType::kF32, {rows, d})};
  for (auto _ : state) {
    if (!call.run(*entry).is_ok()) state.SkipWithError("kernel failed");
    benchmark::ClobberMemory();
  }
  const double it = static_cast<double>(state.iterations());
  state.counters["GFLOP/s"] =
      benchmark::Counter(6.0 * rows * d * f * it, benchmark::Counter::kIsRate);
  state.counters["GB/s"] = benchmark::Counter(
      static_cast<double>(gate.size() + up.size() + down.size()) * it, benchmark::Counter::kIsRate);
}
BENCHMARK_CAPTURE(BM_FfnSwiglu, f32_avx512, DType::kF32, std::string("ffn_swiglu_f32__cpu_avx512"))
    ->Arg(1)
    ->Arg(128)
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime();
BENCHMARK_CAPTURE(BM_FfnSwiglu, f16_avx512, DType::kF16,
                  std::string("ffn_swiglu_f32_f16_f16_f16_f32__cpu_avx512"))
    ->Arg(1)
    ->Arg(128)
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime();
BENCHMARK_CAPTURE(BM_FfnSwiglu, f32_avx2, DType::kF32, std::string("ffn_swiglu_f32__cpu_avx2"))
    ->Arg(1)
    ->Arg(128)
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime();
BENCHMARK_CAPTURE(BM_FfnSwiglu, f16_avx2, DType::kF16,
                  std::string("ffn_swiglu_f32_f16_f16_f16_f32__cpu_avx2"))
    ->Arg(1)
    ->Arg(128)
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime();

}  // namespace
}  // namespace switchyard
