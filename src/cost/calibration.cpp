#include "switchyard/calibration.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <limits>
#include <set>
#include <sstream>
#include <utility>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "switchyard/file_io.h"

namespace switchyard {

namespace {

using nlohmann::json;

constexpr std::string_view kFormat = "switchyard-calibration";

}  // namespace

double calibration_size(double bytes, double flops) {
  return CostEstimate{flops, bytes, 0, true}.time_ns(BackendCaps{});
}

double FittedCost::predict_ns(double bytes, double flops) const {
  if (samples.empty()) return 0;
  const double x = calibration_size(bytes, flops);
  const CostSample& first = samples.front();
  const CostSample& last = samples.back();
  if (x <= calibration_size(first.bytes, first.flops)) return first.ns;
  const double x_last = calibration_size(last.bytes, last.flops);
  if (x >= x_last) return last.ns * x / x_last;
  for (std::size_t i = 1; i < samples.size(); ++i) {
    const double x1 = calibration_size(samples[i].bytes, samples[i].flops);
    if (x > x1) continue;
    const double x0 = calibration_size(samples[i - 1].bytes, samples[i - 1].flops);
    const double t = (x - x0) / (x1 - x0);
    return samples[i - 1].ns + t * (samples[i].ns - samples[i - 1].ns);
  }
  return last.ns;
}

Result<FittedCost> fit_cost(std::span<const CostSample> input) {
  std::vector<CostSample> samples;
  for (const CostSample& s : input) {
    if (s.ns > 0 && std::isfinite(s.ns) && s.bytes >= 0 && s.flops >= 0 && std::isfinite(s.bytes) &&
        std::isfinite(s.flops)) {
      samples.push_back(s);
    }
  }
  std::sort(samples.begin(), samples.end(), [](const CostSample& a, const CostSample& b) {
    return calibration_size(a.bytes, a.flops) < calibration_size(b.bytes, b.flops);
  });
  FittedCost fit;
  for (std::size_t i = 0; i < samples.size();) {
    std::size_t j = i;
    double ns = 0;
    const double x = calibration_size(samples[i].bytes, samples[i].flops);
    while (j < samples.size() && calibration_size(samples[j].bytes, samples[j].flops) == x) {
      ns += samples[j++].ns;
    }
    fit.samples.push_back({samples[i].bytes, samples[i].flops, ns / static_cast<double>(j - i)});
    i = j;
  }
  if (fit.samples.size() < 3) {
    return invalid_argument_error(
        fmt::format("a measured cost needs at least 3 timed sizes, got {}", fit.samples.size()));
  }
  return fit;
}

void CalibrationProfile::set_fingerprint(BackendFingerprint fingerprint) {
  for (BackendFingerprint& f : fingerprints_) {
    if (f.backend == fingerprint.backend) {
      f = std::move(fingerprint);
      return;
    }
  }
  fingerprints_.push_back(std::move(fingerprint));
}

void CalibrationProfile::add(CalibratedEntry entry) {
  const std::uint64_t key = entry.revision_hash;
  entries_.insert_or_assign(key, std::move(entry));
}

const FittedCost* CalibrationProfile::find(std::uint64_t revision_hash) const {
  auto it = entries_.find(revision_hash);
  return it == entries_.end() ? nullptr : &it->second.cost;
}

CalibrationProfile::Applicable CalibrationProfile::applicable(
    std::span<const BackendFingerprint> here,
    std::span<const std::uint64_t> current_revisions) const {
  Applicable out;
  std::set<BackendId> usable;
  for (const BackendFingerprint& f : fingerprints_) {
    auto it = std::find_if(here.begin(), here.end(),
                           [&](const BackendFingerprint& h) { return h.backend == f.backend; });
    if (it == here.end()) {
      out.ignored.push_back(
          fmt::format("{}: measured on \"{}\"; this build or machine has no such backend",
                      name(f.backend), f.text));
    } else if (it->text != f.text) {
      out.ignored.push_back(fmt::format("{}: measured on \"{}\", this machine is \"{}\"",
                                        name(f.backend), f.text, it->text));
    } else {
      usable.insert(f.backend);
      out.profile.set_fingerprint(f);
    }
  }
  const std::set<std::uint64_t> revisions(current_revisions.begin(), current_revisions.end());
  std::size_t stale = 0;
  std::string stale_names;
  for (const auto& [hash, entry] : entries_) {
    if (!usable.contains(entry.backend)) continue;
    if (!revisions.contains(hash)) {
      if (++stale <= 5) stale_names += (stale > 1 ? ", " : "") + entry.kernel;
      continue;
    }
    out.profile.add(entry);
  }
  if (stale > 0) {
    out.ignored.push_back(fmt::format(
        "{} entr{} measured a kernel revision this table no longer has ({}{}); recalibrate", stale,
        stale == 1 ? "y" : "ies", stale_names, stale > 5 ? ", ..." : ""));
  }
  return out;
}

std::string CalibrationProfile::to_json() const {
  json doc;
  doc["format"] = kFormat;
  doc["version"] = kFormatVersion;
  doc["fingerprints"] = json::array();
  for (const BackendFingerprint& f : fingerprints_) {
    doc["fingerprints"].push_back({{"backend", name(f.backend)}, {"text", f.text}});
  }
  doc["entries"] = json::array();
  for (const auto& [hash, e] : entries_) {
    json samples = json::array();
    for (const CostSample& s : e.cost.samples) samples.push_back({s.bytes, s.flops, s.ns});
    doc["entries"].push_back({{"kernel", e.kernel},
                              {"backend", name(e.backend)},
                              {"revision_hash", fmt::format("{:016x}", hash)},
                              {"samples", std::move(samples)}});
  }
  return doc.dump(1) + "\n";
}

Result<CalibrationProfile> CalibrationProfile::parse(std::string_view text,
                                                     std::string_view source) {
  json doc = json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (doc.is_discarded()) {
    return data_loss_error(
        fmt::format("calibration profile {}: not valid JSON (truncated or corrupt)", source));
  }
  auto bad = [&](std::string what) {
    return invalid_argument_error(fmt::format("calibration profile {}: {}", source, what));
  };
  if (!doc.is_object() || doc.value("format", std::string()) != kFormat) {
    return bad(fmt::format("\"format\" is not \"{}\"", kFormat));
  }
  if (!doc.contains("version") || !doc["version"].is_number_integer() ||
      doc["version"].get<int>() != kFormatVersion) {
    return bad(
        fmt::format("\"version\" is not {}, the only one this Switchyard reads", kFormatVersion));
  }
  CalibrationProfile p;
  if (!doc.contains("fingerprints") || !doc["fingerprints"].is_array()) {
    return bad("\"fingerprints\" is missing or not an array");
  }
  for (const json& f : doc["fingerprints"]) {
    if (!f.is_object() || !f.contains("backend") || !f["backend"].is_string() ||
        !f.contains("text") || !f["text"].is_string()) {
      return bad("a fingerprint lacks \"backend\" or \"text\"");
    }
    Result<BackendId> b = parse_backend(f["backend"].get<std::string>());
    if (!b.is_ok()) return bad(std::string(b.status().message()));
    p.set_fingerprint({*b, f["text"].get<std::string>()});
  }
  if (!doc.contains("entries") || !doc["entries"].is_array()) {
    return bad("\"entries\" is missing or not an array");
  }
  const json& entries = doc["entries"];
  for (std::size_t i = 0; i < entries.size(); ++i) {
    const json& e = entries[i];
    auto entry_error = [&](std::string_view what) {
      return bad(fmt::format("entries[{}]: {}", i, what));
    };
    if (!e.is_object() || !e.contains("kernel") || !e["kernel"].is_string() ||
        !e.contains("backend") || !e["backend"].is_string() || !e.contains("revision_hash") ||
        !e["revision_hash"].is_string()) {
      return entry_error("needs \"kernel\", \"backend\" and \"revision_hash\"");
    }
    CalibratedEntry c;
    c.kernel = e["kernel"].get<std::string>();
    Result<BackendId> b = parse_backend(e["backend"].get<std::string>());
    if (!b.is_ok()) return entry_error(b.status().message());
    c.backend = *b;
    const std::string hash = e["revision_hash"].get<std::string>();
    char* end = nullptr;
    c.revision_hash = std::strtoull(hash.c_str(), &end, 16);
    if (hash.size() != 16 || end != hash.c_str() + hash.size()) {
      return entry_error("\"revision_hash\" is not 16 hex digits");
    }
    if (!e.contains("samples") || !e["samples"].is_array()) {
      return entry_error("\"samples\" is missing or not an array");
    }
    std::vector<CostSample> samples;
    for (const json& x : e["samples"]) {
      if (!x.is_array() || x.size() != 3 || !x[0].is_number() || !x[1].is_number() ||
          !x[2].is_number()) {
        return entry_error("a sample is not [bytes, flops, ns]");
      }
      samples.push_back({x[0].get<double>(), x[1].get<double>(), x[2].get<double>()});
    }
    if (samples.size() != e["samples"].size()) return entry_error("bad samples");
    Result<FittedCost> fit = fit_cost(samples);
    if (!fit.is_ok()) return entry_error(fit.status().message());
    if (fit->samples.size() != samples.size()) {
      return entry_error("a sample has a negative, zero or non-finite value, or repeats a size");
    }
    c.cost = std::move(*fit);
    p.add(std::move(c));
  }
  return p;
}

Result<CalibrationProfile> CalibrationProfile::load(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return not_found_error(fmt::format("calibration profile {}: cannot open", path));
  std::stringstream text;
  text << in.rdbuf();
  return parse(text.str(), path);
}

Status CalibrationProfile::save(const std::string& path) const {
  return write_file_atomically(path, to_json(), "the calibration profile");
}

}  // namespace switchyard
