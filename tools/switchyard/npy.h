// NumPy .npy files of f32 rows, for `run --logits-out` and `perplexity
// --logits-out`: raw logits that a script reads with numpy.load to cross-check
// Switchyard against another runtime.
//
// Example
//   SWITCHYARD_RETURN_IF_ERROR(write_npy_f32("logits.npy", rows, vocab, values));
//
//   SWITCHYARD_ASSIGN_OR_RETURN(NpyWriter out, NpyWriter::create("logits.npy", rows, vocab));
//   for (...) SWITCHYARD_RETURN_IF_ERROR(out.append(row));
//   SWITCHYARD_RETURN_IF_ERROR(out.finish());
#pragma once

#include <cstdint>
#include <filesystem>
#include <span>

#include "switchyard/file_io.h"
#include "switchyard/status.h"

namespace switchyard::tool {

// A version 1.0 .npy file of little-endian f32 ('<f4', C order, shape (rows,
// cols)) written a row at a time, so that rows need not all be in memory. The
// file is written whole or not at all (AtomicFileWriter, switchyard/file_io.h):
// it appears at its path only on finish(); an unfinished writer (an error, or
// destroyed early) leaves whatever was there as it was.
class NpyWriter {
 public:
  // AtomicFileWriter::create's errors: a path that is not a regular file, a
  // directory that is missing or not writable.
  [[nodiscard]] static Result<NpyWriter> create(const std::filesystem::path& path,
                                                std::int64_t rows, std::int64_t cols);

  // kInvalidArgument for a row of another length or one row too many;
  // kUnavailable when the write fails (the writer is then abandoned).
  [[nodiscard]] Status append(std::span<const float> row);
  // kFailedPrecondition when fewer rows than announced were appended;
  // kUnavailable when the file cannot be completed. Either way nothing is written.
  [[nodiscard]] Status finish();

 private:
  NpyWriter(AtomicFileWriter file, std::filesystem::path path, std::int64_t rows, std::int64_t cols)
      : file_(std::move(file)), path_(std::move(path)), rows_(rows), cols_(cols) {}

  AtomicFileWriter file_;
  std::filesystem::path path_;
  std::int64_t rows_ = 0;
  std::int64_t cols_ = 0;
  std::int64_t written_ = 0;
};

// Writes `values` (rows x cols, row-major) in one go. kInvalidArgument when the
// sizes disagree; otherwise NpyWriter's errors.
[[nodiscard]] Status write_npy_f32(const std::filesystem::path& path, std::int64_t rows,
                                   std::int64_t cols, std::span<const float> values);

}  // namespace switchyard::tool
