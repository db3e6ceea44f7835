// The CPU backend's dense matmul family against peers measured in the same run:
//   - f32 GEMM 1024^3 (each registered sibling) with GFLOP/s and its ratio to
//     OpenBLAS's cblas_sgemm, timed alternately with it (`vs_openblas`, and
//     `vs_openblas_cpu` in process CPU time);
//   - f16 / bf16 matvec 4096 -> 14336 (weights [14336, 4096]) with GB/s of weights
//     streamed and the ratio to the machine's read bandwidth (`vs_read_bw`,
//     `vs_read_bw_cpu`), measured alternately with it by summing a 256 MiB f32
//     array with the widest SIMD the CPU has;
//   - ffn_swiglu (D 1024, F 2816) for a decode row and a 128-row block.
// Ratios come from interleaved medians because the machine is shared: a ratio of
// two back-to-back runs mostly measures how the neighbours' load changed.
// Threads come from SWITCHYARD_THREADS (the process-wide pool). One command line:
//   SWITCHYARD_THREADS=2 ./build/dev/bench/switchyard_bench
//     --benchmark_filter='Gemm|Matvec|ReadBandwidth|Ffn' --benchmark_repetitions=3
//     --benchmark_report_aggregates_only=true
//
// GCC 12's AVX-512 intrinsic headers trip its uninitialised-use analysis
// (_mm512_undefined_* inside _mm512_reduce_add_ps); silenced for this file only.
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"

#include <benchmark/benchmark.h>
#include <immintrin.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <ctime>
#include <random>
#include <string>
#include <vector>

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
    const KernelCall call{inputs, std::span<const TensorView>(&output, 1), params, ctx};
    return e.fn(call);
  }
};

double process_cpu_seconds() {
  timespec ts{};
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) + static_cast<double>(ts.tv_nsec) * 1e-9;
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

// Times two workloads alternately (A, B, A, B ...) after a warm-up of each, so both
// see the same machine load, which on a shared machine drifts from second to
// second. Medians of wall and process-CPU seconds per call.
struct Paired {
  double wall_a, wall_b, cpu_a, cpu_b;
};
template <typename A, typename B>
Paired paired_medians(int reps, A&& a, B&& b) {
  a();
  b();
  std::vector<double> wall[2], cpu[2];
  for (int i = 0; i < reps; ++i) {
    for (int which = 0; which < 2; ++which) {
      const double c0 = process_cpu_seconds();
      const auto t0 = std::chrono::steady_clock::now();
      if (which == 0) {
        a();
      } else {
        b();
      }
      wall[which].push_back(
          std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
      cpu[which].push_back(process_cpu_seconds() - c0);
    }
  }
  return {median(wall[0]), median(wall[1]), median(cpu[0]), median(cpu[1])};
}

// --- read bandwidth: the roofline of the matvec kernels ------------------------------

// Four named accumulators (an array here ends up in memory at -O2) keep four
// independent add chains, far more than the memory stream needs.
__attribute__((target("avx2"))) float sum_avx2(const float* p, std::int64_t n) {
  __m256 a0 = _mm256_setzero_ps(), a1 = a0, a2 = a0, a3 = a0;
  for (std::int64_t i = 0; i + 32 <= n; i += 32) {
    a0 = _mm256_add_ps(a0, _mm256_loadu_ps(p + i));
    a1 = _mm256_add_ps(a1, _mm256_loadu_ps(p + i + 8));
    a2 = _mm256_add_ps(a2, _mm256_loadu_ps(p + i + 16));
    a3 = _mm256_add_ps(a3, _mm256_loadu_ps(p + i + 24));
  }
  const __m256 s = _mm256_add_ps(_mm256_add_ps(a0, a1), _mm256_add_ps(a2, a3));
  float lanes[8];
  _mm256_storeu_ps(lanes, s);
  float total = 0;
  for (float v : lanes) total += v;
  return total;
}

__attribute__((target("avx512f"))) float sum_avx512(const float* p, std::int64_t n) {
  __m512 a0 = _mm512_setzero_ps(), a1 = a0, a2 = a0, a3 = a0;
  for (std::int64_t i = 0; i + 64 <= n; i += 64) {
    a0 = _mm512_add_ps(a0, _mm512_loadu_ps(p + i));
    a1 = _mm512_add_ps(a1, _mm512_loadu_ps(p + i + 16));
    a2 = _mm512_add_ps(a2, _mm512_loadu_ps(p + i + 32));
    a3 = _mm512_add_ps(a3, _mm512_loadu_ps(p + i + 48));
  }
  return _mm512_reduce_add_ps(_mm512_add_ps(_mm512_add_ps(a0, a1), _mm512_add_ps(a2, a3)));
}

// A read-only sweep of `floats` f32 values on the pool's threads.
struct ReadBandwidth {
  std::vector<float> data;
  explicit ReadBandwidth(std::int64_t floats) : data(static_cast<std::size_t>(floats), 1.0f) {}
  float sweep() {
    ThreadPool& pool = default_thread_pool();
    std::vector<float> partial(static_cast<std::size_t>(pool.num_threads()), 0.0f);
    const std::int64_t n = static_cast<std::int64_t>(data.size());
    const bool wide = __builtin_cpu_supports("avx512f");
    pool.parallel_for(n, 1 << 20, [&](std::int64_t begin, std::int64_t end) {
      const float s = wide ? sum_avx512(data.data() + begin, end - begin)
                           : sum_avx2(data.data() + begin, end - begin);
      partial[static_cast<std::size_t>(begin * pool.num_threads() / n)] += s;
    });
    float total = 0;
    for (float v : partial) total += v;
    return total;
  }
};

constexpr std::int64_t kReadBandwidthFloats = std::int64_t{64} << 20;  // 256 MiB

void BM_ReadBandwidth(benchmark::State& state) {
  ReadBandwidth bw(kReadBandwidthFloats);
  for (auto _ : state) benchmark::DoNotOptimize(bw.sweep());
  state.counters["GB/s"] = benchmark::Counter(
      static_cast<double>(bw.data.size()) * 4.0 * static_cast<double>(state.iterations()),
      benchmark::Counter::kIsRate);
  state.counters["threads"] = default_thread_pool().num_threads();
}
BENCHMARK(BM_ReadBandwidth)->Unit(benchmark::kMillisecond)->UseRealTime();

// --- f32 GEMM vs OpenBLAS -------------------------------------------------------------

void BM_GemmF32(benchmark::State& state, std::string kernel) {
  const std::int64_t n = state.range(0);
  const DTypeList key{DType::kF32, DType::kF32, DType::kF32};
  const BindingEntry* entry = find_entry(OpKind::kMatmul, key, kernel);
  if (entry == nullptr) {
    state.SkipWithError(("not registered on this CPU: " + kernel).c_str());
    return;
  }
  auto a = random_bytes(DType::kF32, n * n, 1);
  auto w = random_bytes(DType::kF32, n * n, 2);
  std::vector<float> out(static_cast<std::size_t>(n * n));
  Call call{.inputs = {TensorView::contiguous(a.data(), DType::kF32, {n, n}),
                       TensorView::contiguous(w.data(), DType::kF32, {n, n})},
            .output = TensorView::contiguous(out.data(), DType::kF32, {n, n})};
  const double flops =
      2.0 * static_cast<double>(n) * static_cast<double>(n) * static_cast<double>(n);
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
    ->Arg(1024)
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime();
BENCHMARK_CAPTURE(BM_GemmF32, avx2, std::string("matmul_f32__cpu_avx2"))
    ->Arg(1024)
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime();
BENCHMARK_CAPTURE(BM_GemmF32, openblas, std::string("matmul_f32__cpu_openblas"))
    ->Arg(1024)
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
  // The roofline, timed in this run, alternating with the kernel under test.
  ReadBandwidth bw(kReadBandwidthFloats);
  const Paired p = paired_medians(
      7, [&] { (void)call.run(*entry); }, [&] { benchmark::DoNotOptimize(bw.sweep()); });
  const double read_gbps = static_cast<double>(bw.data.size()) * 4.0 / p.wall_b / 1e9;
  state.counters["read_GB/s"] = read_gbps;
  state.counters["vs_read_bw"] = weight_bytes / p.wall_a / 1e9 / read_gbps;
  // Bytes per CPU-second against the sweep's: less disturbed by other tenants.
  state.counters["vs_read_bw_cpu"] =
      (weight_bytes / p.cpu_a) / (static_cast<double>(bw.data.size()) * 4.0 / p.cpu_b);
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
BENCHMARK_CAPTURE(BM_FfnSwiglu, f32_avx2, DType::kF32, std::string("ffn_swiglu_f32__cpu_avx2"))
    ->Arg(1)
    ->Arg(128)
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime();
BENCHMARK_CAPTURE(BM_FfnSwiglu, f16_avx2, DType::kF16, std::string("ffn_swiglu_f32_f16__cpu_avx2"))
    ->Arg(1)
    ->Arg(128)
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime();

}  // namespace
}  // namespace switchyard
