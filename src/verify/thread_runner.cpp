#include "verify/thread_runner.h"

#include <algorithm>
#include <thread>
#include <vector>

namespace switchyard::verify_detail {

ThreadRunner::ThreadRunner(int threads) : threads_(threads) { SWITCHYARD_CHECK(threads >= 1); }

void ThreadRunner::parallel_for(std::int64_t n, std::int64_t grain,
                                FunctionRef<void(std::int64_t, std::int64_t)> body) {
  if (n <= 0) return;
  const std::int64_t min_chunk = std::max<std::int64_t>(grain, 1);
  const std::int64_t chunks =
      std::clamp<std::int64_t>((n + min_chunk - 1) / min_chunk, 1, threads_);
  if (chunks == 1) {
    body(0, n);
    return;
  }
  const std::int64_t per = n / chunks;
  const std::int64_t extra = n % chunks;
  auto bounds = [&](std::int64_t c) {
    const std::int64_t begin = c * per + std::min(c, extra);
    return std::pair(begin, begin + per + (c < extra ? 1 : 0));
  };
  std::vector<std::thread> workers;
  workers.reserve(static_cast<std::size_t>(chunks - 1));
  for (std::int64_t c = 1; c < chunks; ++c) {
    const auto [begin, end] = bounds(c);
    workers.emplace_back([body, begin = begin, end = end] { body(begin, end); });
  }
  const auto [begin, end] = bounds(0);
  body(begin, end);
  for (std::thread& t : workers) t.join();
}

}  // namespace switchyard::verify_detail
