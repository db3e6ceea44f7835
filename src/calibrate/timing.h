// Timing one kernel on operands made for the purpose: what calibration (fitting
// costs over a grid of shapes) and the routing-regret measurement (timing every
// sibling a plan's node could have taken) share.
#pragma once

#include <memory>
#include <span>
#include <string>
#include <string_view>
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
// varying along the tensor, integers 0, 1, 2, ... (distinct row indices and
// positions: valid wherever an index operand is no longer than the dimension it
// indexes, as in every calibration grid and llama plan), quantized blocks of
// zeros. With `in_place` the output is the first input's memory (the
// shapes and dtypes must agree), as a graph binds set_rows' cache (Note [Rows
// written in place] in the CPU's get_rows.cpp). Several timers called in turn
// compare kernels in alternation, so that a machine whose speed drifts slows
// them alike.
class KernelTimer {
 public:
  [[nodiscard]] static Result<KernelTimer> make(const BindingEntry& entry, BackendId backend,
                                                std::span<const DType> dtypes,
                                                std::span<const Shape> shapes,
                                                const OpParams& params, BackendMemory* memory,
                                                ParallelRunner& runner, bool in_place = false);
  KernelTimer(KernelTimer&&) noexcept;
  KernelTimer& operator=(KernelTimer&&) noexcept;
  ~KernelTimer();

  // One call, in ns; the kernel's own error if it fails.
  [[nodiscard]] Result<double> call_ns();
  [[nodiscard]] const BindingEntry& entry() const { return *entry_; }

 private:
  class Operands;
  KernelTimer();
  // Frees the operands, then the stream.
  void release();

  const BindingEntry* entry_ = nullptr;
  OpParams params_;
  BackendMemory* memory_ = nullptr;
  void* stream_ = nullptr;
  std::unique_ptr<Operands> operands_;
  bool in_place_ = false;
  ExecContext ctx_;
};

// Note [Timing in alternation]
// This machine's speed may drift by a factor of two over minutes, and a kernel
// timed over and over keeps its operands in cache where a graph's node, run
// between others, does not. So kernels to be compared are timed in rounds, each
// round calling every one once, until each has had `budget_s` (at least
// `min_rounds` rounds, at most 1000), after one warm-up call each; their medians
// are then compared under the same conditions. Each round starts one kernel
// further along, so that no kernel always follows the same one: a slow kernel
// that evicts the caches would otherwise always hand its successor cold ones.
// A timer that fails drops out with its error; the others go on.
[[nodiscard]] std::vector<Result<double>> time_in_turn(std::vector<KernelTimer>& timers,
                                                       double budget_s, int min_rounds);

// What a timing is keyed by: the kernel, its operand shapes and every parameter
// a kernel reads.
[[nodiscard]] std::string timing_key(std::string_view kernel, std::span<const Shape> shapes,
                                     const OpParams& params);

// The smallest step by which the timing clock advances (ns), measured once: no
// timing of one call is finer than it.
[[nodiscard]] double clock_step_ns();

// The median of `times` (0 when empty).
[[nodiscard]] double median(std::vector<double> times);

}  // namespace switchyard
