// Calibration profiles: measured costs in place of modelled ones.
//
// Overview
//   `switchyard calibrate` times kernels over a log-spaced grid of shapes and keeps,
//   per kernel revision, the measured times together with what the entry's own
//   cost function estimates for each shape (cost.h: bytes and flops). The planner
//   ranks every entry the profile covers by the measured time interpolated at the
//   shape it plans, and the rest by the modelled roofline (explain says which
//   ranked each candidate).
//
// Note [Interpolating measurements]
//   The size axis is the entry's estimate turned into time under the default
//   BackendCaps: a measure that weighs bytes and flops as the model does, so that
//   decode shapes (memory-bound) and prompt shapes (compute-bound) of one matmul
//   fall on one axis. Between two measured sizes the time is interpolated
//   linearly; below the smallest it is the smallest's time (a call's fixed cost
//   does not shrink); above the largest it grows in proportion to the size. A
//   global formula such as fixed + bytes / bandwidth was tried first and missed the
//   measurements of the CPU's add kernels by 40-98 %: a kernel crosses several
//   regimes over the grid (L1, L2, the last-level cache, DRAM, and the thread pool
//   joining in at its grain), and the grid's points are where they are known.
//
// Trust
//   A profile holds the fingerprint of each backend it measured (CPU model,
//   features, thread count; GPU name, SM count, driver). A backend whose
//   fingerprint differs from this machine's, and an entry whose revision hash no
//   kernel in the table has any more (its code or name changed), are ignored and
//   reported by `applicable()`, never silently used.
//
// File format: docs/calibration.md (versioned; a truncated or corrupt file is a
// kDataLoss error, another version kInvalidArgument).
#pragma once

#include <cstdint>
#include <map>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "switchyard/backend.h"
#include "switchyard/cost.h"
#include "switchyard/status.h"

namespace switchyard {

// One measurement: the entry's own estimate for the shapes, and the time taken.
struct CostSample {
  double bytes = 0;
  double flops = 0;
  double ns = 0;
};

// The position of an estimate on the size axis (Note [Interpolating measurements]).
[[nodiscard]] double calibration_size(double bytes, double flops);

struct FittedCost {
  // Sorted by calibration_size, one per size.
  std::vector<CostSample> samples;
  [[nodiscard]] double predict_ns(double bytes, double flops) const;
};

// Checks and orders measurements: at least 3 with positive, finite times and
// non-negative counts (others are dropped); samples of one size are averaged.
// kInvalidArgument for fewer than 3 usable samples.
[[nodiscard]] Result<FittedCost> fit_cost(std::span<const CostSample> samples);

// What a profile was measured on, per backend: "Intel(R) Xeon(R) ... | avx2 avx512f
// ... | 2 threads", "NVIDIA H200 | 132 SMs | driver 13000".
struct BackendFingerprint {
  BackendId backend = BackendId::kCpu;
  std::string text;
  friend bool operator==(const BackendFingerprint&, const BackendFingerprint&) = default;
};

struct CalibratedEntry {
  std::string kernel;
  BackendId backend = BackendId::kCpu;
  std::uint64_t revision_hash = 0;
  FittedCost cost;
};

class CalibrationProfile {
 public:
  static constexpr int kFormatVersion = 1;

  CalibrationProfile() = default;

  // `source` names the text in errors (a path).
  [[nodiscard]] static Result<CalibrationProfile> parse(std::string_view json,
                                                        std::string_view source);
  [[nodiscard]] static Result<CalibrationProfile> load(const std::string& path);
  [[nodiscard]] std::string to_json() const;
  [[nodiscard]] Status save(const std::string& path) const;

  void set_fingerprint(BackendFingerprint fingerprint);
  void add(CalibratedEntry entry);

  [[nodiscard]] const std::vector<BackendFingerprint>& fingerprints() const {
    return fingerprints_;
  }
  [[nodiscard]] const std::map<std::uint64_t, CalibratedEntry>& entries() const { return entries_; }
  // The fitted cost of a kernel revision, or null.
  [[nodiscard]] const FittedCost* find(std::uint64_t revision_hash) const;

  // The part of this profile that may be used here: entries whose backend's
  // fingerprint equals `here`'s for that backend and whose revision hash is one of
  // `current_revisions`. Everything left out is named in `ignored`.
  struct Applicable;
  [[nodiscard]] Applicable applicable(std::span<const BackendFingerprint> here,
                                      std::span<const std::uint64_t> current_revisions) const;

 private:
  std::vector<BackendFingerprint> fingerprints_;
  std::map<std::uint64_t, CalibratedEntry> entries_;
};

struct CalibrationProfile::Applicable {
  CalibrationProfile profile;
  std::vector<std::string> ignored;
};

}  // namespace switchyard
