// The CUDA backend's kernels, called through their binding-table entries on a
// stream of the backend's own memory, timed on the GPU:
//   - dense matmul 4096 x 4096 x 4096 per sibling (cuBLASLt bf16, f16, exact f32,
//     TF32; the tiled SIMT kernel for bf16 and f32; the split product of f32 by
//     bf16) in TFLOP/s, a prompt's f32 x bf16 product, and decoding's
//     matrix-vector products in GB/s of weights against the copy bandwidth;
//   - causal prefill attention over 512 and 4096 tokens in TFLOP/s;
//   - decode attention: 16 sequences (and one) of one new token each against a
//     4096-token cache, 32 query heads over 8 kv heads of 128 (Llama-3-8B's), in GB/s of K
//     and V read, with the ratio to the copy bandwidth measured in the same run
//     (`vs_copy_bw`, a device-to-device copy through CudaMemory, counting bytes
//     read and written);
//   - add f32 over 2^26 elements in GB/s, and that copy itself;
//   - the table's cuBLASLt matmul against cuBLASLt called directly (vs_direct).
// Each iteration queues 10 calls and then waits for the stream once, so the wait
// is amortised. Without a CUDA device every benchmark skips, saying why. Run:
//   ./build/release/bench/switchyard_bench --benchmark_filter=Cuda
#include <benchmark/benchmark.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <random>
#include <string>
#include <vector>

#if SWITCHYARD_BENCH_CUDA_PEER
#include "backends/cuda/peer/direct_cublaslt.h"
#endif
#include "switchyard/backends.h"
#include "switchyard/dispatch.h"
#include "switchyard/half.h"

namespace switchyard {
namespace {

constexpr int kCallsPerIteration = 10;
// Four times the H200's 60 MB L2: the copy streams from device memory.
constexpr std::int64_t kCopyBytes = std::int64_t{1} << 28;

BackendMemory* cuda_memory_or_skip(benchmark::State& state) {
  BackendMemory* memory = current_table()->backend_memory(BackendId::kCuda);
  if (memory == nullptr) {
    state.SkipWithError("the cuda backend is not compiled into this build");
    return nullptr;
  }
  if (Status ready = memory->ready(); !ready.is_ok()) {
    state.SkipWithError(std::string(ready.message()).c_str());
    return nullptr;
  }
  return memory;
}

// Device tensors of random values and a stream, freed together.
class Workspace {
 public:
  explicit Workspace(BackendMemory& memory) : memory_(memory) {
    Result<void*> s = memory.create_stream();
    ok_ = s.is_ok();
    stream_ = ok_ ? *s : nullptr;
  }
  ~Workspace() {
    memory_.destroy_stream(stream_);
    for (void* p : blocks_) memory_.deallocate(p);
  }
  Workspace(const Workspace&) = delete;
  Workspace& operator=(const Workspace&) = delete;

  // A device tensor of `dtype` filled with N(0, scale) values (zeros hide
  // unwritten outputs and can run faster than real data).
  TensorView tensor(DType dtype, Shape shape, float scale = 1.0f) {
    const std::int64_t n = shape.numel();
    const std::int64_t bytes = n * dense_bytes(dtype);
    std::vector<std::byte> host(static_cast<std::size_t>(bytes));
    std::mt19937 rng(static_cast<std::uint32_t>(blocks_.size() + 1));
    std::normal_distribution<float> dist(0.0f, scale);
    for (std::int64_t i = 0; i < n; ++i) {
      const float v = dist(rng);
      if (dtype == DType::kF32) {
        reinterpret_cast<float*>(host.data())[i] = v;
      } else {
        reinterpret_cast<std::uint16_t*>(host.data())[i] =
            dtype == DType::kF16 ? f32_to_f16(v) : f32_to_bf16(v);
      }
    }
    Result<void*> p = memory_.allocate(bytes);
    if (!p.is_ok()) {
      ok_ = false;
      return {};
    }
    blocks_.push_back(*p);
    const TensorView d = TensorView::contiguous(*p, dtype, shape, BackendId::kCuda);
    ok_ =
        ok_ && memory_.copy(TensorView::contiguous(host.data(), dtype, shape), d, stream_).is_ok();
    return d;
  }
  [[nodiscard]] bool ok() const { return ok_; }
  [[nodiscard]] void* stream() const { return stream_; }
  [[nodiscard]] BackendMemory& memory() const { return memory_; }

 private:
  BackendMemory& memory_;
  void* stream_ = nullptr;
  bool ok_ = true;
  std::vector<void*> blocks_;
};

const BindingEntry* find_entry(OpKind op, const DTypeList& key, const std::string& name) {
  for (const BindingEntry& e : current_table()->lookup_alternatives(op, key, BackendId::kCuda)) {
    if (e.name == name) return &e;
  }
  return nullptr;
}

// Times `call` kCallsPerIteration times per iteration; false once it fails.
template <typename Call>
void time_calls(benchmark::State& state, Workspace& ws, Call&& call) {
  for (auto _ : state) {
    for (int i = 0; i < kCallsPerIteration; ++i) {
      if (Status s = call(); !s.is_ok()) {
        state.SkipWithError(s.to_string().c_str());
        return;
      }
    }
    if (Status s = ws.memory().synchronize(ws.stream()); !s.is_ok()) {
      state.SkipWithError(s.to_string().c_str());
      return;
    }
  }
}

Status run_entry(const BindingEntry& e, std::span<const TensorView> inputs, const TensorView& out,
                 const OpParams& params, void* stream) {
  ExecContext ctx{.stream = stream};
  return e.fn({.inputs = inputs,
               .outputs = std::span<const TensorView>(&out, 1),
               .params = params,
               .ctx = ctx,
               .name = e.name});
}

// Seconds per device-to-device copy of `bytes`, median of a few.
double copy_seconds(Workspace& ws, std::int64_t bytes) {
  const TensorView a = ws.tensor(DType::kF32, Shape{bytes / 4});
  const TensorView b = ws.tensor(DType::kF32, Shape{bytes / 4});
  std::vector<double> t;
  for (int r = 0; r < 7; ++r) {
    const auto t0 = std::chrono::steady_clock::now();
    for (int i = 0; i < kCallsPerIteration; ++i) (void)ws.memory().copy(a, b, ws.stream());
    (void)ws.memory().synchronize(ws.stream());
    t.push_back(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count() /
                kCallsPerIteration);
  }
  std::sort(t.begin(), t.end());
  return t[t.size() / 2];
}

// out [m, n] = a [m, k] . w [n, k]^T through one sibling; the output takes a's
// dtype. TFLOP/s, and for a few rows (decoding) the weight bytes read per second
// against the copy bandwidth.
void BM_CudaMatmul(benchmark::State& state, DType a_type, DType w_type, std::string variant,
                   std::int64_t m, std::int64_t n, std::int64_t k) {
  BackendMemory* memory = cuda_memory_or_skip(state);
  if (memory == nullptr) return;
  const DTypeList key{a_type, w_type, a_type};
  const std::string entry_name = kernel_name(OpKind::kMatmul, key, BackendId::kCuda, variant);
  const BindingEntry* e = find_entry(OpKind::kMatmul, key, entry_name);
  if (e == nullptr) return state.SkipWithError(("no entry " + entry_name).c_str());
  Workspace ws(*memory);
  const TensorView inputs[] = {ws.tensor(a_type, Shape{m, k}, 0.1f),
                               ws.tensor(w_type, Shape{n, k}, 0.1f)};
  const TensorView out = ws.tensor(a_type, Shape{m, n});
  const double copy_s = m <= 8 ? copy_seconds(ws, kCopyBytes) : 0.0;
  if (!ws.ok()) return state.SkipWithError("could not set up the operands");
  const OpParams params;
  time_calls(state, ws, [&] { return run_entry(*e, inputs, out, params, ws.stream()); });
  state.counters["TFLOP/s"] =
      benchmark::Counter(2.0 * double(m) * double(n) * double(k) * kCallsPerIteration * 1e-12,
                         benchmark::Counter::kIsIterationInvariantRate);
  if (m <= 8) {
    const double weight_bytes = double(n) * double(k) * double(dense_bytes(w_type));
    state.counters["weight_GB/s"] = benchmark::Counter(
        weight_bytes * kCallsPerIteration * 1e-9, benchmark::Counter::kIsIterationInvariantRate);
    state.counters["copy_GB/s"] = 2.0 * double(kCopyBytes) / copy_s * 1e-9;
  }
}
constexpr DType kF32 = DType::kF32, kF16 = DType::kF16, kBF16 = DType::kBF16;
BENCHMARK_CAPTURE(BM_CudaMatmul, bf16_cublaslt, kBF16, kBF16, "cublaslt", 4096, 4096, 4096)
    ->UseRealTime();
BENCHMARK_CAPTURE(BM_CudaMatmul, f16_cublaslt, kF16, kF16, "cublaslt", 4096, 4096, 4096)
    ->UseRealTime();
BENCHMARK_CAPTURE(BM_CudaMatmul, f32_cublaslt, kF32, kF32, "cublaslt", 4096, 4096, 4096)
    ->UseRealTime();
BENCHMARK_CAPTURE(BM_CudaMatmul, f32_cublaslt_tf32, kF32, kF32, "cublaslt_tf32", 4096, 4096, 4096)
    ->UseRealTime();
BENCHMARK_CAPTURE(BM_CudaMatmul, bf16_simt, kBF16, kBF16, "simt", 4096, 4096, 4096)->UseRealTime();
BENCHMARK_CAPTURE(BM_CudaMatmul, f32_simt, kF32, kF32, "simt", 4096, 4096, 4096)->UseRealTime();
#if SWITCHYARD_BENCH_CUDA_PEER
// The table's cuBLASLt sibling against cuBLASLt called directly for the same
// product (src/backends/cuda/peer/): `vs_direct` is the direct call's time over
// the table's, so 1.0 means dispatch adds nothing. Each iteration times
// kCallsPerIteration back-to-back products of each, one after the other with the
// same clock, so both see the same clocks and power state; medians over the
// iterations.
void BM_CudaMatmulVsDirect(benchmark::State& state, DType dtype, std::int64_t m, std::int64_t n,
                           std::int64_t k) {
  BackendMemory* memory = cuda_memory_or_skip(state);
  if (memory == nullptr) return;
  const DTypeList key{dtype, dtype, dtype};
  const std::string entry_name = kernel_name(OpKind::kMatmul, key, BackendId::kCuda, "cublaslt");
  const BindingEntry* e = find_entry(OpKind::kMatmul, key, entry_name);
  if (e == nullptr) return state.SkipWithError(("no entry " + entry_name).c_str());
  Workspace ws(*memory);
  const TensorView inputs[] = {ws.tensor(dtype, Shape{m, k}, 0.1f),
                               ws.tensor(dtype, Shape{n, k}, 0.1f)};
  const TensorView out = ws.tensor(dtype, Shape{m, n});
  if (!ws.ok()) return state.SkipWithError("could not set up the operands");
  Result<std::unique_ptr<cuda::DirectCublasLt>> direct =
      cuda::DirectCublasLt::create(dtype, m, n, k);
  if (!direct.is_ok()) return state.SkipWithError(direct.status().to_string().c_str());
  const OpParams params;
  auto table_calls = [&]() -> Status {
    for (int i = 0; i < kCallsPerIteration; ++i) {
      SWITCHYARD_RETURN_IF_ERROR(run_entry(*e, inputs, out, params, ws.stream()));
    }
    return ws.memory().synchronize(ws.stream());
  };
  if (Status warm = table_calls(); !warm.is_ok())
    return state.SkipWithError(warm.to_string().c_str());
  using Clock = std::chrono::steady_clock;
  std::vector<double> table_s, direct_s;
  for (auto _ : state) {
    auto t0 = Clock::now();
    Status st = table_calls();
    table_s.push_back(std::chrono::duration<double>(Clock::now() - t0).count());
    t0 = Clock::now();
    if (st.is_ok()) st = (*direct)->run(kCallsPerIteration);
    direct_s.push_back(std::chrono::duration<double>(Clock::now() - t0).count());
    if (!st.is_ok()) return state.SkipWithError(st.to_string().c_str());
  }
  std::sort(table_s.begin(), table_s.end());
  std::sort(direct_s.begin(), direct_s.end());
  const double table = table_s[table_s.size() / 2], other = direct_s[direct_s.size() / 2];
  const double flop = 2.0 * double(m) * double(n) * double(k) * kCallsPerIteration;
  state.counters["TFLOP/s"] = flop / table * 1e-12;
  state.counters["direct_TFLOP/s"] = flop / other * 1e-12;
  state.counters["vs_direct"] = other / table;
}
BENCHMARK_CAPTURE(BM_CudaMatmulVsDirect, bf16_4096, DType::kBF16, 4096, 4096, 4096)->UseRealTime();
BENCHMARK_CAPTURE(BM_CudaMatmulVsDirect, bf16_prompt_ffn, DType::kBF16, 512, 14336, 4096)
    ->UseRealTime();
BENCHMARK_CAPTURE(BM_CudaMatmulVsDirect, bf16_prompt_k, DType::kBF16, 512, 1024, 4096)
    ->UseRealTime();
BENCHMARK_CAPTURE(BM_CudaMatmulVsDirect, f16_4096, DType::kF16, 4096, 4096, 4096)->UseRealTime();
#endif

// f32 activations, bf16 weights (a bf16 model): a prompt's ffn_gate product of
// Llama-3.1-8B's shape (512 tokens, 14336 x 4096) and the square one, split and
// tiled; and decoding's matrix-vector products (ffn_gate / up, ffn_down, attn_q).
BENCHMARK_CAPTURE(BM_CudaMatmul, f32_bf16_split, kF32, kBF16, "cublaslt_split", 4096, 4096, 4096)
    ->UseRealTime();
BENCHMARK_CAPTURE(BM_CudaMatmul, f32_bf16_split_prompt, kF32, kBF16, "cublaslt_split", 512, 14336,
                  4096)
    ->UseRealTime();
BENCHMARK_CAPTURE(BM_CudaMatmul, f32_bf16_simt_prompt, kF32, kBF16, "simt", 512, 14336, 4096)
    ->UseRealTime();
BENCHMARK_CAPTURE(BM_CudaMatmul, f32_bf16_matvec_gate, kF32, kBF16, "simt", 1, 14336, 4096)
    ->UseRealTime();
BENCHMARK_CAPTURE(BM_CudaMatmul, f32_bf16_matvec_down, kF32, kBF16, "simt", 1, 4096, 14336)
    ->UseRealTime();
BENCHMARK_CAPTURE(BM_CudaMatmul, f32_bf16_matvec_q, kF32, kBF16, "simt", 1, 4096, 4096)
    ->UseRealTime();
BENCHMARK_CAPTURE(BM_CudaMatmul, f32_bf16_matvec_k, kF32, kBF16, "simt", 1, 1024, 4096)
    ->UseRealTime();
BENCHMARK_CAPTURE(BM_CudaMatmul, f32_bf16_matvec_output, kF32, kBF16, "simt", 1, 128256, 4096)
    ->UseRealTime();

void BM_CudaDecodeAttention(benchmark::State& state, DType q_type, DType kv_type,
                            std::int64_t batch) {
  BackendMemory* memory = cuda_memory_or_skip(state);
  if (memory == nullptr) return;
  const std::int64_t kBatch = batch;
  constexpr std::int64_t kKv = 4096, kHeads = 32, kKvHeads = 8, kDh = 128;
  const DTypeList key{q_type, kv_type, kv_type, q_type};
  const BindingEntry* e = find_entry(
      OpKind::kAttention, key, kernel_name(OpKind::kAttention, key, BackendId::kCuda, "simt"));
  if (e == nullptr) return state.SkipWithError("no attention entry");
  Workspace ws(*memory);
  const TensorView inputs[] = {ws.tensor(q_type, Shape{kBatch, 1, kHeads, kDh}),
                               ws.tensor(kv_type, Shape{kBatch, kKv, kKvHeads, kDh}),
                               ws.tensor(kv_type, Shape{kBatch, kKv, kKvHeads, kDh})};
  const TensorView out = ws.tensor(q_type, Shape{kBatch, 1, kHeads, kDh});
  if (!ws.ok()) return state.SkipWithError("could not set up the operands");
  const double kv_bytes = 2.0 * kBatch * kKv * kKvHeads * kDh * dense_bytes(kv_type);
  const double copy_bw = 2.0 * kCopyBytes / copy_seconds(ws, kCopyBytes);
  OpParams params;
  params.scale = 1.0f / std::sqrt(static_cast<float>(kDh));
  const auto t0 = std::chrono::steady_clock::now();
  time_calls(state, ws, [&] { return run_entry(*e, inputs, out, params, ws.stream()); });
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  const double calls = static_cast<double>(state.iterations()) * kCallsPerIteration;
  state.counters["GB/s"] = benchmark::Counter(kv_bytes * kCallsPerIteration * 1e-9,
                                              benchmark::Counter::kIsIterationInvariantRate);
  state.counters["vs_copy_bw"] = calls > 0 ? kv_bytes * calls / seconds / copy_bw : 0.0;
  state.counters["copy_GB/s"] = copy_bw * 1e-9;
}
BENCHMARK_CAPTURE(BM_CudaDecodeAttention, f16_batch16, DType::kF16, DType::kF16, 16)->UseRealTime();
BENCHMARK_CAPTURE(BM_CudaDecodeAttention, f32_batch16, DType::kF32, DType::kF32, 16)->UseRealTime();
BENCHMARK_CAPTURE(BM_CudaDecodeAttention, f16_batch1, DType::kF16, DType::kF16, 1)->UseRealTime();

// Causal self-attention over a prompt of `tokens` (one sequence, Llama-3-8B's 32
// query heads over 8 kv heads of 128), f32 as the llama model runs it, in TFLOP/s
// of the useful work (4 x head_dim flops per query, head and visible key).
void BM_CudaPrefillAttention(benchmark::State& state, std::int64_t tokens) {
  BackendMemory* memory = cuda_memory_or_skip(state);
  if (memory == nullptr) return;
  constexpr std::int64_t kHeads = 32, kKvHeads = 8, kDh = 128;
  const DTypeList key{DType::kF32, DType::kF32, DType::kF32, DType::kF32};
  const BindingEntry* e = find_entry(
      OpKind::kAttention, key, kernel_name(OpKind::kAttention, key, BackendId::kCuda, "simt"));
  if (e == nullptr) return state.SkipWithError("no attention entry");
  Workspace ws(*memory);
  const TensorView inputs[] = {ws.tensor(DType::kF32, Shape{1, tokens, kHeads, kDh}),
                               ws.tensor(DType::kF32, Shape{1, tokens, kKvHeads, kDh}),
                               ws.tensor(DType::kF32, Shape{1, tokens, kKvHeads, kDh})};
  const TensorView out = ws.tensor(DType::kF32, Shape{1, tokens, kHeads, kDh});
  if (!ws.ok()) return state.SkipWithError("could not set up the operands");
  OpParams params;
  params.scale = 1.0f / std::sqrt(static_cast<float>(kDh));
  params.causal = true;
  time_calls(state, ws, [&] { return run_entry(*e, inputs, out, params, ws.stream()); });
  const double visible = static_cast<double>(tokens) * static_cast<double>(tokens + 1) / 2.0;
  state.counters["TFLOP/s"] =
      benchmark::Counter(4.0 * visible * kHeads * kDh * kCallsPerIteration * 1e-12,
                         benchmark::Counter::kIsIterationInvariantRate);
}
BENCHMARK_CAPTURE(BM_CudaPrefillAttention, f32_512, 512)->UseRealTime();
BENCHMARK_CAPTURE(BM_CudaPrefillAttention, f32_4096, 4096)->UseRealTime();

void BM_CudaAdd(benchmark::State& state) {
  BackendMemory* memory = cuda_memory_or_skip(state);
  if (memory == nullptr) return;
  const DTypeList key{DType::kF32, DType::kF32, DType::kF32};
  const BindingEntry* e = find_entry(OpKind::kAdd, key, "add_f32__cuda_simt");
  if (e == nullptr) return state.SkipWithError("no add entry");
  constexpr std::int64_t n = std::int64_t{1} << 26;
  Workspace ws(*memory);
  const TensorView inputs[] = {ws.tensor(DType::kF32, Shape{n}), ws.tensor(DType::kF32, Shape{n})};
  const TensorView out = ws.tensor(DType::kF32, Shape{n});
  if (!ws.ok()) return state.SkipWithError("could not set up the operands");
  const OpParams params;
  time_calls(state, ws, [&] { return run_entry(*e, inputs, out, params, ws.stream()); });
  state.counters["GB/s"] = benchmark::Counter(3.0 * 4 * n * kCallsPerIteration * 1e-9,
                                              benchmark::Counter::kIsIterationInvariantRate);
}
BENCHMARK(BM_CudaAdd)->UseRealTime();

void BM_CudaCopy(benchmark::State& state) {
  BackendMemory* memory = cuda_memory_or_skip(state);
  if (memory == nullptr) return;
  constexpr std::int64_t bytes = kCopyBytes;
  Workspace ws(*memory);
  const TensorView a = ws.tensor(DType::kF32, Shape{bytes / 4});
  const TensorView b = ws.tensor(DType::kF32, Shape{bytes / 4});
  if (!ws.ok()) return state.SkipWithError("could not set up the operands");
  time_calls(state, ws, [&] { return memory->copy(a, b, ws.stream()); });
  state.counters["GB/s"] = benchmark::Counter(2.0 * bytes * kCallsPerIteration * 1e-9,
                                              benchmark::Counter::kIsIterationInvariantRate);
}
BENCHMARK(BM_CudaCopy)->UseRealTime();

}  // namespace
}  // namespace switchyard
