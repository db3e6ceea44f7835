// PrecisionGuarantee: what a kernel claims about its numerical results.
//
// Three states, kept structural so no caller ever tells them apart by a string:
//   - unaudited: the kernel makes no claim (the state every registration starts in);
//   - bounded:   the kernel claims error bounds (ULP, relative and/or absolute)
//                against an exact reference;
//   - no bound:  the kernel was examined and deliberately claims no bound (an
//                approximation whose error depends on the data).
// A claim is a declaration. Whether it holds is the conformance harness's verdict,
// recorded per kernel revision in the verification ledger; the planner trusts only
// claims that are not unaudited.
#pragma once

#include <optional>
#include <string>

namespace switchyard {

enum class AuditState : unsigned char { kUnaudited, kBounded, kNoBound };

struct PrecisionGuarantee {
  AuditState audit = AuditState::kUnaudited;
  // The same inputs give the same output bytes on the same hardware.
  bool bit_stable = false;
  // The same inputs give the same output bytes at any thread count.
  bool deterministic_across_threads = false;
  // Bounds against an exact (float64) reference; set ones apply jointly: an element
  // passes when it is within any one of them.
  std::optional<double> max_ulp;
  std::optional<double> max_rel;
  std::optional<double> max_abs;

  [[nodiscard]] bool is_unaudited() const { return audit == AuditState::kUnaudited; }

  // A bounded claim. At least one bound should be set.
  [[nodiscard]] static PrecisionGuarantee bounded(bool bit_stable,
                                                  bool deterministic_across_threads,
                                                  std::optional<double> max_ulp,
                                                  std::optional<double> max_rel,
                                                  std::optional<double> max_abs);
  // An examined claim of no bound.
  [[nodiscard]] static PrecisionGuarantee no_bound(bool bit_stable,
                                                   bool deterministic_across_threads);

  friend bool operator==(const PrecisionGuarantee&, const PrecisionGuarantee&) = default;
};

[[nodiscard]] std::string_view name(AuditState state);
// "bounded bit-stable thread-deterministic rel<=1e-06".
[[nodiscard]] std::string describe(const PrecisionGuarantee& precision);
// The claim as a JSON object: audit, bit_stable, deterministic_across_threads,
// and max_ulp / max_rel / max_abs where set (what `coverage --json` and
// `explain --json` print).
[[nodiscard]] std::string to_json(const PrecisionGuarantee& precision);

}  // namespace switchyard
