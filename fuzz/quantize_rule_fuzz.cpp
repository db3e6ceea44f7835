// Fuzz target: the `--tensor-type PATTERN=TYPE` language of `switchyard quantize`.
// The input is a rule, then a newline, then a tensor name to match it against.
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "switchyard/quantize_model.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace switchyard;
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  const std::size_t newline = text.find('\n');
  const std::string_view rule_text = text.substr(0, newline);
  const std::string_view name =
      newline == std::string_view::npos ? std::string_view() : text.substr(newline + 1);
  Result<QuantizeRule> rule = parse_quantize_rule(rule_text);
  (void)tensor_name_matches(rule.is_ok() ? std::string_view(rule->pattern) : rule_text, name);
  return 0;
}
