#include "npy.h"

#include <bit>
#include <span>
#include <string>
#include <utility>

#include <fmt/format.h>

namespace switchyard::tool {

// The format (NumPy's NEP 1): the magic "\x93NUMPY", version 1.0, a two-byte
// little-endian header length, then a Python dict literal padded with spaces and
// ended by a newline so that the data starts at a multiple of 64 bytes.
Result<NpyWriter> NpyWriter::create(const std::filesystem::path& path, std::int64_t rows,
                                    std::int64_t cols) {
  static_assert(std::endian::native == std::endian::little, "the data is written as stored");
  if (rows < 0 || cols < 0) {
    return invalid_argument_error(fmt::format("npy: a shape of ({}, {})", rows, cols));
  }
  std::string header =
      fmt::format("{{'descr': '<f4', 'fortran_order': False, 'shape': ({}, {}), }}", rows, cols);
  constexpr std::size_t kPreamble = 10;  // magic, version, header length
  const std::size_t padded = (kPreamble + header.size() + 1 + 63) / 64 * 64;
  header.append(padded - kPreamble - header.size() - 1, ' ');
  header.push_back('\n');
  const auto length = static_cast<std::uint16_t>(header.size());
  const unsigned char preamble[kPreamble] = {0x93,
                                             'N',
                                             'U',
                                             'M',
                                             'P',
                                             'Y',
                                             1,
                                             0,
                                             static_cast<unsigned char>(length & 0xff),
                                             static_cast<unsigned char>(length >> 8)};
  SWITCHYARD_ASSIGN_OR_RETURN(AtomicFileWriter file, AtomicFileWriter::create(path.string()));
  SWITCHYARD_RETURN_IF_ERROR(file.write(std::as_bytes(std::span(preamble))));
  SWITCHYARD_RETURN_IF_ERROR(file.write(std::as_bytes(std::span(header))));
  return NpyWriter(std::move(file), path, rows, cols);
}

Status NpyWriter::append(std::span<const float> row) {
  if (static_cast<std::int64_t>(row.size()) != cols_ || written_ == rows_) {
    return invalid_argument_error(fmt::format("npy: a row of {} values as row {} of {} rows of {}",
                                              row.size(), written_, rows_, cols_));
  }
  SWITCHYARD_RETURN_IF_ERROR(file_.write(std::as_bytes(row)).with_context("npy"));
  ++written_;
  return Status::ok();
}

Status NpyWriter::finish() {
  if (written_ != rows_) {
    file_.abandon();
    return failed_precondition_error(
        fmt::format("npy: '{}' got {} of its {} rows", path_.string(), written_, rows_));
  }
  return file_.commit().with_context("npy");
}

Status write_npy_f32(const std::filesystem::path& path, std::int64_t rows, std::int64_t cols,
                     std::span<const float> values) {
  if (rows < 0 || cols < 0 || static_cast<std::int64_t>(values.size()) != rows * cols) {
    return invalid_argument_error(
        fmt::format("npy: {} values are not {} rows of {}", values.size(), rows, cols));
  }
  SWITCHYARD_ASSIGN_OR_RETURN(NpyWriter writer, NpyWriter::create(path, rows, cols));
  for (std::int64_t r = 0; r < rows; ++r) {
    SWITCHYARD_RETURN_IF_ERROR(writer.append(
        values.subspan(static_cast<std::size_t>(r * cols), static_cast<std::size_t>(cols))));
  }
  return writer.finish();
}

}  // namespace switchyard::tool
