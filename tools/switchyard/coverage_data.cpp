#include "coverage_data.h"

#include <algorithm>
#include <cfloat>
#include <map>
#include <string>
#include <tuple>
#include <vector>

#include <fmt/format.h>

#include "switchyard/backends.h"
#include "switchyard/dispatch.h"
#include "table_text.h"

namespace switchyard::tool {
namespace {

// The column of a key in the coverage map (Note [The coverage map]).
DType lead_dtype(const DTypeList& dtypes) {
  for (DType t : dtypes.span()) {
    if (t != DType::kF32) return t;
  }
  return DType::kF32;
}

// Orders claims from the tightest (Note [The coverage map]).
std::tuple<int, double, int> claim_rank(const PrecisionGuarantee& p) {
  const int audit = p.audit == AuditState::kBounded ? 0 : p.audit == AuditState::kNoBound ? 1 : 2;
  double bound = DBL_MAX;
  if (p.max_ulp) bound = std::min(bound, *p.max_ulp * FLT_EPSILON);
  if (p.max_rel) bound = std::min(bound, *p.max_rel);
  if (p.max_abs) bound = std::min(bound, *p.max_abs);
  return {audit, bound, p.bit_stable ? 0 : 1};
}

// The weakest of the states counted (Note [The coverage map]).
std::string_view cell_state(const std::map<std::string_view, int>& states) {
  for (std::string_view s : {"failed", "unverified", "verified"}) {
    if (states.contains(s)) return s;
  }
  return "unaudited";
}

}  // namespace

std::string_view verification_state(const BindingEntry& entry, const VerificationLedger& ledger) {
  if (entry.precision.is_unaudited()) return "unaudited";
  const LedgerRecord* r = ledger.find(entry.name, entry.revision_hash);
  if (r == nullptr) return "unverified";
  switch (r->verdict) {
    case VerifyVerdict::kPass: return "verified";
    case VerifyVerdict::kFail: return "failed";
    case VerifyVerdict::kUnaudited:
    case VerifyVerdict::kSkipped: return "unverified";
  }
  return "unverified";
}

nlohmann::json alternative_json(const BindingEntry& e, const VerificationLedger& ledger) {
  return {{"name", e.name},
          {"source", e.source},
          {"caps",
           {{"strided_input", e.caps.strided_input},
            {"broadcast_input", e.caps.broadcast_input},
            {"requires_broadcast", e.caps.requires_broadcast},
            {"in_place", e.caps.in_place},
            {"trades_precision", e.caps.trades_precision}}},
          {"precision", nlohmann::json::parse(to_json(e.precision))},
          {"precision_text", describe(e.precision)},
          {"cost",
           e.cost_expr ? e.cost_expr->to_string() : (e.has_known_cost() ? "function" : "unknown")},
          {"is_generic", e.is_generic},
          {"shape_restricted", e.admits != nullptr},
          {"revision_hash", fmt::format("{:016x}", e.revision_hash)},
          {"verification", verification_state(e, ledger)},
          {"site", describe_site(e)}};
}

nlohmann::json coverage_map_json(const KernelBindingTable& table, const VerificationLedger& ledger,
                                 std::optional<BackendId> only) {
  struct Cell {
    nlohmann::json keys = nlohmann::json::array();
    int siblings = 0;
    const PrecisionGuarantee* best = nullptr;
    std::map<std::string_view, int> states;
  };
  struct Panel {
    std::vector<std::string> ops;
    std::vector<DType> dtypes;
    std::map<std::pair<std::string, DType>, Cell> cells;
  };
  std::map<BackendId, Panel> panels;
  std::map<std::string_view, int> summary;
  for (const auto& slot : table.slots()) {
    if (only && slot.backend != *only) continue;
    Panel& panel = panels[slot.backend];
    const std::string op = key_label(table, slot.key);
    const DType dtype = lead_dtype(slot.dtypes);
    if (std::find(panel.ops.begin(), panel.ops.end(), op) == panel.ops.end()) {
      panel.ops.push_back(op);
    }
    if (std::find(panel.dtypes.begin(), panel.dtypes.end(), dtype) == panel.dtypes.end()) {
      panel.dtypes.push_back(dtype);
    }
    Cell& cell = panel.cells[{op, dtype}];
    nlohmann::json alternatives = nlohmann::json::array();
    for (const BindingEntry& e : slot.alternatives) {
      const std::string_view state = verification_state(e, ledger);
      ++cell.states[state];
      ++summary[state];
      ++cell.siblings;
      if (cell.best == nullptr || claim_rank(e.precision) < claim_rank(*cell.best)) {
        cell.best = &e.precision;
      }
      alternatives.push_back(alternative_json(e, ledger));
    }
    cell.keys.push_back(
        {{"signature", signature(slot.dtypes)}, {"alternatives", std::move(alternatives)}});
  }

  nlohmann::json backends = nlohmann::json::array();
  for (BackendId b : compiled_backends()) {
    if (only && b != *only) continue;
    Panel& panel = panels[b];
    // Columns in the order of the DType enum: f32 and the floats first, then the
    // block formats, as `coverage` lists them.
    std::sort(panel.dtypes.begin(), panel.dtypes.end());
    nlohmann::json dtypes = nlohmann::json::array();
    for (DType t : panel.dtypes) dtypes.push_back(name(t));
    nlohmann::json cells = nlohmann::json::array();
    for (const std::string& op : panel.ops) {
      for (DType t : panel.dtypes) {
        auto it = panel.cells.find({op, t});
        if (it == panel.cells.end()) continue;
        Cell& cell = it->second;
        nlohmann::json states = nlohmann::json::object();
        for (const auto& [state, n] : cell.states) states[std::string(state)] = n;
        cells.push_back({{"op", op},
                         {"dtype", name(t)},
                         {"siblings", cell.siblings},
                         {"best_precision", cell.best ? describe(*cell.best) : "none"},
                         {"state", cell_state(cell.states)},
                         {"states", std::move(states)},
                         {"keys", std::move(cell.keys)}});
      }
    }
    backends.push_back({{"backend", name(b)},
                        {"ops", panel.ops},
                        {"dtypes", std::move(dtypes)},
                        {"cells", std::move(cells)}});
  }
  nlohmann::json counts = nlohmann::json::object();
  for (std::string_view s : {"verified", "failed", "unverified", "unaudited"}) {
    counts[std::string(s)] = summary[s];
  }
  return {{"backends", std::move(backends)}, {"summary", std::move(counts)}};
}

}  // namespace switchyard::tool
