#include "switchyard/thread_pool.h"

#include <atomic>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

namespace switchyard {
namespace {

TEST(ThreadPoolTest, CoversEveryIndexExactlyOnce) {
  for (int threads : {1, 2, 3, 8}) {
    ThreadPool pool(threads);
    for (std::int64_t n : {0, 1, 2, 7, 100, 1001}) {
      std::vector<std::atomic<int>> hits(static_cast<std::size_t>(n));
      pool.parallel_for(n, 1, [&](std::int64_t begin, std::int64_t end) {
        for (std::int64_t i = begin; i < end; ++i) hits[static_cast<std::size_t>(i)]++;
      });
      for (std::int64_t i = 0; i < n; ++i) {
        EXPECT_EQ(hits[static_cast<std::size_t>(i)], 1) << threads << " threads, n=" << n;
      }
    }
  }
}

TEST(ThreadPoolTest, RespectsGrainAndRunsSmallWorkInline) {
  ThreadPool pool(4);
  std::atomic<int> calls{0};
  pool.parallel_for(10, 100, [&](std::int64_t begin, std::int64_t end) {
    EXPECT_EQ(begin, 0);
    EXPECT_EQ(end, 10);
    ++calls;
  });
  EXPECT_EQ(calls, 1);
}

TEST(ThreadPoolTest, NestedCallsRunInline) {
  ThreadPool pool(2);
  std::atomic<std::int64_t> total{0};
  pool.parallel_for(4, 1, [&](std::int64_t begin, std::int64_t end) {
    for (std::int64_t i = begin; i < end; ++i) {
      pool.parallel_for(10, 1, [&](std::int64_t b, std::int64_t e) { total += e - b; });
    }
  });
  EXPECT_EQ(total, 40);
}

TEST(ThreadPoolTest, ConcurrentCallersAreSerialisedCorrectly) {
  ThreadPool pool(3);
  std::atomic<std::int64_t> total{0};
  std::vector<std::thread> callers;
  for (int c = 0; c < 4; ++c) {
    callers.emplace_back([&] {
      for (int rep = 0; rep < 50; ++rep) {
        pool.parallel_for(64, 1, [&](std::int64_t b, std::int64_t e) { total += e - b; });
      }
    });
  }
  for (std::thread& t : callers) t.join();
  EXPECT_EQ(total, 4 * 50 * 64);
}

TEST(ThreadPoolTest, DefaultThreadCountIsPositive) { EXPECT_GE(default_thread_count(), 1); }

}  // namespace
}  // namespace switchyard
