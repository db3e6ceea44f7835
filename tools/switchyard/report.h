// `switchyard report` and `run --report`: one self-contained HTML page that a
// person reads instead of five terminal dumps, and the JSON it is made from.
//
// Note [One document, two renderings]
//   report_json() gathers everything the page shows into one versioned JSON
//   document: the coverage map, the model's seal report and plan, the measured
//   run, the calibration profile. report_html() does not format any of it: it
//   writes the page's template (report_page.html, our own styles and script),
//   Chart.js (inlined at build time from the distribution's libjs-chart.js; the
//   page draws tables alone when the build had none), and the document itself in
//   a <script type="application/json"> element that the page's script renders.
//   So `report --json` and the page cannot disagree, and the browser test checks
//   the page's cells and rows against the JSON embedded in it.
//
// Format: docs/report.md.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "switchyard/binding_table.h"
#include "switchyard/calibration.h"
#include "switchyard/dispatch.h"
#include "switchyard/llama.h"
#include "switchyard/status.h"
#include "switchyard/verify.h"

namespace switchyard::tool {

inline constexpr int kReportFormatVersion = 1;

// A model that was loaded and run.
struct ReportModel {
  const LlamaModel* model = nullptr;
  // The run's record: what `run --json` prints (throughput, time by op family,
  // the kernel report's counts).
  nlohmann::json run;
};

struct ReportInputs {
  TableSnapshot table;
  VerificationLedger ledger;
  std::string ledger_path;
  // The coverage panels: this backend's only, or every compiled backend's.
  std::optional<BackendId> backend;
  // A profile to show, as read (every entry), and what this machine ignores of it.
  std::optional<CalibrationProfile> calibration;
  std::string calibration_path;
  std::vector<std::string> calibration_ignored;
  std::optional<ReportModel> model;
};

// Everything but the model: the current table, the ledger at `ledger_path` (a
// missing file is an empty ledger: every claim unverified), and the calibration
// profile that `calibration_flag` names, else SWITCHYARD_CALIBRATION's, if any.
// Errors: a corrupt ledger or profile.
[[nodiscard]] Result<ReportInputs> report_inputs(const std::string& ledger_path,
                                                 std::optional<BackendId> backend,
                                                 const std::string& calibration_flag, int threads);

[[nodiscard]] nlohmann::json report_json(const ReportInputs& inputs);

// The page for a report_json() document.
[[nodiscard]] std::string report_html(const nlohmann::json& report);

// Whether this build inlines Chart.js into the page (false: tables only).
[[nodiscard]] bool report_has_charts();

}  // namespace switchyard::tool
