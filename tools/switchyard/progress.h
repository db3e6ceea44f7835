// A one-line progress bar on stderr, shared by the commands that take long enough
// to want one (run's loading and generation, inspect --check).
#pragma once

#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <string>
#include <string_view>

namespace switchyard::tool {

// Drawn only when stderr is a terminal, so that logs and pipes get clean output;
// redrawn in place, and cleared before anything else is printed.
class Progress {
 public:
  explicit Progress(bool enabled) : enabled_(enabled && isatty(STDERR_FILENO) == 1) {}
  // "what [#####     ] done/total unit".
  void show(std::string_view what, std::int64_t done, std::int64_t total,
            std::string_view unit = {}) {
    if (!enabled_) return;
    constexpr int kWidth = 30;
    const int filled = total > 0 ? static_cast<int>(kWidth * done / total) : kWidth;
    std::fprintf(stderr, "\r%-10.*s [%s%s] %lld/%lld %.*s", static_cast<int>(what.size()),
                 what.data(), std::string(static_cast<std::size_t>(filled), '#').c_str(),
                 std::string(static_cast<std::size_t>(kWidth - filled), ' ').c_str(),
                 static_cast<long long>(done), static_cast<long long>(total),
                 static_cast<int>(unit.size()), unit.data());
    std::fflush(stderr);
  }
  void clear() {
    if (!enabled_) return;
    std::fprintf(stderr, "\r%70s\r", "");
    std::fflush(stderr);
  }

 private:
  bool enabled_;
};

}  // namespace switchyard::tool
