// Quantizing a model file (`switchyard quantize`): a synthetic f32 llama model of
// stated size converted to a mix preset, against the peer measured in the same run
// on the same page-cached file: the same tool path with nothing to convert (type
// f32, every tensor copied), which is the cost of reading and writing the file.
//   ./build/release/bench/switchyard_bench --benchmark_filter=QuantizeModel
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <map>

#include <benchmark/benchmark.h>
#include <fmt/format.h>

#include "switchyard/quantize_model.h"
#include "switchyard/synthetic_model.h"
#include "switchyard/thread_pool.h"

namespace switchyard {
namespace {

// An f32 synthetic llama of dimension `dim` (ff 2.75x, 8 blocks, vocab 32000),
// written once and removed when the program ends.
const std::filesystem::path& model_file(std::int64_t dim) {
  struct Files {
    std::map<std::int64_t, std::filesystem::path> by_dim;
    ~Files() {
      for (const auto& [d, path] : by_dim) std::filesystem::remove(path);
    }
  };
  static Files files;
  auto [it, inserted] = files.by_dim.try_emplace(dim);
  if (!inserted) return it->second;
  SyntheticLlamaConfig c;
  c.vocab_size = 32000;
  c.embedding_length = dim;
  c.block_count = 8;
  c.head_count = dim / 64;
  c.head_count_kv = dim / 64;
  c.feed_forward_length = dim * 11 / 4;
  c.weight_type = DType::kF32;
  Result<SyntheticModel> model = generate_synthetic_llama(c);
  SWITCHYARD_CHECK(model.is_ok());
  it->second = std::filesystem::temp_directory_path() /
               fmt::format("switchyard_quantize_bench_{}_{}.gguf", ::getpid(), dim);
  SWITCHYARD_CHECK(write_synthetic_model(*model, it->second).is_ok());
  return it->second;
}

double quantize_seconds(const std::filesystem::path& in, const std::string& type,
                        ParallelRunner* runner) {
  const std::filesystem::path out = in.string() + "." + type;
  QuantizeOptions options;
  options.type = type;
  options.runner = runner;
  const auto start = std::chrono::steady_clock::now();
  Result<QuantizeSummary> s = quantize_gguf(in, out, options);
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  SWITCHYARD_CHECK(s.is_ok());
  std::filesystem::remove(out);
  return seconds;
}

// Args: {model dimension, threads}.
void BM_QuantizeModel(benchmark::State& state) {
  const std::filesystem::path& in = model_file(state.range(0));
  ThreadPool pool(static_cast<int>(state.range(1)));
  const double copy_seconds = quantize_seconds(in, "f32", &pool);  // the peer; warms the cache
  double seconds = 0;
  for (auto _ : state) seconds += quantize_seconds(in, "q4_k_m", &pool);
  const double per_run = seconds / static_cast<double>(state.iterations());
  const auto bytes = static_cast<std::int64_t>(std::filesystem::file_size(in));
  state.SetBytesProcessed(state.iterations() * bytes);
  state.counters["input_MiB"] = static_cast<double>(bytes) / (1 << 20);
  state.counters["copy_s"] = copy_seconds;
  // How many times the plain copy's time quantizing takes.
  state.counters["quantize_over_copy"] = per_run / copy_seconds;
}
BENCHMARK(BM_QuantizeModel)
    ->Args({1024, 1})
    ->Args({1024, 2})
    ->Iterations(2)  // seconds per conversion: two are plenty
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime();

}  // namespace
}  // namespace switchyard
