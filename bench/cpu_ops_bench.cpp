// CPU non-matmul kernels against this machine's memory bandwidth, measured in the
// same run.
//
//   SWITCHYARD_THREADS=2 ./build/release/bench/switchyard_bench
//       --benchmark_filter='Stream|CpuOp' --benchmark_min_time=0.3
//   (one command line)
//
// BM_CpuOp runs every kernel on 16M-element tensors (64 MiB in f32) through the
// process-wide thread pool, like the executor runs it. That is beyond the caches of
// most machines but not of every host: some report hundreds of MiB of L3, where
// kernel and peer both run from cache. BM_CpuOpDram therefore runs the streaming
// ops (elementwise, casts, norms, softmax, reductions) again on 16x larger tensors
// (256M elements, 1 GiB per f32 operand), beyond any last-level cache, so kernel and
// peer both stream from DRAM. BM_CpuOpCache runs them on 64K elements (256 KiB per
// f32 operand, 16 rows of 4096), which stay in a core's L2: single-threaded
// (SWITCHYARD_THREADS=1) its CPU time is the kernel's arithmetic cost per element,
// the figure to compare when the machine is shared and bandwidth is not
// measurable. Counters:
//   GB/s       operand bytes (inputs read once, output written once) per second,
//              over all iterations;
//   best_GB/s  the same for the fastest iteration;
//   peer_GB/s  best-of-five bandwidth of the streaming peer with the same mix of
//              reads and writes, measured right after the kernel: copy (one read
//              stream, one write stream) for kernels with one full-size input,
//              triad (two reads, one write) for two full-size inputs; plain loops
//              with ordinary stores, through the same pool;
//   ratio      best_GB/s / peer_GB/s.
// Transpose and concat move bits only: their peer is the copy.
// Attention is compute-bound: it reports GFLOP/s (of the op's default cost-model
// flop count, the same for every sibling).
#include <benchmark/benchmark.h>
#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstring>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "switchyard/dispatch.h"
#include "switchyard/half.h"
#include "switchyard/thread_pool.h"

namespace switchyard {
namespace {

constexpr std::int64_t kElems = std::int64_t{1} << 24;
constexpr std::int64_t kRowLength = 4096;
// Rows of kRowLength elements per tensor in each family (BM_CpuOp has kElems).
constexpr std::int64_t kL3Rows = kElems / kRowLength;
constexpr std::int64_t kDramRows = kL3Rows * 16;
constexpr std::int64_t kCacheRows = 16;
constexpr std::int64_t kGrain = 1 << 15;

// One owned buffer of n elements of `dtype`, filled with values in [0.5, 1.5). It
// starts on a 64-byte boundary, as the executor's host allocations do: a vector of
// this size starts 16 bytes into a page, where every 64-byte access of an AVX-512
// row would straddle two cache lines.
struct Buffer {
  Buffer(DType t, Shape s) : dtype(t), shape(s), bytes(storage_bytes(t, s)) {
    data.assign(bytes / 8 + 16, 0);
    const auto address = reinterpret_cast<std::uintptr_t>(data.data());
    first = reinterpret_cast<std::byte*>(data.data()) + ((64 - address % 64) % 64);
    std::byte* p = first;
    if (t == DType::kQ8_0) {  // a q8_0 KV cache: every block scale 1/64, varied levels
      const std::uint16_t scale = f32_to_f16(1.0f / 64);
      for (std::int64_t b = 0; b < s.numel() / block_elems(t); ++b) {
        std::byte* block = p + b * block_bytes(t);
        std::memcpy(block, &scale, sizeof scale);
        for (int j = 0; j < block_elems(t); ++j) {
          block[2 + j] = static_cast<std::byte>((b * 31 + j * 7) % 61);
        }
      }
      return;
    }
    for (std::int64_t i = 0; i < s.numel(); ++i) {
      // A multiplicative hash, not a random engine: the DRAM-sized buffers hold
      // 256M values, and only their range matters to the timing.
      const std::uint32_t h = static_cast<std::uint32_t>(i) * 2654435761u;
      const float v = 0.5f + static_cast<float>(h >> 8) * (1.0f / 16777216.0f);
      if (t == DType::kF32) reinterpret_cast<float*>(p)[i] = v;
      if (t == DType::kF16) reinterpret_cast<std::uint16_t*>(p)[i] = f32_to_f16(v);
      if (t == DType::kBF16) reinterpret_cast<std::uint16_t*>(p)[i] = f32_to_bf16(v);
      if (t == DType::kI32)
        reinterpret_cast<std::int32_t*>(p)[i] = static_cast<std::int32_t>(i % 7);
    }
  }
  TensorView view() { return TensorView::contiguous(first, dtype, shape); }
  static std::size_t storage_bytes(DType t, const Shape& s) {
    return is_quantized(t) ? static_cast<std::size_t>(s.numel() / block_elems(t) * block_bytes(t))
                           : static_cast<std::size_t>(s.numel()) * dense_bytes(t);
  }
  DType dtype;
  Shape shape;
  std::size_t bytes;
  std::vector<std::uint64_t> data;
  std::byte* first;  // the first element, 64-byte aligned, inside `data`
};

// Best-of-five bandwidth of a plain streaming loop through the pool, in GB/s:
// copy (a = b) or triad (a = b + s * c), over `elems` floats per array.
//
// Both loops store with ordinary stores, as the kernels do. The copy is kept a
// loop (GCC would otherwise turn it into memcpy, which for hundreds of MiB
// switches to non-temporal stores that skip reading the destination: a roofline
// no kernel writing with ordinary stores can reach, and the wrong peer for one).
__attribute__((optimize("no-tree-loop-distribute-patterns"))) double stream_gbps(
    bool triad, std::int64_t elems = kElems) {
  std::vector<float> a(static_cast<std::size_t>(elems), 0.0f);
  std::vector<float> b(static_cast<std::size_t>(elems), 1.0f);
  std::vector<float> c(triad ? static_cast<std::size_t>(elems) : 0, 2.0f);
  ThreadPool& pool = default_thread_pool();
  double best = 0;
  for (int rep = 0; rep < 5; ++rep) {
    const auto t0 = std::chrono::steady_clock::now();
    pool.parallel_for(elems, kGrain, [&](std::int64_t begin, std::int64_t end) {
      if (triad) {
        for (std::int64_t i = begin; i < end; ++i) a[i] = b[i] + 3.0f * c[i];
      } else {
        for (std::int64_t i = begin; i < end; ++i) a[i] = b[i];
      }
    });
    const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    best = std::max(best, (triad ? 12.0 : 8.0) * static_cast<double>(elems) / s / 1e9);
  }
  benchmark::DoNotOptimize(a.data());
  return best;
}

void BM_Stream(benchmark::State& state) {
  const bool triad = state.range(0) == 1;
  double gbps = 0;
  for (auto _ : state) gbps = stream_gbps(triad);
  state.counters["GB/s"] = gbps;
  state.SetLabel(triad ? "triad" : "copy");
}
BENCHMARK(BM_Stream)->Arg(0)->Arg(1)->Unit(benchmark::kMillisecond)->Iterations(1);

// One benchmark per CPU sibling at a key.
struct OpBench {
  std::string label;
  // What the kernel's variant names after its instruction set (kernel_name in
  // binding_table.h): "w" for a norm with a weight, "in2" for a two-input concat;
  // empty for most.
  std::string extra;
  OpKind op;
  DTypeList dtypes;
  std::vector<Shape> shapes;  // inputs then the output
  OpParams params;
  bool compute_bound = false;
  // The second input is a row (shapes[1]) broadcast over the output's leading dim.
  bool broadcast_second = false;
};

// The ops the bandwidth target is about, run again at DRAM size (BM_CpuOpDram):
// elementwise, casts, norms, softmax and reductions.
bool streaming(const OpBench& spec) {
  return !spec.compute_bound && spec.op != OpKind::kRope && spec.op != OpKind::kGetRows &&
         spec.op != OpKind::kCopy && spec.op != OpKind::kTranspose && spec.op != OpKind::kConcat;
}

// `rows`: the tensors hold `rows` rows of kRowLength elements (kCacheRows,
// kL3Rows or kDramRows); the peer streams as many floats.
void run_op(benchmark::State& state, const OpBench& spec, std::string kernel, std::int64_t rows) {
  const TableSnapshot table = current_table();
  const BindingEntry* entry = nullptr;
  for (const BindingEntry& e : table->lookup_alternatives(spec.op, spec.dtypes, BackendId::kCpu)) {
    if (e.name == kernel) entry = &e;
  }
  if (entry == nullptr) {
    state.SkipWithError("kernel not registered on this CPU");
    return;
  }
  std::vector<Buffer> buffers;
  for (std::size_t i = 0; i < spec.shapes.size(); ++i)
    buffers.emplace_back(spec.dtypes[i], spec.shapes[i]);
  if (spec.op == OpKind::kGetRows) {
    auto* idx = reinterpret_cast<std::int32_t*>(buffers[1].first);
    std::mt19937 gen(5);
    for (std::int64_t i = 0; i < spec.shapes[1].numel(); ++i) {
      idx[i] = static_cast<std::int32_t>(gen() % static_cast<std::uint32_t>(spec.shapes[0][0]));
    }
  }
  std::vector<TensorView> inputs, outputs;
  double bytes = 0;
  for (std::size_t i = 0; i < buffers.size(); ++i) {
    TensorView v = buffers[i].view();
    if (spec.broadcast_second && i == 1) {
      const std::int64_t strides[] = {0, 1};
      v = TensorView::strided(buffers[i].first, spec.dtypes[i], spec.shapes.back(), strides);
    }
    (i + 1 < buffers.size() ? inputs : outputs).push_back(v);
    bytes += static_cast<double>(buffers[i].bytes);
  }
  if (spec.op == OpKind::kGetRows)
    bytes -= static_cast<double>(buffers[0].bytes) / 2;  // half the table is read
  ExecContext ctx{.runner = &default_thread_pool()};
  KernelCall call{inputs, outputs, spec.params, ctx};
  double seconds = 0;
  double best = 1e30;
  for (auto _ : state) {
    const auto t0 = std::chrono::steady_clock::now();
    const Status s = entry->fn(call);
    const double dt = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    seconds += dt;
    best = std::min(best, dt);
    if (!s.is_ok()) {
      state.SkipWithError(s.to_string().c_str());
      return;
    }
  }
  const double iters = static_cast<double>(state.iterations());
  if (spec.compute_bound) {
    std::vector<DType> dts(spec.dtypes.span().begin(), spec.dtypes.span().end());
    // The op's default flop count, not the entry's own estimate: a sibling may
    // weight its estimate (the scalar attention reference counts 8x) to be ranked.
    const CostEstimate c =
        default_cost_for(spec.op)({spec.op, spec.shapes, dts, &spec.params, nullptr});
    state.counters["GFLOP/s"] = c.flops * iters / seconds / 1e9;
    return;
  }
  // The peer is measured right after the kernel, so both see the same machine
  // state; both figures are best-of-N, which filters out time slices lost to other
  // processes on a shared machine.
  // The peer moves the same number of full-size streams: a triad for two full-size
  // inputs (add, mul), a copy when the other inputs are small or broadcast rows
  // (norm weights, a broadcast addend, rope positions, get_rows indices).
  const std::int64_t out_elems = spec.shapes.back().numel();
  const auto full_inputs = std::count_if(spec.shapes.begin(), spec.shapes.end() - 1,
                                         [&](const Shape& s) { return s.numel() == out_elems; });
  const bool two_streams = full_inputs >= 2 && !spec.broadcast_second;
  const double peer = stream_gbps(two_streams, rows * kRowLength);
  state.counters["GB/s"] = bytes * iters / seconds / 1e9;
  state.counters["best_GB/s"] = bytes / best / 1e9;
  state.counters["peer_GB/s"] = peer;
  state.counters["ratio"] = bytes / best / 1e9 / peer;
}

std::vector<OpBench> op_benches(std::int64_t row_count) {
  const DType f32 = DType::kF32, f16 = DType::kF16, bf16 = DType::kBF16, i32 = DType::kI32;
  const Shape flat{row_count * kRowLength};
  const Shape rows{row_count, kRowLength};
  OpParams none;
  OpParams scaled;
  scaled.scale = 0.125f;
  OpParams last;
  last.axis = -1;
  return {
      {"add/f32", "", OpKind::kAdd, {f32, f32, f32}, {flat, flat, flat}, none},
      {"mul/bf16", "", OpKind::kMul, {bf16, bf16, bf16}, {flat, flat, flat}, none},
      {"add_row_broadcast/f32",
       "",
       OpKind::kAdd,
       {f32, f32, f32},
       {rows, {4096}, rows},
       none,
       false,
       true},
      {"scale/f32", "", OpKind::kScale, {f32, f32}, {flat, flat}, scaled},
      {"exp/f32", "", OpKind::kExp, {f32, f32}, {flat, flat}, none},
      {"silu/f32", "", OpKind::kSilu, {f32, f32}, {flat, flat}, none},
      {"gelu/f32", "", OpKind::kGelu, {f32, f32}, {flat, flat}, none},
      {"silu/f16", "", OpKind::kSilu, {f16, f16}, {flat, flat}, none},
      {"cast/f32_f16", "", OpKind::kCast, {f32, f16}, {flat, flat}, none},
      {"cast/bf16_f32", "", OpKind::kCast, {bf16, f32}, {flat, flat}, none},
      {"rms_norm_w/f32", "w", OpKind::kRmsNorm, {f32, f32, f32}, {rows, {4096}, rows}, none},
      {"layer_norm_wb/f32",
       "wb",
       OpKind::kLayerNorm,
       {f32, f32, f32, f32},
       {rows, {4096}, {4096}, rows},
       none},
      {"softmax/f32", "", OpKind::kSoftmax, {f32, f32}, {rows, rows}, scaled},
      {"sum/f32", "", OpKind::kSum, {f32, f32}, {rows, {row_count, 1}}, none},
      {"rope/f32",
       "",
       OpKind::kRope,
       {f32, i32, f32},
       {{4096, 32, 128}, {4096}, {4096, 32, 128}},
       none},
      {"get_rows/f16_f32",
       "",
       OpKind::kGetRows,
       {f16, i32, f32},
       {{8192, 2048}, {4096}, {4096, 2048}},
       none},
      {"copy/f32", "", OpKind::kCopy, {f32, f32}, {flat, flat}, none},
      {"transpose/f32", "", OpKind::kTranspose, {f32, f32}, {rows, rows}, none},
      {"transpose/f16", "", OpKind::kTranspose, {f16, f16}, {rows, rows}, none},
      // Two halves of each row (runs of 8 KiB), and attention heads of 64 f16
      // joined into heads of 128 (runs of 128 bytes).
      {"concat_halves/f32",
       "in2",
       OpKind::kConcat,
       {f32, f32, f32},
       {{row_count, 2048}, {row_count, 2048}, rows},
       last},
      {"concat_heads/f16",
       "in2",
       OpKind::kConcat,
       {f16, f16, f16},
       {{4 * row_count, 8, 64}, {4 * row_count, 8, 64}, {4 * row_count, 8, 128}},
       last},
      {"attention/f32",
       "",
       OpKind::kAttention,
       {f32, f32, f32, f32},
       {{1, 64, 32, 128}, {1, 512, 8, 128}, {1, 512, 8, 128}, {1, 64, 32, 128}},
       scaled,
       true},
      // One decoding step of a llama-7B-shaped layer against a 1024-token cache.
      {"attention_decode/f32",
       "",
       OpKind::kAttention,
       {f32, f32, f32, f32},
       {{1, 1, 32, 128}, {1, 1024, 8, 128}, {1, 1024, 8, 128}, {1, 1, 32, 128}},
       scaled,
       true},
      // The same layer against a 32768-token cache of f16 and of q8_0 (Note [A
      // q8_0 KV cache]): 128 and 68 MiB of keys and values.
      {"attention_decode_32k/f16",
       "",
       OpKind::kAttention,
       {f32, f16, f16, f32},
       {{1, 1, 32, 128}, {1, 32768, 8, 128}, {1, 32768, 8, 128}, {1, 1, 32, 128}},
       scaled,
       true},
      {"attention_decode_32k/q8_0",
       "",
       OpKind::kAttention,
       {f32, DType::kQ8_0, DType::kQ8_0, f32},
       {{1, 1, 32, 128}, {1, 32768, 8, 128}, {1, 32768, 8, 128}, {1, 1, 32, 128}},
       scaled,
       true},
  };
}

// Registers one benchmark per (spec, variant). The table is not consulted here:
// this runs during static initialisation, before the library's own statics are
// guaranteed to exist; a variant this CPU lacks is skipped when it runs.
const bool kRegistered = [] {
  const std::pair<std::int64_t, const char*> families[] = {
      {kL3Rows, "BM_CpuOp/"}, {kDramRows, "BM_CpuOpDram/"}, {kCacheRows, "BM_CpuOpCache/"}};
  for (const auto& [row_count, family] : families) {
    for (const OpBench& spec : op_benches(row_count)) {
      if (row_count != kL3Rows && !streaming(spec)) continue;
      for (const char* variant : {"avx512", "avx2", "ref"}) {
        const std::string kernel = kernel_name(
            spec.op, spec.dtypes, BackendId::kCpu,
            spec.extra.empty() ? std::string(variant) : fmt::format("{}_{}", variant, spec.extra));
        benchmark::RegisterBenchmark((family + spec.label + "/" + kernel).c_str(),
                                     [spec, kernel, rows = row_count](benchmark::State& state) {
                                       run_op(state, spec, kernel, rows);
                                     })
            ->Unit(row_count == kCacheRows ? benchmark::kMicrosecond : benchmark::kMillisecond)
            ->UseRealTime();
      }
    }
  }
  return true;
}();

}  // namespace
}  // namespace switchyard
