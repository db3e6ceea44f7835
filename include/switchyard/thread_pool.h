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
// Hand-off: a decode step issues dozens of small parallel_for calls back to back,
// each a few microseconds of work. Waking a sleeping thread through the kernel
// costs tens of microseconds (more on a virtual machine, where the idle vCPU has
// halted), which made two threads ten times slower than one there. So workers
// spin on an atomic job counter for a short while (about 100 us) after each job
// before they sleep on a condition variable, and the caller spins on the pending
// count before it sleeps. An idle pool burns that window of CPU, then blocks. A
// pool with more threads than hardware threads never spins (a spinning thread would
// hold the core the working one needs), and spinners yield every few microseconds.
//
// Example
//   ThreadPool pool(4);
//   ExecContext ctx{.runner = &pool};
//   ctx.parallel_for(rows, 16, [&](std::int64_t begin, std::int64_t end) { ... });
#pragma once

#include <atomic>
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
  bool spin_;  // num_threads_ <= hardware threads
  std::vector<std::thread> workers_;
  std::mutex submit_;  // serialises parallel_for callers
  // Published before job_serial_ is incremented (release), read after it is seen.
  std::atomic<const Job*> job_{nullptr};
  std::atomic<std::uint64_t> job_serial_{0};
  std::atomic<int> pending_{0};  // workers that have not finished the current job
  std::atomic<bool> stopping_{false};
  // Sleeping, after the spin: workers wait on wake_, the caller on done_. The
  // mutex orders a sleeper's last check against the notifier (no lost wake-up).
  std::mutex mutex_;
  std::condition_variable wake_;
  std::condition_variable done_;
  int sleeping_workers_ = 0;  // guarded by mutex_
};

// SWITCHYARD_THREADS when set to a positive integer, else the number of hardware
// threads. Read once per process.
[[nodiscard]] int default_thread_count();

// A process-wide pool of default_thread_count() threads, created on first use.
[[nodiscard]] ThreadPool& default_thread_pool();

}  // namespace switchyard
