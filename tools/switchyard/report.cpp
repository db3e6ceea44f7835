#include "report.h"

#include <algorithm>
#include <ctime>
#include <filesystem>
#include <map>
#include <tuple>

#include <fmt/format.h>

#include "calibration_plot.h"
#include "coverage_data.h"
#include "report_assets.h"
#include "switchyard/backends.h"
#include "switchyard/calibrate.h"
#include "switchyard/environment.h"
#include "switchyard/file_io.h"
#include "switchyard/plan.h"
#include "switchyard/thread_pool.h"
#include "switchyard/version.h"
#include "table_text.h"

namespace switchyard::tool {
namespace {

std::string utc_now() {
  const std::time_t now = std::time(nullptr);
  std::tm parts{};
  gmtime_r(&now, &parts);
  char text[32];
  std::strftime(text, sizeof text, "%Y-%m-%dT%H:%M:%SZ", &parts);
  return text;
}

// The seal report with the load's violations first, ordered by tensor, role and
// dtype (the kernel report names each by its tensor).
nlohmann::json seal_json(const LlamaKernelReport& report) {
  std::vector<const LlamaKernelReport::Violation*> violations;
  for (const auto& v : report.violations) violations.push_back(&v);
  std::sort(violations.begin(), violations.end(), [](const auto* a, const auto* b) {
    return std::tie(a->tensor, a->role, a->dtype) < std::tie(b->tensor, b->role, b->dtype);
  });
  nlohmann::json rows = nlohmann::json::array();
  for (const auto* v : violations) {
    rows.push_back({{"tensor", v->tensor},
                    {"role", v->role},
                    {"op", v->op},
                    {"dtype", name(v->dtype)},
                    {"fallback", v->fallback}});
  }
  // The registry's own rows, as SealReport::to_json renders them.
  const nlohmann::json seal = nlohmann::json::parse(report.seal.to_json());
  auto rows_of = [&](const char* key) {
    return seal.contains(key) ? seal[key] : nlohmann::json::array();
  };
  return {{"backend", name(report.backend)},   {"probes", report.probes},
          {"violations", std::move(rows)},     {"registry_violations", rows_of("violations")},
          {"misses", rows_of("misses")},       {"surprises", rows_of("surprises")},
          {"masked", rows_of("masked")},       {"entries", rows_of("entries")},
          {"strict", seal.value("strict", "")}};
}

// Measured time per node of the plan's graph, largest first, with the kernel the
// plan chose for it (per bucket: a node may take another kernel in each).
nlohmann::json node_times_json(const LlamaModel& model) {
  const LlamaProfile& profile = model.profile();
  const Graph& graph = model.plan().graph();
  std::map<std::int32_t, std::vector<std::string>> kernels;
  for (const BucketReport& b : model.plan().report().buckets) {
    for (const NodeReport& n : b.nodes) {
      if (!n.resolved) continue;
      std::vector<std::string>& k = kernels[n.node];
      const std::string text = fmt::format("{} on {}", n.chosen.kernel, name(n.chosen.backend));
      if (std::find(k.begin(), k.end(), text) == k.end()) k.push_back(text);
    }
  }
  std::vector<std::size_t> order;
  for (std::size_t i = 0; i < profile.node_ns.size(); ++i) {
    if (profile.node_ns[i] > 0) order.push_back(i);
  }
  std::stable_sort(order.begin(), order.end(), [&](std::size_t a, std::size_t b) {
    return profile.node_ns[a] > profile.node_ns[b];
  });
  nlohmann::json out = nlohmann::json::array();
  for (std::size_t i : order) {
    const auto id = static_cast<std::int32_t>(i);
    const Node& node = graph.node(id);
    const OpFamily family = node.fused_key != 0 ? OpFamily::kFused : op_family(node.op);
    out.push_back({{"node", id},
                   {"name", node.name},
                   {"family", name(family)},
                   {"kernels", kernels[id]},
                   {"ms", profile.node_ns[i] * 1e-6}});
  }
  return out;
}

nlohmann::json model_json(const ReportModel& m) {
  nlohmann::json out;
  out["run"] = m.run;
  out["seal"] = seal_json(m.model->kernel_report());
  out["plan"] = nlohmann::json::parse(explain_json(m.model->plan().report()));
  out["node_times"] = node_times_json(*m.model);
  return out;
}

// Per op family, per calibrated kernel: the measured points and the fitted cost
// on the size axis (calibration_size: the work at the reference rates). Kernels
// no longer in the table (their revision changed) are the family "retired".
nlohmann::json calibration_json(const ReportInputs& in) {
  const CalibrationProfile& profile = *in.calibration;
  struct Known {
    OpFamily family;
    std::string key;
  };
  std::map<std::uint64_t, Known> current;
  for (const auto& slot : in.table->slots()) {
    const auto op = slot.key.static_op();
    for (const BindingEntry& e : slot.alternatives) {
      current[e.revision_hash] = {op ? op_family(*op) : OpFamily::kFused,
                                  fmt::format("{}({})@{}", key_label(*in.table, slot.key),
                                              signature(slot.dtypes), name(slot.backend))};
    }
  }
  std::map<std::string, nlohmann::json> families;
  for (const auto& [revision, entry] : profile.entries()) {
    auto it = current.find(revision);
    const std::string family =
        it == current.end() ? "retired" : std::string(name(it->second.family));
    nlohmann::json measured = nlohmann::json::array();
    double lo = 0, hi = 0;
    for (const CostSample& s : entry.cost.samples) {
      const double x = calibration_size(s.bytes, s.flops);
      measured.push_back({x, s.ns});
      lo = lo == 0 ? x : std::min(lo, x);
      hi = std::max(hi, x);
    }
    nlohmann::json series = {
        {"kernel", entry.kernel},
        {"backend", name(entry.backend)},
        {"key", it == current.end() ? "" : it->second.key},
        {"current", it != current.end()},
        {"revision_hash", fmt::format("{:016x}", revision)},
        {"measured", std::move(measured)},
        {"fitted", lo > 0 ? fitted_curve(entry.cost, lo, 2 * hi) : nlohmann::json::array()}};
    families[family].push_back(std::move(series));
  }
  nlohmann::json fams = nlohmann::json::array();
  for (auto& [family, series] : families) {
    fams.push_back({{"family", family}, {"series", std::move(series)}});
  }
  nlohmann::json fingerprints = nlohmann::json::array();
  for (const BackendFingerprint& f : profile.fingerprints()) {
    fingerprints.push_back({{"backend", name(f.backend)}, {"text", f.text}});
  }
  return {{"source", in.calibration_path},
          {"fingerprints", std::move(fingerprints)},
          {"ignored", in.calibration_ignored},
          {"axis", calibration_axis_label()},
          {"families", std::move(fams)}};
}

// The document inside a <script> element: '<', '>' and '&' as JSON escapes, so no
// string in it (a tensor name, a path) can end the element or open a comment.
std::string script_safe(const nlohmann::json& document) {
  const std::string text = document.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
  std::string out;
  out.reserve(text.size() + text.size() / 64);
  for (char c : text) {
    switch (c) {
      case '<': out += "\\u003c"; break;
      case '>': out += "\\u003e"; break;
      case '&': out += "\\u0026"; break;
      default: out += c;
    }
  }
  return out;
}

template <std::size_t N>
std::string joined(const std::array<std::string_view, N>& parts) {
  std::string out;
  for (std::string_view p : parts) out += p;
  return out;
}

}  // namespace

bool report_has_charts() { return !kChartJsParts.empty(); }

Result<ReportInputs> report_inputs(const std::string& ledger_path, std::optional<BackendId> backend,
                                   const std::string& calibration_flag, int threads) {
  ReportInputs in;
  in.table = current_table();
  SWITCHYARD_ASSIGN_OR_RETURN(in.ledger, VerificationLedger::load(ledger_path));
  in.ledger_path = ledger_path;
  in.backend = backend;
  in.calibration_path = calibration_flag;
  if (in.calibration_path.empty()) {
    const char* env = read_environment(EnvVar::kCalibration);
    if (env != nullptr) in.calibration_path = env;
  }
  if (!in.calibration_path.empty()) {
    SWITCHYARD_ASSIGN_OR_RETURN(in.calibration, CalibrationProfile::load(in.calibration_path));
    // What the planner leaves out here (another machine's backends, kernels whose
    // revision changed), for the page to list; the profile is read once.
    (void)applicable_here(*in.calibration, *in.table, threads, in.calibration_ignored);
  }
  return in;
}

nlohmann::json report_json(const ReportInputs& in) {
  nlohmann::json out;
  out["format"] = "switchyard-report";
  out["version"] = kReportFormatVersion;
  nlohmann::json machine = nlohmann::json::array();
  for (const BackendFingerprint& f : machine_fingerprints(*in.table, default_thread_count())) {
    machine.push_back({{"backend", name(f.backend)}, {"text", f.text}});
  }
  out["generated"] = {{"by", fmt::format("switchyard {}", library_version().to_string())},
                      {"at", utc_now()},
                      {"table_generation", in.table->generation()},
                      {"charts", report_has_charts()},
                      {"machine", std::move(machine)}};
  out["coverage"] = coverage_map_json(*in.table, in.ledger, in.backend);
  out["coverage"]["ledger"] = in.ledger_path;
  out["model"] = in.model ? model_json(*in.model) : nlohmann::json();
  out["calibration"] = in.calibration ? calibration_json(in) : nlohmann::json();
  return out;
}

std::string report_html(const nlohmann::json& report) {
  static constexpr std::string_view kChartsAt = "<!--switchyard:chart.js-->";
  static constexpr std::string_view kDataAt = "<!--switchyard:data-->";
  std::string page = joined(kReportPageParts);
  const std::string charts =
      report_has_charts() ? "<script>" + joined(kChartJsParts) + "</script>" : std::string();
  const std::string data =
      R"(<script type="application/json" id="report-data">)" + script_safe(report) + "</script>";
  // The data goes in last: nothing in it is searched for a marker.
  page.replace(page.find(kChartsAt), kChartsAt.size(), charts);
  page.replace(page.find(kDataAt), kDataAt.size(), data);
  return page;
}

}  // namespace switchyard::tool
