#include "output_path.h"

#include <unistd.h>

#include <filesystem>
#include <system_error>

#include <fmt/format.h>

namespace switchyard::tool {

Status check_output_path(const std::string& path, const std::string& input, std::string_view what) {
  namespace fs = std::filesystem;
  const fs::path target(path);
  const std::string shown = printable(path, 200);
  std::error_code ec;
  const fs::file_status existing = fs::symlink_status(target, ec);
  if (path.empty() || target.filename().empty() ||
      (fs::exists(existing) && !fs::is_regular_file(existing))) {
    return invalid_argument_error(fmt::format(
        "cannot write {} to '{}': only a regular file is replaced by a written file", what, shown));
  }
  const fs::path dir = target.has_parent_path() ? target.parent_path() : fs::path(".");
  if (!fs::is_directory(dir, ec) || ::access(dir.c_str(), W_OK) != 0) {
    return invalid_argument_error(
        fmt::format("cannot write {} to '{}': '{}' is not a writable directory", what, shown,
                    printable(dir.string(), 200)));
  }
  if (!input.empty() && fs::exists(existing) && fs::equivalent(target, input, ec)) {
    return invalid_argument_error(
        fmt::format("cannot write {} to '{}': it is the model file", what, shown));
  }
  return Status::ok();
}

}  // namespace switchyard::tool
