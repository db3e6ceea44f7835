// BackendId: the execution backends, generated from backend.def (the one place a
// backend is named).
#pragma once

#include <array>
#include <cstdint>
#include <string_view>

#include "switchyard/status.h"

namespace switchyard {

enum class BackendId : std::uint8_t {
#define SWITCHYARD_BACKEND(ident, name, accel, host) ident,
#include "switchyard/backend.def"
#undef SWITCHYARD_BACKEND
};

inline constexpr int kBackendCount = 0
#define SWITCHYARD_BACKEND(ident, name, accel, host) +1
#include "switchyard/backend.def"
#undef SWITCHYARD_BACKEND
    ;

inline constexpr std::array<BackendId, kBackendCount> kAllBackends = {
#define SWITCHYARD_BACKEND(ident, name, accel, host) BackendId::ident,
#include "switchyard/backend.def"
#undef SWITCHYARD_BACKEND
};

namespace detail {
struct BackendInfo {
  std::string_view name;
  bool is_accelerator;
  bool is_host;
};
inline constexpr std::array<BackendInfo, kBackendCount> kBackendInfos = {{
#define SWITCHYARD_BACKEND(ident, name, accel, host) {name, accel, host},
#include "switchyard/backend.def"
#undef SWITCHYARD_BACKEND
}};

constexpr BackendId find_host_backend() {
  int found = -1;
  for (int i = 0; i < kBackendCount; ++i) {
    if (kBackendInfos[static_cast<std::size_t>(i)].is_host) {
      if (found >= 0) return BackendId{0xff};  // two rows claim the host
      found = i;
    }
  }
  return found < 0 ? BackendId{0xff} : static_cast<BackendId>(found);
}
}  // namespace detail

// The backend whose memory is the process's own: a graph's inputs, outputs and
// constants live there, and a value computed elsewhere is copied back to it.
inline constexpr BackendId kHostBackend = detail::find_host_backend();
static_assert(static_cast<int>(kHostBackend) < kBackendCount,
              "backend.def must mark exactly one backend as the host");

[[nodiscard]] constexpr std::string_view name(BackendId b) {
  return detail::kBackendInfos[static_cast<std::size_t>(b)].name;
}
// True when a miss on `b` means work meant for a device runs somewhere slower.
[[nodiscard]] constexpr bool is_accelerator(BackendId b) {
  return detail::kBackendInfos[static_cast<std::size_t>(b)].is_accelerator;
}
// True for kHostBackend.
[[nodiscard]] constexpr bool is_host(BackendId b) {
  return detail::kBackendInfos[static_cast<std::size_t>(b)].is_host;
}
// Parses "cpu", "cuda", ...; case-insensitive.
[[nodiscard]] Result<BackendId> parse_backend(std::string_view text);

}  // namespace switchyard
