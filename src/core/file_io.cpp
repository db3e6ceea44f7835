#include "switchyard/file_io.h"

#include <cstdio>
#include <fstream>

#include <fmt/format.h>

namespace switchyard {

Status write_file_atomically(const std::string& path, std::string_view contents,
                             std::string_view what) {
  const std::string tmp = path + ".tmp";
  {
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    if (!out) return unavailable_error(fmt::format("cannot write {} '{}'", what, tmp));
    out.write(contents.data(), static_cast<std::streamsize>(contents.size()));
    out.flush();
    if (!out) {
      out.close();
      std::remove(tmp.c_str());
      return unavailable_error(fmt::format("cannot write {} '{}' (disk full?)", what, tmp));
    }
  }
  if (std::rename(tmp.c_str(), path.c_str()) != 0) {
    std::remove(tmp.c_str());
    return unavailable_error(fmt::format("cannot replace {} '{}'", what, path));
  }
  return Status::ok();
}

}  // namespace switchyard
