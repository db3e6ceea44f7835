// The conformance harness: every kernel in a binding table, run against an
// independent float64 reference, judged by the precision it claims.
//
// Overview
//   `verify_table` walks every alternative of every key (each sibling, not only
//   the first) and runs it on freshly generated inputs over several shapes: size 1,
//   odd sizes, sizes that are not a multiple of any SIMD width, and strided or
//   broadcast inputs where the entry's caps accept them. Each output is compared
//   with a float64 reference written from docs/ops.md, independently of any kernel.
//   Inputs are rounded to their storage dtype first (f16, bf16, integers; block-
//   quantized weights through quantize/dequantize) so that the reference reads
//   exactly the values the kernel reads.
//
//   Around every run the harness poisons the output (all bits set: a NaN in every
//   float dtype), surrounds it with guard bytes and checks afterwards that the
//   guards and the inputs are untouched. Entries of a backend whose memory is not
//   host memory (a GPU) run the same way on a copy: the inputs, and the poisoned
//   output with its guards, are uploaded through that backend's BackendMemory on
//   a stream of its own, and after the run the output, the guards and the inputs
//   are downloaded and checked on the host. Without a device such entries are
//   skipped, saying why. A claim of bit stability is checked by
//   running twice and comparing bytes; a claim of determinism across threads by
//   running serially and at `VerifyOptions::threads` threads.
//
// Threshold rule (Note [Verify thresholds])
//   For every output element, err = |out - ref| with ref the float64 reference.
//   - Any NaN in the output fails (the reference never produces one).
//   - A bounded claim passes an element when it is within ANY declared bound:
//       err <= max_abs, or
//       err <= max_rel * scale, or
//       err <= max_ulp * ulp(ref) + |ref| * 2^-50   (ulp in the output dtype; the
//                                                    last term absorbs the rounding
//                                                    of the float64 reference).
//     `scale` is the magnitude the kernel's arithmetic works at: |ref| for
//     elementwise ops, sum |a_i * b_i| for dot products and sums (so cancellation
//     does not fail an honest kernel), |x - mean| terms for layer_norm, and
//     sum p_j |v_j| for attention. A bounded claim that declares no bound at all
//     demands exact results.
//     Infinities pass only when the output is the same infinity.
//   - Every claim, and an unaudited entry too, must keep the normalised mean
//     squared error NMSE = sum (out - ref)^2 / sum ref^2 at or below
//     VerifyOptions::max_nmse (default 1e-3). That is the only numeric gate of a
//     no-bound claim: it is far above what an approximation worth using produces
//     (bf16 rounding alone is ~1e-5, q8 activations ~1e-5) and far below what a
//     broken kernel produces (dropping one term of a 64-term dot product is
//     ~1.6e-2, a wrong index or a missed row is ~1). For matmul each element's
//     ref^2 in the denominator is floored by the sum of its squared terms (which
//     ref^2 equals on average when nothing cancels): a draw whose terms cancel
//     to a tiny result would otherwise fail an honest kernel whose error follows
//     the terms (q8 activations), while a dropped term still costs 1/K of it.
//
// Verdicts
//   pass: a claim (bounded or no-bound) held on every case. fail: anything above
//   went wrong, or the kernel returned an error on a valid case. unaudited: the
//   entry claims nothing; it ran cleanly, which is not a pass of any claim. skipped:
//   the harness cannot run it here (device memory, a runtime-fused recipe, a dtype
//   combination the op contract does not define) — a skipped claim stays unverified.
//
// Ledger
//   Verdicts are recorded in a VerificationLedger keyed by (kernel name, revision
//   hash). A claim counts as audited only with a pass recorded for the entry's
//   current revision hash, so changing a kernel's numerics (bumping its revision)
//   invalidates the audit until the harness passes it again.
//
// Example
//   const TableSnapshot table = current_table();
//   std::vector<VerifyEntryReport> reports = verify_table(*table, {.op = OpKind::kAdd});
//   SWITCHYARD_ASSIGN_OR_RETURN(VerificationLedger ledger,
//                               VerificationLedger::load("switchyard-ledger.json"));
//   for (const VerifyEntryReport& r : reports) ledger.record(r, utc_date_now());
//   SWITCHYARD_RETURN_IF_ERROR(ledger.save("switchyard-ledger.json"));
//   for (const UnverifiedClaim& c : unverified_claims(*table, ledger)) ...
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "switchyard/backend.h"
#include "switchyard/backend_memory.h"
#include "switchyard/binding_table.h"
#include "switchyard/op.h"
#include "switchyard/precision.h"
#include "switchyard/status.h"

namespace switchyard {

enum class VerifyVerdict : unsigned char { kPass, kFail, kUnaudited, kSkipped };

// Why a case failed; the first reason found in a case is the one reported.
enum class VerifyFailure : unsigned char {
  kNone,
  // The kernel returned a non-ok Status on a valid case.
  kKernelError,
  // The output holds a NaN (a poisoned element left unwritten shows as one too).
  kNaN,
  // A guard byte before or after the output changed: an out-of-bounds write.
  kOutOfBoundsWrite,
  // An input's bytes changed.
  kInputModified,
  // An element is outside every declared bound.
  kBoundExceeded,
  // The NMSE is above VerifyOptions::max_nmse.
  kNmseExceeded,
  // With an input poisoned by NaN or infinity, an output the reference makes
  // non-finite came out finite: the kernel dropped a NaN (Note [Poisoned inputs]).
  kNonFiniteDropped,
  // Two runs at the same thread count gave different bytes (bit-stable claimed).
  kNotBitStable,
  // A serial run and a threaded run gave different bytes (claimed deterministic).
  kNotThreadDeterministic,
};

// "pass", "fail", "unaudited", "skipped".
[[nodiscard]] std::string_view name(VerifyVerdict verdict);
// Parses the spellings of name(VerifyVerdict).
[[nodiscard]] Result<VerifyVerdict> parse_verify_verdict(std::string_view text);
// "kernel-error", "nan", "out-of-bounds-write", ...
[[nodiscard]] std::string_view name(VerifyFailure failure);

struct VerifyOptions {
  // Only entries of this backend / this static op (unset: all).
  std::optional<BackendId> backend;
  std::optional<OpKind> op;
  // Seeds the input generator; each entry mixes in its kernel name so that adding
  // a kernel does not change the inputs of the others.
  std::uint64_t seed = 0x5157'17c4'a11d'0001ULL;
  // Threads of the parallel run; the thread-determinism check compares it with a
  // serial run (and with 3 threads when this is 1).
  int threads = 2;
  // The NMSE gate every entry must pass (see Note [Verify thresholds]).
  double max_nmse = 1e-3;
  // Per backend, the memory its operands live in. Null: for verify_table, the
  // memory the backend registered in the table; for verify_entry, host memory for
  // the host backend, and the entries of any other backend are skipped.
  std::array<BackendMemory*, kBackendCount> memory{};
};

// One generated case of one entry.
struct VerifyCaseResult {
  // The operands and params, e.g. "x f32[3, 17] strided; eps=1e-05".
  std::string description;
  VerifyFailure failure = VerifyFailure::kNone;
  // What failed, e.g. the first element outside the bound with its values.
  std::string detail;
  double nmse = 0.0;
  double max_abs_error = 0.0;
  std::int64_t elements = 0;
};

// The harness's verdict on one alternative.
struct VerifyEntryReport {
  BackendId backend = BackendId::kCpu;
  BindingKey key = OpKind::kCopy;
  DTypeList dtypes;
  std::string kernel;
  std::string source;
  std::uint64_t revision_hash = 0;
  PrecisionGuarantee precision;
  VerifyVerdict verdict = VerifyVerdict::kSkipped;
  // The first failure (kNone unless verdict is kFail).
  VerifyFailure failure = VerifyFailure::kNone;
  // Why it failed or was skipped, in words.
  std::string reason;
  std::vector<VerifyCaseResult> cases;
  double worst_nmse = 0.0;
  double worst_max_abs = 0.0;
  // Whether the bit-stability (and thread-determinism) claim was exercised.
  bool bit_stable_checked = false;
  bool thread_determinism_checked = false;
};

// Verifies one alternative of `slot`. Never fails as a call: every problem is in
// the report's verdict.
[[nodiscard]] VerifyEntryReport verify_entry(const KernelBindingTable::Slot& slot,
                                             const BindingEntry& entry,
                                             const VerifyOptions& options = {});

// Verifies every alternative the options select, in table order.
[[nodiscard]] std::vector<VerifyEntryReport> verify_table(const KernelBindingTable& table,
                                                          const VerifyOptions& options = {});

// One audit in the ledger.
struct LedgerRecord {
  std::string kernel;
  std::uint64_t revision_hash = 0;
  VerifyVerdict verdict = VerifyVerdict::kSkipped;
  std::int64_t cases = 0;
  double worst_nmse = 0.0;
  double worst_max_abs = 0.0;
  bool bit_stable_checked = false;
  // When the audit ran, ISO 8601 UTC ("2026-12-02T10:35:00Z").
  std::string date;

  friend bool operator==(const LedgerRecord&, const LedgerRecord&) = default;
};

// The verification ledger: the latest verdict per (kernel name, revision hash).
// Stored as JSON: {"version": 1, "records": [{"kernel": ..., "revision_hash":
// "<16 hex digits>", "verdict": ..., "cases": ..., "worst_nmse": ...,
// "worst_max_abs": ..., "bit_stable_checked": ..., "date": ...}, ...]}.
class VerificationLedger {
 public:
  // Records a report's verdict, replacing an earlier record for the same kernel
  // and revision. Records of other revisions are kept (they no longer count).
  void record(const VerifyEntryReport& report, std::string date);
  // Inserts or replaces a record as is.
  void put(LedgerRecord record);
  // The record for (kernel, revision), or null.
  [[nodiscard]] const LedgerRecord* find(std::string_view kernel,
                                         std::uint64_t revision_hash) const;
  // Whether `entry` makes a claim (bounded or no-bound) and the ledger holds a pass
  // for its current revision hash. An unaudited entry is never verified.
  [[nodiscard]] bool is_verified(const BindingEntry& entry) const;
  [[nodiscard]] std::span<const LedgerRecord> records() const { return records_; }

  // The JSON text described above, records sorted by kernel then revision.
  [[nodiscard]] std::string to_json() const;
  // Parses to_json()'s format. kDataLoss on malformed text or a missing field.
  [[nodiscard]] static Result<VerificationLedger> from_json(std::string_view text);
  // Reads a ledger file; a file that does not exist is an empty ledger.
  // kDataLoss when it exists but cannot be read or parsed.
  [[nodiscard]] static Result<VerificationLedger> load(const std::string& path);
  // Writes the ledger (to a temporary file renamed over `path`). kUnavailable
  // when the file cannot be written.
  [[nodiscard]] Status save(const std::string& path) const;

 private:
  std::vector<LedgerRecord> records_;
};

// A precision claim the ledger does not back for the entry's current revision.
struct UnverifiedClaim {
  BackendId backend = BackendId::kCpu;
  BindingKey key = OpKind::kCopy;
  DTypeList dtypes;
  std::string kernel;
  std::uint64_t revision_hash = 0;
  PrecisionGuarantee precision;
  // "never verified", "verified only for another revision", "last verdict: fail".
  std::string why;
};

// Every entry of `table` whose claim is not verified by `ledger`, in table order.
// Unaudited entries make no claim and are not listed.
[[nodiscard]] std::vector<UnverifiedClaim> unverified_claims(const KernelBindingTable& table,
                                                             const VerificationLedger& ledger);

// The current time as ISO 8601 UTC, for LedgerRecord::date.
[[nodiscard]] std::string utc_date_now();

}  // namespace switchyard
