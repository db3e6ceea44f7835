// The sealed kernel-lookup registry: makes a missing kernel loud at load time
// instead of silently slow in a benchmark.
//
// Overview
//   Every dispatch decision that asks "is there a kernel for this (backend, op,
//   dtype)?" can record its answer here: a hit, or a miss with the fallback the
//   caller takes and how bad that is (Severity). The registry observes only: the
//   answers it records come from the binding table's own lookups, read a second
//   time, and nothing here can change what dispatch does.
//
//   Build phase   while a model or graph is planned, each decision is probed
//                 eagerly (`probe_kernel`, with the very lookups dispatch makes) and
//                 recorded. Those rows predict what the run will need.
//   seal()        turns the build picture into a SealReport: every build row, the
//                 misses, and the violations (slow-path misses on a selected
//                 accelerator). Violations are printed whenever they exist;
//                 strict mode turns them into an error (`seal_or_error`).
//   Run phase     after sealing, a dispatch site that is about to take a fallback
//                 records it (`note_fallback`). A slow-path miss on a (backend, op,
//                 dtype) the build phase never saw is a surprise: warned about once,
//                 naming its call site, role and dtype, and kept for the report.
//
// Cost
//   A hit at a dispatch site records nothing: only the fallback branch calls in,
//   and it is already about to do far more work than the bookkeeping. Rows are
//   deduplicated on their key (backend, op, role, dtype, call site) and carry an
//   atomic count, so a repeat record is a shared lock, a hash probe and one relaxed
//   increment; the exclusive lock is taken once per new key. A disabled registry
//   (SWITCHYARD_KERNEL_REGISTRY=0) reduces every entry point to one relaxed atomic
//   load and a return. The environment is read once per process.
//
// Roles
//   A role is a tensor or node role ("attn_q", "ffn_down", "moe_router", a node
//   name) or kDispatchRole when the recording site does not know it. It is passed
//   as a string_view that only has to live for the call: a new row copies it, so
//   runtime strings such as tensor names are fine.
//
// Violations and the selected backends
//   A violation is a slow-path build-phase miss on a backend the process selected.
//   By default the selected set is every accelerator backend (a row on an
//   accelerator exists only because something chose to run there); a CPU miss is
//   then informational, since there is no device to fall off. A process may name
//   its selected set explicitly (`RegistryConfig::selected_backends`), which is how
//   a CPU-only deployment makes its own slow paths (a quantized matmul routed
//   through an f32 dequantize) count.
//
// Example
//   // Planning: probe with the table dispatch will use.
//   TableSnapshot table = current_table();
//   Result<const BindingEntry*> k = probe_kernel(*table, {
//       .key = OpKind::kMatmul, .dtypes = {DType::kF32, DType::kQ4_K, DType::kF32},
//       .backend = BackendId::kCuda, .role = "ffn_down",
//       .fallback = "matmul_q4_k__cpu"});
//   SWITCHYARD_ASSIGN_OR_RETURN(SealReport report, seal_or_error());
//
//   // Hot path, fallback branch only:
//   note_fallback({.backend = BackendId::kCuda, .op = OpKind::kMatmul,
//                  .dtype = DType::kQ4_K}, "matmul_q4_k__cpu");
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <shared_mutex>
#include <source_location>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "switchyard/backend.h"
#include "switchyard/binding_table.h"
#include "switchyard/dtype.h"
#include "switchyard/op.h"
#include "switchyard/status.h"

namespace switchyard {

// The role recorded by a hot-path site that does not know which tensor it serves.
inline constexpr std::string_view kDispatchRole = "(dispatch)";

// How bad a miss is. Only the recording site knows; inferring it later from the
// dtype or the backend is how a signal turns into noise.
enum class Severity : std::uint8_t {
  // The fallback is the intended path (a lone small f32 router matvec costs more to
  // ship to a device than to run on the host).
  kByDesign,
  // No kernel: the work runs somewhere slower than the selected backend, with
  // correct output and no other symptom. What the registry exists to surface.
  kSlowPath,
};

// Build: recorded before seal() (planning, probing). Run: recorded after it.
enum class Phase : std::uint8_t { kBuild, kRun };

// "by_design" / "slow_path"; "build" / "run".
[[nodiscard]] std::string_view name(Severity severity);
[[nodiscard]] std::string_view name(Phase phase);

// What a lookup resolved to. `fallback` only has to live for the recording call.
struct Outcome {
  bool hit = true;
  // The fallback's name, so a report reads as a sentence; empty for a hit.
  std::string_view fallback;
  Severity severity = Severity::kByDesign;

  [[nodiscard]] static constexpr Outcome make_hit() { return {}; }
  [[nodiscard]] static constexpr Outcome slow_path(std::string_view fallback_name) {
    return {false, fallback_name, Severity::kSlowPath};
  }
  [[nodiscard]] static constexpr Outcome by_design(std::string_view fallback_name) {
    return {false, fallback_name, Severity::kByDesign};
  }
  [[nodiscard]] constexpr bool is_slow_path() const {
    return !hit && severity == Severity::kSlowPath;
  }
};

// The question a lookup asked, minus its call site (a defaulted
// std::source_location argument supplies that at the caller).
struct Lookup {
  BackendId backend = BackendId::kCpu;
  // The binding key's op: a static op or a runtime-fused id.
  BindingKey op = OpKind::kCopy;
  // The quant kind or dense dtype of the weight (see representative_dtype).
  DType dtype = DType::kF32;
  std::string_view role = kDispatchRole;
};

// One deduplicated row, as reports hand it out.
struct RegistryEntry {
  BackendId backend = BackendId::kCpu;
  BindingKey op = OpKind::kCopy;
  std::string role;
  DType dtype = DType::kF32;
  std::source_location site;
  bool hit = true;
  std::string fallback;  // empty for a hit
  Severity severity = Severity::kByDesign;
  Phase phase = Phase::kBuild;
  // How many records collapsed into this row.
  std::uint64_t count = 0;

  [[nodiscard]] bool is_miss() const { return !hit; }
  [[nodiscard]] bool is_slow_path() const { return !hit && severity == Severity::kSlowPath; }
  // "matmul", or "fused#16384" for a runtime-fused id.
  [[nodiscard]] std::string op_name() const;
  // One line: "MISS  cuda matmul q4_k (ffn_down) -> matmul_q4_k__cpu [slow_path]
  // at src/plan/probe.cpp:42  x32".
  [[nodiscard]] std::string to_string() const;
};

// Which slow-path misses make strict mode refuse. Off, all, or only those whose
// op family, op or role is listed (a row matches when any list matches it).
// Runtime-fused ids belong to the family "fused".
struct StrictPolicy {
  enum class Mode : std::uint8_t { kOff, kAll, kSelected };
  Mode mode = Mode::kOff;
  std::vector<OpFamily> families;
  std::vector<OpKind> ops;
  std::vector<std::string> roles;

  [[nodiscard]] static StrictPolicy off() { return {}; }
  [[nodiscard]] static StrictPolicy all() { return {.mode = Mode::kAll}; }
  [[nodiscard]] static StrictPolicy only(std::vector<OpFamily> families,
                                         std::vector<std::string> roles = {}) {
    return {.mode = Mode::kSelected, .families = std::move(families), .roles = std::move(roles)};
  }

  [[nodiscard]] bool enabled() const { return mode != Mode::kOff; }
  // Whether a violation on `entry` falls under this policy.
  [[nodiscard]] bool covers(const RegistryEntry& entry) const;
  // "off", "all", or the list as it would be written in the environment.
  [[nodiscard]] std::string to_string() const;
};

// Parses SWITCHYARD_STRICT_KERNELS. "", "0", "false", "off" -> off; "1", "true",
// "on" -> all; otherwise a comma-separated list in which each item is an op family
// ("matmul", "attention"), an op ("rms_norm") or a role written "role:attn_q"
// (roles are free-form, so they carry a prefix: a bare word that is neither a
// family nor an op is a typo). kInvalidArgument names every item that is none of
// these and lists the families.
[[nodiscard]] Result<StrictPolicy> parse_strict_policy(std::string_view text);

// The quant kind or dense dtype a probe records for a key: the first block-quantized
// operand when there is one, else the first operand (f32 for an empty list). Pass
// ProbeRequest::dtype to name the weight explicitly for mixed dense keys such as
// matmul (f32, f16, f32).
[[nodiscard]] DType representative_dtype(const DTypeList& dtypes);

// What `seal()` saw.
struct SealReport {
  // Every build-phase row, stably sorted by backend, op, dtype, role and site.
  std::vector<RegistryEntry> entries;
  // The build-phase rows that missed, of either severity.
  std::vector<RegistryEntry> misses;
  // The slow-path misses on a selected backend (see the file comment).
  std::vector<RegistryEntry> violations;
  // Run-phase slow-path misses that no build record predicted, so far.
  std::vector<RegistryEntry> surprises;
  // What the kernel mask hid from the table the probes read.
  std::vector<CoverageBinding> masked;
  // The strict policy in force when the report was made.
  StrictPolicy strict;

  // The violations the strict policy covers: what seal_or_error refuses.
  [[nodiscard]] std::vector<RegistryEntry> strict_violations() const;
  // The whole report, one row per line, with headed sections.
  [[nodiscard]] std::string render() const;
  // The loud summary printed whenever a violation exists: one line per violation,
  // then the masked bindings when there are any.
  [[nodiscard]] std::string render_violations() const;
  // The report as a JSON object: {"entries", "misses", "violations", "surprises":
  // [row...], "masked": [binding...], "strict": "..."}, each row carrying backend,
  // op, role, dtype, outcome, fallback, severity, phase, count and call_site.
  [[nodiscard]] std::string to_json() const;
};

// The payload of seal_or_error()'s failure (code kFailedPrecondition).
struct StrictKernelFailure : StatusPayload {
  SealReport report;
};

// Where warnings and seal output go. The default writes to stderr.
using WarningSink = std::function<void(std::string_view)>;

// Everything a Registry reads from outside, explicit so that tests never depend on
// the process environment. `from_environment()` is what the global registry uses.
struct RegistryConfig {
  // False: every entry point is one relaxed load and a return; nothing is recorded.
  bool enabled = true;
  // Print the whole build-phase table at seal.
  bool verbose = false;
  StrictPolicy strict;
  // The backends whose slow-path misses are violations; nullopt means every
  // accelerator backend.
  std::optional<std::vector<BackendId>> selected_backends;
  // Null: stderr.
  WarningSink sink;

  // SWITCHYARD_KERNEL_REGISTRY ("0"/"false"/"off" disables, "1"/"true"/"on"/
  // "verbose" prints the table at seal) and SWITCHYARD_STRICT_KERNELS, read once
  // per process and cached. A value that does not parse never weakens strictness:
  // an unusable strict policy means strict for everything, an unusable registry
  // switch leaves the registry on, and either is noted for check_environment()
  // (environment.h).
  [[nodiscard]] static const RegistryConfig& from_environment();

  // The configuration those two variables' values give (null: unset), without
  // reading the environment. kInvalidArgument when either does not parse.
  [[nodiscard]] static Result<RegistryConfig> from_variables(const char* kernel_registry,
                                                             const char* strict_kernels);
};

// A registry instance. There is one process-wide instance (global_registry());
// tests build their own. All members are safe to call concurrently.
class Registry {
 public:
  explicit Registry(RegistryConfig config = {});
  ~Registry();
  Registry(const Registry&) = delete;
  Registry& operator=(const Registry&) = delete;

  [[nodiscard]] bool enabled() const { return enabled_.load(std::memory_order_relaxed); }
  [[nodiscard]] bool is_sealed() const { return sealed_.load(std::memory_order_relaxed); }

  // Records a build-phase lookup (a prediction). Accepted after seal() too: a
  // process that loads a second model probes it, and those lookups extend the
  // predicted set rather than count as surprises.
  void record_build(const Lookup& lookup, const Outcome& outcome,
                    std::source_location site = std::source_location::current()) {
    if (!enabled()) return;
    record(lookup, outcome, site, /*build=*/true);
  }

  // Records a dispatch-site lookup. Before seal() it is a build-phase record; after
  // it, a slow-path miss on an unpredicted (backend, op, dtype) is a surprise,
  // warned about once per row however many threads race to create it.
  void record_dispatch(const Lookup& lookup, const Outcome& outcome,
                       std::source_location site = std::source_location::current()) {
    // Inline so that a disabled registry costs the caller one relaxed load.
    if (!enabled()) return;
    record(lookup, outcome, site, /*build=*/false);
  }

  // The dispatch-site helper for the fallback branch: record_dispatch with a miss.
  void note_fallback(const Lookup& lookup, std::string_view fallback,
                     Severity severity = Severity::kSlowPath,
                     std::source_location site = std::source_location::current()) {
    // Checked before the outcome is built, so that a disabled registry builds nothing.
    if (!enabled()) return;
    record(lookup, {false, fallback, severity}, site, /*build=*/false);
  }

  // Switches on post-seal checking and reports the build picture; prints the
  // violations (and, when verbose, the whole table) through the sink. Idempotent:
  // sealing again recomputes the report over everything recorded so far.
  // `masked` is listed in the report as is (the global seal passes the published
  // table's masked bindings).
  SealReport seal(std::span<const CoverageBinding> masked = {});

  // seal(), then kFailedPrecondition carrying a StrictKernelFailure when the strict
  // policy covers at least one violation. The message holds the full violation
  // report.
  [[nodiscard]] Result<SealReport> seal_or_error(std::span<const CoverageBinding> masked = {});

  // Post-seal surprises so far, in the order they were first seen.
  [[nodiscard]] std::vector<RegistryEntry> surprises() const;
  // Every row, build and run, sorted like SealReport::entries.
  [[nodiscard]] std::vector<RegistryEntry> entries() const;

  // The strict policy; replaceable at any time (a programmatic override of
  // SWITCHYARD_STRICT_KERNELS).
  void set_strict_policy(StrictPolicy policy);
  [[nodiscard]] StrictPolicy strict_policy() const;
  // The backends whose slow-path misses are violations (nullopt: the accelerators).
  void set_selected_backends(std::optional<std::vector<BackendId>> backends);

  // Forgets every row, surprise and the sealed state; keeps the configuration.
  void reset();

 private:
  struct State;
  void record(const Lookup& lookup, const Outcome& outcome, const std::source_location& site,
              bool build);
  void warn(std::string_view text) const;

  std::atomic<bool> enabled_;
  std::atomic<bool> sealed_{false};
  mutable std::shared_mutex mutex_;
  std::unique_ptr<State> state_;  // guarded by mutex_
};

// What probe_kernel asks.
struct ProbeRequest {
  BindingKey key = OpKind::kCopy;
  DTypeList dtypes;
  BackendId backend = BackendId::kCpu;
  std::string_view role = kDispatchRole;
  // What runs instead when the key misses.
  std::string_view fallback;
  Severity severity_if_missing = Severity::kSlowPath;
  // The dtype to record; representative_dtype(dtypes) when unset.
  std::optional<DType> dtype;
};

// Asks `table` exactly what dispatch asks (lookup_with_caps, whose success is
// backend_supports's condition), records the answer as a build-phase hit or miss,
// and returns the lookup's own result unchanged: the entry dispatch would launch,
// or the NoBackendForOp miss. The registry being disabled changes nothing but
// the recording.
[[nodiscard]] Result<const BindingEntry*> probe_kernel(
    Registry& registry, const KernelBindingTable& table, const ProbeRequest& request,
    std::source_location site = std::source_location::current());

// The process-wide registry, configured from the environment on first use.
[[nodiscard]] Registry& global_registry();

namespace detail {
// 0: environment not read yet, 1: enabled, 2: disabled. Constant-initialised so
// that the disabled check is one relaxed load with no guard.
extern std::atomic<std::uint8_t> g_registry_mode;
inline constexpr std::uint8_t kRegistryModeDisabled = 2;
void record_build_global(const Lookup& lookup, const Outcome& outcome,
                         const std::source_location& site);
void note_fallback_global(const Lookup& lookup, std::string_view fallback, Severity severity,
                          const std::source_location& site);
}  // namespace detail

// Whether the process-wide registry records (SWITCHYARD_KERNEL_REGISTRY).
[[nodiscard]] bool registry_enabled();

// record_build on the global registry.
inline void record_build(const Lookup& lookup, const Outcome& outcome,
                         std::source_location site = std::source_location::current()) {
  if (detail::g_registry_mode.load(std::memory_order_relaxed) == detail::kRegistryModeDisabled) {
    return;
  }
  detail::record_build_global(lookup, outcome, site);
}

// note_fallback on the global registry: call on a dispatch site's fallback branch
// only, never on a hit.
inline void note_fallback(const Lookup& lookup, std::string_view fallback,
                          Severity severity = Severity::kSlowPath,
                          std::source_location site = std::source_location::current()) {
  if (detail::g_registry_mode.load(std::memory_order_relaxed) == detail::kRegistryModeDisabled) {
    return;
  }
  detail::note_fallback_global(lookup, fallback, severity, site);
}

// probe_kernel against the global registry.
[[nodiscard]] Result<const BindingEntry*> probe_kernel(
    const KernelBindingTable& table, const ProbeRequest& request,
    std::source_location site = std::source_location::current());

// Seals the global registry, listing the published table's masked bindings.
SealReport seal();

// seal_or_error on the global registry (strict policy from SWITCHYARD_STRICT_KERNELS
// unless set_strict_policy replaced it).
[[nodiscard]] Result<SealReport> seal_or_error();

}  // namespace switchyard
