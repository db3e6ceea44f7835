#include "model_source.h"

#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <iterator>

#include <fmt/format.h>

#include "switchyard/backends.h"
#include "switchyard/dispatch.h"
#include "switchyard/llama.h"

namespace switchyard::tool {

Result<BackendId> pick_backend(std::string_view command, std::string_view text) {
  const TableSnapshot table = current_table();
  if (text == "auto") return default_backend(*table);
  Result<BackendId> backend = parse_compiled_backend(text);
  if (!backend.is_ok()) {
    return invalid_argument_error(
        fmt::format("{}: --backend: {}; or give auto", command, backend.status().message()));
  }
  const BackendMemory* memory = table->backend_memory(*backend);
  if (memory != nullptr) {
    if (Status ready = memory->ready(); !ready.is_ok()) {
      return invalid_argument_error(
          fmt::format("{}: --backend {}: {}", command, text, ready.message()));
    }
  }
  return backend;
}

std::string auto_note(BackendId chosen) {
  if (is_accelerator(chosen)) return " (auto: its device is present)";
  const TableSnapshot table = current_table();
  for (BackendId b : compiled_backends()) {
    const BackendMemory* memory = table->backend_memory(b);
    if (!is_accelerator(b) || memory == nullptr) continue;
    if (Status ready = memory->ready(); !ready.is_ok()) {
      return fmt::format(" (auto: {} not usable: {})", name(b), ready.message());
    }
  }
  return " (auto)";
}

Result<std::vector<TensorTypeRule>> synthetic_types(std::string_view model_type) {
  if (model_type == "mix") return default_synthetic_llama_types();
  Result<DType> dtype = parse_dtype(model_type);
  if (!dtype.is_ok()) {
    return invalid_argument_error(fmt::format(
        "--model-type '{}': expected mix or a weight dtype (f32, f16, q4_k, ...)", model_type));
  }
  std::vector<TensorTypeRule> rules;
  for (std::string_view role : synthetic_llama_weight_roles()) {
    rules.push_back({std::string(role), *dtype});
  }
  return rules;
}

Result<GgufFile> synthetic_file(std::string_view preset, std::string_view model_type,
                                const std::string& save_as) {
  SWITCHYARD_ASSIGN_OR_RETURN(std::vector<TensorTypeRule> types, synthetic_types(model_type));
  SWITCHYARD_ASSIGN_OR_RETURN(SyntheticLlamaConfig config, synthetic_llama_preset(preset));
  if (config.tied_embeddings)
    std::erase_if(types, [](const auto& r) { return r.role == "output"; });
  // Generated straight in the weights' storage types: a model of billions of
  // parameters is never held in f32 as well.
  config.type_rules = std::move(types);
  SWITCHYARD_ASSIGN_OR_RETURN(SyntheticModel model, generate_synthetic_llama(config));
  const std::filesystem::path path =
      !save_as.empty()
          ? std::filesystem::path(save_as)
          : std::filesystem::temp_directory_path() /
                fmt::format("switchyard-synthetic-llama-{}.gguf", static_cast<long>(getpid()));
  SWITCHYARD_RETURN_IF_ERROR(write_synthetic_model(model, path));
  Result<GgufFile> file = GgufFile::open(path);
  if (save_as.empty()) {
    std::error_code ec;
    std::filesystem::remove(path, ec);
  }
  return file;
}

Result<std::string> read_text_file(std::string_view what, const std::string& path) {
  std::error_code ec;
  std::ifstream in;
  if (!std::filesystem::is_directory(path, ec)) in.open(path, std::ios::binary);
  if (!in.is_open()) {
    return invalid_argument_error(
        fmt::format("{}: cannot read '{}' (not a readable file)", what, path));
  }
  // Pipes and devices too (a prompt from /dev/stdin or a process substitution),
  // up to a size no prompt needs, so that an endless one (/dev/zero) is refused.
  std::string text;
  char buffer[1 << 16];
  while (in.read(buffer, sizeof(buffer)) || in.gcount() > 0) {
    text.append(buffer, static_cast<std::size_t>(in.gcount()));
    if (text.size() > kMaxTextFileBytes) {
      return invalid_argument_error(
          fmt::format("{}: '{}' is longer than {} MiB", what, path, kMaxTextFileBytes >> 20));
    }
  }
  if (in.bad()) {
    return invalid_argument_error(fmt::format("{}: reading '{}' failed", what, path));
  }
  return text;
}

}  // namespace switchyard::tool
