// The sealed kernel-lookup registry: rows, seal, surprises and the global instance.
//
// Note [Two-step recording]
//   A record first looks its key up under a shared lock and, when the row exists,
//   bumps the row's atomic count and leaves. Only a key seen for the first time
//   takes the exclusive lock, and it re-checks there: several threads can race to
//   the same new key, and exactly one of them creates the row and decides whether
//   it is a surprise. The others find the row under the exclusive lock and only
//   count. The warning itself is printed after the lock is released, so a slow
//   sink never blocks a dispatch thread that merely counts.
#include "switchyard/registry.h"

#include <algorithm>
#include <cctype>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <tuple>
#include <unordered_map>
#include <unordered_set>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "registry/report_format.h"
#include "switchyard/dispatch.h"
#include "switchyard/environment.h"

namespace switchyard {

std::atomic<std::uint8_t> detail::g_registry_mode{0};

namespace {

constexpr std::uint8_t kModeEnabled = 1;

// The part of a row's key that decides whether a kernel exists. Role and call
// site are diagnostics, not part of the question asked.
std::uint32_t shape_of(BackendId backend, std::uint16_t op, DType dtype) {
  return (static_cast<std::uint32_t>(backend) << 24) | (static_cast<std::uint32_t>(op) << 8) |
         static_cast<std::uint32_t>(dtype);
}

// The key as a record sees it: no allocation for the role.
struct KeyView {
  BackendId backend;
  std::uint16_t op;
  DType dtype;
  std::string_view role;
  const char* file;
  std::uint32_t line;
};

// The key as a row stores it.
struct RowKey {
  explicit RowKey(const KeyView& v)
      : backend(v.backend), op(v.op), dtype(v.dtype), role(v.role), file(v.file), line(v.line) {}
  BackendId backend;
  std::uint16_t op;
  DType dtype;
  std::string role;
  const char* file;
  std::uint32_t line;

  [[nodiscard]] KeyView view() const { return {backend, op, dtype, role, file, line}; }
};

// The file name is left out of the hash: hashing a path on every record would
// cost more than the rest together, and (line, shape, role) already spreads rows.
struct KeyHash {
  using is_transparent = void;
  std::size_t operator()(const KeyView& k) const {
    std::uint64_t h = shape_of(k.backend, k.op, k.dtype);
    h = h * 0x9e3779b97f4a7c15ull + k.line;
    h ^= std::hash<std::string_view>{}(k.role) + 0x7f4a7c159e3779b9ull + (h << 6) + (h >> 2);
    return static_cast<std::size_t>(h);
  }
  std::size_t operator()(const RowKey& k) const { return (*this)(k.view()); }
};

// Files compare by pointer first (the usual case: one literal per translation
// unit) and by content otherwise, so a header's call site inlined into two units
// is still one row.
struct KeyEqual {
  using is_transparent = void;
  static bool eq(const KeyView& a, const KeyView& b) {
    return a.backend == b.backend && a.op == b.op && a.dtype == b.dtype && a.line == b.line &&
           a.role == b.role && (a.file == b.file || std::strcmp(a.file, b.file) == 0);
  }
  bool operator()(const KeyView& a, const KeyView& b) const { return eq(a, b); }
  bool operator()(const RowKey& a, const KeyView& b) const { return eq(a.view(), b); }
  bool operator()(const KeyView& a, const RowKey& b) const { return eq(a, b.view()); }
  bool operator()(const RowKey& a, const RowKey& b) const { return eq(a.view(), b.view()); }
};

struct Row {
  Row(const Outcome& outcome, Phase row_phase, std::source_location row_site)
      : hit(outcome.hit),
        fallback(outcome.fallback),
        severity(outcome.severity),
        phase(row_phase),
        site(row_site) {}
  bool hit;
  std::string fallback;
  Severity severity;
  Phase phase;
  std::source_location site;
  // Atomic so that a repeat record needs only the shared lock.
  std::atomic<std::uint64_t> count{0};
};

using RowMap = std::unordered_map<RowKey, Row, KeyHash, KeyEqual>;

RegistryEntry to_entry(const RowMap::value_type& item) {
  const auto& [key, row] = item;
  RegistryEntry e;
  e.backend = key.backend;
  e.op = key.op < kFirstFusedOpId ? BindingKey(static_cast<OpKind>(key.op))
                                  : BindingKey(FusedOpId{key.op});
  e.role = key.role;
  e.dtype = key.dtype;
  e.site = row.site;
  e.hit = row.hit;
  e.fallback = row.fallback;
  e.severity = row.severity;
  e.phase = row.phase;
  e.count = row.count.load(std::memory_order_relaxed);
  return e;
}

bool entry_less(const RegistryEntry& a, const RegistryEntry& b) {
  const auto rank = [](const RegistryEntry& e) {
    return std::make_tuple(e.backend, e.op.raw(), e.dtype, std::string_view(e.role));
  };
  if (rank(a) != rank(b)) return rank(a) < rank(b);
  if (const int c = std::strcmp(a.site.file_name(), b.site.file_name()); c != 0) return c < 0;
  return a.site.line() < b.site.line();
}

void sort_entries(std::vector<RegistryEntry>& entries) {
  std::stable_sort(entries.begin(), entries.end(), entry_less);
}

std::string lower(std::string_view s) {
  std::string out(s);
  for (char& c : out) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return out;
}

std::string_view trim(std::string_view s) {
  constexpr std::string_view kSpace = " \t\r\n";
  const auto first = s.find_first_not_of(kSpace);
  if (first == std::string_view::npos) return {};
  return s.substr(first, s.find_last_not_of(kSpace) - first + 1);
}

}  // namespace

// --- vocabulary -------------------------------------------------------------------

std::string_view name(Severity severity) {
  return severity == Severity::kByDesign ? "by_design" : "slow_path";
}

std::string_view name(Phase phase) { return phase == Phase::kBuild ? "build" : "run"; }

DType representative_dtype(const DTypeList& dtypes) {
  const auto span = dtypes.span();
  const auto quant =
      std::find_if(span.begin(), span.end(), [](DType t) { return is_quantized(t); });
  if (quant != span.end()) return *quant;
  return span.empty() ? DType::kF32 : span.front();
}

std::string RegistryEntry::op_name() const {
  if (auto op_kind = op.static_op()) return std::string(name(*op_kind));
  return fmt::format("fused#{}", op.raw());
}

std::string RegistryEntry::to_string() const {
  std::string text;
  if (hit) {
    text = fmt::format("hit   {} {} {} ({})", name(backend), op_name(), name(dtype), role);
  } else {
    text =
        fmt::format("{}  {} {} {} ({}) -> {} [{}]",
                    severity == Severity::kSlowPath ? "MISS" : "host", name(backend), op_name(),
                    name(dtype), role, detail::fallback_or_placeholder(fallback), name(severity));
  }
  return fmt::format("{} at {}  x{}{}", text, describe_site(site), count,
                     phase == Phase::kRun ? "  (run)" : "");
}

// --- strict policy ------------------------------------------------------------

bool StrictPolicy::covers(const RegistryEntry& entry) const {
  switch (mode) {
    case Mode::kOff: return false;
    case Mode::kAll: return true;
    case Mode::kSelected: break;
  }
  const std::optional<OpKind> op = entry.op.static_op();
  const OpFamily family = op ? op_family(*op) : OpFamily::kFused;
  return std::find(families.begin(), families.end(), family) != families.end() ||
         (op && std::find(ops.begin(), ops.end(), *op) != ops.end()) ||
         std::find(roles.begin(), roles.end(), entry.role) != roles.end();
}

std::string StrictPolicy::to_string() const {
  if (mode == Mode::kOff) return "off";
  if (mode == Mode::kAll) return "all";
  std::vector<std::string> parts;
  for (OpFamily f : families) parts.push_back(fmt::format("family {}", name(f)));
  for (OpKind o : ops) parts.push_back(fmt::format("op {}", name(o)));
  for (const std::string& r : roles) parts.push_back(fmt::format("role {}", r));
  return fmt::format("{}", fmt::join(parts, ", "));
}

Result<StrictPolicy> parse_strict_policy(std::string_view text) {
  const std::string word = lower(trim(text));
  if (word.empty() || word == "0" || word == "false" || word == "off") return StrictPolicy::off();
  if (word == "1" || word == "true" || word == "on") return StrictPolicy::all();
  StrictPolicy policy{.mode = StrictPolicy::Mode::kSelected};
  std::vector<std::string> unknown;
  std::size_t start = 0;
  while (start <= text.size()) {
    const std::size_t comma = text.find(',', start);
    const std::string_view item = trim(text.substr(start, comma - start));
    constexpr std::string_view kRolePrefix = "role:";
    if (item.starts_with(kRolePrefix) && !trim(item.substr(kRolePrefix.size())).empty()) {
      const std::string_view role = trim(item.substr(kRolePrefix.size()));
      if (std::find(policy.roles.begin(), policy.roles.end(), role) == policy.roles.end()) {
        policy.roles.emplace_back(role);
      }
    } else if (Result<OpFamily> family = parse_op_family(item); family.is_ok()) {
      if (std::find(policy.families.begin(), policy.families.end(), *family) ==
          policy.families.end()) {
        policy.families.push_back(*family);
      }
    } else if (Result<OpKind> op = parse_op(item); op.is_ok()) {
      if (std::find(policy.ops.begin(), policy.ops.end(), *op) == policy.ops.end()) {
        policy.ops.push_back(*op);
      }
    } else if (!item.empty()) {
      unknown.push_back(fmt::format("'{}'", printable(item, 40)));
    }
    if (comma == std::string_view::npos) break;
    start = comma + 1;
  }
  if (!unknown.empty()) {
    std::vector<std::string_view> families;
    for (OpFamily f : kAllOpFamilies) families.push_back(name(f));
    return invalid_argument_error(fmt::format(
        "strict policy: {} {} not 1/true/on, 0/false/off, an op family ({}), an op or "
        "role:<role>",
        fmt::join(unknown, ", "), unknown.size() == 1 ? "is" : "are", fmt::join(families, ", ")));
  }
  if (policy.families.empty() && policy.ops.empty() && policy.roles.empty()) {
    return StrictPolicy::off();
  }
  return policy;
}

// --- configuration --------------------------------------------------------------

Result<RegistryConfig> RegistryConfig::from_variables(const char* kernel_registry,
                                                      const char* strict_kernels) {
  RegistryConfig c;
  if (kernel_registry != nullptr) {
    const std::string word = lower(trim(kernel_registry));
    if (word == "0" || word == "false" || word == "off") {
      c.enabled = false;
    } else if (word == "1" || word == "true" || word == "on" || word == "verbose") {
      c.verbose = true;
    } else if (!word.empty()) {
      return invalid_argument_error(
          fmt::format("kernel registry: '{}' is not 0/false/off or 1/true/on/verbose",
                      printable(kernel_registry, 40)));
    }
  }
  if (strict_kernels != nullptr) {
    SWITCHYARD_ASSIGN_OR_RETURN(c.strict, parse_strict_policy(strict_kernels));
  }
  return c;
}

// Note [A misspelt strict policy is strict]
// A value that does not parse must not weaken what the user asked for: a typo in
// SWITCHYARD_STRICT_KERNELS makes the registry strict for everything (and the
// problem is noted for check_environment(), which the tool turns into exit 2); an
// unusable SWITCHYARD_KERNEL_REGISTRY leaves the registry on, as when unset.
const RegistryConfig& RegistryConfig::from_environment() {
  static const RegistryConfig config = [] {
    const char* registry_text = read_environment(EnvVar::kKernelRegistry);
    const char* strict_text = read_environment(EnvVar::kStrictKernels);
    RegistryConfig c;
    if (Result<RegistryConfig> r = from_variables(registry_text, nullptr); r.is_ok()) {
      c = *std::move(r);
    } else {
      note_environment_problem(EnvVar::kKernelRegistry,
                               fmt::format("{}; the registry stays on", r.status().message()));
    }
    if (strict_text != nullptr) {
      if (Result<StrictPolicy> policy = parse_strict_policy(strict_text); policy.is_ok()) {
        c.strict = *std::move(policy);
      } else {
        c.strict = StrictPolicy::all();
        note_environment_problem(
            EnvVar::kStrictKernels,
            fmt::format("{}; strict mode is on for every op", policy.status().message()));
      }
    }
    return c;
  }();
  return config;
}

// --- Registry -----------------------------------------------------------------------

struct Registry::State {
  RegistryConfig config;
  RowMap rows;
  // Shapes predicted by build-phase records.
  std::unordered_set<std::uint32_t> known;
  // Surprise rows in first-seen order; map nodes are stable until reset().
  std::vector<const RowMap::value_type*> surprises;
};

Registry::Registry(RegistryConfig config)
    : enabled_(config.enabled), state_(std::make_unique<State>()) {
  state_->config = std::move(config);
}

Registry::~Registry() = default;

void Registry::record(const Lookup& lookup, const Outcome& outcome,
                      const std::source_location& site, bool build) {
  const KeyView key{lookup.backend, lookup.op.raw(),  lookup.dtype,
                    lookup.role,    site.file_name(), site.line()};
  const std::uint32_t shape = shape_of(key.backend, key.op, key.dtype);
  bool counted = false;
  {
    // See Note [Two-step recording].
    std::shared_lock lock(mutex_);
    const auto it = state_->rows.find(key);
    if (it != state_->rows.end()) {
      it->second.count.fetch_add(1, std::memory_order_relaxed);
      // A build record must also leave its shape predicted; it is only not when
      // a run-phase row of the same key came first.
      if (!build || state_->known.contains(shape)) return;
      counted = true;
    }
  }
  std::string warning;
  {
    std::unique_lock lock(mutex_);
    State& st = *state_;
    const bool sealed = sealed_.load(std::memory_order_relaxed);
    if (build || !sealed) st.known.insert(shape);
    auto [it, inserted] = st.rows.try_emplace(
        RowKey(key), outcome, (build || !sealed) ? Phase::kBuild : Phase::kRun, site);
    if (!counted) it->second.count.fetch_add(1, std::memory_order_relaxed);
    if (!inserted || build || !sealed || !outcome.is_slow_path() || st.known.contains(shape)) {
      return;
    }
    st.surprises.push_back(&*it);
    warning = fmt::format(
        "switchyard: SILENT SLOW PATH: a kernel lookup missed after the registry was sealed.\n"
        "switchyard:   {} {} for {} has no kernel; falling back to {}.\n"
        "switchyard:   call site {} (role {}).\n"
        "switchyard:   no build-phase probe predicted this, so no load-time diagnostic "
        "covered it.\n"
        "switchyard:   probe this shape while planning so that seal() reports it and strict "
        "mode (SWITCHYARD_STRICT_KERNELS) can refuse it.\n",
        name(key.backend), to_entry(*it).op_name(), name(key.dtype),
        detail::fallback_or_placeholder(outcome.fallback), describe_site(site), key.role);
  }
  warn(warning);
}

void Registry::warn(std::string_view text) const {
  // The sink is fixed at construction, so reading it without the lock is safe.
  if (state_->config.sink) {
    state_->config.sink(text);
  } else {
    std::fwrite(text.data(), 1, text.size(), stderr);
    std::fflush(stderr);
  }
}

SealReport Registry::seal(std::span<const CoverageBinding> masked) {
  SealReport report;
  std::optional<std::vector<BackendId>> selected;
  {
    std::unique_lock lock(mutex_);
    sealed_.store(true, std::memory_order_relaxed);
    for (const auto& item : state_->rows) {
      if (item.second.phase == Phase::kBuild) report.entries.push_back(to_entry(item));
    }
    for (const auto* item : state_->surprises) report.surprises.push_back(to_entry(*item));
    report.strict = state_->config.strict;
    selected = state_->config.selected_backends;
  }
  sort_entries(report.entries);
  report.masked.assign(masked.begin(), masked.end());
  const auto is_selected = [&](BackendId b) {
    return selected ? std::find(selected->begin(), selected->end(), b) != selected->end()
                    : is_accelerator(b);
  };
  for (const RegistryEntry& e : report.entries) {
    if (!e.is_miss()) continue;
    report.misses.push_back(e);
    if (e.is_slow_path() && is_selected(e.backend)) report.violations.push_back(e);
  }
  if (!enabled()) return report;
  if (state_->config.verbose) warn(report.render());
  if (!report.violations.empty()) {
    const bool refused = !report.strict_violations().empty();
    warn(report.render_violations() +
         fmt::format("switchyard: {} kernel lookup(s) above will run on a slower path than the "
                     "selected backend. {}\n",
                     report.violations.size(),
                     refused ? "Strict mode covers at least one of them and refuses to run."
                             : "Set SWITCHYARD_STRICT_KERNELS=1 to refuse to run instead."));
  }
  return report;
}

Result<SealReport> Registry::seal_or_error(std::span<const CoverageBinding> masked) {
  SealReport report = seal(masked);
  const std::vector<RegistryEntry> refused = report.strict_violations();
  if (refused.empty()) return report;
  std::string message = fmt::format("strict kernels ({}) refused {} slow-path kernel miss(es):\n",
                                    report.strict.to_string(), refused.size());
  for (const RegistryEntry& e : refused) message += detail::violation_line(e);
  message += detail::masked_lines(report.masked);
  auto payload = std::make_shared<StrictKernelFailure>();
  payload->report = std::move(report);
  return Status(StatusCode::kFailedPrecondition, std::move(message), std::move(payload));
}

std::vector<RegistryEntry> Registry::surprises() const {
  std::shared_lock lock(mutex_);
  std::vector<RegistryEntry> out;
  for (const auto* item : state_->surprises) out.push_back(to_entry(*item));
  return out;
}

std::vector<RegistryEntry> Registry::entries() const {
  std::vector<RegistryEntry> out;
  {
    std::shared_lock lock(mutex_);
    for (const auto& item : state_->rows) out.push_back(to_entry(item));
  }
  sort_entries(out);
  return out;
}

void Registry::set_strict_policy(StrictPolicy policy) {
  std::unique_lock lock(mutex_);
  state_->config.strict = std::move(policy);
}

StrictPolicy Registry::strict_policy() const {
  std::shared_lock lock(mutex_);
  return state_->config.strict;
}

void Registry::set_selected_backends(std::optional<std::vector<BackendId>> backends) {
  std::unique_lock lock(mutex_);
  state_->config.selected_backends = std::move(backends);
}

void Registry::reset() {
  std::unique_lock lock(mutex_);
  state_->surprises.clear();
  state_->rows.clear();
  state_->known.clear();
  sealed_.store(false, std::memory_order_relaxed);
}

// --- probes -------------------------------------------------------------------------

Result<const BindingEntry*> probe_kernel(Registry& registry, const KernelBindingTable& table,
                                         const ProbeRequest& request, std::source_location site) {
  // The very lookup dispatch makes; its answer is returned untouched.
  Result<const BindingEntry*> answer =
      table.lookup_with_caps(request.key, request.dtypes, request.backend);
  if (registry.enabled()) {
    const Lookup lookup{request.backend, request.key,
                        request.dtype.value_or(representative_dtype(request.dtypes)), request.role};
    registry.record_build(lookup,
                          answer.is_ok()
                              ? Outcome::make_hit()
                              : Outcome{false, request.fallback, request.severity_if_missing},
                          site);
  }
  return answer;
}

// --- the global registry ------------------------------------------------------------

Registry& global_registry() {
  static Registry* registry = [] {
    // Never destroyed: a dispatch thread may record after main() returns.
    auto* r = new Registry(RegistryConfig::from_environment());
    detail::g_registry_mode.store(r->enabled() ? kModeEnabled : detail::kRegistryModeDisabled,
                                  std::memory_order_relaxed);
    return r;
  }();
  return *registry;
}

bool registry_enabled() { return global_registry().enabled(); }

void detail::record_build_global(const Lookup& lookup, const Outcome& outcome,
                                 const std::source_location& site) {
  global_registry().record_build(lookup, outcome, site);
}

void detail::note_fallback_global(const Lookup& lookup, std::string_view fallback,
                                  Severity severity, const std::source_location& site) {
  global_registry().note_fallback(lookup, fallback, severity, site);
}

Result<const BindingEntry*> probe_kernel(const KernelBindingTable& table,
                                         const ProbeRequest& request, std::source_location site) {
  return probe_kernel(global_registry(), table, request, site);
}

SealReport seal() {
  const std::vector<CoverageBinding> masked = masked_bindings();
  return global_registry().seal(masked);
}

Result<SealReport> seal_or_error() {
  const std::vector<CoverageBinding> masked = masked_bindings();
  return global_registry().seal_or_error(masked);
}

}  // namespace switchyard
