// ThreadPool: the CPU backend's ParallelRunner.
//
// parallel_for cuts [0, n) into chunks of whole `grain`s (the last may be
// shorter), which the calling thread and the pool's workers claim from a shared
// counter, large ones first and smaller towards the end, and returns when all
// have run. The chunk boundaries depend only on (n, grain, num_threads()), not on
// which thread runs a chunk, so a kernel that computes each output element in a
// fixed order gives the same bytes at any thread count. A range of a single grain
// runs inline, as does a parallel_for issued from inside a pool task (no nested
// fan-out, no deadlock). One parallel_for runs at a time per pool; concurrent
// callers are serialised.
//
// Hand-off: a decode step issues dozens of small parallel_for calls back to back,
// each a few microseconds of work. Waking a sleeping thread through the kernel
// costs tens of microseconds (more on a virtual machine, where the idle vCPU has
// halted), which made two threads ten times slower than one there. So workers
// spin on the job state for a short while (about 100 us) after each job before
// they sleep on a condition variable, and the caller spins on the count of workers
// still inside the job before it sleeps. An idle pool burns that window of CPU,
// then blocks. A pool with more threads than hardware threads never spins (a
// spinning thread would hold the core the working one needs), and spinners yield
// every few microseconds. A worker that does wake from sleep joins late; the
// caller has meanwhile claimed more of the work, and once every chunk is claimed
// the job closes, so a worker arriving after that is not waited for.
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
  // A pool of `num_threads` threads in all (the caller counts as one), clamped
  // to 1 .. 65536.
  explicit ThreadPool(int num_threads);
  ~ThreadPool() override;
  ThreadPool(const ThreadPool&) = delete;
  ThreadPool& operator=(const ThreadPool&) = delete;

  [[nodiscard]] int num_threads() const override { return num_threads_; }
  void parallel_for(std::int64_t n, std::int64_t grain,
                    FunctionRef<void(std::int64_t, std::int64_t)> body) override;

 private:
  struct Job;
  void worker_loop();

  int num_threads_;
  bool spin_;  // num_threads_ <= hardware threads
  std::vector<std::thread> workers_;
  std::mutex submit_;  // serialises parallel_for callers
  // The current job: stored before state_ announces it (release), read by the
  // workers that join it.
  std::atomic<Job*> job_{nullptr};
  // The current job's serial, whether it is closed to new workers, and how many
  // workers are inside it (thread_pool.cpp: kSerialShift, kClosed, kInsideMask).
  // Joining and leaving are atomic updates of the whole word, so a worker joins
  // only the job it saw, and only while it is open.
  std::atomic<std::uint64_t> state_{0};
  std::atomic<bool> stopping_{false};
  // Sleeping, after the spin: workers wait on wake_, the caller on done_. The
  // mutex orders a sleeper's last check against the notifier (no lost wake-up).
  std::mutex mutex_;
  std::condition_variable wake_;
  std::condition_variable done_;
  int sleeping_workers_ = 0;  // guarded by mutex_
};

// The most threads a pool is given: far beyond any machine's useful count, small
// enough that a mistyped number cannot exhaust the process.
inline constexpr int kMaxThreads = 1024;

// SWITCHYARD_THREADS when set to an integer from 1 to kMaxThreads, else the number
// of hardware threads (an unusable value is noted for check_environment()). Read
// once per process.
[[nodiscard]] int default_thread_count();

// A process-wide pool of default_thread_count() threads, created on first use.
[[nodiscard]] ThreadPool& default_thread_pool();

}  // namespace switchyard
