// Text pieces shared by the registry's warnings, its reports and the strict failure,
// so that a violation reads the same wherever it is printed.
#pragma once

#include <span>
#include <string>
#include <string_view>

#include "switchyard/registry.h"

namespace switchyard::detail {

// `fallback`, or a placeholder that says the recording site named none.
[[nodiscard]] std::string_view fallback_or_placeholder(std::string_view fallback);

// "switchyard: NO KERNEL for cuda matmul q4_k (ffn_down) -> falls back to X
// [src/plan/probe.cpp:42], 32 lookups\n".
[[nodiscard]] std::string violation_line(const RegistryEntry& entry);

// "switchyard: kernel mask hid N binding(s):\n" and one indented line each; "" when
// nothing is masked.
[[nodiscard]] std::string masked_lines(std::span<const CoverageBinding> masked);

}  // namespace switchyard::detail
