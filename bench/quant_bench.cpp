// Quantized matvec / matmul through the kernels the binding table resolves, with
// the machine's read bandwidth measured in the same run as the roofline.
//
//   ./build/release/bench/switchyard_bench --benchmark_filter='Quant'
//
// Every benchmark runs once per SIMD sibling the CPU has (suffix /avx512, /avx2),
// through the sibling's binding-table entry, on the process-wide pool
// (SWITCHYARD_THREADS).
// QuantMatvec/<fmt>    [1 x 4096] x [14336 x 4096]^T, timed alternately with a
//                      read sweep (bench/roofline.h), medians of 9 pairs:
//                      GB/s      weight bytes read per second;
//                      bw_ratio  over a sweep of as many bytes as the weights
//                                (the same cache regime: on hosts with a large
//                                L3 both stay in it);
//                      bw_ratio_dram, GB/s_dram  the same against a 1 GiB sweep,
//                                which also evicts the weights between calls, so
//                                kernel and sweep both read DRAM.
// QuantDotInCache/<fmt> one thread, 256 weight rows that stay in L2: the compute
//                      ceiling per core (GB/s of weights consumed, activation
//                      quantization included).
// QuantMatmul/<fmt>    [512 x 4096] x [14336 x 4096]^T (~60 GFLOP): one iteration
//                      per format and sibling (amx too); counter GFLOP/s.
// QuantMatmulRows/<fmt>/<sibling>/<rows>  [rows x 4096] x [14336 x 4096]^T for 1
//                      to 128 activation rows: where the AMX sibling, which
//                      unpacks the weights once per call, overtakes the AVX-512
//                      one (the crossover the cost functions must agree with).
// Weights are 256 distinct quantized rows repeated to 14336 (quantizing 58M values
// with the reference k-quant searches would dominate the run); the bytes streamed
// are the full matrix either way.
#include <benchmark/benchmark.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <random>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "roofline.h"
#include "switchyard/backends.h"
#include "switchyard/binding_table.h"
#include "switchyard/quant.h"
#include "switchyard/thread_pool.h"

namespace switchyard {
namespace {

constexpr std::int64_t kK = 4096;
constexpr std::int64_t kN = 14336;
constexpr std::int64_t kPrefillRows = 512;

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

// The CPU sibling of `matmul (f32, t, f32)` whose name ends in `_<variant>`
// ("avx512", "avx512_packed", "vnni_packed256", "avx2", ...), or the table's first when `variant`
// is empty. The benchmarks are registered during static initialisation, before main publishes the
// built-in table, so they read a table of their own, built the same way.
const BindingEntry* sibling(DType t, std::string_view source) {
  static const KernelBindingTable kTable = [] {
    Result<KernelBindingTable> table = make_builtin_table();
    SWITCHYARD_CHECK(table.is_ok());
    return std::move(table).value();
  }();
  for (const BindingEntry& e : kTable.lookup_alternatives(
           OpKind::kMatmul, {DType::kF32, t, DType::kF32}, BackendId::kCpu)) {
    if (source.empty() ||
        (e.name.ends_with(source) && e.name[e.name.size() - source.size() - 1] == '_')) {
      return &e;
    }
  }
  return nullptr;
}

void run_quant_matmul(benchmark::State& state, DType t, std::string_view source, std::int64_t rows,
                      std::int64_t n = kN, bool threaded = true, bool roofline = true) {
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
  TensorView views[] = {TensorView::contiguous(a.data(), DType::kF32, {rows, kK}),
                        TensorView::contiguous(w.bytes.data(), t, {n, kK}),
                        TensorView::contiguous(out.data(), DType::kF32, {rows, n})};
  OpParams params;
  ExecContext ctx;
  ctx.runner = threaded ? &default_thread_pool() : nullptr;
  // A packed sibling reads the weight packed, as an executor packs it at load.
  std::shared_ptr<void> packed;
  if (entry->packing != nullptr) {
    Result<std::shared_ptr<void>> copy = pack_operand(*entry->packing, views[1], ctx);
    if (!copy.is_ok()) {
      state.SkipWithError(copy.status().to_string().c_str());
      return;
    }
    packed = *std::move(copy);
  }
  double seconds = 0.0;
  for (auto _ : state) {
    const auto t0 = std::chrono::steady_clock::now();
    const Status s =
        entry->fn({std::span(views, 2), std::span(views + 2, 1), params, ctx, entry->name});
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
  const double weight_bytes = static_cast<double>(n * w.row_bytes);
  if (rows == 1 && threaded && roofline) {
    // The roofline in the same run, alternating with the kernel (see the top).
    auto kernel = [&] {
      (void)entry->fn({std::span(views, 2), std::span(views + 2, 1), params, ctx, entry->name});
    };
    for (const auto& [bytes, suffix] : {std::pair{static_cast<std::size_t>(weight_bytes), ""},
                                        std::pair{bench::kDramSweepBytes, "_dram"}}) {
      bench::ReadSweep sweep(bytes);
      const bench::Paired p =
          bench::paired_medians(9, kernel, [&] { benchmark::DoNotOptimize(sweep.run()); });
      const double gbps = weight_bytes / p.wall_a / 1e9;
      const double peer = static_cast<double>(sweep.bytes()) / p.wall_b / 1e9;
      state.counters[std::string("GB/s") + suffix] = gbps;
      state.counters[std::string("read_GB/s") + suffix] = peer;
      state.counters[std::string("bw_ratio") + suffix] = gbps / peer;
    }
  } else if (rows == 1 && roofline) {
    state.counters["GB/s"] = weight_bytes * iters / seconds / 1e9;
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
void BM_QuantMatmulRows(benchmark::State& state, DType t, std::string_view source) {
  run_quant_matmul(state, t, source, state.range(0), kN, true, false);
}
// One thread, 256 weight rows (at most 1.1 MB for q8_0: in L2): the kernel's
// compute ceiling in weight bytes per second per core, with memory out of the
// way. The per-call activation quantization (one 4096-row) is still in it, a
// few percent of the time (at 64 rows it was a third and hid the dot products).
void BM_QuantDotInCache(benchmark::State& state, DType t, std::string_view source) {
  run_quant_matmul(state, t, source, 1, 256, false);
}

// The weight formats, which the integer-dot siblings serve.
constexpr auto kFormats = kQuantizedWeightDTypes;

// One benchmark per format and SIMD sibling the CPU runs (`<name>/<fmt>/<source>`),
// so siblings are compared in the same run.
std::vector<std::string_view> simd_sources(DType t, bool amx = false) {
  std::vector<std::string_view> out;
  for (std::string_view source : {"amx_bf16", "amx"}) {
    if (amx && sibling(t, source) != nullptr) out.push_back(source);
  }
  for (std::string_view source : {"avx512_packed", "vnni_packed256", "avx512", "avx2"}) {
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
      add("BM_QuantMatvec", t, s, BM_QuantMatvec)->Unit(benchmark::kMillisecond)->MinTime(0.1);
    }
  }
  for (DType t : kFormats) {
    for (std::string_view s : simd_sources(t)) {
      add("BM_QuantDotInCache", t, s, BM_QuantDotInCache)->MinTime(0.2);
    }
  }
  for (DType t : kFormats) {
    for (std::string_view s : simd_sources(t, true)) {
      add("BM_QuantMatmul", t, s, BM_QuantMatmul)->Unit(benchmark::kMillisecond)->Iterations(1);
    }
  }
  for (DType t : {DType::kQ4_0, DType::kQ8_0, DType::kQ4_K, DType::kQ6_K}) {
    for (std::string_view s : simd_sources(t, true)) {
      add("BM_QuantMatmulRows", t, s, BM_QuantMatmulRows)
          ->RangeMultiplier(2)
          ->Range(1, 128)
          ->Unit(benchmark::kMillisecond)
          ->MinTime(0.2);
    }
  }
  return true;
}();

}  // namespace
}  // namespace switchyard
