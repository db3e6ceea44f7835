#include "switchyard/thread_pool.h"

#include <algorithm>
#include <charconv>
#include <cstdlib>
#include <cstring>

#include <fmt/format.h>

#include "switchyard/environment.h"

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#endif

namespace switchyard {
namespace {

// Set while a thread runs pool work, so nested parallel_for calls run inline.
thread_local bool t_inside_pool = false;

// ThreadPool::state_: bits 0-15 the workers inside the current job, bit 16 set
// once it is closed to new ones, the job's serial above.
constexpr std::uint64_t kInsideMask = 0xffff;
constexpr std::uint64_t kClosed = std::uint64_t{1} << 16;
constexpr int kSerialShift = 17;
constexpr std::uint64_t serial_of(std::uint64_t state) { return state >> kSerialShift; }

// Note [Claimed chunks]
// A job's range is cut into units of `grain` items, and threads claim runs of
// units from a shared counter: each claim takes 1 / (2 threads) of the units
// left, at least one. The claim sizes depend only on where the claim starts, so
// the chunk boundaries depend only on (n, grain, threads), whichever thread takes
// each chunk. Early claims are large (few claims while every thread is busy),
// late ones small, so the threads finish together even when one starts late: a
// worker woken from sleep joins tens of microseconds to a millisecond after the
// caller (measured on a 2-vCPU virtual machine), and with a fixed chunk per
// thread the whole job waited that long. A worker that arrives after the last
// chunk was claimed does not join at all, so the caller never waits for it.
std::int64_t claim_units(std::int64_t left, int threads) {
  return std::max<std::int64_t>(1, left / (2 * static_cast<std::int64_t>(threads)));
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
  std::int64_t grain;
  std::int64_t units;  // ceil(n / grain)
  int threads;
  FunctionRef<void(std::int64_t, std::int64_t)> body;
  std::atomic<std::int64_t> next_unit{0};

  // Claims and runs chunks until none are left (Note [Claimed chunks]).
  void run() {
    std::int64_t unit = next_unit.load(std::memory_order_relaxed);
    while (unit < units) {
      const std::int64_t end_unit = unit + claim_units(units - unit, threads);
      if (next_unit.compare_exchange_weak(unit, end_unit, std::memory_order_relaxed)) {
        body(unit * grain, std::min(n, end_unit * grain));
        unit = next_unit.load(std::memory_order_relaxed);
      }
    }
  }
};

ThreadPool::ThreadPool(int num_threads)
    : num_threads_(std::clamp(num_threads, 1, static_cast<int>(kInsideMask) + 1)),
      spin_(static_cast<unsigned>(num_threads_) <=
            std::max(1u, std::thread::hardware_concurrency())) {
  workers_.reserve(static_cast<std::size_t>(num_threads_ - 1));
  for (int i = 1; i < num_threads_; ++i) workers_.emplace_back([this] { worker_loop(); });
}

ThreadPool::~ThreadPool() {
  {
    std::lock_guard lock(mutex_);
    stopping_.store(true, std::memory_order_release);
  }
  wake_.notify_all();
  for (std::thread& t : workers_) t.join();
}

void ThreadPool::worker_loop() {
  t_inside_pool = true;
  std::uint64_t seen = 0;  // the serial of the last job this worker saw
  while (true) {
    const auto has_work = [&] {
      return stopping_.load(std::memory_order_acquire) ||
             serial_of(state_.load(std::memory_order_acquire)) != seen;
    };
    if (!spin_until(spin_, has_work)) {
      std::unique_lock lock(mutex_);
      ++sleeping_workers_;
      wake_.wait(lock, has_work);
      --sleeping_workers_;
    }
    if (stopping_.load(std::memory_order_acquire)) return;
    // Join the job unless it is closed (Note [Claimed chunks]); the count this
    // adds keeps the caller, and so the job, there until this worker leaves.
    std::uint64_t state = state_.load(std::memory_order_acquire);
    seen = serial_of(state);
    bool joined = false;
    while ((state & kClosed) == 0 && serial_of(state) == seen) {
      if (state_.compare_exchange_weak(state, state + 1, std::memory_order_acquire)) {
        joined = true;
        break;
      }
    }
    if (!joined) continue;
    job_.load(std::memory_order_relaxed)->run();
    const std::uint64_t left = state_.fetch_sub(1, std::memory_order_acq_rel) - 1;
    if ((left & kClosed) != 0 && (left & kInsideMask) == 0) {
      // The last one out of a closed job: the caller may have stopped spinning.
      // Taking the mutex orders this against its last check before it sleeps.
      { std::lock_guard lock(mutex_); }
      done_.notify_one();
    }
  }
}

void ThreadPool::parallel_for(std::int64_t n, std::int64_t grain,
                              FunctionRef<void(std::int64_t, std::int64_t)> body) {
  if (n <= 0) return;
  grain = std::max<std::int64_t>(grain, 1);
  const std::int64_t units = (n + grain - 1) / grain;
  if (units == 1 || workers_.empty() || t_inside_pool) {
    // One chunk, or no workers, or nested: run it here. The chunk boundaries of
    // a nested call would differ, so nested calls run the whole range as one chunk.
    body(0, n);
    return;
  }
  std::lock_guard submit_lock(submit_);
  Job job{.n = n, .grain = grain, .units = units, .threads = num_threads_, .body = body};
  job_.store(&job, std::memory_order_relaxed);
  // Open, nobody inside: the serial's release publishes the job.
  const std::uint64_t serial = serial_of(state_.load(std::memory_order_relaxed)) + 1;
  state_.store(serial << kSerialShift, std::memory_order_release);
  bool any_asleep = false;
  {
    // A worker past its spin either saw the new serial under this mutex or is
    // waiting on wake_ by the time we hold it.
    std::lock_guard lock(mutex_);
    any_asleep = sleeping_workers_ > 0;
  }
  if (any_asleep) wake_.notify_all();
  t_inside_pool = true;
  job.run();
  t_inside_pool = false;
  // Every chunk is claimed: close the job to latecomers, then wait for the
  // workers inside to finish theirs.
  state_.fetch_or(kClosed, std::memory_order_acq_rel);
  const auto all_out = [&] { return (state_.load(std::memory_order_acquire) & kInsideMask) == 0; };
  if (!spin_until(spin_, all_out)) {
    std::unique_lock lock(mutex_);
    done_.wait(lock, all_out);
  }
  job_.store(nullptr, std::memory_order_relaxed);
}

int default_thread_count() {
  static const int count = [] {
    const int hardware = std::max(1, static_cast<int>(std::thread::hardware_concurrency()));
    if (const char* env = read_environment(EnvVar::kThreads)) {
      int value = 0;
      const char* end = env + std::strlen(env);
      auto [ptr, ec] = std::from_chars(env, end, value);
      if (ec == std::errc() && ptr == end && value >= 1 && value <= kMaxThreads) return value;
      note_environment_problem(EnvVar::kThreads,
                               fmt::format("'{}' is not a thread count from 1 to {}; using {}",
                                           printable(env, 40), kMaxThreads, hardware));
    }
    return hardware;
  }();
  return count;
}

ThreadPool& default_thread_pool() {
  // Never destroyed: kernels may run from other static destructors' callers.
  static ThreadPool* pool = new ThreadPool(default_thread_count());
  return *pool;
}

}  // namespace switchyard
