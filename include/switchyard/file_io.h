// Writing a small file whole or not at all.
#pragma once

#include <string>
#include <string_view>

#include "switchyard/status.h"

namespace switchyard {

// Writes `contents` to `path` through a temporary file beside it that is renamed
// into place, so that a reader never sees half a file and a failed write leaves
// the old one. `what` names the file in errors ("the ledger"). kUnavailable when
// the temporary cannot be written (a full disk) or renamed.
[[nodiscard]] Status write_file_atomically(const std::string& path, std::string_view contents,
                                           std::string_view what);

}  // namespace switchyard
