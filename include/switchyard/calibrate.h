// Measuring kernels for a calibration profile (calibration.h), and finding the
// part of a profile that may be used on this machine.
//
// calibrate() times every alternative the options select over a log-spaced grid
// of shapes for its op family (and, given a plan's shapes, at those too), on the
// backend's own memory and stream, and fits each one's cost (fit_cost). Families with a grid today:
// elementwise binary and unary ops, casts, copy, the row-wise norms and softmax (one input), and
// matmul (dense and quantized weights). Entries of other families are listed as skipped with the
// reason, and the planner keeps their modelled cost.
//
// Each shape is run once to warm up, then timed call by call until the budget
// for that shape is spent (at least 3 calls; the median counts). The budget is
// shared evenly between the entries; an entry stops taking larger shapes when its
// share is spent, and one with fewer than 3 timed shapes is skipped.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "switchyard/binding_table.h"
#include "switchyard/calibration.h"
#include "switchyard/kernel.h"
#include "switchyard/status.h"

namespace switchyard {

// A shape a plan runs a kernel at (planned_shapes in regret.h): calibrated
// besides the kernel's grid, so that the profile has a measurement at the very
// shapes the model runs.
struct PlannedShape {
  std::string kernel;
  std::vector<Shape> shapes;  // key order: inputs, then the output
  OpParams params;
  // The output is the first input's memory (set_rows' cache).
  bool in_place = false;
};

struct CalibrateOptions {
  std::optional<BackendId> backend;
  std::optional<OpKind> op;
  // When not empty: only the kernels named here are calibrated, at their grid's
  // shapes and at these.
  std::vector<PlannedShape> planned;
  // Wall-clock seconds for the whole table.
  double budget_s = 180.0;
  // The CPU threads kernels run on (a pool of this size is made); recorded in the
  // CPU fingerprint.
  int threads = 1;
  // Called before each entry: (index, count, kernel name).
  std::function<void(std::size_t, std::size_t, std::string_view)> progress;
};

// What one kernel's fitted cost was made from, for pictures (`calibrate --plot`):
// every timed point, the planner's modelled time there, and the fit.
struct CalibrationSeries {
  std::string kernel;
  BackendId backend = BackendId::kCpu;
  OpKind op = OpKind::kAdd;
  // The key: "add(f32,f32,f32)@cpu".
  std::string key;
  // As timed (a size timed twice appears twice); bytes and flops from the entry's
  // own estimate.
  std::vector<CostSample> measured;
  // Per measured point: the modelled time the planner ranks by without a profile.
  std::vector<double> modelled_ns;
  FittedCost fit;
};

struct CalibrateReport {
  CalibrationProfile profile;
  // One per kernel in the profile, in table order.
  std::vector<CalibrationSeries> series;
  // "kernel: reason" for each selected entry that has no fit.
  std::vector<std::string> skipped;
  std::size_t calibrated = 0;
  double seconds = 0;
};

[[nodiscard]] Result<CalibrateReport> calibrate(const KernelBindingTable& table,
                                                const CalibrateOptions& options);

// This machine as calibration sees it, per backend in `table` that is ready: the
// CPU's model name, a hash of its feature flags and `threads`; a device's
// BackendMemory::device_description().
[[nodiscard]] std::vector<BackendFingerprint> machine_fingerprints(const KernelBindingTable& table,
                                                                   int threads);

// The part of `profile` that applies to `table` on this machine with `threads` CPU
// threads; what it leaves out is appended to `ignored`.
[[nodiscard]] CalibrationProfile applicable_here(const CalibrationProfile& profile,
                                                 const KernelBindingTable& table, int threads,
                                                 std::vector<std::string>& ignored);

// Loads the profile at `path` and keeps what applies to `table` on this machine
// with `threads` CPU threads; what it leaves out is appended to `ignored`.
[[nodiscard]] Result<std::shared_ptr<const CalibrationProfile>> load_calibration(
    const std::string& path, const KernelBindingTable& table, int threads,
    std::vector<std::string>& ignored);

}  // namespace switchyard
