// A minimal ParallelRunner for the conformance harness, so that a claim of
// determinism across thread counts can be checked before the CPU backend's own
// thread pool exists. It starts its threads per parallel_for call: simple and
// obviously correct matters more here than dispatch overhead.
#pragma once

#include "switchyard/kernel.h"

namespace switchyard::verify_detail {

class ThreadRunner final : public ParallelRunner {
 public:
  // `threads` >= 1.
  explicit ThreadRunner(int threads);
  [[nodiscard]] int num_threads() const override { return threads_; }
  // Splits [0, n) into at most num_threads() chunks of at least `grain` items; the
  // calling thread runs the first chunk, started threads the others.
  void parallel_for(std::int64_t n, std::int64_t grain,
                    FunctionRef<void(std::int64_t, std::int64_t)> body) override;

 private:
  int threads_;
};

}  // namespace switchyard::verify_detail
