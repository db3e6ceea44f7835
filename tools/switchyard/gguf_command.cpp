// `switchyard inspect FILE [--json]`: what a GGUF file holds — header, metadata and
// tensors with their shapes, types and sizes — read through the same reader the
// runtime loads models with, so a file this command refuses is one the runtime
// refuses too, with the same error.
//
// `switchyard inspect FILE --check [--json] [--threads N]`: instead of the listing,
// a full scan of every tensor's floats (switchyard/weight_check.h): one line per
// tensor holding NaN or infinity (NONFINITE) or subnormals (SUBNORMAL), and a
// summary. Exit 1 when any tensor holds a NaN or an infinity (a failed check);
// subnormals are finite and only warned about (exit 0): tiny blocks of a healthy
// model give them (an f16 scale below 2^-14 is subnormal), and the kernels compute
// with them correctly.
#include <algorithm>
#include <memory>
#include <string>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "command.h"
#include "switchyard/gguf.h"
#include "switchyard/thread_pool.h"
#include "weight_check_text.h"

namespace switchyard::tool {
namespace {

struct InspectOptions {
  std::string path;
  bool json = false;
  bool check = false;
  int threads = 0;
  std::size_t max_elements = 8;
};

// Arrays can hold a whole vocabulary; JSON output shows the first elements and the
// length, like the text output, rather than megabytes of tokens.
nlohmann::json to_json(const GgufValue& v, std::size_t max_elements) {
  switch (v.type()) {
    case GgufType::kU8: return *v.as_u8();
    case GgufType::kI8: return *v.as_i8();
    case GgufType::kU16: return *v.as_u16();
    case GgufType::kI16: return *v.as_i16();
    case GgufType::kU32: return *v.as_u32();
    case GgufType::kI32: return *v.as_i32();
    case GgufType::kF32: return *v.as_f32();
    case GgufType::kBool: return *v.as_bool();
    // Not necessarily UTF-8: dump() below replaces invalid bytes instead of throwing.
    case GgufType::kString: return std::string(*v.as_string());
    case GgufType::kU64: return *v.as_u64();
    case GgufType::kI64: return *v.as_i64();
    case GgufType::kF64: return *v.as_f64();
    case GgufType::kArray: {
      nlohmann::json values = nlohmann::json::array();
      const GgufArray elements = *v.as_array();
      for (std::size_t i = 0; i < elements.size() && i < max_elements; ++i) {
        // An inner array is rendered where it is; at() would copy it whole.
        values.push_back(elements.element_type() == GgufType::kArray
                             ? to_json((*elements.arrays())[i], max_elements)
                             : to_json(elements.at(i), max_elements));
      }
      return {{"element_type", name(elements.element_type())},
              {"length", elements.size()},
              {"values", std::move(values)},
              {"truncated", elements.size() > max_elements}};
    }
  }
  return nullptr;
}

std::string dims_text(std::span<const std::int64_t> dims) {
  return fmt::format("[{}]", fmt::join(dims, ", "));
}

int run_check(const InspectOptions& options, const GgufFile& file) {
  std::unique_ptr<ThreadPool> own_pool;
  ThreadPool* pool = &default_thread_pool();
  if (options.threads > 0) {
    own_pool = std::make_unique<ThreadPool>(options.threads);
    pool = own_pool.get();
  }
  Result<TimedWeightCheck> check = timed_weight_check(file, pool, !options.json);
  if (!check.is_ok()) return report_failure(check.status());
  if (options.json) {
    nlohmann::json out;
    out["file"] = options.path;
    out["check"] = check_json(file, *check);
    fmt::print("{}\n", out.dump(2, ' ', false, nlohmann::json::error_handler_t::replace));
  } else {
    fmt::print("{}{}: {}\n", finding_lines(file, check->report), printable(options.path),
               check_summary(file, *check));
  }
  if (!check->report.finite()) {
    std::fflush(stdout);
    std::fprintf(stderr, "switchyard: inspect --check: %s holds NaN or infinity: %s\n",
                 printable(options.path).c_str(),
                 first_nonfinite_text(file, check->report).c_str());
    return kExitCheckFailed;
  }
  return kExitOk;
}

int run_inspect(const InspectOptions& options) {
  Result<GgufFile> opened = GgufFile::open(options.path);
  if (!opened.is_ok()) return report_failure(opened.status());
  const GgufFile& file = *opened;
  if (options.check) return run_check(options, file);
  std::int64_t tensor_bytes = 0;
  for (const GgufTensorInfo& t : file.tensors()) tensor_bytes += t.size_bytes;

  if (options.json) {
    nlohmann::json out;
    out["file"] = options.path;
    out["version"] = file.version();
    out["alignment"] = file.alignment();
    out["file_size"] = file.file_size();
    out["header_bytes"] = file.header_bytes();
    out["data_offset"] = file.data_offset();
    out["tensor_bytes"] = tensor_bytes;
    out["metadata"] = nlohmann::json::array();
    for (const GgufMetadata::Entry& e : file.metadata().entries()) {
      out["metadata"].push_back({{"key", e.key},
                                 {"type", name(e.value.type())},
                                 {"value", to_json(e.value, options.max_elements)}});
    }
    out["tensors"] = nlohmann::json::array();
    for (const GgufTensorInfo& t : file.tensors()) {
      out["tensors"].push_back({{"name", t.name},
                                {"dtype", name(t.dtype)},
                                {"shape", t.shape.dims()},
                                {"ne", gguf_dims(t.shape)},
                                {"elements", t.shape.numel()},
                                {"offset", t.offset},
                                {"bytes", t.size_bytes}});
    }
    fmt::print("{}\n", out.dump(2, ' ', false, nlohmann::json::error_handler_t::replace));
    return kExitOk;
  }

  fmt::print("{}: GGUF v{}, {} bytes\n", options.path, file.version(), file.file_size());
  fmt::print("  alignment {}, header {} bytes, data at offset {}, {} bytes of tensor data\n",
             file.alignment(), file.header_bytes(), file.data_offset(), tensor_bytes);
  fmt::print("metadata ({} keys)\n", file.metadata().size());
  // Keys and names come from the file: escaped (no control byte reaches the
  // terminal) and cut, so each stays on its line.
  constexpr std::size_t kNameBytes = 200;
  std::size_t key_width = 0;
  for (const GgufMetadata::Entry& e : file.metadata().entries()) {
    key_width = std::max(key_width, printable(e.key, kNameBytes).size());
  }
  for (const GgufMetadata::Entry& e : file.metadata().entries()) {
    fmt::print("  {:<{}}  {:<6}  {}\n", printable(e.key, kNameBytes), key_width,
               name(e.value.type()), e.value.to_string(options.max_elements));
  }
  fmt::print("tensors ({})  shape is outermost first; ne is GGUF's innermost-first order\n",
             file.tensors().size());
  std::size_t name_width = 4;
  for (const GgufTensorInfo& t : file.tensors()) {
    name_width = std::max(name_width, printable(t.name, kNameBytes).size());
  }
  fmt::print("  {:<{}}  {:<6}  {:<16}  {:<16}  {:>12}  {:>12}\n", "name", name_width, "dtype",
             "shape", "ne", "offset", "bytes");
  for (const GgufTensorInfo& t : file.tensors()) {
    fmt::print("  {:<{}}  {:<6}  {:<16}  {:<16}  {:>12}  {:>12}\n", printable(t.name, kNameBytes),
               name_width, name(t.dtype), t.shape.to_string(), dims_text(gguf_dims(t.shape)),
               t.offset, t.size_bytes);
  }
  return kExitOk;
}

}  // namespace

void add_inspect_command(CLI::App& app, CommandMain& selected) {
  auto options = std::make_shared<InspectOptions>();
  CLI::App* cmd = app.add_subcommand("inspect", "Show a GGUF file's header, metadata and tensors");
  cmd->add_option("file", options->path, "GGUF file")->required();
  cmd->add_flag("--json", options->json, "Machine-readable output");
  cmd->add_flag("--check", options->check,
                "Scan every tensor for NaN, infinity and subnormals instead of listing; exit 1 "
                "on NaN or infinity");
  cmd->add_option("--threads", options->threads,
                  "--check: CPU threads (default: SWITCHYARD_THREADS or all)")
      ->check(kThreadRange);
  cmd->add_option("--max-elements", options->max_elements,
                  "Array elements shown per metadata value (default 8)")
      ->check(CLI::Range(std::size_t{0}, std::size_t{1} << 20));
  cmd->callback([options, &selected] { selected = [options] { return run_inspect(*options); }; });
}

}  // namespace switchyard::tool
