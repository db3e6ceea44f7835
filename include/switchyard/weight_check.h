// Checking a GGUF file's weights for numerical garbage: NaN and infinity (a file
// that must not be run) and subnormal values (suspicious, and slow on some
// hardware), tensor by tensor, as `switchyard inspect --check` and
// `switchyard run --check-weights` do.
//
// Overview
//   check_weights() reads every tensor's bytes once, straight from the file's
//   mapping, through scan_values() (value_scan.h says which values of each dtype
//   are floats: every element of f32/f16/bf16/f64, the scale fields of a block
//   format). The work is cut into chunks of whole blocks and spread over the
//   caller's ParallelRunner; per-tensor results are merged in file order, so they do
//   not depend on the thread count. Nothing is dequantized and nothing is
//   allocated in proportion to the data.
//
//   The walk trusts only what the parser has already checked (every tensor's
//   range lies inside the file, whole blocks) and re-checks it before reading:
//   a range outside the file is an error (kInternal: the parser should have
//   refused the file), never a read.
//
// Cost
//   One read of the tensor data, at about the speed of a plain read of the same
//   bytes (docs/benchmarks.md, "Checking weights"). The first read of a mapped
//   file also pays the page faults (and the disk, when the file is not cached) that
//   a first inference would otherwise pay.
//
// Example
//   ThreadPool pool(4);
//   SWITCHYARD_ASSIGN_OR_RETURN(WeightCheckReport r,
//                               check_weights(file, {.runner = &pool}));
//   for (const TensorCheck& t : r.tensors) {
//     if (!t.scan.finite()) fmt::print("{}: {} NaN\n", file.tensors()[t.tensor].name, t.scan.nan);
//   }
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "switchyard/gguf.h"
#include "switchyard/kernel.h"
#include "switchyard/status.h"
#include "switchyard/value_scan.h"

namespace switchyard {

struct WeightCheckOptions {
  // Spreads the scan; null scans on the calling thread.
  ParallelRunner* runner = nullptr;
  // Called on the calling thread before the first byte is read and then every few
  // tens of megabytes, with the tensor bytes scanned so far and in all (the last
  // call has done == total); may be empty.
  std::function<void(std::uint64_t done, std::uint64_t total)> progress;
};

// One tensor's result.
struct TensorCheck {
  // Index into the file's tensors().
  std::size_t tensor = 0;
  // Whether its dtype holds floats at all (has_float_values); an integer tensor
  // is reported with an empty scan.
  bool checked = false;
  ValueScan scan;
};

struct WeightCheckReport {
  // One per tensor of the file, in file order.
  std::vector<TensorCheck> tensors;
  // Tensor bytes read.
  std::uint64_t bytes = 0;
  // Totals over all tensors.
  std::int64_t values = 0;
  std::int64_t nan = 0;
  std::int64_t inf = 0;
  std::int64_t subnormal = 0;
  // Tensors with at least one NaN or infinity; with at least one subnormal.
  std::int64_t nonfinite_tensors = 0;
  std::int64_t subnormal_tensors = 0;
  // The subnormals that stay subnormal in f32 (subnormal_in_f32: f32, bf16, ...
  // but not f16 values or scales), and the tensors holding them: the ones worth a
  // warning.
  std::int64_t subnormal_in_f32 = 0;
  std::int64_t subnormal_in_f32_tensors = 0;

  // No tensor holds a NaN or an infinity.
  [[nodiscard]] bool finite() const { return nan == 0 && inf == 0; }
  // The first tensor (in file order) holding a NaN or an infinity, or null.
  [[nodiscard]] const TensorCheck* first_nonfinite() const;
};

// Scans every tensor of `file`. Fails only with kInternal, for a tensor range the
// parser should have refused; the scan's findings are data, not errors.
[[nodiscard]] Result<WeightCheckReport> check_weights(const GgufFile& file,
                                                      const WeightCheckOptions& options = {});

// One line describing a tensor's findings, without its name: "q4_0: 1 NaN, 0 Inf,
// 0 subnormal; first non-finite: block 17 (d)". Element indices are named as
// such for the dense dtypes.
[[nodiscard]] std::string describe(const TensorCheck& check, DType dtype);

}  // namespace switchyard
