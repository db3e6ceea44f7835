#include "switchyard/version.h"

#include <fmt/format.h>

namespace switchyard {

std::string Version::to_string() const { return fmt::format("{}.{}.{}", major, minor, patch); }

// Compiled into the library: the headers' version at the time it was built.
Version library_version() { return kHeaderVersion; }

Status check_abi_compatible(Version headers, Version library) {
  const bool compatible =
      headers.major == library.major && (headers.major > 0 || headers.minor == library.minor);
  if (compatible) return Status::ok();
  return failed_precondition_error(fmt::format(
      "switchyard: this program was compiled against the headers of {} but runs with the "
      "library of {}, whose ABI differs; rebuild the program against the installed release",
      headers.to_string(), library.to_string()));
}

}  // namespace switchyard
