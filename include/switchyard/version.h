// The version of Switchyard: of these headers (the macros, fixed when a program
// is compiled) and of the library a program runs with (library_version(), fixed
// when the library was built). The two differ when a program built against one
// release loads another's shared library.
//
// Versions follow major.minor.patch. Before 1.0 a minor release may change the
// ABI (the layout of public types, the signatures of public functions, the
// kernel pack interface); a patch release never does. check_library_version()
// says whether the library loaded has the ABI of the headers compiled against:
//
//   if (Status s = switchyard::check_library_version(); !s.is_ok()) {
//     std::fprintf(stderr, "%s\n", s.to_string().c_str());
//     return 1;
//   }
//
// The CMake project reads its version from the three macros below, so this file
// is the one place a release changes it.
#pragma once

#include <string>

#include "switchyard/status.h"

#define SWITCHYARD_VERSION_MAJOR 0
#define SWITCHYARD_VERSION_MINOR 1
#define SWITCHYARD_VERSION_PATCH 0
#define SWITCHYARD_VERSION "0.1.0"

namespace switchyard {

struct Version {
  int major = 0;
  int minor = 0;
  int patch = 0;

  [[nodiscard]] std::string to_string() const;
  friend bool operator==(const Version&, const Version&) = default;
};

// The version the headers in use were released with.
inline constexpr Version kHeaderVersion{SWITCHYARD_VERSION_MAJOR, SWITCHYARD_VERSION_MINOR,
                                        SWITCHYARD_VERSION_PATCH};

// The version of the library linked into the process.
[[nodiscard]] Version library_version();

// Whether a library of version `library` has the ABI of headers of version
// `headers`: the same major, and before 1.0 the same minor. kFailedPrecondition
// naming both versions otherwise.
[[nodiscard]] Status check_abi_compatible(Version headers, Version library);

// check_abi_compatible for the headers this program was compiled with and the
// library it runs with. Inline, so that kHeaderVersion is the caller's.
[[nodiscard]] inline Status check_library_version() {
  return check_abi_compatible(kHeaderVersion, library_version());
}

}  // namespace switchyard
