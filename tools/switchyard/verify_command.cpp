// `switchyard verify`: runs the conformance harness over the binding table, records
// the verdicts in the verification ledger and prints them as a table or JSON.
// `switchyard verify --unverified` lists the claims the ledger does not back.
//
// Exit status: 1 when any entry fails (or, with --unverified, when any claim is
// unverified), 2 on bad usage or an unreadable ledger, 0 otherwise.
#include <algorithm>
#include <cstdio>
#include <memory>
#include <string>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "command.h"
#include "switchyard/dispatch.h"
#include "switchyard/verify.h"
#include "table_text.h"

namespace switchyard::tool {
namespace {

struct VerifyCommandOptions {
  std::string backend;
  std::string op;
  bool json = false;
  bool unverified = false;
  bool no_record = false;
  bool verbose = false;
  std::string ledger = "switchyard-ledger.json";
  std::uint64_t seed = VerifyOptions{}.seed;
  int threads = VerifyOptions{}.threads;
};

// What the bit-stable column says: "-" when nothing is claimed.
std::string bit_stable_cell(const VerifyEntryReport& r) {
  if (!r.precision.bit_stable && !r.precision.deterministic_across_threads) return "-";
  if (r.failure == VerifyFailure::kNotBitStable ||
      r.failure == VerifyFailure::kNotThreadDeterministic) {
    return "no";
  }
  if (!r.bit_stable_checked && !r.thread_determinism_checked) return "unchecked";
  return r.thread_determinism_checked ? "yes (threads)" : "yes";
}

nlohmann::json nullable(double v) {
  return std::isfinite(v) ? nlohmann::json(v) : nlohmann::json(nullptr);
}

void print_table(const std::vector<std::vector<std::string>>& rows) {
  std::vector<std::size_t> width(rows.front().size(), 0);
  for (const auto& row : rows) {
    for (std::size_t c = 0; c < row.size(); ++c) width[c] = std::max(width[c], row[c].size());
  }
  for (const auto& row : rows) {
    std::string line;
    for (std::size_t c = 0; c < row.size(); ++c) {
      line += c + 1 == row.size() ? row[c] : fmt::format("{:<{}}  ", row[c], width[c]);
    }
    fmt::print("{}\n", line);
  }
}

int run_unverified(const VerifyCommandOptions& options, const KernelBindingTable& table,
                   const VerificationLedger& ledger) {
  const std::vector<UnverifiedClaim> claims = unverified_claims(table, ledger);
  if (options.json) {
    nlohmann::json out = {{"ledger", options.ledger}, {"unverified", nlohmann::json::array()}};
    for (const UnverifiedClaim& c : claims) {
      std::vector<std::string> dtypes;
      for (DType t : c.dtypes.span()) dtypes.emplace_back(name(t));
      out["unverified"].push_back({{"op", key_label(table, c.key)},
                                   {"dtypes", dtypes},
                                   {"backend", name(c.backend)},
                                   {"kernel", c.kernel},
                                   {"revision_hash", fmt::format("{:016x}", c.revision_hash)},
                                   {"claim", describe(c.precision)},
                                   {"why", c.why}});
    }
    fmt::print("{}\n", out.dump(2));
  } else if (claims.empty()) {
    fmt::print("every precision claim is verified for its current revision (ledger {})\n",
               options.ledger);
  } else {
    std::vector<std::vector<std::string>> rows = {
        {"op", "dtypes", "backend", "kernel", "claim", "why"}};
    for (const UnverifiedClaim& c : claims) {
      rows.push_back({key_label(table, c.key), signature(c.dtypes), std::string(name(c.backend)),
                      c.kernel, describe(c.precision), c.why});
    }
    print_table(rows);
    fmt::print("\n{} unverified claim(s) (ledger {})\n", claims.size(), options.ledger);
  }
  return claims.empty() ? kExitOk : kExitCheckFailed;
}

int run_verify(const VerifyCommandOptions& options) {
  VerifyOptions verify_options{.seed = options.seed, .threads = options.threads};
  if (options.threads < 1) return report_failure(invalid_argument_error("--threads must be >= 1"));
  if (!options.backend.empty()) {
    Result<BackendId> b = parse_backend(options.backend);
    if (!b.is_ok()) return report_failure(b.status());
    verify_options.backend = *b;
  }
  if (!options.op.empty()) {
    Result<OpKind> o = parse_op(options.op);
    if (!o.is_ok()) return report_failure(o.status());
    verify_options.op = *o;
  }
  Result<VerificationLedger> ledger = VerificationLedger::load(options.ledger);
  if (!ledger.is_ok()) return report_failure(ledger.status());
  const TableSnapshot table = current_table();
  if (options.unverified) return run_unverified(options, *table, *ledger);

  // A device backend compiled in where its device is absent: its entries are
  // skipped, each saying why; say it once up front too.
  for (BackendId b : kAllBackends) {
    if (verify_options.backend && b != *verify_options.backend) continue;
    const BackendMemory* memory = table->backend_memory(b);
    if (memory == nullptr) continue;
    if (Status ready = memory->ready(); !ready.is_ok()) {
      std::fprintf(stderr, "switchyard verify: skipping the %s entries: %s\n",
                   std::string(name(b)).c_str(), std::string(ready.message()).c_str());
    }
  }
  const std::vector<VerifyEntryReport> reports = verify_table(*table, verify_options);
  if (!options.no_record) {
    const std::string date = utc_date_now();
    for (const VerifyEntryReport& r : reports) ledger->record(r, date);
    if (Status s = ledger->save(options.ledger); !s.is_ok()) return report_failure(s);
  }
  const bool failed = std::any_of(reports.begin(), reports.end(), [](const VerifyEntryReport& r) {
    return r.verdict == VerifyVerdict::kFail;
  });

  if (options.json) {
    nlohmann::json out = {{"seed", options.seed},
                          {"threads", options.threads},
                          {"ledger", options.no_record ? "" : options.ledger},
                          {"entries", nlohmann::json::array()}};
    for (const VerifyEntryReport& r : reports) {
      std::vector<std::string> dtypes;
      for (DType t : r.dtypes.span()) dtypes.emplace_back(name(t));
      nlohmann::json entry = {{"op", key_label(*table, r.key)},
                              {"dtypes", dtypes},
                              {"backend", name(r.backend)},
                              {"kernel", r.kernel},
                              {"source", r.source},
                              {"revision_hash", fmt::format("{:016x}", r.revision_hash)},
                              {"claim", describe(r.precision)},
                              {"verdict", name(r.verdict)},
                              {"failure", name(r.failure)},
                              {"reason", r.reason},
                              {"worst_nmse", nullable(r.worst_nmse)},
                              {"worst_max_abs", nullable(r.worst_max_abs)},
                              {"bit_stable_checked", r.bit_stable_checked},
                              {"thread_determinism_checked", r.thread_determinism_checked},
                              {"cases", nlohmann::json::array()}};
      for (const VerifyCaseResult& c : r.cases) {
        entry["cases"].push_back({{"description", c.description},
                                  {"failure", name(c.failure)},
                                  {"detail", c.detail},
                                  {"nmse", nullable(c.nmse)},
                                  {"max_abs_error", nullable(c.max_abs_error)},
                                  {"elements", c.elements}});
      }
      out["entries"].push_back(std::move(entry));
    }
    fmt::print("{}\n", out.dump(2));
    return failed ? kExitCheckFailed : kExitOk;
  }

  std::vector<std::vector<std::string>> rows = {
      {"op", "dtypes", "kernel", "source", "cases", "worst NMSE", "bit-stable", "verdict"}};
  std::size_t counts[4] = {0, 0, 0, 0};
  for (const VerifyEntryReport& r : reports) {
    ++counts[static_cast<int>(r.verdict)];
    rows.push_back({key_label(*table, r.key), signature(r.dtypes), r.kernel, r.source,
                    std::to_string(r.cases.size()),
                    r.cases.empty() ? "-" : fmt::format("{:.3g}", r.worst_nmse), bit_stable_cell(r),
                    std::string(name(r.verdict))});
  }
  if (reports.empty()) {
    fmt::print("no kernel matches the selection\n");
  } else {
    print_table(rows);
  }
  // Why each failed or skipped entry is what it is; every case with --verbose.
  bool header = false;
  for (const VerifyEntryReport& r : reports) {
    const bool explain = r.verdict == VerifyVerdict::kFail || r.verdict == VerifyVerdict::kSkipped;
    if (!explain && !options.verbose) continue;
    if (!header) {
      fmt::print("\n");
      header = true;
    }
    fmt::print("{} [{}]: {}\n", r.kernel, name(r.verdict),
               r.reason.empty() ? describe(r.precision) : r.reason);
    if (options.verbose) {
      for (const VerifyCaseResult& c : r.cases) {
        fmt::print(
            "    {:<70}  nmse {:.3g}  max_abs {:.3g}{}\n", c.description, c.nmse, c.max_abs_error,
            c.failure == VerifyFailure::kNone ? ""
                                              : fmt::format("  {}: {}", name(c.failure), c.detail));
      }
    }
  }
  fmt::print("\n{} entries: {} pass, {} fail, {} unaudited, {} skipped{}\n", reports.size(),
             counts[static_cast<int>(VerifyVerdict::kPass)],
             counts[static_cast<int>(VerifyVerdict::kFail)],
             counts[static_cast<int>(VerifyVerdict::kUnaudited)],
             counts[static_cast<int>(VerifyVerdict::kSkipped)],
             options.no_record ? "" : fmt::format("; ledger {}", options.ledger));
  return failed ? kExitCheckFailed : kExitOk;
}

}  // namespace

void add_verify_command(CLI::App& app, CommandMain& selected) {
  auto options = std::make_shared<VerifyCommandOptions>();
  CLI::App* sub = app.add_subcommand(
      "verify", "Run every kernel alternative against float64 references and check its claims");
  sub->add_option("--backend", options->backend, "Only this backend (cpu, cuda, ...)");
  sub->add_option("--op", options->op, "Only this op (add, matmul, ...)");
  sub->add_flag("--json", options->json, "Print JSON instead of a table");
  sub->add_option("--ledger", options->ledger, "The verification ledger file")
      ->capture_default_str();
  sub->add_flag("--unverified", options->unverified,
                "List the precision claims the ledger does not back for the current revisions");
  sub->add_flag("--no-record", options->no_record, "Do not write the verdicts to the ledger");
  sub->add_flag("--verbose", options->verbose, "Print every case");
  sub->add_option("--seed", options->seed, "Seed of the input generator")->capture_default_str();
  sub->add_option("--threads", options->threads, "Threads of the parallel runs")
      ->capture_default_str()
      ->check(CLI::Range(1, kMaxThreads));
  sub->callback([options, &selected] { selected = [options] { return run_verify(*options); }; });
}

}  // namespace switchyard::tool
