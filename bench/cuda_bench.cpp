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
//   - the table's cuBLASLt matmul against cuBLASLt called directly (vs_direct);
//   - quantized weights in every GGUF format: decoding's matrix-vector products
//     against the copy bandwidth over a weight set four times the L2 cache, and a
//     prompt's product against the dense bf16 one of the same shape.
// Each iteration queues 10 calls and then waits for the stream once, so the wait
// is amortised. Without a CUDA device every benchmark skips, saying why. Run:
//   ./build/release/bench/switchyard_bench --benchmark_filter=Cuda
#include <benchmark/benchmark.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <random>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#if SWITCHYARD_BENCH_CUDA_PEER
#include "backends/cuda/peer/direct_cublaslt.h"
#endif
#include "switchyard/backends.h"
#include "switchyard/dispatch.h"
#include "switchyard/half.h"
#include "switchyard/quant.h"

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

  // Bytes of n values of dtype (whole blocks for a quantized one).
  static std::int64_t storage_bytes(DType dtype, std::int64_t n) {
    return is_quantized(dtype) ? n / block_elems(dtype) * block_bytes(dtype)
                               : n * dense_bytes(dtype);
  }

  // A device tensor of `dtype` filled with N(0, scale) values (zeros hide
  // unwritten outputs and can run faster than real data).
  TensorView tensor(DType dtype, Shape shape, float scale = 1.0f) {
    const std::int64_t n = shape.numel();
    const std::int64_t bytes = storage_bytes(dtype, n);
    std::vector<std::byte> host(static_cast<std::size_t>(bytes));
    std::mt19937 rng(static_cast<std::uint32_t>(blocks_.size() + 1));
    std::normal_distribution<float> dist(0.0f, scale);
    if (is_quantized(dtype)) {  // a q8_0 KV cache, say: quantized from the same draws
      std::vector<float> values(static_cast<std::size_t>(n));
      for (float& v : values) v = dist(rng);
      ok_ = ok_ && quantize(dtype, values, host).is_ok();
    }
    for (std::int64_t i = 0; i < n && !is_quantized(dtype); ++i) {
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
  // A device tensor holding `bytes` (a quantized tensor's blocks).
  TensorView tensor_of(DType dtype, Shape shape, std::span<const std::byte> bytes) {
    Result<void*> p = memory_.allocate(static_cast<std::int64_t>(bytes.size()));
    if (!p.is_ok()) {
      ok_ = false;
      return {};
    }
    blocks_.push_back(*p);
    const TensorView d = TensorView::contiguous(*p, dtype, shape, BackendId::kCuda);
    const TensorView h = TensorView::contiguous(const_cast<std::byte*>(bytes.data()), dtype, shape);
    ok_ = ok_ && memory_.copy(h, d, stream_).is_ok();
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

// The CUDA matmul sibling `variant` at key, or nullptr once the benchmark is
// skipped, saying why (no device, or no such entry).
const BindingEntry* matmul_entry_or_skip(benchmark::State& state, const DTypeList& key,
                                         const std::string& variant) {
  if (cuda_memory_or_skip(state) == nullptr) return nullptr;
  const std::string entry_name = kernel_name(OpKind::kMatmul, key, BackendId::kCuda, variant);
  const BindingEntry* e = find_entry(OpKind::kMatmul, key, entry_name);
  if (e == nullptr) state.SkipWithError(("no entry " + entry_name).c_str());
  return e;
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

// Records `calls` calls of `call` once and replays the recording
// kReplaysPerIteration times per iteration; the seconds the replays took.
constexpr int kReplaysPerIteration = 4;
template <typename Call>
Result<double> replay_seconds(benchmark::State& state, Workspace& ws, std::int64_t calls,
                              Call&& call) {
  BackendMemory& memory = ws.memory();
  if (!memory.can_capture()) return unimplemented_error("the cuda memory does not record");
  // One plain call first, as the executor runs a step before recording it: a
  // kernel's scratch memory is allocated on first use, which a capture forbids.
  SWITCHYARD_RETURN_IF_ERROR(call());
  SWITCHYARD_RETURN_IF_ERROR(memory.synchronize(ws.stream()));
  SWITCHYARD_RETURN_IF_ERROR(memory.begin_capture(ws.stream()));
  Status recorded = Status::ok();
  for (std::int64_t i = 0; i < calls && recorded.is_ok(); ++i) recorded = call();
  Result<void*> recording = memory.end_capture(ws.stream());
  SWITCHYARD_RETURN_IF_ERROR(recorded);
  if (!recording.is_ok()) return recording.status();
  Status status = memory.replay(*recording, ws.stream());  // warm-up
  if (status.is_ok()) status = memory.synchronize(ws.stream());
  double seconds = 0;
  for (auto _ : state) {
    if (!status.is_ok()) break;
    const auto t0 = std::chrono::steady_clock::now();
    for (int r = 0; r < kReplaysPerIteration && status.is_ok(); ++r) {
      status = memory.replay(*recording, ws.stream());
    }
    if (status.is_ok()) status = memory.synchronize(ws.stream());
    const double t = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    state.SetIterationTime(t);
    seconds += t;
  }
  memory.destroy_recording(*recording);
  SWITCHYARD_RETURN_IF_ERROR(status);
  return seconds;
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
  const BindingEntry* e = matmul_entry_or_skip(state, DTypeList{a_type, w_type, a_type}, variant);
  if (e == nullptr) return;
  Workspace ws(*current_table()->backend_memory(BackendId::kCuda));
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

// Quantized weights [n, k] of format w (rows of random values quantized once and
// repeated: the bytes are valid blocks and the GPU reads them as any others).
std::vector<std::byte> quantized_weights(DType w, std::int64_t n, std::int64_t k) {
  const std::int64_t sample_rows = std::min<std::int64_t>(n, 64);
  std::vector<float> values(static_cast<std::size_t>(sample_rows * k));
  std::mt19937 rng(7);
  std::normal_distribution<float> dist(0.0f, 0.1f);
  for (float& v : values) v = dist(rng);
  const std::int64_t row = *row_bytes(w, k);
  std::vector<std::byte> sample(static_cast<std::size_t>(sample_rows * row));
  if (!quantize(w, values, sample).is_ok()) return {};
  std::vector<std::byte> out(static_cast<std::size_t>(n * row));
  for (std::size_t at = 0; at < out.size(); at += sample.size()) {
    std::copy_n(sample.begin(), std::min(sample.size(), out.size() - at), out.begin() + at);
  }
  return out;
}

// out [m, n] = a [m, k] . w [n, k]^T for quantized w through one sibling. For a
// few rows (decoding) the weights rotate among copies that together are four
// times the L2 cache, so every call reads HBM: weight bytes per second against
// the copy bandwidth (`vs_copy_bw`, copy bytes read and written, as the issue's
// ratio). For many rows (a prompt), TFLOP/s against the dense bf16 product of
// the same shape through cuBLASLt, timed in the same process (`vs_bf16_gemm`).
void BM_CudaQuantMatmul(benchmark::State& state, DType w_type, std::string variant, std::int64_t m,
                        std::int64_t n, std::int64_t k) {
  const BindingEntry* e = matmul_entry_or_skip(state, DTypeList{kF32, w_type, kF32}, variant);
  if (e == nullptr) return;
  Workspace ws(*current_table()->backend_memory(BackendId::kCuda));
  const std::vector<std::byte> bytes = quantized_weights(w_type, n, k);
  if (bytes.empty()) return state.SkipWithError("could not quantize the weights");
  const bool decode = m <= 8;
  const auto weight_set = static_cast<std::int64_t>(bytes.size());
  const std::int64_t copies = decode ? kCopyBytes / weight_set + 1 : 1;
  std::vector<TensorView> weights;
  for (std::int64_t i = 0; i < copies; ++i) {
    weights.push_back(ws.tensor_of(w_type, Shape{n, k}, bytes));
  }
  const TensorView a = ws.tensor(kF32, Shape{m, k}, 1.0f);
  const TensorView out = ws.tensor(kF32, Shape{m, n});
  if (!ws.ok()) return state.SkipWithError("could not set up the operands");
  // Measured once per process: every format's ratio has the same peer.
  static const double copy_bw = 2.0 * double(kCopyBytes) / copy_seconds(ws, kCopyBytes);
  double dense_tflops = 0;
  if (!decode) {
    const DTypeList dense{kBF16, kBF16, kBF16};
    const BindingEntry* d = find_entry(
        OpKind::kMatmul, dense, kernel_name(OpKind::kMatmul, dense, BackendId::kCuda, "cublaslt"));
    const TensorView dense_in[] = {ws.tensor(kBF16, Shape{m, k}, 0.1f),
                                   ws.tensor(kBF16, Shape{n, k}, 0.1f)};
    const TensorView dense_out = ws.tensor(kBF16, Shape{m, n});
    if (d == nullptr || !ws.ok()) return state.SkipWithError("no dense bf16 peer");
    std::vector<double> t;
    for (int r = 0; r < 9; ++r) {
      const auto t0 = std::chrono::steady_clock::now();
      for (int i = 0; i < kCallsPerIteration; ++i) {
        (void)run_entry(*d, dense_in, dense_out, {}, ws.stream());
      }
      (void)ws.memory().synchronize(ws.stream());
      t.push_back(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
    }
    std::sort(t.begin(), t.end());
    dense_tflops = 2.0 * double(m) * double(n) * double(k) * kCallsPerIteration / t[4] * 1e-12;
  }
  const OpParams params;
  std::size_t next = 0;
  const auto call = [&] {
    const TensorView in[] = {a, weights[next++ % weights.size()]};
    return run_entry(*e, in, out, params, ws.stream());
  };
  double seconds = 0, calls = 0;
  if (decode) {
    // As a decode step runs: one pass over the weight copies recorded once and
    // replayed, so the time is the GPU's and not the launches'.
    Result<double> replayed = replay_seconds(state, ws, copies, call);
    if (!replayed.is_ok()) return state.SkipWithError(replayed.status().to_string().c_str());
    seconds = *replayed;
    calls = static_cast<double>(state.iterations()) * kReplaysPerIteration * double(copies);
  } else {
    const auto t0 = std::chrono::steady_clock::now();
    time_calls(state, ws, call);
    seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    calls = static_cast<double>(state.iterations()) * kCallsPerIteration;
  }
  const double flops = 2.0 * double(m) * double(n) * double(k);
  state.counters["TFLOP/s"] = calls > 0 ? flops * calls / seconds * 1e-12 : 0.0;
  if (decode) {
    state.counters["weight_GB/s"] = calls > 0 ? double(weight_set) * calls / seconds * 1e-9 : 0.0;
    state.counters["vs_copy_bw"] = calls > 0 ? double(weight_set) * calls / seconds / copy_bw : 0.0;
    state.counters["copy_GB/s"] = copy_bw * 1e-9;
  } else {
    state.counters["bf16_gemm_TFLOP/s"] = dense_tflops;
    state.counters["vs_bf16_gemm"] =
        calls > 0 ? flops * calls / seconds * 1e-12 / dense_tflops : 0.0;
  }
}
// Decoding Llama-3.1-8B's ffn_gate / up (14336 x 4096) and ffn_down (4096 x
// 14336) in every weight format; its prompt's ffn_gate (512 rows) in the formats
// of the common q4_0, q8_0 and q4_k_m files (the prompt path is one kernel for
// every format but the unpacking).
#define SWITCHYARD_QUANT_BENCH(fmt, dtype)                                         \
  BENCHMARK_CAPTURE(BM_CudaQuantMatmul, fmt##_gate, dtype, "dp4a", 1, 14336, 4096) \
      ->UseManualTime();                                                           \
  BENCHMARK_CAPTURE(BM_CudaQuantMatmul, fmt##_down, dtype, "dp4a", 1, 4096, 14336)->UseManualTime()
SWITCHYARD_QUANT_BENCH(q4_0, DType::kQ4_0);
SWITCHYARD_QUANT_BENCH(q4_1, DType::kQ4_1);
SWITCHYARD_QUANT_BENCH(q5_0, DType::kQ5_0);
SWITCHYARD_QUANT_BENCH(q5_1, DType::kQ5_1);
SWITCHYARD_QUANT_BENCH(q8_0, DType::kQ8_0);
SWITCHYARD_QUANT_BENCH(q2_k, DType::kQ2_K);
SWITCHYARD_QUANT_BENCH(q3_k, DType::kQ3_K);
SWITCHYARD_QUANT_BENCH(q4_k, DType::kQ4_K);
SWITCHYARD_QUANT_BENCH(q5_k, DType::kQ5_K);
SWITCHYARD_QUANT_BENCH(q6_k, DType::kQ6_K);
SWITCHYARD_QUANT_BENCH(iq4_nl, DType::kIQ4_NL);
SWITCHYARD_QUANT_BENCH(iq4_xs, DType::kIQ4_XS);
SWITCHYARD_QUANT_BENCH(mxfp4, DType::kMXFP4);
#undef SWITCHYARD_QUANT_BENCH
BENCHMARK_CAPTURE(BM_CudaQuantMatmul, q4_k_4rows_gate, DType::kQ4_K, "dp4a", 4, 14336, 4096)
    ->UseManualTime();
BENCHMARK_CAPTURE(BM_CudaQuantMatmul, q4_0_prompt, DType::kQ4_0, "cublaslt_bf16", 512, 14336, 4096)
    ->UseRealTime();
BENCHMARK_CAPTURE(BM_CudaQuantMatmul, q8_0_prompt, DType::kQ8_0, "cublaslt_bf16", 512, 14336, 4096)
    ->UseRealTime();
BENCHMARK_CAPTURE(BM_CudaQuantMatmul, q4_k_prompt, DType::kQ4_K, "cublaslt_bf16", 512, 14336, 4096)
    ->UseRealTime();
BENCHMARK_CAPTURE(BM_CudaQuantMatmul, q6_k_prompt, DType::kQ6_K, "cublaslt_bf16", 512, 14336, 4096)
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
  const double kv_bytes =
      2.0 * static_cast<double>(Workspace::storage_bytes(kv_type, kBatch * kKv * kKvHeads * kDh));
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
BENCHMARK_CAPTURE(BM_CudaDecodeAttention, q8_0_batch16, DType::kF32, DType::kQ8_0, 16)
    ->UseRealTime();

// Causal self-attention over a prompt of `tokens` (one sequence, Llama-3-8B's 32
// query heads over 8 kv heads of 128), f32 queries as the llama model runs them
// against a K/V cache of `kv_type`, through the sibling `variant` (the SIMT kernel
// or the tensor cores, Note [Prompt attention on the tensor cores]), in TFLOP/s of
// the useful work (4 x head_dim flops per query, head and visible key).
void BM_CudaPrefillAttention(benchmark::State& state, DType kv_type, std::string_view variant,
                             std::int64_t tokens) {
  BackendMemory* memory = cuda_memory_or_skip(state);
  if (memory == nullptr) return;
  constexpr std::int64_t kHeads = 32, kKvHeads = 8, kDh = 128;
  const DTypeList key{DType::kF32, kv_type, kv_type, DType::kF32};
  const BindingEntry* e = find_entry(
      OpKind::kAttention, key, kernel_name(OpKind::kAttention, key, BackendId::kCuda, variant));
  if (e == nullptr) return state.SkipWithError("no attention entry");
  Workspace ws(*memory);
  const TensorView inputs[] = {ws.tensor(DType::kF32, Shape{1, tokens, kHeads, kDh}),
                               ws.tensor(kv_type, Shape{1, tokens, kKvHeads, kDh}),
                               ws.tensor(kv_type, Shape{1, tokens, kKvHeads, kDh})};
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
BENCHMARK_CAPTURE(BM_CudaPrefillAttention, f32_simt_512, DType::kF32, "simt", 512)->UseRealTime();
BENCHMARK_CAPTURE(BM_CudaPrefillAttention, f32_simt_4096, DType::kF32, "simt", 4096)->UseRealTime();
BENCHMARK_CAPTURE(BM_CudaPrefillAttention, f16_simt_512, DType::kF16, "simt", 512)->UseRealTime();
BENCHMARK_CAPTURE(BM_CudaPrefillAttention, f16_simt_4096, DType::kF16, "simt", 4096)->UseRealTime();
BENCHMARK_CAPTURE(BM_CudaPrefillAttention, f16_tc_512, DType::kF16, "tc", 512)->UseRealTime();
BENCHMARK_CAPTURE(BM_CudaPrefillAttention, f16_tc_4096, DType::kF16, "tc", 4096)->UseRealTime();
BENCHMARK_CAPTURE(BM_CudaPrefillAttention, bf16_tc_4096, DType::kBF16, "tc", 4096)->UseRealTime();

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
