// ThreadPool: the CPU backend's ParallelRunner.
//
// parallel_for splits [0, n) into at most num_threads() contiguous chunks of at
// least `grain` items, runs them on the pool's workers and the calling thread, and
// returns when all are done. The split depends only on (n, grain, num_threads()), so
// a kernel that computes each output element in a fixed order gives the same bytes
// at any thread count. A parallel_for issued from inside a pool task runs inline
// on that thread (no nested fan-out, no deadlock). One parallel_for runs at a time
// per pool; concurrent callers are serialised.
//
// Example
//   ThreadPool pool(4);
//   ExecContext ctx{.runner = &pool};
//   ctx.parallel_for(rows, 16, [&](std::int64_t begin, std::int64_t end) { ... });
#pragma once

#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include "switchyard/kernel.h"

namespace switchyard {

class ThreadPool final : public ParallelRunner {
 public:
  // A pool of `num_threads` threads in all (the caller counts as one), >= 1.
  explicit ThreadPool(int num_threads);
  ~ThreadPool() override;
  ThreadPool(const ThreadPool&) = delete;
  ThreadPool& operator=(const ThreadPool&) = delete;

  [[nodiscard]] int num_threads() const override { return num_threads_; }
  void parallel_for(std::int64_t n, std::int64_t grain,
                    FunctionRef<void(std::int64_t, std::int64_t)> body) override;

 private:
  struct Job;
  void worker_loop(int index);

  int num_threads_;
  std::vector<std::thread> workers_;
  std::mutex submit_;  // serialises parallel_for callers
  std::mutex mutex_;
  std::condition_variable wake_;
  std::condition_variable done_;
  const Job* job_ = nullptr;  // guarded by mutex_
  std::uint64_t job_serial_ = 0;
  int pending_ = 0;
  bool stopping_ = false;
};

// SWITCHYARD_THREADS when set to a positive integer, else the number of hardware
// threads. Read once per process.
[[nodiscard]] int default_thread_count();

// A process-wide pool of default_thread_count() threads, created on first use.
[[nodiscard]] ThreadPool& default_thread_pool();

}  // namespace switchyard
