// Writing a file whole or not at all: what every file Switchyard writes (GGUF
// models, the verification ledger, calibration profiles, report pages) goes
// through.
#pragma once

#include <cstddef>
#include <functional>
#include <memory>
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

// A file written whole or not at all, a piece at a time (a file too large to hold
// in memory): write_file_atomically's refusals and promises, with the bytes handed
// over as they come. commit() flushes the temporary and renames it into place; a
// writer destroyed, moved from or failed before that removes its temporary and
// leaves whatever is at the path as it was.
//
//   SWITCHYARD_ASSIGN_OR_RETURN(AtomicFileWriter out, AtomicFileWriter::create(path));
//   for (...) SWITCHYARD_RETURN_IF_ERROR(out.write(bytes));
//   SWITCHYARD_RETURN_IF_ERROR(out.commit());
class AtomicFileWriter {
 public:
  // write_file_atomically's errors for a path it cannot write.
  [[nodiscard]] static Result<AtomicFileWriter> create(const std::string& path);
  AtomicFileWriter(AtomicFileWriter&& other) noexcept;
  AtomicFileWriter& operator=(AtomicFileWriter&& other) noexcept;
  ~AtomicFileWriter();

  // kUnavailable when the system refuses the bytes (the writer is then abandoned);
  // kFailedPrecondition after commit or abandonment.
  [[nodiscard]] Status write(std::span<const std::byte> bytes);
  // kUnavailable when the flush, close or rename fails (abandoned);
  // kFailedPrecondition after commit or abandonment.
  [[nodiscard]] Status commit();
  // Removes the temporary now; the path keeps what it had.
  void abandon();

 private:
  struct State;
  explicit AtomicFileWriter(std::unique_ptr<State> state);
  std::unique_ptr<State> state_;
};

// The same for bytes at hand; `what` names the file in errors ("the ledger").
[[nodiscard]] Status write_file_atomically(const std::string& path, std::string_view contents,
                                           std::string_view what);

}  // namespace switchyard
