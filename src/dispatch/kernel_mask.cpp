// Kernel-mask patterns: parsing, matching and applying them to a table.
#include "switchyard/kernel_mask.h"

#include <algorithm>

#include <fmt/format.h>

namespace switchyard {
namespace {

std::string_view trim(std::string_view s) {
  constexpr std::string_view kSpace = " \t\r\n";
  const auto first = s.find_first_not_of(kSpace);
  if (first == std::string_view::npos) return {};
  const auto last = s.find_last_not_of(kSpace);
  return s.substr(first, last - first + 1);
}

// Parses one field: `*` is the wildcard, anything else goes through the
// vocabulary's own parser, whose error already lists every valid spelling.
template <typename T>
Result<std::optional<T>> parse_field(std::string_view field, std::string_view pattern,
                                     std::string_view what, Result<T> (*parse)(std::string_view)) {
  if (field.empty()) {
    return invalid_argument_error(
        fmt::format("kernel mask '{}': the {} field is empty (use '*' to match any)",
                    printable(pattern, 60), what));
  }
  if (field == "*") return std::optional<T>();
  Result<T> parsed = parse(field);
  if (!parsed.is_ok()) {
    return Status(
        StatusCode::kInvalidArgument,
        fmt::format("kernel mask '{}': {}", printable(pattern, 60), parsed.status().message()));
  }
  return std::optional<T>(*parsed);
}

}  // namespace

bool KernelMaskPattern::matches(BindingKey key, const DTypeList& dtypes, BackendId b) const {
  if (backend && *backend != b) return false;
  if (op && key.static_op() != op) return false;
  if (dtype) {
    const auto span = dtypes.span();
    if (std::find(span.begin(), span.end(), *dtype) == span.end()) return false;
  }
  return true;
}

std::string KernelMaskPattern::to_string() const {
  return fmt::format("{}:{}:{}", backend ? name(*backend) : "*", op ? name(*op) : "*",
                     dtype ? name(*dtype) : "*");
}

Result<KernelMaskPattern> parse_kernel_mask_pattern(std::string_view text) {
  const std::string_view pattern = trim(text);
  std::vector<std::string_view> fields;
  std::size_t start = 0;
  while (true) {
    const std::size_t colon = pattern.find(':', start);
    fields.push_back(trim(pattern.substr(start, colon - start)));
    if (colon == std::string_view::npos) break;
    start = colon + 1;
  }
  if (fields.size() != 3) {
    return invalid_argument_error(fmt::format(
        "kernel mask '{}': expected backend:op:dtype (three fields, '*' for any), got {} "
        "field(s)",
        printable(pattern, 60), fields.size()));
  }
  KernelMaskPattern out;
  SWITCHYARD_ASSIGN_OR_RETURN(
      out.backend, parse_field<BackendId>(fields[0], pattern, "backend", &parse_backend));
  SWITCHYARD_ASSIGN_OR_RETURN(out.op, parse_field<OpKind>(fields[1], pattern, "op", &parse_op));
  SWITCHYARD_ASSIGN_OR_RETURN(out.dtype,
                              parse_field<DType>(fields[2], pattern, "dtype", &parse_dtype));
  return out;
}

Result<KernelMask> KernelMask::parse(std::string_view spec) {
  std::vector<KernelMaskPattern> patterns;
  if (trim(spec).empty()) return KernelMask();
  std::size_t start = 0;
  while (true) {
    const std::size_t comma = spec.find(',', start);
    const std::string_view item = trim(spec.substr(start, comma - start));
    if (item.empty()) {
      return invalid_argument_error(
          fmt::format("kernel mask '{}': empty pattern between commas", printable(trim(spec), 60)));
    }
    SWITCHYARD_ASSIGN_OR_RETURN(KernelMaskPattern p, parse_kernel_mask_pattern(item));
    if (std::find(patterns.begin(), patterns.end(), p) == patterns.end()) patterns.push_back(p);
    if (comma == std::string_view::npos) break;
    start = comma + 1;
  }
  return KernelMask(std::move(patterns));
}

bool KernelMask::matches(BindingKey key, const DTypeList& dtypes, BackendId backend) const {
  return std::any_of(patterns_.begin(), patterns_.end(),
                     [&](const KernelMaskPattern& p) { return p.matches(key, dtypes, backend); });
}

std::string KernelMask::to_string() const {
  std::string out;
  for (const KernelMaskPattern& p : patterns_) {
    if (!out.empty()) out += ',';
    out += p.to_string();
  }
  return out;
}

std::vector<CoverageBinding> apply_kernel_mask(const KernelMask& mask, KernelBindingTable& table) {
  if (mask.empty()) return {};
  return table.remove_if([&](const KernelBindingTable::Slot& slot, const BindingEntry&) {
    return mask.matches(slot.key, slot.dtypes, slot.backend);
  });
}

}  // namespace switchyard
