#include "weight_check_text.h"

#include <chrono>

#include <fmt/format.h>

#include "progress.h"

namespace switchyard::tool {

Result<TimedWeightCheck> timed_weight_check(const GgufFile& file, ParallelRunner* runner,
                                            bool progress) {
  Progress bar(progress);
  WeightCheckOptions options;
  options.runner = runner;
  options.progress = [&bar](std::uint64_t done, std::uint64_t total) {
    bar.show("checking", static_cast<std::int64_t>(done >> 20),
             static_cast<std::int64_t>(total >> 20), "MiB");
  };
  const auto start = std::chrono::steady_clock::now();
  Result<WeightCheckReport> report = check_weights(file, options);
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  bar.clear();
  if (!report.is_ok()) return report.status();
  return TimedWeightCheck{std::move(*report), seconds};
}

std::string finding_lines(const GgufFile& file, const WeightCheckReport& report) {
  std::string out;
  const auto lines = [&](std::string_view label, auto&& wanted) {
    for (const TensorCheck& t : report.tensors) {
      const GgufTensorInfo& info = file.tensors()[t.tensor];
      if (!wanted(t.scan, info.dtype)) continue;
      out += fmt::format("{}  {}  {}\n", label, printable(info.name), describe(t, info.dtype));
    }
  };
  lines("NONFINITE", [](const ValueScan& s, DType) { return !s.finite(); });
  lines("SUBNORMAL", [](const ValueScan& s, DType t) {
    return s.finite() && s.subnormal > 0 && subnormal_in_f32(t);
  });
  return out;
}

std::string check_summary(const GgufFile& file, const TimedWeightCheck& check) {
  const WeightCheckReport& r = check.report;
  std::int64_t checked = 0;
  for (const TensorCheck& t : r.tensors) checked += t.checked ? 1 : 0;
  const double gb = static_cast<double>(r.bytes) / 1e9;
  std::string text = fmt::format(
      "checked {} of {} tensors, {:.3f} GB in {:.3f} s ({:.1f} GB/s): ", checked,
      file.tensors().size(), gb, check.seconds, check.seconds > 0 ? gb / check.seconds : 0.0);
  if (r.finite()) {
    text += "no NaN or infinity";
  } else {
    text += fmt::format("{} tensor{} hold{} NaN or infinity ({} NaN, {} Inf)", r.nonfinite_tensors,
                        r.nonfinite_tensors == 1 ? "" : "s", r.nonfinite_tensors == 1 ? "s" : "",
                        r.nan, r.inf);
  }
  if (r.subnormal_in_f32 > 0) {
    text += fmt::format("; {} subnormal value{} in {} tensor{} stay subnormal in f32 (a warning)",
                        r.subnormal_in_f32, r.subnormal_in_f32 == 1 ? "" : "s",
                        r.subnormal_in_f32_tensors, r.subnormal_in_f32_tensors == 1 ? "" : "s");
  }
  if (const std::int64_t f16 = r.subnormal - r.subnormal_in_f32; f16 > 0) {
    text += fmt::format("; {} f16 subnormal{} (values or scales; normal once widened to f32)", f16,
                        f16 == 1 ? "" : "s");
  }
  return text;
}

std::string first_nonfinite_text(const GgufFile& file, const WeightCheckReport& report) {
  const TensorCheck* first = report.first_nonfinite();
  if (first == nullptr) return {};
  const GgufTensorInfo& info = file.tensors()[first->tensor];
  return fmt::format("'{}' ({}); {} tensor{} in all", printable(info.name),
                     describe(*first, info.dtype), report.nonfinite_tensors,
                     report.nonfinite_tensors == 1 ? "" : "s");
}

nlohmann::json check_json(const GgufFile& file, const TimedWeightCheck& check) {
  const WeightCheckReport& r = check.report;
  std::int64_t checked = 0;
  nlohmann::json findings = nlohmann::json::array();
  const auto index = [](std::int64_t i) {
    return i < 0 ? nlohmann::json(nullptr) : nlohmann::json(i);
  };
  for (const TensorCheck& t : r.tensors) {
    checked += t.checked ? 1 : 0;
    const ValueScan& s = t.scan;
    if (s.finite() && s.subnormal == 0) continue;
    const GgufTensorInfo& info = file.tensors()[t.tensor];
    findings.push_back({{"name", info.name},
                        {"dtype", std::string(name(info.dtype))},
                        {"index_unit", block_elems(info.dtype) == 1 ? "element" : "block"},
                        {"values", s.values},
                        {"nan", s.nan},
                        {"inf", s.inf},
                        {"subnormal", s.subnormal},
                        {"subnormal_in_f32", subnormal_in_f32(info.dtype)},
                        {"first_nonfinite", index(s.first_nonfinite)},
                        {"first_nonfinite_field", std::string(s.first_nonfinite_field)},
                        {"first_subnormal", index(s.first_subnormal)},
                        {"first_subnormal_field", std::string(s.first_subnormal_field)}});
  }
  return {
      {"ok", r.finite()},
      {"tensors", file.tensors().size()},
      {"checked", checked},
      {"bytes", r.bytes},
      {"seconds", check.seconds},
      {"gb_per_s", check.seconds > 0 ? static_cast<double>(r.bytes) / 1e9 / check.seconds : 0.0},
      {"values", r.values},
      {"nan", r.nan},
      {"inf", r.inf},
      {"subnormal", r.subnormal},
      {"nonfinite_tensors", r.nonfinite_tensors},
      {"subnormal_tensors", r.subnormal_tensors},
      {"subnormal_in_f32", r.subnormal_in_f32},
      {"subnormal_in_f32_tensors", r.subnormal_in_f32_tensors},
      {"findings", std::move(findings)}};
}

}  // namespace switchyard::tool
