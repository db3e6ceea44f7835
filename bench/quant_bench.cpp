// Quantized matvec / matmul through the kernels the binding table resolves, with
// the machine's read bandwidth measured in the same run as the roofline.
//
//   ./build/release/bench/switchyard_bench --benchmark_filter='Quant'
//
// QuantReadBandwidth   streams a 256 MiB buffer with every thread (AVX2 loads when
//                      the CPU has them): the matvec roofline.
// Every benchmark below runs once per SIMD sibling the CPU has (suffix /avx512,
// /avx2), through the sibling's binding-table entry.
// QuantMatvec/<fmt>    [1 x 4096] x [14336 x 4096]^T: counters GB/s (weight bytes
//                      read per second) and bw_ratio (GB/s over the measured read
//                      bandwidth).
// QuantDotInCache/<fmt> one thread, 256 weight rows that stay in L2: the compute
//                      ceiling per core (GB/s of weights consumed, activation
//                      quantization included).
// QuantMatmul/<fmt>    [512 x 4096] x [14336 x 4096]^T (~60 GFLOP): one iteration
//                      per format; counter GFLOP/s.
// Weights are 256 distinct quantized rows repeated to 14336 (quantizing 58M values
// with the reference k-quant searches would dominate the run); the bytes streamed
// are the full matrix either way.
#include <benchmark/benchmark.h>
#include <immintrin.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <random>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "backends/cpu/cpu_features.h"
#include "switchyard/dispatch.h"
#include "switchyard/quant.h"
#include "switchyard/thread_pool.h"

namespace switchyard {
namespace {

constexpr std::int64_t kK = 4096;
constexpr std::int64_t kN = 14336;
constexpr std::int64_t kPrefillRows = 512;

ThreadPool& pool() {
  static ThreadPool p(static_cast<int>(std::max(1u, std::thread::hardware_concurrency())));
  return p;
}

__attribute__((target("avx2"))) double sum_avx2(const float* p, std::int64_t n) {
  __m256 a0 = _mm256_setzero_ps(), a1 = a0, a2 = a0, a3 = a0;
  for (std::int64_t i = 0; i + 32 <= n; i += 32) {
    a0 = _mm256_add_ps(a0, _mm256_loadu_ps(p + i));
    a1 = _mm256_add_ps(a1, _mm256_loadu_ps(p + i + 8));
    a2 = _mm256_add_ps(a2, _mm256_loadu_ps(p + i + 16));
    a3 = _mm256_add_ps(a3, _mm256_loadu_ps(p + i + 24));
  }
  float lanes[8];
  _mm256_storeu_ps(lanes, _mm256_add_ps(_mm256_add_ps(a0, a1), _mm256_add_ps(a2, a3)));
  double s = 0.0;
  for (float v : lanes) s += v;
  return s;
}

double sum_scalar(const float* p, std::int64_t n) {
  float a[8] = {};
  for (std::int64_t i = 0; i + 8 <= n; i += 8) {
    for (int j = 0; j < 8; ++j) a[j] += p[i + j];
  }
  double s = 0.0;
  for (float v : a) s += v;
  return s;
}

// One pass over `buf` split across the pool; returns seconds.
double read_pass(const std::vector<float>& buf) {
  const bool avx2 = cpu::cpu_features().avx2;
  const std::int64_t n = static_cast<std::int64_t>(buf.size());
  const std::int64_t chunk = 1 << 20;
  std::vector<double> sink(static_cast<std::size_t>((n + chunk - 1) / chunk));
  const auto t0 = std::chrono::steady_clock::now();
  pool().parallel_for((n + chunk - 1) / chunk, 1, [&](std::int64_t b, std::int64_t e) {
    for (std::int64_t c = b; c < e; ++c) {
      const std::int64_t len = std::min(chunk, n - c * chunk);
      sink[static_cast<std::size_t>(c)] =
          avx2 ? sum_avx2(buf.data() + c * chunk, len) : sum_scalar(buf.data() + c * chunk, len);
    }
  });
  const auto t1 = std::chrono::steady_clock::now();
  benchmark::DoNotOptimize(sink.data());
  return std::chrono::duration<double>(t1 - t0).count();
}

// Best of several passes over 256 MiB, in GB/s; measured once per process.
double measured_read_gbps() {
  static const double kGbps = [] {
    std::vector<float> buf(64 << 20, 1.0f);
    double best = 1e30;
    for (int i = 0; i < 6; ++i) best = std::min(best, read_pass(buf));
    return static_cast<double>(buf.size() * sizeof(float)) / best / 1e9;
  }();
  return kGbps;
}

void BM_QuantReadBandwidth(benchmark::State& state) {
  std::vector<float> buf(64 << 20, 1.0f);
  double seconds = 0.0;
  for (auto _ : state) {
    const double s = read_pass(buf);
    state.SetIterationTime(s);
    seconds += s;
  }
  state.counters["GB/s"] =
      benchmark::Counter(static_cast<double>(buf.size() * sizeof(float)) *
                         static_cast<double>(state.iterations()) / seconds / 1e9);
}
BENCHMARK(BM_QuantReadBandwidth)->UseManualTime()->Iterations(5)->Unit(benchmark::kMillisecond);

struct Weights {
  std::vector<std::byte> bytes;
  std::int64_t row_bytes = 0;
};

const Weights& weights(DType t) {
  static std::vector<std::pair<DType, Weights>> cache;
  for (const auto& [d, w] : cache) {
    if (d == t) return w;
  }
  constexpr std::int64_t kDistinct = 256;
  std::mt19937 rng(42);
  std::normal_distribution<float> normal(0.0f, 0.02f);
  std::vector<float> src(static_cast<std::size_t>(kDistinct * kK));
  for (float& v : src) v = normal(rng);
  Weights w;
  w.row_bytes = *row_bytes(t, kK);
  std::vector<std::byte> distinct(static_cast<std::size_t>(kDistinct * w.row_bytes));
  if (!quantize(t, src, distinct).is_ok()) std::abort();
  w.bytes.resize(static_cast<std::size_t>(kN * w.row_bytes));
  for (std::int64_t r = 0; r < kN; ++r) {
    std::memcpy(w.bytes.data() + r * w.row_bytes, distinct.data() + (r % kDistinct) * w.row_bytes,
                static_cast<std::size_t>(w.row_bytes));
  }
  cache.emplace_back(t, std::move(w));
  return cache.back().second;
}

// The CPU sibling of `matmul (f32, t, f32)` from `source` ("avx512", "avx2"), or
// the table's first when `source` is empty.
const BindingEntry* sibling(DType t, std::string_view source) {
  static const TableSnapshot kTable = current_table();
  for (const BindingEntry& e : kTable->lookup_alternatives(
           OpKind::kMatmul, {DType::kF32, t, DType::kF32}, BackendId::kCpu)) {
    if (source.empty() || e.source == source) return &e;
  }
  return nullptr;
}

void run_quant_matmul(benchmark::State& state, DType t, std::string_view source, std::int64_t rows,
                      std::int64_t n = kN, bool threaded = true) {
  const BindingEntry* const entry = sibling(t, source);
  if (entry == nullptr) {
    state.SkipWithError("no kernel registered");
    return;
  }
  Weights& w = const_cast<Weights&>(weights(t));
  std::vector<float> a(static_cast<std::size_t>(rows * kK));
  std::mt19937 rng(1);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  for (float& v : a) v = normal(rng);
  std::vector<float> out(static_cast<std::size_t>(rows * kN));
  const TensorView views[] = {TensorView::contiguous(a.data(), DType::kF32, {rows, kK}),
                              TensorView::contiguous(w.bytes.data(), t, {n, kK}),
                              TensorView::contiguous(out.data(), DType::kF32, {rows, n})};
  OpParams params;
  ExecContext ctx;
  ctx.runner = threaded ? &pool() : nullptr;
  const double gbps_peak = measured_read_gbps();
  double seconds = 0.0;
  for (auto _ : state) {
    const auto t0 = std::chrono::steady_clock::now();
    const Status s = entry->fn({std::span(views, 2), std::span(views + 2, 1), params, ctx});
    const auto t1 = std::chrono::steady_clock::now();
    if (!s.is_ok()) {
      state.SkipWithError(s.to_string().c_str());
      return;
    }
    benchmark::ClobberMemory();
    seconds += std::chrono::duration<double>(t1 - t0).count();
  }
  state.SetLabel(entry->name);
  const double iters = static_cast<double>(state.iterations());
  if (rows == 1) {
    const double gbps = static_cast<double>(n * w.row_bytes) * iters / seconds / 1e9;
    state.counters["GB/s"] = gbps;
    state.counters["read_GB/s"] = gbps_peak;
    state.counters["bw_ratio"] = gbps / gbps_peak;
  } else {
    state.counters["GFLOP/s"] = 2.0 * static_cast<double>(rows * n * kK) * iters / seconds / 1e9;
  }
}

void BM_QuantMatvec(benchmark::State& state, DType t, std::string_view source) {
  run_quant_matmul(state, t, source, 1);
}
void BM_QuantMatmul(benchmark::State& state, DType t, std::string_view source) {
  run_quant_matmul(state, t, source, kPrefillRows);
}
// One thread, 256 weight rows (at most 1.1 MB for q8_0: in L2): the kernel's
// compute ceiling in weight bytes per second per core, with memory out of the
// way. The per-call activation quantization (one 4096-row) is still in it, a
// few percent of the time (at 64 rows it was a third and hid the dot products).
void BM_QuantDotInCache(benchmark::State& state, DType t, std::string_view source) {
  run_quant_matmul(state, t, source, 1, 256, false);
}

constexpr DType kFormats[] = {DType::kQ4_0, DType::kQ4_1, DType::kQ5_0,   DType::kQ5_1,
                              DType::kQ8_0, DType::kQ2_K, DType::kQ3_K,   DType::kQ4_K,
                              DType::kQ5_K, DType::kQ6_K, DType::kIQ4_NL, DType::kIQ4_XS,
                              DType::kMXFP4};

// One benchmark per format and SIMD sibling the CPU runs (`<name>/<fmt>/<source>`),
// so siblings are compared in the same run.
std::vector<std::string_view> simd_sources(DType t) {
  std::vector<std::string_view> out;
  for (std::string_view source : {"avx512", "avx2"}) {
    if (sibling(t, source) != nullptr) out.push_back(source);
  }
  if (out.empty()) out.push_back("");
  return out;
}

template <typename Fn>
benchmark::internal::Benchmark* add(const char* bench, DType t, std::string_view source, Fn fn) {
  // Appended piece by piece: GCC 12 at -O3 flags `"/" + std::string(...)` with a
  // spurious -Wrestrict.
  std::string label(bench);
  label += '/';
  label += name(t);
  if (!source.empty()) {
    label += '/';
    label += source;
  }
  return benchmark::RegisterBenchmark(label.c_str(), fn, t, source);
}

const bool kRegistered = [] {
  for (DType t : kFormats) {
    for (std::string_view s : simd_sources(t)) {
      add("BM_QuantMatvec", t, s, BM_QuantMatvec)->Unit(benchmark::kMillisecond)->MinTime(0.5);
    }
  }
  for (DType t : kFormats) {
    for (std::string_view s : simd_sources(t)) {
      add("BM_QuantDotInCache", t, s, BM_QuantDotInCache)->MinTime(0.2);
    }
  }
  for (DType t : kFormats) {
    for (std::string_view s : simd_sources(t)) {
      add("BM_QuantMatmul", t, s, BM_QuantMatmul)->Unit(benchmark::kMillisecond)->Iterations(1);
    }
  }
  return true;
}();

}  // namespace
}  // namespace switchyard
