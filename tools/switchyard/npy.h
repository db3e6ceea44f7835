// A NumPy .npy file of f32 rows, for `run --logits-out`: raw logits that a script
// reads with numpy.load to cross-check Switchyard against another runtime.
//
// Example
//   SWITCHYARD_RETURN_IF_ERROR(write_npy_f32("logits.npy", rows, vocab, values));
#pragma once

#include <cstdint>
#include <filesystem>
#include <span>

#include "switchyard/status.h"

namespace switchyard::tool {

// Writes `values` (rows x cols, row-major) as a version 1.0 .npy file of
// little-endian f32 ('<f4', C order, shape (rows, cols)). kInvalidArgument when
// the sizes disagree; kUnavailable naming the path when the file cannot be
// written, and then no partial file is left behind.
[[nodiscard]] Status write_npy_f32(const std::filesystem::path& path, std::int64_t rows,
                                   std::int64_t cols, std::span<const float> values);

}  // namespace switchyard::tool
