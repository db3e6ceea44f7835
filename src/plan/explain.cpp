// Renderings of a PlanReport: the full per-node explanation, the one-screen
// summary, and the JSON that `switchyard explain --json` and the Python package
// hand to programs.
#include <fmt/format.h>

#include <nlohmann/json.hpp>

#include "switchyard/plan.h"

namespace switchyard {
namespace {

nlohmann::json precision_json(const PrecisionGuarantee& p) {
  return nlohmann::json::parse(to_json(p));
}

nlohmann::json candidate_json(const RouteCandidate& c) {
  nlohmann::json j = {{"kernel", c.kernel},         {"source", c.source},
                      {"backend", name(c.backend)}, {"sibling", c.sibling},
                      {"cost_known", c.cost_known}, {"precision", precision_json(c.precision)}};
  if (c.cost_known) {
    j["estimated_ns"] = {{"total", c.total_ns},
                         {"kernel", c.kernel_ns},
                         {"kernel_modelled", c.modelled_ns},
                         {"transfer", c.transfer_ns},
                         {"casts", c.cast_ns}};
    j["ranked_by"] = c.measured ? "measured" : "modelled";
  }
  if (c.packed_bytes > 0) j["packed_weight_bytes"] = c.packed_bytes;
  return j;
}

nlohmann::json report_json(const PlanReport& r) {
  nlohmann::json out;
  out["table_generation"] = r.table_generation;
  out["fusions"] = nlohmann::json::array();
  for (const AppliedFusion& f : r.fusions) {
    out["fusions"].push_back({{"rule", f.rule}, {"node", f.fused_node}, {"replaced", f.replaced}});
  }
  out["skipped_fusions"] = nlohmann::json::array();
  for (const SkippedFusion& f : r.skipped_fusions) {
    out["skipped_fusions"].push_back(
        {{"rule", f.rule}, {"anchor", f.anchor_node}, {"reason", f.reason}});
  }
  out["casts"] = nlohmann::json::array();
  for (const InsertedCast& c : r.casts) {
    out["casts"].push_back(
        {{"node", c.cast_node},
         {"for_node", c.for_node},
         {"operand", c.operand < 0 ? nlohmann::json("output") : nlohmann::json(c.operand)},
         {"from", name(c.from)},
         {"to", name(c.to)}});
  }
  out["buckets"] = nlohmann::json::array();
  for (const BucketReport& b : r.buckets) {
    nlohmann::json bj = {{"name", b.name},
                         {"sizes", nlohmann::json::object()},
                         {"estimated_ns", b.estimated_ns},
                         {"copies", b.copies},
                         {"per_backend", nlohmann::json::array()},
                         {"nodes", nlohmann::json::array()}};
    for (const auto& [symbol, size] : b.sizes) bj["sizes"][symbol] = size;
    for (const BackendTotal& t : b.per_backend) {
      bj["per_backend"].push_back({{"backend", name(t.backend)},
                                   {"nodes", t.nodes},
                                   {"estimated_ns", t.estimated_ns},
                                   {"peak_bytes", t.peak_bytes}});
    }
    for (const NodeReport& n : b.nodes) {
      nlohmann::json nj = {{"node", n.node},
                           {"name", n.name},
                           {"role", n.role},
                           {"op", n.op},
                           {"dtypes", n.signature},
                           {"shapes", n.shapes},
                           {"precision_floor", describe(n.floor)},
                           {"resolved", n.resolved},
                           {"runners_up", nlohmann::json::array()},
                           {"rejected", nlohmann::json::array()}};
      if (n.resolved) {
        nj["chosen"] = candidate_json(n.chosen);
        nj["fallback"] = n.fallback;
      } else {
        nj["failure"] = n.failure;
      }
      for (const RouteCandidate& c : n.runners_up) nj["runners_up"].push_back(candidate_json(c));
      for (const RejectedCandidate& c : n.rejected) {
        nj["rejected"].push_back({{"backend", name(c.backend)},
                                  {"kernel", c.kernel},
                                  {"reason", name(c.reason)},
                                  {"detail", c.detail}});
      }
      bj["nodes"].push_back(std::move(nj));
    }
    out["buckets"].push_back(std::move(bj));
  }
  out["violations"] = r.violations;
  return out;
}

std::string time_text(double ns) {
  if (ns >= 1e6) return fmt::format("{:.2f} ms", ns / 1e6);
  if (ns >= 1e3) return fmt::format("{:.2f} us", ns / 1e3);
  return fmt::format("{:.0f} ns", ns);
}

std::string bytes_text(std::int64_t bytes) {
  if (bytes >= (1 << 20)) return fmt::format("{:.1f} MiB", static_cast<double>(bytes) / (1 << 20));
  if (bytes >= (1 << 10)) return fmt::format("{:.1f} KiB", static_cast<double>(bytes) / (1 << 10));
  return fmt::format("{} B", bytes);
}

std::string sizes_text(const BucketReport& b) {
  std::vector<std::string> parts;
  for (const auto& [symbol, size] : b.sizes) parts.push_back(fmt::format("{}={}", symbol, size));
  return parts.empty() ? "static shapes" : fmt::format("{}", fmt::join(parts, ", "));
}

std::string candidate_text(const RouteCandidate& c) {
  const std::string cost =
      !c.cost_known ? std::string("no cost estimate")
      : c.measured  ? fmt::format("est {} (kernel {} measured, {} modelled + transfer {})",
                                  time_text(c.total_ns), time_text(c.kernel_ns),
                                  time_text(c.modelled_ns), time_text(c.transfer_ns))
                   : fmt::format("est {} (kernel {} modelled + transfer {})", time_text(c.total_ns),
                                 time_text(c.kernel_ns), time_text(c.transfer_ns));
  // Note [Prepacked weights]: the copy the sibling reads, made once at load.
  const std::string packed =
      c.packed_bytes > 0 ? fmt::format("; weight packed at load ({:.1f} MiB)",
                                       static_cast<double>(c.packed_bytes) / (1024.0 * 1024.0))
                         : std::string();
  return fmt::format("{} [{}] on {}, sibling {}: {}; precision {}{}", c.kernel, c.source,
                     name(c.backend), c.sibling, cost, describe(c.precision), packed);
}

}  // namespace

std::string explain_text(const PlanReport& report) {
  std::string out = fmt::format("plan against table generation {}\n", report.table_generation);
  if (!report.fusions.empty()) {
    out += "fusions:\n";
    for (const AppliedFusion& f : report.fusions) {
      out += fmt::format("  {} -> node '{}' (replaces {})\n", f.rule, f.fused_node,
                         fmt::join(f.replaced, ", "));
    }
  }
  if (!report.skipped_fusions.empty()) {
    out += "fusions not applied:\n";
    for (const SkippedFusion& f : report.skipped_fusions) {
      out += fmt::format("  {} at '{}': {}\n", f.rule, f.anchor_node, f.reason);
    }
  }
  if (!report.casts.empty()) {
    out += "casts inserted:\n";
    for (const InsertedCast& c : report.casts) {
      out += fmt::format(
          "  '{}': {} -> {} for node '{}' {}\n", c.cast_node, name(c.from), name(c.to), c.for_node,
          c.operand < 0 ? std::string("output") : fmt::format("operand {}", c.operand));
    }
  }
  for (const BucketReport& b : report.buckets) {
    out += fmt::format("\nbucket '{}' ({}): estimated {}, {} copies\n", b.name, sizes_text(b),
                       time_text(b.estimated_ns), b.copies);
    for (const NodeReport& n : b.nodes) {
      out += fmt::format("  node '{}' {}({}) {}{}{}\n", n.name, n.op, n.signature, n.shapes,
                         n.role.empty() ? "" : " role=" + n.role,
                         n.floor.any() ? " floor=" + describe(n.floor) : "");
      if (n.resolved) {
        out += fmt::format("    chosen     {}{}\n", candidate_text(n.chosen),
                           n.fallback ? " [FALLBACK]" : "");
        for (const RouteCandidate& r : n.runners_up) {
          out += fmt::format("    runner-up  {}\n", candidate_text(r));
        }
      } else {
        out += "    NO ROUTE\n";
        std::size_t start = 0;
        while (start <= n.failure.size()) {
          const std::size_t end = n.failure.find('\n', start);
          out += fmt::format("      {}\n", n.failure.substr(start, end - start));
          if (end == std::string::npos) break;
          start = end + 1;
        }
      }
      for (const RejectedCandidate& r : n.rejected) {
        out += fmt::format("    rejected   {} on {}: {}: {}\n", r.kernel.empty() ? "-" : r.kernel,
                           name(r.backend), name(r.reason), r.detail);
      }
    }
  }
  if (!report.violations.empty()) {
    out += "\nviolations:\n";
    for (const std::string& v : report.violations) out += "  " + v + "\n";
  }
  return out;
}

std::string explain_summary(const PlanReport& report) {
  std::string out =
      fmt::format("table generation {}: {} fusion(s), {} cast(s) inserted\n",
                  report.table_generation, report.fusions.size(), report.casts.size());
  for (const BucketReport& b : report.buckets) {
    int unresolved = 0;
    for (const NodeReport& n : b.nodes) unresolved += n.resolved ? 0 : 1;
    out += fmt::format("bucket '{}' ({}): {} nodes{}, estimated {}, {} copies\n", b.name,
                       sizes_text(b), b.nodes.size(),
                       unresolved ? fmt::format(" ({} without a route)", unresolved) : "",
                       time_text(b.estimated_ns), b.copies);
    out +=
        fmt::format("  {:<8} {:>6} {:>12} {:>12}\n", "backend", "nodes", "est time", "peak memory");
    for (const BackendTotal& t : b.per_backend) {
      out += fmt::format("  {:<8} {:>6} {:>12} {:>12}\n", name(t.backend), t.nodes,
                         time_text(t.estimated_ns), bytes_text(t.peak_bytes));
    }
  }
  if (report.violations.empty()) {
    out += "no violations\n";
  } else {
    out += fmt::format("{} violation(s):\n", report.violations.size());
    const std::size_t shown = std::min<std::size_t>(report.violations.size(), 10);
    for (std::size_t i = 0; i < shown; ++i) out += "  " + report.violations[i] + "\n";
    if (shown < report.violations.size()) {
      out += fmt::format("  ... and {} more (`switchyard explain` lists every node)\n",
                         report.violations.size() - shown);
    }
  }
  return out;
}

std::string explain_json(const PlanReport& report) { return report_json(report).dump(); }

}  // namespace switchyard
