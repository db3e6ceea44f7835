// `switchyard coverage`: the binding table as a matrix of op x operand dtypes x
// backend, each cell listing the alternatives in sibling order, each with the
// verification state of its precision claim for its current revision (from the
// ledger `switchyard verify` writes).
#include <algorithm>
#include <map>
#include <memory>
#include <string>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "command.h"
#include "coverage_data.h"
#include "switchyard/backends.h"
#include "switchyard/dispatch.h"
#include "switchyard/verify.h"
#include "table_text.h"

namespace switchyard::tool {
namespace {

struct CoverageOptions {
  bool json = false;
  std::string backend;
  std::string op;
  std::string ledger = "switchyard-ledger.json";
};

int run_coverage(const CoverageOptions& options) {
  std::optional<BackendId> only_backend;
  if (!options.backend.empty()) {
    Result<BackendId> b = parse_backend(options.backend);
    if (!b.is_ok()) return report_failure(b.status());
    only_backend = *b;
  }
  std::optional<OpKind> only_op;
  if (!options.op.empty()) {
    Result<OpKind> o = parse_op(options.op);
    if (!o.is_ok()) return report_failure(o.status());
    only_op = *o;
  }
  // A ledger that does not exist is an empty one: every claim unverified.
  Result<VerificationLedger> ledger = VerificationLedger::load(options.ledger);
  if (!ledger.is_ok()) return report_failure(ledger.status());
  const TableSnapshot table = current_table();
  auto selected = [&](const KernelBindingTable::Slot& s) {
    return (!only_backend || s.backend == *only_backend) &&
           (!only_op || s.key == BindingKey(*only_op));
  };

  if (options.json) {
    nlohmann::json out;
    out["generation"] = table->generation();
    out["ledger"] = options.ledger;
    out["compiled_backends"] = nlohmann::json::array();
    for (BackendId b : compiled_backends()) out["compiled_backends"].push_back(name(b));
    out["bindings"] = nlohmann::json::array();
    for (const auto& slot : table->slots()) {
      if (!selected(slot)) continue;
      nlohmann::json binding = {{"op", key_label(*table, slot.key)},
                                {"backend", name(slot.backend)},
                                {"dtypes", nlohmann::json::array()},
                                {"alternatives", nlohmann::json::array()}};
      if (auto op = slot.key.static_op()) binding["family"] = name(op_family(*op));
      for (DType t : slot.dtypes.span()) binding["dtypes"].push_back(name(t));
      for (const BindingEntry& e : slot.alternatives) {
        binding["alternatives"].push_back(alternative_json(e, *ledger));
      }
      out["bindings"].push_back(std::move(binding));
    }
    fmt::print("{}\n", out.dump(2));
    return kExitOk;
  }

  // Rows: (op label, signature) in first-registration order; columns: backends.
  std::vector<BackendId> columns;
  for (BackendId b : compiled_backends()) {
    if (!only_backend || b == *only_backend) columns.push_back(b);
  }
  struct RowKey {
    std::string op, sig;
  };
  std::vector<RowKey> rows;
  std::map<std::pair<std::string, std::string>, std::map<BackendId, std::vector<std::string>>>
      cells;
  std::map<std::string_view, int> states;
  for (const auto& slot : table->slots()) {
    if (!selected(slot)) continue;
    RowKey row{key_label(*table, slot.key), signature(slot.dtypes)};
    auto& cell = cells[{row.op, row.sig}];
    if (cell.empty()) rows.push_back(row);
    for (const BindingEntry& e : slot.alternatives) {
      const std::string_view state = verification_state(e, *ledger);
      ++states[state];
      cell[slot.backend].push_back(fmt::format("{} [{}{}, {}]", e.name, e.source,
                                               e.caps.trades_precision ? ", trades precision" : "",
                                               state));
    }
  }
  std::size_t op_width = 2, sig_width = 6;
  for (const RowKey& r : rows) {
    op_width = std::max(op_width, r.op.size());
    sig_width = std::max(sig_width, r.sig.size());
  }
  fmt::print("{:<{}}  {:<{}}", "op", op_width, "dtypes", sig_width);
  for (BackendId b : columns) fmt::print("  {}", name(b));
  fmt::print("\n");
  for (const RowKey& r : rows) {
    const auto& cell = cells[{r.op, r.sig}];
    // One line per alternative position, so every sibling of every backend shows.
    std::size_t depth = 1;
    for (BackendId b : columns) {
      if (auto it = cell.find(b); it != cell.end()) depth = std::max(depth, it->second.size());
    }
    for (std::size_t line = 0; line < depth; ++line) {
      fmt::print("{:<{}}  {:<{}}", line == 0 ? r.op : "", op_width, line == 0 ? r.sig : "",
                 sig_width);
      for (BackendId b : columns) {
        auto it = cell.find(b);
        const bool has = it != cell.end() && line < it->second.size();
        fmt::print("  {}", has ? it->second[line] : (line == 0 ? "-" : ""));
      }
      fmt::print("\n");
    }
  }
  fmt::print("\n{} bindings, {} alternatives, {} backend(s) compiled; table generation {}\n",
             table->key_count(), table->size(), compiled_backends().size(), table->generation());
  fmt::print("claims (ledger {}): {} verified, {} failed, {} unverified, {} unaudited\n",
             options.ledger, states["verified"], states["failed"], states["unverified"],
             states["unaudited"]);
  return kExitOk;
}

}  // namespace

void add_coverage_command(CLI::App& app, CommandMain& selected) {
  auto options = std::make_shared<CoverageOptions>();
  CLI::App* sub = app.add_subcommand(
      "coverage", "Show the kernel binding table: op x dtypes x backend, every alternative");
  sub->add_flag("--json", options->json, "Print JSON instead of a table");
  sub->add_option("--backend", options->backend, "Only this backend (cpu, cuda, ...)");
  sub->add_option("--op", options->op, "Only this op (add, matmul, ...)");
  sub->add_option("--ledger", options->ledger,
                  "The verification ledger that says which claims are verified (default: "
                  "switchyard-ledger.json; a missing file leaves every claim unverified)");
  sub->callback([options, &selected] { selected = [options] { return run_coverage(*options); }; });
}

}  // namespace switchyard::tool
