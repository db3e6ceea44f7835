// Opening a GGUF file: map + parse the header, against reading the whole file (the
// peer, measured in the same run on the same page-cached file). Zero-copy loading
// means the cost follows the header (tensor and metadata count), not the data size.
//   ./build/release/bench/switchyard_bench --benchmark_filter=Gguf
#include <fcntl.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <map>
#include <string>
#include <tuple>
#include <vector>

#include <benchmark/benchmark.h>
#include <fmt/format.h>

#include "switchyard/gguf.h"

namespace switchyard {
namespace {

struct BenchFile {
  std::filesystem::path path;
  std::uint64_t size = 0;
  std::uint64_t header = 0;
};

// A file of `tensors` f32 tensors of `tensor_kib` KiB each and, when `vocab` > 0, a
// tokenizer-style string array of that many tokens (real llama files carry one).
const BenchFile& bench_file(int tensors, int tensor_kib, int vocab) {
  // Removes the files when the program ends.
  struct Files {
    std::map<std::tuple<int, int, int>, BenchFile> by_args;
    ~Files() {
      for (const auto& [args, f] : by_args) std::filesystem::remove(f.path);
    }
  };
  static Files files;
  auto [it, inserted] = files.by_args.try_emplace({tensors, tensor_kib, vocab});
  if (!inserted) return it->second;
  GgufWriter writer;
  writer.metadata().set("general.architecture", GgufValue::string("llama"));
  if (vocab > 0) {
    std::vector<std::string> tokens;
    for (int i = 0; i < vocab; ++i) tokens.push_back(fmt::format("tok{}", i));
    writer.metadata().set("tokenizer.ggml.tokens", GgufValue::string_array(tokens));
  }
  const std::int64_t elems = std::int64_t{tensor_kib} * 1024 / 4;
  const std::vector<std::byte> data(static_cast<std::size_t>(elems * 4), std::byte{1});
  for (int i = 0; i < tensors; ++i) {
    const Status s = writer.add_tensor_ref(fmt::format("blk.{}.t{}.weight", i / 9, i % 9),
                                           DType::kF32, Shape{elems / 64, 64}, data);
    SWITCHYARD_CHECK(s.is_ok());
  }
  BenchFile& f = it->second;
  f.path = std::filesystem::temp_directory_path() /
           fmt::format("switchyard_bench_{}_{}_{}_{}.gguf", ::getpid(), tensors, tensor_kib, vocab);
  SWITCHYARD_CHECK(writer.write(f.path).is_ok());
  Result<GgufFile> file = GgufFile::open(f.path);
  SWITCHYARD_CHECK(file.is_ok());
  f.size = file->file_size();
  f.header = file->header_bytes();
  return f;
}

// Seconds to read the whole file into memory (the copy a non-mapping loader makes),
// best of a few runs on the warm page cache.
double full_read_seconds(const BenchFile& f) {
  std::vector<char> buffer(f.size);
  double best = 1e30;
  for (int run = 0; run < 5; ++run) {
    const auto start = std::chrono::steady_clock::now();
    const int fd = ::open(f.path.c_str(), O_RDONLY);
    SWITCHYARD_CHECK(fd >= 0);
    std::size_t done = 0;
    while (done < f.size) {
      const ssize_t n = ::read(fd, buffer.data() + done, f.size - done);
      SWITCHYARD_CHECK(n > 0);
      done += static_cast<std::size_t>(n);
    }
    ::close(fd);
    best = std::min(
        best, std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
  }
  return best;
}

void BM_GgufOpen(benchmark::State& state) {
  const int tensors = static_cast<int>(state.range(0));
  const BenchFile& f =
      bench_file(tensors, static_cast<int>(state.range(1)), static_cast<int>(state.range(2)));
  const double read_seconds = full_read_seconds(f);
  double open_seconds = 0;
  for (auto _ : state) {
    const auto start = std::chrono::steady_clock::now();
    Result<GgufFile> file = GgufFile::open(f.path);
    benchmark::DoNotOptimize(file);
    open_seconds += std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  }
  const double per_open = open_seconds / static_cast<double>(state.iterations());
  state.SetItemsProcessed(state.iterations() * tensors);
  state.SetBytesProcessed(state.iterations() * static_cast<std::int64_t>(f.header));
  state.counters["file_MiB"] = static_cast<double>(f.size) / (1 << 20);
  state.counters["header_KiB"] = static_cast<double>(f.header) / 1024;
  state.counters["read_GB/s"] = static_cast<double>(f.size) / read_seconds / 1e9;
  // How many times faster opening is than copying the file in.
  state.counters["read_over_open"] = read_seconds / per_open;
}
// {tensors, KiB per tensor, vocabulary}: a llama-7B-like tensor count with a 32k
// vocabulary; many small tensors; the same count with 4x the data (cost must not move).
BENCHMARK(BM_GgufOpen)
    ->Args({291, 64, 32000})
    ->Args({4096, 4, 0})
    ->Args({4096, 16, 0})
    ->Unit(benchmark::kMicrosecond);

}  // namespace
}  // namespace switchyard
