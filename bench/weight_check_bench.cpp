// Checking a model's weights (check_weights, what `inspect --check` and
// `run --check-weights` do) against reading the same bytes: a sweep over the same
// tensor bytes of the same mapping, on the same pool, in the same 1 MiB pieces, with
// the widest loads the CPU has and several streams per piece (Note [Sweep streams]
// in roofline.h), timed alternately with the check (paired_medians).
//   ./build/dev/bench/switchyard_bench --benchmark_filter=CheckWeights
//
// Two regimes, both on a file in the page cache (written just before):
//   warm:  the mapping's pages are already in the process's page tables (a second
//          check of an open file); the check against the memory it reads.
//   fresh: every call opens the file again, so each call also takes the page
//          faults of a new mapping, as the tool does on every invocation.
// vs_read is the sweep's time over the check's: 1.0 means the check reads the
// file as fast as a plain read does; cpu_vs_read the same in process CPU time.
#include <immintrin.h>
#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <random>
#include <vector>

#include <benchmark/benchmark.h>
#include <fmt/format.h>

#include "roofline.h"
#include "switchyard/gguf.h"
#include "switchyard/quant.h"
#include "switchyard/thread_pool.h"
#include "switchyard/weight_check.h"

namespace switchyard {
namespace {

// One stream per part of the piece, XOR-folded: integer, so no bit pattern the
// piece holds (a subnormal, a NaN) can slow the peer down.
__attribute__((target("avx2"))) std::uint64_t fold_avx2(const std::byte* p, std::size_t n) {
  const std::size_t part = n / bench::kSweepStreams / 32 * 32;
  __m256i acc[bench::kSweepStreams];
  for (__m256i& a : acc) a = _mm256_setzero_si256();
  for (std::size_t i = 0; i < part; i += 32) {
    for (int s = 0; s < bench::kSweepStreams; ++s) {
      acc[s] = _mm256_xor_si256(
          acc[s], _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p + s * part + i)));
    }
  }
  for (int s = 1; s < bench::kSweepStreams; ++s) acc[0] = _mm256_xor_si256(acc[0], acc[s]);
  std::uint64_t lanes[4];
  _mm256_storeu_si256(reinterpret_cast<__m256i*>(lanes), acc[0]);
  std::uint64_t total = lanes[0] ^ lanes[1] ^ lanes[2] ^ lanes[3];
  for (std::size_t i = bench::kSweepStreams * part; i < n; ++i)
    total ^= std::to_integer<unsigned>(p[i]);
  return total;
}

std::uint64_t fold_scalar(const std::byte* p, std::size_t n) {
  std::uint64_t total = 0;
  for (std::size_t i = 0; i + 8 <= n; i += 8) {
    std::uint64_t w;
    std::memcpy(&w, p + i, 8);
    total ^= w;
  }
  return total;
}

// Reads every tensor's bytes of `file` as check_weights splits them.
std::uint64_t read_tensors(const GgufFile& file, ThreadPool& pool) {
  constexpr std::size_t kPiece = std::size_t{1} << 20;
  struct Piece {
    const std::byte* p;
    std::size_t n;
  };
  std::vector<Piece> pieces;
  for (const GgufTensorInfo& t : file.tensors()) {
    const std::span<const std::byte> b = file.tensor_bytes(t);
    for (std::size_t at = 0; at < b.size(); at += kPiece) {
      pieces.push_back({b.data() + at, std::min(kPiece, b.size() - at)});
    }
  }
  std::vector<std::uint64_t> folded(pieces.size());
  const bool avx2 = __builtin_cpu_supports("avx2");
  pool.parallel_for(static_cast<std::int64_t>(pieces.size()), 1,
                    [&](std::int64_t begin, std::int64_t end) {
                      for (std::int64_t i = begin; i < end; ++i) {
                        const Piece& piece = pieces[static_cast<std::size_t>(i)];
                        folded[static_cast<std::size_t>(i)] =
                            avx2 ? fold_avx2(piece.p, piece.n) : fold_scalar(piece.p, piece.n);
                      }
                    });
  std::uint64_t total = 0;
  for (std::uint64_t f : folded) total ^= f;
  return total;
}

// A file of `mib` MiB of `dtype` tensors (64 MiB each) with finite, normal values:
// what a healthy model is, so the check takes its common path throughout.
std::filesystem::path write_file(DType dtype, std::int64_t mib) {
  constexpr std::int64_t kCols = 4096;
  const std::int64_t row = *row_bytes(dtype, kCols);
  const std::int64_t rows = (std::int64_t{64} << 20) / row;
  std::mt19937 rng(7);
  std::normal_distribution<float> dist(0.0f, 0.02f);
  std::vector<float> values(static_cast<std::size_t>(kCols));
  // 64 distinct rows, repeated.
  std::vector<std::byte> distinct(static_cast<std::size_t>(64 * row));
  for (std::int64_t r = 0; r < 64; ++r) {
    for (float& v : values) v = dist(rng);
    SWITCHYARD_CHECK(row_from_f32(dtype, values,
                                  std::span(distinct).subspan(static_cast<std::size_t>(r * row),
                                                              static_cast<std::size_t>(row)))
                         .is_ok());
  }
  std::vector<std::byte> data(static_cast<std::size_t>(rows * row));
  for (std::int64_t r = 0; r < rows; ++r) {
    std::memcpy(data.data() + r * row, distinct.data() + (r % 64) * row,
                static_cast<std::size_t>(row));
  }
  GgufWriter writer;
  writer.metadata().set("general.architecture", GgufValue::string("llama"));
  for (std::int64_t i = 0; i < mib / 64; ++i) {
    SWITCHYARD_CHECK(
        writer
            .add_tensor_ref(fmt::format("blk.{}.ffn_up.weight", i), dtype, Shape{rows, kCols}, data)
            .is_ok());
  }
  const std::filesystem::path path =
      std::filesystem::temp_directory_path() /
      fmt::format("switchyard_bench_check_{}_{}.gguf", ::getpid(), name(dtype));
  SWITCHYARD_CHECK(writer.write(path).is_ok());
  return path;
}

void BM_CheckWeights(benchmark::State& state) {
  const auto dtype = static_cast<DType>(state.range(0));
  const std::int64_t mib = state.range(1);
  state.SetLabel(std::string(name(dtype)));
  const std::filesystem::path path = write_file(dtype, mib);
  ThreadPool& pool = default_thread_pool();
  Result<GgufFile> file = GgufFile::open(path);
  SWITCHYARD_CHECK(file.is_ok());
  std::uint64_t bytes = 0;
  for (const GgufTensorInfo& t : file->tensors()) bytes += static_cast<std::uint64_t>(t.size_bytes);

  const auto check = [&](const GgufFile& f) {
    Result<WeightCheckReport> r = check_weights(f, {.runner = &pool});
    SWITCHYARD_CHECK(r.is_ok() && r->finite() && r->bytes == bytes);
    benchmark::DoNotOptimize(r);
  };
  const auto read = [&](const GgufFile& f) { benchmark::DoNotOptimize(read_tensors(f, pool)); };
  bench::Paired warm{}, fresh{};
  for (auto _ : state) {
    warm = bench::paired_medians(
        5, [&] { check(*file); }, [&] { read(*file); });
    fresh = bench::paired_medians(
        5, [&] { check(*GgufFile::open(path)); }, [&] { read(*GgufFile::open(path)); });
  }
  const double gb = static_cast<double>(bytes) / 1e9;
  state.counters["GB"] = gb;
  state.counters["check_GB/s"] = gb / warm.wall_a;
  state.counters["read_GB/s"] = gb / warm.wall_b;
  state.counters["vs_read"] = warm.wall_b / warm.wall_a;
  state.counters["fresh_check_GB/s"] = gb / fresh.wall_a;
  state.counters["fresh_read_GB/s"] = gb / fresh.wall_b;
  state.counters["fresh_vs_read"] = fresh.wall_b / fresh.wall_a;
  // Process CPU seconds, the same ratio: on a machine shared with other work the
  // check, which computes more per byte, loses more wall time than the read.
  state.counters["cpu_vs_read"] = warm.cpu_b / warm.cpu_a;
  std::filesystem::remove(path);
}
// {dtype, MiB}: 1 GiB of each, beyond the last-level cache.
BENCHMARK(BM_CheckWeights)
    ->ArgNames({"dtype", "MiB"})
    ->Args({static_cast<int>(DType::kF32), 1024})
    ->Args({static_cast<int>(DType::kF16), 1024})
    ->Args({static_cast<int>(DType::kBF16), 1024})
    ->Args({static_cast<int>(DType::kQ8_0), 1024})
    ->Args({static_cast<int>(DType::kQ4_0), 1024})
    ->Args({static_cast<int>(DType::kQ4_K), 1024})
    ->Args({static_cast<int>(DType::kQ6_K), 1024})
    ->Iterations(1)
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime();

}  // namespace
}  // namespace switchyard
