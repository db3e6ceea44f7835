// Rooflines measured in the same run as the kernels they judge.
//
// A ratio against a roofline measured minutes earlier, or on a quiet moment of a
// shared machine, says more about the neighbours than about the kernel. These
// helpers time the kernel and its peer alternately (A, B, A, B ...) and compare
// medians, so both see the same load and, where the peer touches as many bytes
// as the kernel, the same level of the memory hierarchy.
//
// GCC 12's AVX-512 intrinsic headers trip its uninitialised-use analysis
// (_mm512_undefined_* inside _mm512_reduce_add_ps); silenced for the sweeps only.
#pragma once

#include <immintrin.h>

#include <algorithm>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <ctime>
#include <vector>

#include "switchyard/thread_pool.h"

namespace switchyard::bench {

inline double process_cpu_seconds() {
  timespec ts{};
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) + static_cast<double>(ts.tv_nsec) * 1e-9;
}

inline double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

// Medians of wall and process-CPU seconds per call of two workloads timed
// alternately after one warm-up call of each.
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

#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"

// Note [Sweep streams]
// A sweep reads each 1 MiB chunk as kSweepStreams streams side by side, one add
// chain each. The L2 hardware prefetcher follows one stream per 4 KiB page and
// runs only so far ahead of it, so one linear stream per core keeps too few lines
// in flight to use the memory: on the 2-vCPU Ice Lake machine the 1 GiB sweep on
// two threads read 18.0, 22.2, 25.2, 26.8 and 26.1 GB/s with 1, 2, 4, 8 and 16
// streams (2026-12-03; medians of three), and the decode tiles, which read four
// streams of rows (Note [Decode streams] in src/backends/cpu/quant/quant_matmul_simd.cpp),
// beat the one-stream sweep by a fifth.
// A roofline a kernel can beat is not one.
inline constexpr int kSweepStreams = 8;

__attribute__((target("avx2"))) inline float sum_avx2(const float* p, std::int64_t n) {
  const std::int64_t part = n / kSweepStreams / 8 * 8;
  __m256 acc[kSweepStreams];
  for (__m256& a : acc) a = _mm256_setzero_ps();
  for (std::int64_t i = 0; i < part; i += 8) {
    for (int s = 0; s < kSweepStreams; ++s) {
      acc[s] = _mm256_add_ps(acc[s], _mm256_loadu_ps(p + s * part + i));
    }
  }
  for (int s = 1; s < kSweepStreams; ++s) acc[0] = _mm256_add_ps(acc[0], acc[s]);
  float lanes[8];
  _mm256_storeu_ps(lanes, acc[0]);
  float total = 0.0f;
  for (float v : lanes) total += v;
  for (std::int64_t i = kSweepStreams * part; i < n; ++i) total += p[i];  // the tail
  return total;
}

__attribute__((target("avx512f"))) inline float sum_avx512(const float* p, std::int64_t n) {
  const std::int64_t part = n / kSweepStreams / 16 * 16;
  __m512 acc[kSweepStreams];
  for (__m512& a : acc) a = _mm512_setzero_ps();
  for (std::int64_t i = 0; i < part; i += 16) {
    for (int s = 0; s < kSweepStreams; ++s) {
      acc[s] = _mm512_add_ps(acc[s], _mm512_loadu_ps(p + s * part + i));
    }
  }
  for (int s = 1; s < kSweepStreams; ++s) acc[0] = _mm512_add_ps(acc[0], acc[s]);
  float total = _mm512_reduce_add_ps(acc[0]);
  for (std::int64_t i = kSweepStreams * part; i < n; ++i) total += p[i];  // the tail
  return total;
}

#pragma GCC diagnostic pop

inline float sum_scalar(const float* p, std::int64_t n) {
  float a[8] = {};
  for (std::int64_t i = 0; i + 8 <= n; i += 8) {
    for (int j = 0; j < 8; ++j) a[j] += p[i + j];
  }
  float total = 0.0f;
  for (float v : a) total += v;
  return total;
}

// A read-only sweep of a buffer of `bytes` bytes on the process-wide pool, with
// the widest loads the CPU has: what a memory-bound kernel reading that many bytes
// can at best reach. Size it like the kernel's operands to judge the kernel in the
// same cache regime, or beyond the last-level cache for the DRAM roofline.
class ReadSweep {
 public:
  explicit ReadSweep(std::size_t bytes) : data_(bytes / sizeof(float), 1.0f) {}

  [[nodiscard]] std::size_t bytes() const { return data_.size() * sizeof(float); }

  float run() {
    ThreadPool& pool = default_thread_pool();
    const std::int64_t n = static_cast<std::int64_t>(data_.size());
    constexpr std::int64_t kChunk = std::int64_t{1} << 18;  // 1 MiB of floats
    const std::int64_t chunks = (n + kChunk - 1) / kChunk;
    std::vector<float> partial(static_cast<std::size_t>(chunks), 0.0f);
    const bool wide = __builtin_cpu_supports("avx512f");
    const bool avx2 = __builtin_cpu_supports("avx2");
    pool.parallel_for(chunks, 1, [&](std::int64_t begin, std::int64_t end) {
      for (std::int64_t c = begin; c < end; ++c) {
        const float* p = data_.data() + c * kChunk;
        const std::int64_t len = std::min(kChunk, n - c * kChunk);
        partial[static_cast<std::size_t>(c)] = wide   ? sum_avx512(p, len)
                                               : avx2 ? sum_avx2(p, len)
                                                      : sum_scalar(p, len);
      }
    });
    float total = 0.0f;
    for (float v : partial) total += v;
    return total;
  }

 private:
  std::vector<float> data_;
};

// Beyond the last-level cache of the machines this runs on (the largest seen
// reports 480 MiB of L3): a sweep this size, run between two kernel calls, also
// evicts the kernel's operands, so the kernel reads them from DRAM.
inline constexpr std::size_t kDramSweepBytes = std::size_t{1} << 30;

}  // namespace switchyard::bench
