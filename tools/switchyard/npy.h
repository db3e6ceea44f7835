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
#include <cstdio>
#include <filesystem>
#include <span>

#include "switchyard/status.h"

namespace switchyard::tool {

// A version 1.0 .npy file of little-endian f32 ('<f4', C order, shape (rows,
// cols)) written a row at a time, so that rows need not all be in memory. The
// file is complete only after finish(); an unfinished writer (an error, or
// destroyed early) removes it.
class NpyWriter {
 public:
  // kUnavailable naming the path when it cannot be created.
  [[nodiscard]] static Result<NpyWriter> create(const std::filesystem::path& path,
                                                std::int64_t rows, std::int64_t cols);
  NpyWriter(NpyWriter&& other) noexcept;
  NpyWriter& operator=(NpyWriter&&) = delete;
  ~NpyWriter();

  // kInvalidArgument for a row of another length or one row too many;
  // kUnavailable when the write fails (the file is removed).
  [[nodiscard]] Status append(std::span<const float> row);
  // kFailedPrecondition when fewer rows than announced were appended;
  // kUnavailable when closing fails. Either way the file is removed.
  [[nodiscard]] Status finish();

 private:
  NpyWriter(std::FILE* file, std::filesystem::path path, std::int64_t rows, std::int64_t cols)
      : file_(file), path_(std::move(path)), rows_(rows), cols_(cols) {}
  void abandon();

  std::FILE* file_ = nullptr;
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
