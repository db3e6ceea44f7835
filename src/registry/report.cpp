// SealReport rendering: the readable text form and the JSON form.
//
// The library links only {fmt}, so the JSON is written by hand; every string that
// can come from outside (roles are tensor names, fallbacks and kernel names are
// free-form) goes through json_string, which escapes per RFC 8259.
#include <algorithm>

#include <fmt/format.h>

#include "registry/report_format.h"

namespace switchyard {
namespace detail {

std::string_view fallback_or_placeholder(std::string_view fallback) {
  return fallback.empty() ? std::string_view("(unnamed fallback)") : fallback;
}

std::string violation_line(const RegistryEntry& e) {
  return fmt::format("switchyard: NO KERNEL for {} {} {} ({}) -> falls back to {} [{}], {} {}\n",
                     name(e.backend), e.op_name(), name(e.dtype), e.role,
                     fallback_or_placeholder(e.fallback), describe_site(e.site), e.count,
                     e.count == 1 ? "lookup" : "lookups");
}

std::string masked_lines(std::span<const CoverageBinding> masked) {
  if (masked.empty()) return {};
  std::string text = fmt::format("switchyard: kernel mask hid {} binding(s):\n", masked.size());
  for (const CoverageBinding& b : masked) {
    text += fmt::format("switchyard:   {} {} (registered at {})\n",
                        describe_key(b.key, b.dtypes, b.backend), b.kernel_name, describe_site(b));
  }
  return text;
}

}  // namespace detail

namespace {

std::string json_string(std::string_view s) {
  std::string out;
  out.reserve(s.size() + 2);
  out += '"';
  for (const char c : s) {
    switch (c) {
      case '"': out += "\\\""; break;
      case '\\': out += "\\\\"; break;
      case '\n': out += "\\n"; break;
      case '\r': out += "\\r"; break;
      case '\t': out += "\\t"; break;
      default:
        if (static_cast<unsigned char>(c) < 0x20) {
          out += fmt::format("\\u{:04x}", static_cast<unsigned>(static_cast<unsigned char>(c)));
        } else {
          out += c;
        }
    }
  }
  out += '"';
  return out;
}

std::string json_row(const RegistryEntry& e) {
  return fmt::format(R"({{"backend":{},"op":{},"role":{},"dtype":{},"outcome":{},"fallback":{},)"
                     R"("severity":{},"phase":{},"count":{},"call_site":{}}})",
                     json_string(name(e.backend)), json_string(e.op_name()), json_string(e.role),
                     json_string(name(e.dtype)), json_string(e.hit ? "hit" : "miss"),
                     e.hit ? std::string("null") : json_string(e.fallback),
                     e.hit ? std::string("null") : json_string(name(e.severity)),
                     json_string(name(e.phase)), e.count, json_string(describe_site(e.site)));
}

std::string json_rows(const std::vector<RegistryEntry>& rows) {
  std::string out = "[";
  for (std::size_t i = 0; i < rows.size(); ++i) {
    if (i) out += ',';
    out += json_row(rows[i]);
  }
  return out + "]";
}

std::string json_masked(const std::vector<CoverageBinding>& masked) {
  std::string out = "[";
  for (std::size_t i = 0; i < masked.size(); ++i) {
    const CoverageBinding& b = masked[i];
    if (i) out += ',';
    const std::string op = b.key.static_op() ? std::string(name(*b.key.static_op()))
                                             : fmt::format("fused#{}", b.key.raw());
    out += fmt::format(R"({{"backend":{},"op":{},"dtypes":{},"kernel":{},"call_site":{}}})",
                       json_string(name(b.backend)), json_string(op),
                       json_string(b.dtypes.to_string()), json_string(b.kernel_name),
                       json_string(describe_site(b)));
  }
  return out + "]";
}

}  // namespace

std::vector<RegistryEntry> SealReport::strict_violations() const {
  std::vector<RegistryEntry> out;
  std::copy_if(violations.begin(), violations.end(), std::back_inserter(out),
               [&](const RegistryEntry& e) { return strict.covers(e); });
  return out;
}

std::string SealReport::render() const {
  std::string text = fmt::format(
      "switchyard kernels: {} build row(s), {} miss(es), {} violation(s), {} surprise(s), "
      "{} masked; strict {}\n",
      entries.size(), misses.size(), violations.size(), surprises.size(), masked.size(),
      strict.to_string());
  for (const RegistryEntry& e : entries) text += "switchyard kernels: " + e.to_string() + "\n";
  for (const RegistryEntry& e : surprises) {
    text += "switchyard kernels: surprise " + e.to_string() + "\n";
  }
  text += detail::masked_lines(masked);
  return text;
}

std::string SealReport::render_violations() const {
  std::string text;
  for (const RegistryEntry& e : violations) text += detail::violation_line(e);
  if (!text.empty()) text += detail::masked_lines(masked);
  return text;
}

std::string SealReport::to_json() const {
  return fmt::format(
      R"({{"entries":{},"misses":{},"violations":{},"surprises":{},"masked":{},"strict":{}}})",
      json_rows(entries), json_rows(misses), json_rows(violations), json_rows(surprises),
      json_masked(masked), json_string(strict.to_string()));
}

}  // namespace switchyard
