#include "switchyard/precision.h"

#include <fmt/format.h>

namespace switchyard {

PrecisionGuarantee PrecisionGuarantee::bounded(bool bit_stable, bool deterministic_across_threads,
                                               std::optional<double> max_ulp,
                                               std::optional<double> max_rel,
                                               std::optional<double> max_abs) {
  PrecisionGuarantee p;
  p.audit = AuditState::kBounded;
  p.bit_stable = bit_stable;
  p.deterministic_across_threads = deterministic_across_threads;
  p.max_ulp = max_ulp;
  p.max_rel = max_rel;
  p.max_abs = max_abs;
  return p;
}

PrecisionGuarantee PrecisionGuarantee::no_bound(bool bit_stable,
                                                bool deterministic_across_threads) {
  PrecisionGuarantee p;
  p.audit = AuditState::kNoBound;
  p.bit_stable = bit_stable;
  p.deterministic_across_threads = deterministic_across_threads;
  return p;
}

std::string_view name(AuditState state) {
  switch (state) {
    case AuditState::kUnaudited: return "unaudited";
    case AuditState::kBounded: return "bounded";
    case AuditState::kNoBound: return "no-bound";
  }
  return "?";
}

std::string describe(const PrecisionGuarantee& p) {
  std::string text(name(p.audit));
  if (p.bit_stable) text += " bit-stable";
  if (p.deterministic_across_threads) text += " thread-deterministic";
  if (p.max_ulp) text += fmt::format(" ulp<={:g}", *p.max_ulp);
  if (p.max_rel) text += fmt::format(" rel<={:g}", *p.max_rel);
  if (p.max_abs) text += fmt::format(" abs<={:g}", *p.max_abs);
  return text;
}

std::string to_json(const PrecisionGuarantee& p) {
  std::string out =
      fmt::format(R"({{"audit":"{}","bit_stable":{},"deterministic_across_threads":{})",
                  name(p.audit), p.bit_stable, p.deterministic_across_threads);
  // Shortest round-trip decimals: valid JSON for every finite bound.
  if (p.max_ulp) out += fmt::format(R"(,"max_ulp":{})", *p.max_ulp);
  if (p.max_rel) out += fmt::format(R"(,"max_rel":{})", *p.max_rel);
  if (p.max_abs) out += fmt::format(R"(,"max_abs":{})", *p.max_abs);
  return out + "}";
}

}  // namespace switchyard
