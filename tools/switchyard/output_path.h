// Refusing an output path before any work: a command that runs a model for
// minutes checks first that what it will write can be written.
#pragma once

#include <string>
#include <string_view>

#include "switchyard/status.h"

namespace switchyard::tool {

// kInvalidArgument when `what` ("the report page") could not be written to `path`
// by write_file_atomically or AtomicFileWriter (switchyard/file_io.h): something
// other than a regular file is there (a directory, a link, a FIFO, a device), its
// directory does not exist or is not writable, or it is `input` (the model file),
// which an output must never replace. Nothing at `path` is opened or created.
[[nodiscard]] Status check_output_path(const std::string& path, const std::string& input,
                                       std::string_view what);

}  // namespace switchyard::tool
