#include "switchyard/thread_pool.h"

#include <algorithm>
#include <charconv>
#include <cstdlib>
#include <cstring>

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#endif

namespace switchyard {
namespace {

// Set while a thread runs pool work, so nested parallel_for calls run inline.
thread_local bool t_inside_pool = false;

struct Chunking {
  std::int64_t chunks;
  std::int64_t per_chunk;
};

Chunking split(std::int64_t n, std::int64_t grain, int threads) {
  grain = std::max<std::int64_t>(grain, 1);
  const std::int64_t by_grain = (n + grain - 1) / grain;
  const std::int64_t chunks = std::clamp<std::int64_t>(by_grain, 1, threads);
  return {chunks, (n + chunks - 1) / chunks};
}

// How long a thread spins before it sleeps: 4096 pause instructions, about
// 50-200 us depending on the CPU's pause latency (see the header's Hand-off).
constexpr int kSpinIterations = 1 << 12;

inline void cpu_relax() {
#if defined(__x86_64__) || defined(__i386__)
  _mm_pause();
#else
  std::this_thread::yield();
#endif
}

// Spins until `ready()` or the spin budget runs out; returns ready(). A pool with
// more threads than the machine has hardware threads does not spin at all: a
// spinning thread would hold a core that the thread with the work needs. Every 64
// pauses the spinner also yields, so another process's runnable thread on this
// core is not kept waiting for the whole window.
template <typename Ready>
bool spin_until(bool spin, Ready ready) {
  if (spin) {
    for (int i = 1; i <= kSpinIterations; ++i) {
      if (ready()) return true;
      cpu_relax();
      if (i % 64 == 0) std::this_thread::yield();
    }
  }
  return ready();
}

}  // namespace

struct ThreadPool::Job {
  std::int64_t n;
  Chunking chunking;
  FunctionRef<void(std::int64_t, std::int64_t)> body;

  void run_chunk(std::int64_t chunk) const {
    const std::int64_t begin = chunk * chunking.per_chunk;
    const std::int64_t end = std::min(n, begin + chunking.per_chunk);
    if (begin < end) body(begin, end);
  }
};

ThreadPool::ThreadPool(int num_threads)
    : num_threads_(std::max(num_threads, 1)),
      spin_(static_cast<unsigned>(num_threads_) <=
            std::max(1u, std::thread::hardware_concurrency())) {
  workers_.reserve(static_cast<std::size_t>(num_threads_ - 1));
  for (int i = 1; i < num_threads_; ++i) workers_.emplace_back([this, i] { worker_loop(i); });
}

ThreadPool::~ThreadPool() {
  {
    std::lock_guard lock(mutex_);
    stopping_.store(true, std::memory_order_release);
  }
  wake_.notify_all();
  for (std::thread& t : workers_) t.join();
}

void ThreadPool::worker_loop(int index) {
  t_inside_pool = true;
  std::uint64_t seen = 0;
  while (true) {
    const auto has_work = [&] {
      return stopping_.load(std::memory_order_acquire) ||
             job_serial_.load(std::memory_order_acquire) != seen;
    };
    if (!spin_until(spin_, has_work)) {
      std::unique_lock lock(mutex_);
      ++sleeping_workers_;
      wake_.wait(lock, has_work);
      --sleeping_workers_;
    }
    if (stopping_.load(std::memory_order_acquire)) return;
    seen = job_serial_.load(std::memory_order_acquire);
    const Job* job = job_.load(std::memory_order_acquire);
    // Worker i takes chunk i; the caller takes chunk 0.
    if (index < job->chunking.chunks) job->run_chunk(index);
    if (pending_.fetch_sub(1, std::memory_order_acq_rel) == 1) {
      // The last one: the caller may have stopped spinning. Taking the mutex orders
      // this against its check of pending_ before it sleeps.
      { std::lock_guard lock(mutex_); }
      done_.notify_one();
    }
  }
}

void ThreadPool::parallel_for(std::int64_t n, std::int64_t grain,
                              FunctionRef<void(std::int64_t, std::int64_t)> body) {
  if (n <= 0) return;
  const Chunking chunking = split(n, grain, num_threads_);
  if (chunking.chunks == 1 || t_inside_pool) {
    // One chunk, or nested: run it here. The chunk boundaries of a nested call
    // would differ, so nested calls run the whole range as one chunk.
    body(0, n);
    return;
  }
  std::lock_guard submit_lock(submit_);
  const Job job{n, chunking, body};
  pending_.store(static_cast<int>(workers_.size()), std::memory_order_relaxed);
  job_.store(&job, std::memory_order_relaxed);
  job_serial_.fetch_add(1, std::memory_order_release);
  bool any_asleep = false;
  {
    // A worker past its spin either saw the new serial under this mutex or is
    // waiting on wake_ by the time we hold it.
    std::lock_guard lock(mutex_);
    any_asleep = sleeping_workers_ > 0;
  }
  if (any_asleep) wake_.notify_all();
  t_inside_pool = true;
  job.run_chunk(0);
  t_inside_pool = false;
  const auto all_done = [&] { return pending_.load(std::memory_order_acquire) == 0; };
  if (!spin_until(spin_, all_done)) {
    std::unique_lock lock(mutex_);
    done_.wait(lock, all_done);
  }
  job_.store(nullptr, std::memory_order_relaxed);
}

int default_thread_count() {
  static const int count = [] {
    if (const char* env = std::getenv("SWITCHYARD_THREADS")) {
      int value = 0;
      const char* end = env + std::strlen(env);
      auto [ptr, ec] = std::from_chars(env, end, value);
      if (ec == std::errc() && ptr == end && value > 0) return value;
    }
    return std::max(1, static_cast<int>(std::thread::hardware_concurrency()));
  }();
  return count;
}

ThreadPool& default_thread_pool() {
  // Never destroyed: kernels may run from other static destructors' callers.
  static ThreadPool* pool = new ThreadPool(default_thread_count());
  return *pool;
}

}  // namespace switchyard
