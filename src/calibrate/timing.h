// Timing one kernel on operands made for the purpose: what calibration (fitting
// costs over a grid of shapes) and the routing-regret measurement (timing every
// sibling a plan's node could have taken) share.
#pragma once

#include <memory>
#include <span>
#include <vector>

#include "switchyard/backend.h"
#include "switchyard/binding_table.h"
#include "switchyard/kernel.h"
#include "switchyard/status.h"

namespace switchyard {

// One kernel with its operands made, ready to be called and timed: the operands
// (key order: inputs, then the output) are contiguous at `shapes` in `dtypes`, in
// `memory` when it is a device's (each call then waits for the timer's stream),
// with values that keep every kernel on its ordinary path: floats in [-1, 1)
// varying along the tensor, integers 0 (a valid row index or position), quantized
// blocks of zeros. Several timers called in turn compare kernels in alternation,
// so that a machine whose speed drifts slows them alike.
class KernelTimer {
 public:
  [[nodiscard]] static Result<KernelTimer> make(const BindingEntry& entry, BackendId backend,
                                                std::span<const DType> dtypes,
                                                std::span<const Shape> shapes,
                                                const OpParams& params, BackendMemory* memory,
                                                ParallelRunner& runner);
  KernelTimer(KernelTimer&&) noexcept;
  KernelTimer& operator=(KernelTimer&&) noexcept;
  ~KernelTimer();

  // One call, in ns; the kernel's own error if it fails.
  [[nodiscard]] Result<double> call_ns();
  [[nodiscard]] const BindingEntry& entry() const { return *entry_; }

 private:
  class Operands;
  KernelTimer();

  const BindingEntry* entry_ = nullptr;
  OpParams params_;
  BackendMemory* memory_ = nullptr;
  void* stream_ = nullptr;
  std::unique_ptr<Operands> operands_;
  ExecContext ctx_;
};

// The median of `times` (0 when empty).
[[nodiscard]] double median(std::vector<double> times);

// Runs `entry` once to warm up (caches, pages, a kernel's lazy setup), then call
// by call until `budget_s` is spent (at least 3 timed calls, at most 1000), and
// returns the median in ns, on a KernelTimer's operands.
[[nodiscard]] Result<double> time_entry(const BindingEntry& entry, BackendId backend,
                                        std::span<const DType> dtypes,
                                        std::span<const Shape> shapes, const OpParams& params,
                                        BackendMemory* memory, ParallelRunner& runner,
                                        double budget_s);

}  // namespace switchyard
