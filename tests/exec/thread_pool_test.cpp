#include "switchyard/thread_pool.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <mutex>
#include <thread>
#include <utility>
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

// Note [Claimed chunks]: chunks are whole grains (the last may be shorter), and
// where they fall depends on (n, grain, threads) alone, not on which thread
// claimed what, so a kernel's results do not depend on scheduling.
TEST(ThreadPoolTest, ChunksAreWholeGrainsAtFixedBoundaries) {
  for (int threads : {2, 3}) {
    ThreadPool pool(threads);
    for (const auto& [n, grain] :
         {std::pair<std::int64_t, std::int64_t>{1000, 16}, {17, 16}, {4096, 1}, {14336, 16}}) {
      std::vector<std::pair<std::int64_t, std::int64_t>> first;
      for (int rep = 0; rep < 20; ++rep) {
        std::mutex m;
        std::vector<std::pair<std::int64_t, std::int64_t>> chunks;
        pool.parallel_for(n, grain, [&](std::int64_t begin, std::int64_t end) {
          std::lock_guard lock(m);
          chunks.emplace_back(begin, end);
        });
        std::sort(chunks.begin(), chunks.end());
        std::int64_t at = 0;
        for (const auto& [begin, end] : chunks) {
          EXPECT_EQ(begin, at) << "gap or overlap, n=" << n;
          EXPECT_EQ(begin % grain, 0) << "n=" << n;
          EXPECT_TRUE(end - begin >= grain || end == n) << begin << ".." << end << ", n=" << n;
          at = end;
        }
        EXPECT_EQ(at, n);
        if (rep == 0) {
          first = chunks;
          // The claims shrink towards the end: more chunks than threads.
          if (n / grain > 8 * threads) {
            EXPECT_GT(chunks.size(), static_cast<std::size_t>(threads));
          }
        } else {
          EXPECT_EQ(chunks, first) << threads << " threads, n=" << n << ", run " << rep;
        }
      }
    }
  }
}

// A worker held up inside its first chunk (as one preempted, or woken late)
// holds up that chunk only, at most 1 / (2 threads) of the range: the caller
// claims and runs all the rest meanwhile. With a fixed share per thread the held
// worker would keep half of the range.
TEST(ThreadPoolTest, ConcurrentCallerTakesOverTheWorkOfAHeldWorker) {
  ThreadPool pool(2);
  constexpr std::int64_t kN = 4000;
  const std::thread::id caller = std::this_thread::get_id();
  for (int rep = 0; rep < 50; ++rep) {
    std::atomic<std::int64_t> by_caller{0};
    std::atomic<std::int64_t> held_items{0};
    std::atomic<bool> stuck{false};
    pool.parallel_for(kN, 1, [&](std::int64_t begin, std::int64_t end) {
      if (std::this_thread::get_id() == caller) {
        by_caller += end - begin;
        return;
      }
      std::int64_t none = 0;
      if (!held_items.compare_exchange_strong(none, end - begin)) {
        ADD_FAILURE() << "the held worker ran a second chunk";
        return;
      }
      // Held until the caller has run everything else. A bound turns a
      // deadlock into a failure instead of a hung test.
      const auto give_up = std::chrono::steady_clock::now() + std::chrono::seconds(60);
      while (by_caller.load() != kN - (end - begin)) {
        if (std::chrono::steady_clock::now() > give_up) {
          stuck = true;
          return;
        }
        std::this_thread::yield();
      }
    });
    ASSERT_FALSE(stuck) << "run " << rep;
    EXPECT_EQ(by_caller + held_items, kN);
    EXPECT_LE(held_items, kN / 4) << "run " << rep;
  }
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

// Back-to-back small jobs, the decode pattern: workers pick each one up while
// still spinning from the last. Every job must see all its chunks run once, and
// a job's writes must be visible to the caller when parallel_for returns.
//
// Pools of 2 and of 64 threads: one no larger than the machine spins, the other
// (more threads than any CI machine has) blocks at once; both paths must hand off.
TEST(ThreadPoolTest, ConcurrentBackToBackJobsHandOffWithoutLoss) {
  for (int threads : {2, 64}) {
    ThreadPool pool(threads);
    std::vector<int> slots(static_cast<std::size_t>(threads), 0);
    const int jobs = threads == 2 ? 20000 : 300;
    for (int job = 1; job <= jobs; ++job) {
      pool.parallel_for(threads, 1, [&](std::int64_t b, std::int64_t e) {
        for (std::int64_t i = b; i < e; ++i) slots[static_cast<std::size_t>(i)] = job;
      });
      ASSERT_EQ(slots, std::vector<int>(static_cast<std::size_t>(threads), job))
          << threads << " threads, job " << job;
    }
  }
}

// Jobs separated by pauses longer than the spin window: workers (and the caller)
// go to sleep between jobs and must be woken, never left asleep or woken twice.
TEST(ThreadPoolTest, ConcurrentJobsAfterWorkersSleepStillRun) {
  for (int threads : {2, 3}) {
    ThreadPool pool(threads);
    std::atomic<std::int64_t> total{0};
    for (int rep = 0; rep < 20; ++rep) {
      std::this_thread::sleep_for(std::chrono::milliseconds(3));
      pool.parallel_for(300, 1, [&](std::int64_t b, std::int64_t e) {
        // Uneven work so the caller sometimes waits past its own spin.
        if (b > 0 && rep % 4 == 0) std::this_thread::sleep_for(std::chrono::milliseconds(2));
        total += e - b;
      });
      ASSERT_EQ(total, 300 * (rep + 1)) << threads << " threads";
    }
  }
}

// Destroying a pool whose workers are spinning, and one whose workers sleep.
TEST(ThreadPoolTest, ConcurrentDestructionWhileSpinningOrSleeping) {
  for (int pause_ms : {0, 5}) {
    ThreadPool pool(4);
    std::atomic<int> runs{0};
    pool.parallel_for(4, 1, [&](std::int64_t, std::int64_t) { ++runs; });
    std::this_thread::sleep_for(std::chrono::milliseconds(pause_ms));
    EXPECT_EQ(runs, 4);
  }
}

TEST(ThreadPoolTest, DefaultThreadCountIsPositive) { EXPECT_GE(default_thread_count(), 1); }

}  // namespace
}  // namespace switchyard
