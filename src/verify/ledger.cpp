// The verification ledger and its JSON file. The library links only {fmt}, so the
// ledger carries a small JSON writer and reader of its own; they handle exactly
// the JSON subset the ledger needs (objects, arrays, strings, numbers, booleans,
// null) and reject anything malformed with kDataLoss.
#include <algorithm>
#include <charconv>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <ctime>
#include <fstream>
#include <map>
#include <memory>
#include <sstream>
#include <variant>

#include <fmt/format.h>

#include "switchyard/verify.h"

#include "switchyard/file_io.h"

namespace switchyard {
namespace {

// ---- writing ---------------------------------------------------------------

std::string json_string(std::string_view s) {
  std::string out = "\"";
  for (char c : s) {
    switch (c) {
      case '"': out += "\\\""; break;
      case '\\': out += "\\\\"; break;
      case '\n': out += "\\n"; break;
      case '\t': out += "\\t"; break;
      case '\r': out += "\\r"; break;
      default:
        if (static_cast<unsigned char>(c) < 0x20) {
          out += fmt::format("\\u{:04x}", static_cast<unsigned char>(c));
        } else {
          out += c;
        }
    }
  }
  return out + "\"";
}

// JSON has no infinity: a non-finite number is written as null and read back as
// +infinity (the only non-finite value a ledger holds: the NMSE of a NaN output).
std::string json_number(double v) {
  if (!std::isfinite(v)) return "null";
  return fmt::format("{:.17g}", v);
}

// ---- reading ---------------------------------------------------------------

struct JsonValue;
using JsonObject = std::map<std::string, JsonValue, std::less<>>;
using JsonArray = std::vector<JsonValue>;
struct JsonValue {
  std::variant<std::nullptr_t, bool, double, std::string, std::shared_ptr<JsonArray>,
               std::shared_ptr<JsonObject>>
      v;
};

class JsonReader {
 public:
  explicit JsonReader(std::string_view text) : text_(text) {}

  Result<JsonValue> document() {
    SWITCHYARD_ASSIGN_OR_RETURN(JsonValue v, value(0));
    skip_space();
    if (pos_ != text_.size()) return error("trailing characters");
    return v;
  }

 private:
  static constexpr int kMaxDepth = 32;

  Status error(std::string_view what) const {
    return data_loss_error(fmt::format("ledger JSON: {} at offset {}", what, pos_));
  }
  void skip_space() {
    while (pos_ < text_.size() && (text_[pos_] == ' ' || text_[pos_] == '\n' ||
                                   text_[pos_] == '\t' || text_[pos_] == '\r')) {
      ++pos_;
    }
  }
  bool consume(std::string_view word) {
    if (text_.substr(pos_, word.size()) != word) return false;
    pos_ += word.size();
    return true;
  }

  Result<JsonValue> value(int depth) {
    if (depth > kMaxDepth) return error("nesting too deep");
    skip_space();
    if (pos_ >= text_.size()) return error("unexpected end");
    const char c = text_[pos_];
    if (c == '{') return object(depth);
    if (c == '[') return array(depth);
    if (c == '"') {
      SWITCHYARD_ASSIGN_OR_RETURN(std::string s, string());
      return JsonValue{std::move(s)};
    }
    if (consume("true")) return JsonValue{true};
    if (consume("false")) return JsonValue{false};
    if (consume("null")) return JsonValue{nullptr};
    return number();
  }

  Result<JsonValue> number() {
    const std::size_t start = pos_;
    while (pos_ < text_.size() &&
           std::string_view("+-0123456789.eE").find(text_[pos_]) != std::string_view::npos) {
      ++pos_;
    }
    if (start == pos_) return error("unexpected character");
    double v = 0.0;
    const auto [end, ec] = std::from_chars(text_.data() + start, text_.data() + pos_, v);
    if (ec != std::errc() || end != text_.data() + pos_) return error("malformed number");
    return JsonValue{v};
  }

  Result<std::string> string() {
    ++pos_;  // opening quote
    std::string out;
    while (pos_ < text_.size() && text_[pos_] != '"') {
      char c = text_[pos_++];
      if (c != '\\') {
        out += c;
        continue;
      }
      if (pos_ >= text_.size()) break;
      c = text_[pos_++];
      switch (c) {
        case '"':
        case '\\':
        case '/': out += c; break;
        case 'n': out += '\n'; break;
        case 't': out += '\t'; break;
        case 'r': out += '\r'; break;
        case 'b': out += '\b'; break;
        case 'f': out += '\f'; break;
        case 'u': {
          unsigned code = 0;
          if (pos_ + 4 > text_.size()) return error("short \\u escape");
          const auto [end, ec] =
              std::from_chars(text_.data() + pos_, text_.data() + pos_ + 4, code, 16);
          if (ec != std::errc() || end != text_.data() + pos_ + 4) return error("bad \\u escape");
          pos_ += 4;
          // Kernel names and dates are ASCII; anything wider is written as UTF-8.
          if (code < 0x80) {
            out += static_cast<char>(code);
          } else if (code < 0x800) {
            out += static_cast<char>(0xC0 | (code >> 6));
            out += static_cast<char>(0x80 | (code & 0x3F));
          } else {
            out += static_cast<char>(0xE0 | (code >> 12));
            out += static_cast<char>(0x80 | ((code >> 6) & 0x3F));
            out += static_cast<char>(0x80 | (code & 0x3F));
          }
          break;
        }
        default: return error("bad escape");
      }
    }
    if (pos_ >= text_.size()) return error("unterminated string");
    ++pos_;  // closing quote
    return out;
  }

  Result<JsonValue> array(int depth) {
    ++pos_;
    auto items = std::make_shared<JsonArray>();
    skip_space();
    if (consume("]")) return JsonValue{items};
    while (true) {
      SWITCHYARD_ASSIGN_OR_RETURN(JsonValue v, value(depth + 1));
      items->push_back(std::move(v));
      skip_space();
      if (consume("]")) return JsonValue{items};
      if (!consume(",")) return error("expected ',' or ']'");
    }
  }

  Result<JsonValue> object(int depth) {
    ++pos_;
    auto members = std::make_shared<JsonObject>();
    skip_space();
    if (consume("}")) return JsonValue{members};
    while (true) {
      skip_space();
      if (pos_ >= text_.size() || text_[pos_] != '"') return error("expected a member name");
      SWITCHYARD_ASSIGN_OR_RETURN(std::string key, string());
      skip_space();
      if (!consume(":")) return error("expected ':'");
      SWITCHYARD_ASSIGN_OR_RETURN(JsonValue v, value(depth + 1));
      (*members)[std::move(key)] = std::move(v);
      skip_space();
      if (consume("}")) return JsonValue{members};
      if (!consume(",")) return error("expected ',' or '}'");
    }
  }

  std::string_view text_;
  std::size_t pos_ = 0;
};

Status missing(std::string_view field) {
  return data_loss_error(fmt::format("ledger JSON: a record lacks a valid '{}'", field));
}

Result<std::string> get_string(const JsonObject& o, std::string_view field) {
  auto it = o.find(field);
  if (it == o.end() || !std::holds_alternative<std::string>(it->second.v)) return missing(field);
  return std::get<std::string>(it->second.v);
}

Result<double> get_number(const JsonObject& o, std::string_view field) {
  auto it = o.find(field);
  if (it == o.end()) return missing(field);
  if (std::holds_alternative<std::nullptr_t>(it->second.v)) {
    return std::numeric_limits<double>::infinity();
  }
  if (!std::holds_alternative<double>(it->second.v)) return missing(field);
  return std::get<double>(it->second.v);
}

Result<bool> get_bool(const JsonObject& o, std::string_view field) {
  auto it = o.find(field);
  if (it == o.end() || !std::holds_alternative<bool>(it->second.v)) return missing(field);
  return std::get<bool>(it->second.v);
}

Result<LedgerRecord> parse_record(const JsonValue& v) {
  if (!std::holds_alternative<std::shared_ptr<JsonObject>>(v.v)) {
    return data_loss_error("ledger JSON: a record is not an object");
  }
  const JsonObject& o = *std::get<std::shared_ptr<JsonObject>>(v.v);
  LedgerRecord r;
  SWITCHYARD_ASSIGN_OR_RETURN(r.kernel, get_string(o, "kernel"));
  SWITCHYARD_ASSIGN_OR_RETURN(std::string hash, get_string(o, "revision_hash"));
  const auto [end, ec] =
      std::from_chars(hash.data(), hash.data() + hash.size(), r.revision_hash, 16);
  if (hash.empty() || ec != std::errc() || end != hash.data() + hash.size()) {
    return missing("revision_hash");
  }
  SWITCHYARD_ASSIGN_OR_RETURN(std::string verdict, get_string(o, "verdict"));
  Result<VerifyVerdict> parsed = parse_verify_verdict(verdict);
  if (!parsed.is_ok()) return missing("verdict");
  r.verdict = *parsed;
  SWITCHYARD_ASSIGN_OR_RETURN(double cases, get_number(o, "cases"));
  if (!(cases >= 0.0 && cases < 1e15) || cases != std::floor(cases)) return missing("cases");
  r.cases = static_cast<std::int64_t>(cases);
  SWITCHYARD_ASSIGN_OR_RETURN(r.worst_nmse, get_number(o, "worst_nmse"));
  SWITCHYARD_ASSIGN_OR_RETURN(r.worst_max_abs, get_number(o, "worst_max_abs"));
  SWITCHYARD_ASSIGN_OR_RETURN(r.bit_stable_checked, get_bool(o, "bit_stable_checked"));
  SWITCHYARD_ASSIGN_OR_RETURN(r.date, get_string(o, "date"));
  return r;
}

}  // namespace

void VerificationLedger::record(const VerifyEntryReport& report, std::string date) {
  put({.kernel = report.kernel,
       .revision_hash = report.revision_hash,
       .verdict = report.verdict,
       .cases = static_cast<std::int64_t>(report.cases.size()),
       .worst_nmse = report.worst_nmse,
       .worst_max_abs = report.worst_max_abs,
       .bit_stable_checked = report.bit_stable_checked,
       .date = std::move(date)});
}

void VerificationLedger::put(LedgerRecord record) {
  for (LedgerRecord& r : records_) {
    if (r.kernel == record.kernel && r.revision_hash == record.revision_hash) {
      r = std::move(record);
      return;
    }
  }
  records_.push_back(std::move(record));
}

const LedgerRecord* VerificationLedger::find(std::string_view kernel,
                                             std::uint64_t revision_hash) const {
  for (const LedgerRecord& r : records_) {
    if (r.kernel == kernel && r.revision_hash == revision_hash) return &r;
  }
  return nullptr;
}

bool VerificationLedger::is_verified(const BindingEntry& entry) const {
  if (entry.precision.is_unaudited()) return false;
  const LedgerRecord* r = find(entry.name, entry.revision_hash);
  return r != nullptr && r->verdict == VerifyVerdict::kPass;
}

std::string VerificationLedger::to_json() const {
  std::vector<const LedgerRecord*> sorted;
  for (const LedgerRecord& r : records_) sorted.push_back(&r);
  std::sort(sorted.begin(), sorted.end(), [](const LedgerRecord* a, const LedgerRecord* b) {
    return std::tie(a->kernel, a->revision_hash) < std::tie(b->kernel, b->revision_hash);
  });
  std::string out = "{\n  \"version\": 1,\n  \"records\": [";
  for (std::size_t i = 0; i < sorted.size(); ++i) {
    const LedgerRecord& r = *sorted[i];
    out += fmt::format(
        "{}\n    {{\"kernel\": {}, \"revision_hash\": \"{:016x}\", \"verdict\": {}, \"cases\": {}, "
        "\"worst_nmse\": {}, \"worst_max_abs\": {}, \"bit_stable_checked\": {}, \"date\": {}}}",
        i ? "," : "", json_string(r.kernel), r.revision_hash, json_string(name(r.verdict)), r.cases,
        json_number(r.worst_nmse), json_number(r.worst_max_abs),
        r.bit_stable_checked ? "true" : "false", json_string(r.date));
  }
  out += sorted.empty() ? "]\n}\n" : "\n  ]\n}\n";
  return out;
}

Result<VerificationLedger> VerificationLedger::from_json(std::string_view text) {
  SWITCHYARD_ASSIGN_OR_RETURN(JsonValue doc, JsonReader(text).document());
  if (!std::holds_alternative<std::shared_ptr<JsonObject>>(doc.v)) {
    return data_loss_error("ledger JSON: the document is not an object");
  }
  const JsonObject& root = *std::get<std::shared_ptr<JsonObject>>(doc.v);
  SWITCHYARD_ASSIGN_OR_RETURN(double version, get_number(root, "version"));
  if (version != 1.0) {
    return data_loss_error(fmt::format("ledger JSON: version {} is not 1", version));
  }
  auto it = root.find("records");
  if (it == root.end() || !std::holds_alternative<std::shared_ptr<JsonArray>>(it->second.v)) {
    return data_loss_error("ledger JSON: 'records' is missing or not an array");
  }
  VerificationLedger ledger;
  for (const JsonValue& v : *std::get<std::shared_ptr<JsonArray>>(it->second.v)) {
    SWITCHYARD_ASSIGN_OR_RETURN(LedgerRecord r, parse_record(v));
    ledger.put(std::move(r));
  }
  return ledger;
}

Result<VerificationLedger> VerificationLedger::load(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    // A missing ledger is an empty one; any other open failure is reported.
    if (std::FILE* f = std::fopen(path.c_str(), "rb")) {
      std::fclose(f);
      return data_loss_error(fmt::format("cannot read the ledger '{}'", path));
    }
    return VerificationLedger{};
  }
  std::ostringstream text;
  text << in.rdbuf();
  if (in.bad()) return data_loss_error(fmt::format("cannot read the ledger '{}'", path));
  Result<VerificationLedger> ledger = from_json(text.str());
  if (!ledger.is_ok()) return ledger.status().with_context(path);
  return ledger;
}

Status VerificationLedger::save(const std::string& path) const {
  return write_file_atomically(path, to_json(), "the ledger");
}

std::vector<UnverifiedClaim> unverified_claims(const KernelBindingTable& table,
                                               const VerificationLedger& ledger) {
  std::vector<UnverifiedClaim> out;
  for (const KernelBindingTable::EntryRef ref : table.entries()) {
    const BindingEntry& e = ref.entry;
    if (e.precision.is_unaudited() || ledger.is_verified(e)) continue;
    std::string why = "never verified";
    if (const LedgerRecord* r = ledger.find(e.name, e.revision_hash)) {
      why = fmt::format("last verdict for this revision: {}", name(r->verdict));
    } else if (std::any_of(ledger.records().begin(), ledger.records().end(),
                           [&](const LedgerRecord& other) { return other.kernel == e.name; })) {
      why = "verified only for another revision";
    }
    out.push_back({.backend = ref.slot.backend,
                   .key = ref.slot.key,
                   .dtypes = ref.slot.dtypes,
                   .kernel = e.name,
                   .revision_hash = e.revision_hash,
                   .precision = e.precision,
                   .why = std::move(why)});
  }
  return out;
}

std::string utc_date_now() {
  const std::time_t now = std::chrono::system_clock::to_time_t(std::chrono::system_clock::now());
  std::tm utc{};
  gmtime_r(&now, &utc);
  char text[32];
  std::strftime(text, sizeof text, "%Y-%m-%dT%H:%M:%SZ", &utc);
  return text;
}

}  // namespace switchyard
