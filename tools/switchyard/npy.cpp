#include "npy.h"

#include <bit>
#include <cstdio>
#include <string>

#include <fmt/format.h>

namespace switchyard::tool {

// The format (NumPy's NEP 1): the magic "\x93NUMPY", version 1.0, a two-byte
// little-endian header length, then a Python dict literal padded with spaces and
// ended by a newline so that the data starts at a multiple of 64 bytes.
Status write_npy_f32(const std::filesystem::path& path, std::int64_t rows, std::int64_t cols,
                     std::span<const float> values) {
  static_assert(std::endian::native == std::endian::little, "the data is written as stored");
  if (rows < 0 || cols < 0 || static_cast<std::int64_t>(values.size()) != rows * cols) {
    return invalid_argument_error(
        fmt::format("npy: {} values are not {} rows of {}", values.size(), rows, cols));
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
  std::FILE* f = std::fopen(path.c_str(), "wb");
  if (f == nullptr) {
    return unavailable_error(fmt::format("npy: cannot open '{}' for writing", path.string()));
  }
  bool ok = std::fwrite(preamble, 1, kPreamble, f) == kPreamble &&
            std::fwrite(header.data(), 1, header.size(), f) == header.size() &&
            std::fwrite(values.data(), sizeof(float), values.size(), f) == values.size();
  ok = std::fclose(f) == 0 && ok;
  if (!ok) {
    std::error_code ignored;
    std::filesystem::remove(path, ignored);
    return unavailable_error(fmt::format("npy: writing '{}' failed", path.string()));
  }
  return Status::ok();
}

}  // namespace switchyard::tool
