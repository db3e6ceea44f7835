#include "switchyard/thread_pool.h"

#include <algorithm>
#include <charconv>
#include <cstdlib>
#include <cstring>

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

ThreadPool::ThreadPool(int num_threads) : num_threads_(std::max(num_threads, 1)) {
  workers_.reserve(static_cast<std::size_t>(num_threads_ - 1));
  for (int i = 1; i < num_threads_; ++i) workers_.emplace_back([this, i] { worker_loop(i); });
}

ThreadPool::~ThreadPool() {
  {
    std::lock_guard lock(mutex_);
    stopping_ = true;
  }
  wake_.notify_all();
  for (std::thread& t : workers_) t.join();
}

void ThreadPool::worker_loop(int index) {
  t_inside_pool = true;
  std::uint64_t seen = 0;
  while (true) {
    const Job* job = nullptr;
    {
      std::unique_lock lock(mutex_);
      wake_.wait(lock, [&] { return stopping_ || job_serial_ != seen; });
      if (stopping_) return;
      seen = job_serial_;
      job = job_;
    }
    // Worker i takes chunk i; the caller takes chunk 0.
    if (index < job->chunking.chunks) job->run_chunk(index);
    {
      std::lock_guard lock(mutex_);
      if (--pending_ == 0) done_.notify_one();
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
  {
    std::lock_guard lock(mutex_);
    job_ = &job;
    ++job_serial_;
    pending_ = static_cast<int>(workers_.size());
  }
  wake_.notify_all();
  t_inside_pool = true;
  job.run_chunk(0);
  t_inside_pool = false;
  std::unique_lock lock(mutex_);
  done_.wait(lock, [&] { return pending_ == 0; });
  job_ = nullptr;
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
