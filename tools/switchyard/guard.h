// The tool's last line of defence: whatever a command does, the process ends with
// one line on stderr and an exit status from the README, never with an uncaught
// exception's abort (signal 6, a core dump) and never with output silently lost.
//
// Kept in a header so that the tests run the same function main() runs
// (tests/tool/guard_test.cpp).
#pragma once

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <string>

#include "switchyard/status.h"

namespace switchyard::tool {

// Exit statuses: 0 success, 1 a check failed (verification, strict mode) or an
// internal error, 2 bad usage or bad input.
inline constexpr int kExitOk = 0;
inline constexpr int kExitCheckFailed = 1;
inline constexpr int kExitUsage = 2;

namespace detail {

// Output that could not be written is a failure of the run: stdout may be a full
// disk or a closed pipe, and exiting 0 would tell a script it has a whole file.
inline int output_failure(int status) {
  if (std::fflush(stdout) == 0 && std::ferror(stdout) == 0) return status;
  const int error = errno;
  std::fprintf(stderr, "switchyard: cannot write the output: %s\n",
               error != 0 ? std::strerror(error) : "write error");
  return kExitCheckFailed;
}

inline int internal_failure(std::string_view what) {
  std::fprintf(stderr, "switchyard: internal error: %s\n", printable(what, 200).c_str());
  return kExitCheckFailed;
}

}  // namespace detail

// Runs `body` and returns its exit status; an exception escaping it becomes a
// one-line internal error (exit 1), or a write error when stdout failed (exit 1);
// a command that succeeded but whose output could not be written exits 1.
template <typename Body>
int run_guarded(Body&& body) {
  int status = kExitCheckFailed;
  try {
    status = body();
  } catch (const std::exception& e) {
    if (std::ferror(stdout) != 0) return detail::output_failure(kExitCheckFailed);
    return detail::internal_failure(e.what());
  } catch (...) {
    return detail::internal_failure("an exception that is not a std::exception");
  }
  return detail::output_failure(status);
}

// For exceptions that escape a thread other than main's (std::terminate): one line
// and exit 1, without the abort's core dump.
[[noreturn]] inline void terminate_in_one_line() {
  std::string what = "terminate called without an active exception";
  if (std::exception_ptr current = std::current_exception()) {
    try {
      std::rethrow_exception(current);
    } catch (const std::exception& e) {
      what = e.what();
    } catch (...) {
      what = "an exception that is not a std::exception";
    }
  }
  detail::internal_failure(what);
  std::_Exit(kExitCheckFailed);
}

}  // namespace switchyard::tool
