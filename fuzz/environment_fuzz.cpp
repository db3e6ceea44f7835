// Fuzz target: the parsers of the SWITCHYARD_* variables' values: the strict
// policy, the registry switch and the kernel mask. Every input either parses or
// is refused with a one-line message.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>

#include "switchyard/kernel_mask.h"
#include "switchyard/registry.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace switchyard;
  const std::string text(reinterpret_cast<const char*>(data), size);
  auto one_line = [](const Status& s) {
    if (!s.is_ok() && s.message().find('\n') != std::string_view::npos) std::abort();
  };
  Result<StrictPolicy> policy = parse_strict_policy(text);
  if (policy.is_ok()) {
    (void)policy->to_string();
  } else {
    one_line(policy.status());
  }
  Result<KernelMask> mask = KernelMask::parse(text);
  if (mask.is_ok()) {
    (void)mask->to_string();
  } else {
    one_line(mask.status());
  }
  Result<RegistryConfig> config = RegistryConfig::from_variables(text.c_str(), text.c_str());
  if (!config.is_ok()) one_line(config.status());
  return 0;
}
