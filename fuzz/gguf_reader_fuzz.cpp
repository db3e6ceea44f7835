// Fuzz target: the GGUF reader on arbitrary bytes, and everything a caller then
// does with a file that parsed: metadata rendering, tensor views, the data walk
// that converts every row to f32, and the weight check of `inspect --check`, which
// reads every tensor's bytes in full; then the tokenizer and the llama config
// that a model load reads from the same metadata.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <span>
#include <string_view>
#include <vector>

#include "switchyard/gguf.h"
#include "switchyard/llama.h"
#include "switchyard/quant.h"
#include "switchyard/tokenizer.h"
#include "switchyard/weight_check.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace switchyard;
  const std::span<const std::byte> bytes(reinterpret_cast<const std::byte*>(data), size);
  Result<GgufFile> file = GgufFile::parse(bytes);
  if (!file.is_ok()) {
    (void)file.status().to_string();
    return 0;
  }
  // Note [Metadata memory]: whatever parsed stays within the documented limit; array
  // views cover their storage.
  const GgufMetadata& metadata = file->metadata();
  if (metadata.memory_bytes() >
      kGgufMetadataMemoryFactor * file->header_bytes() + kGgufMetadataMemorySlack) {
    std::abort();
  }
  for (const auto& entry : metadata.entries()) {
    (void)entry.value.to_string(4);
    if (!entry.value.is_array()) continue;
    const GgufArray array = *entry.value.as_array();
    if (array.element_type() == GgufType::kString) {
      const GgufStrings strings = *array.strings();
      std::size_t total = 0;
      for (std::string_view s : strings) total += s.size();
      if (total != strings.chars().size()) std::abort();
    } else if (!array.empty() && array.element_type() != GgufType::kArray) {
      (void)array.at(array.size() - 1).to_string();
    }
  }
  std::vector<float> row;
  for (const GgufTensorInfo& info : file->tensors()) {
    const std::span<const std::byte> tensor = file->tensor_bytes(info);
    const std::int64_t cols = info.shape.rank() > 0 ? info.shape[info.shape.rank() - 1] : 1;
    Result<std::int64_t> row_size = row_bytes(info.dtype, cols);
    if (!row_size.is_ok() || *row_size <= 0 || cols > (1 << 16)) continue;
    row.resize(static_cast<std::size_t>(cols));
    // The first rows only: enough to reach every block decoder without making a
    // large (valid) tensor slow to fuzz.
    for (std::size_t at = 0; at + static_cast<std::size_t>(*row_size) <= tensor.size() && at < 4096;
         at += static_cast<std::size_t>(*row_size)) {
      (void)row_to_f32(info.dtype, tensor.subspan(at, static_cast<std::size_t>(*row_size)), row);
    }
  }
  // Every range the check reads was validated by the parser: a failure here is a
  // finding (the check reports kInternal for a range outside the file).
  Result<WeightCheckReport> check = check_weights(*file);
  if (!check.is_ok() || check->tensors.size() != file->tensors().size()) __builtin_trap();
  // A tokenizer the metadata describes encodes and decodes without leaving its
  // vocabulary; one it cannot describe is an error, never a crash.
  Result<Tokenizer> tokenizer = Tokenizer::from_metadata(metadata);
  if (tokenizer.is_ok()) {
    for (std::int32_t id :
         tokenizer->encode("Hello <s> w\xC3\xB6rld 42\n", {.parse_special = true})) {
      if (id < 0 || id >= tokenizer->vocab_size()) __builtin_trap();
    }
  }
  (void)LlamaConfig::from_gguf(*file);
  return 0;
}
