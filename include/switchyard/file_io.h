// Writing a file whole or not at all: what every file Switchyard writes (GGUF
// models, the verification ledger, calibration profiles, report pages) goes
// through.
#pragma once

#include <cstddef>
#include <functional>
#include <span>
#include <string>
#include <string_view>

#include "switchyard/status.h"

namespace switchyard {

// Takes a file's bytes, in order; a non-ok Status stops the write.
using ByteSink = std::function<Status(std::span<const std::byte>)>;

// Writes to `path` the bytes `produce` hands its sink, whole or not at all:
//   - only a regular file at `path` (or nothing) is replaced; a directory, a
//     symbolic link, a FIFO, a device or a socket there is refused
//     (kInvalidArgument), as the rename would put a file in its place;
//   - the bytes go to a temporary file beside `path` (mode 0644), are flushed to
//     the disk and renamed into place, so a reader never sees half a file;
//   - a failed write (a full disk, a file-size limit), an error from `produce`, or
//     a SIGINT, SIGTERM or SIGHUP while writing (Note [Temporary files and
//     signals]) removes the temporary and leaves an existing file as it was.
// Errors: kNotFound for a missing directory; kInvalidArgument where the directory
// cannot be written; kUnavailable for a failed write, flush or rename; or
// `produce`'s own.
[[nodiscard]] Status write_file_atomically(const std::string& path,
                                           const std::function<Status(const ByteSink&)>& produce);

// The same for bytes at hand; `what` names the file in errors ("the ledger").
[[nodiscard]] Status write_file_atomically(const std::string& path, std::string_view contents,
                                           std::string_view what);

}  // namespace switchyard
