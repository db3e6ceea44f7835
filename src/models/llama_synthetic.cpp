// The embedded default llama model: generate_synthetic_llama (f32) re-stored with
// the quantized types real files mix.
#include <algorithm>
#include <array>
#include <vector>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "switchyard/llama.h"
#include "switchyard/quant.h"

namespace switchyard {

SyntheticLlamaConfig default_synthetic_llama_config() {
  SyntheticLlamaConfig c;
  c.vocab_size = 512;
  c.embedding_length = 256;
  c.block_count = 4;
  c.head_count = 8;
  c.head_count_kv = 4;
  c.feed_forward_length = 768;
  c.context_length = 2048;
  c.seed = 0x5eed;
  c.weight_type = DType::kF32;
  c.tokenizer = true;
  return c;
}

namespace {

constexpr std::array<std::string_view, 3> kPresets = {"tiny", "llama3-1b", "llama3-8b"};

// The Llama 3 family's shared numbers: a 128256-token vocabulary, 8 kv heads,
// rope base 500000 and a 131072-token context.
SyntheticLlamaConfig llama3_shape(std::int64_t dim, std::int64_t blocks, std::int64_t ff) {
  SyntheticLlamaConfig c;
  c.vocab_size = 128256;
  c.embedding_length = dim;
  c.block_count = blocks;
  c.head_count = 32;
  c.head_count_kv = 8;
  c.feed_forward_length = ff;
  c.context_length = 131072;
  c.rope_freq_base = 500000.0f;
  c.rms_epsilon = 1e-5f;
  c.seed = 0x5eed;
  c.tokenizer = true;
  return c;
}

}  // namespace

std::span<const std::string_view> synthetic_llama_presets() { return kPresets; }

Result<SyntheticLlamaConfig> synthetic_llama_preset(std::string_view preset) {
  if (preset == "tiny") return default_synthetic_llama_config();
  if (preset == "llama3-1b") {
    SyntheticLlamaConfig c = llama3_shape(2048, 16, 8192);
    c.tied_embeddings = true;
    return c;
  }
  if (preset == "llama3-8b") return llama3_shape(4096, 32, 14336);
  return invalid_argument_error(fmt::format("no synthetic model '{}' (presets: {})",
                                            printable(preset, 40), fmt::join(kPresets, ", ")));
}

std::vector<TensorTypeRule> default_synthetic_llama_types() {
  return {{"token_embd", DType::kQ4_K}, {"attn_q", DType::kQ4_K},      {"attn_k", DType::kQ4_K},
          {"attn_v", DType::kQ8_0},     {"attn_output", DType::kQ4_K}, {"ffn_gate", DType::kQ4_K},
          {"ffn_up", DType::kQ4_K},     {"ffn_down", DType::kQ6_K},    {"output", DType::kQ6_K}};
}

Status quantize_synthetic_llama(SyntheticModel& model, std::span<const TensorTypeRule> rules) {
  const auto roles = synthetic_llama_weight_roles();
  for (const TensorTypeRule& r : rules) {
    if (std::find(roles.begin(), roles.end(), r.role) == roles.end()) {
      return invalid_argument_error(
          fmt::format("synthetic llama: no weight role '{}' to quantize", r.role));
    }
    const bool storable = r.dtype == DType::kF32 || r.dtype == DType::kF16 ||
                          r.dtype == DType::kBF16 ||
                          (is_quantized(r.dtype) && can_quantize(r.dtype));
    if (!storable) {
      return invalid_argument_error(
          fmt::format("synthetic llama: cannot store weights as {}", name(r.dtype)));
    }
  }
  for (SyntheticTensor& t : model.tensors) {
    auto rule = std::find_if(rules.begin(), rules.end(),
                             [&](const TensorTypeRule& r) { return r.role == t.role; });
    if (rule == rules.end() || t.dtype != DType::kF32 || rule->dtype == DType::kF32) continue;
    const DType to = rule->dtype;
    std::vector<float> values(static_cast<std::size_t>(t.shape.numel()));
    SWITCHYARD_RETURN_IF_ERROR(row_to_f32(DType::kF32, t.data, values));
    Result<std::int64_t> row = row_bytes(to, t.shape.inner());
    if (!row.is_ok()) {
      return invalid_argument_error(fmt::format("synthetic llama: tensor '{}' {} cannot be {}: {}",
                                                t.name, t.shape.to_string(), name(to),
                                                row.status().message()));
    }
    std::vector<std::byte> out(static_cast<std::size_t>(*row * t.shape.outer()));
    SWITCHYARD_RETURN_IF_ERROR(row_from_f32(to, values, out));
    t.data = std::move(out);
    t.dtype = to;
  }
  return Status::ok();
}

}  // namespace switchyard
