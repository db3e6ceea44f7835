// BackendId: the execution backends, generated from backend.def (the one place a
// backend is named).
#pragma once

#include <array>
#include <cstdint>
#include <string_view>

#include "switchyard/status.h"

namespace switchyard {

enum class BackendId : std::uint8_t {
#define SWITCHYARD_BACKEND(ident, name, accel) ident,
#include "switchyard/backend.def"
#undef SWITCHYARD_BACKEND
};

inline constexpr int kBackendCount = 0
#define SWITCHYARD_BACKEND(ident, name, accel) +1
#include "switchyard/backend.def"
#undef SWITCHYARD_BACKEND
    ;

inline constexpr std::array<BackendId, kBackendCount> kAllBackends = {
#define SWITCHYARD_BACKEND(ident, name, accel) BackendId::ident,
#include "switchyard/backend.def"
#undef SWITCHYARD_BACKEND
};

namespace detail {
struct BackendInfo {
  std::string_view name;
  bool is_accelerator;
};
inline constexpr std::array<BackendInfo, kBackendCount> kBackendInfos = {{
#define SWITCHYARD_BACKEND(ident, name, accel) {name, accel},
#include "switchyard/backend.def"
#undef SWITCHYARD_BACKEND
}};
}  // namespace detail

[[nodiscard]] constexpr std::string_view name(BackendId b) {
  return detail::kBackendInfos[static_cast<std::size_t>(b)].name;
}
// True when a miss on `b` means work meant for a device runs somewhere slower.
[[nodiscard]] constexpr bool is_accelerator(BackendId b) {
  return detail::kBackendInfos[static_cast<std::size_t>(b)].is_accelerator;
}
// Parses "cpu", "cuda", ...; case-insensitive.
[[nodiscard]] Result<BackendId> parse_backend(std::string_view text);

}  // namespace switchyard
