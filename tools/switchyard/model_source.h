// What the model-running commands (`run`, `perplexity`) share: the backend flag,
// the embedded synthetic model, and reading a text file.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

#include "switchyard/backend.h"
#include "switchyard/gguf.h"
#include "switchyard/status.h"
#include "switchyard/synthetic_model.h"

namespace switchyard::tool {

// `--backend`: a compiled backend's name, or `auto` for the default one (the
// first accelerator with a device present, else the CPU). A compiled backend
// without its device is a usage error (kInvalidArgument, exit 2) with the
// backend's own reason; `command` prefixes the messages.
[[nodiscard]] Result<BackendId> pick_backend(std::string_view command, std::string_view text);

// What `--backend auto` chose and why, for the report: the accelerator whose
// device is present, or the host and the reason each compiled accelerator gave.
[[nodiscard]] std::string auto_note(BackendId chosen);

// The storage rules of the embedded model: the default mix ("mix"), or one dtype
// for every matrix weight (norms stay f32).
[[nodiscard]] Result<std::vector<TensorTypeRule>> synthetic_types(std::string_view model_type);

// The embedded model: the synthetic preset written through the GGUF writer and
// mapped back through the reader. Without `save_as` the file is temporary and
// unlinked once mapped (the mapping keeps the data).
[[nodiscard]] Result<GgufFile> synthetic_file(std::string_view preset, std::string_view model_type,
                                              const std::string& save_as);

// The most read_text_file reads: far more text than any model's context holds.
inline constexpr std::size_t kMaxTextFileBytes = std::size_t{256} << 20;

// A file's bytes: a regular file, a pipe or a device, up to kMaxTextFileBytes.
// kInvalidArgument "<what>: cannot read '<path>'" for a directory or a file that
// does not open, or naming the limit for a longer one.
[[nodiscard]] Result<std::string> read_text_file(std::string_view what, const std::string& path);

}  // namespace switchyard::tool
