// LlamaConfig: the `llama.*` (or `qwen2.*`) GGUF keys and the tensors they imply, checked.
#include <algorithm>
#include <cmath>

#include <fmt/format.h>

#include "switchyard/llama.h"

namespace switchyard {
namespace {

constexpr std::string_view kArchitecture = "general.architecture";

// A required positive integer key.
Result<std::int64_t> positive_key(const GgufMetadata& md, std::string_view key) {
  if (md.find(key) == nullptr) {
    return invalid_argument_error(fmt::format("llama: metadata key '{}' is missing", key));
  }
  Result<std::int64_t> v = md.get_integer(key);
  if (!v.is_ok()) {
    return invalid_argument_error(
        fmt::format("llama: metadata key '{}' is not an integer: {}", key, v.status().message()));
  }
  if (*v <= 0) {
    return invalid_argument_error(
        fmt::format("llama: metadata key '{}' is {}, must be positive", key, *v));
  }
  return *v;
}

Result<float> positive_float_key(const GgufMetadata& md, std::string_view key,
                                 std::optional<float> fallback) {
  if (md.find(key) == nullptr) {
    if (fallback) return *fallback;
    return invalid_argument_error(fmt::format("llama: metadata key '{}' is missing", key));
  }
  Result<double> v = md.get_float(key);
  if (!v.is_ok()) {
    return invalid_argument_error(
        fmt::format("llama: metadata key '{}' is not a number: {}", key, v.status().message()));
  }
  if (!(*v > 0) || !std::isfinite(*v)) {
    return invalid_argument_error(
        fmt::format("llama: metadata key '{}' is {}, must be positive", key, *v));
  }
  return static_cast<float>(*v);
}

bool is_matrix_dtype(DType t) {
  return t == DType::kF32 || t == DType::kF16 || t == DType::kBF16 || is_quantized(t);
}

Status check_tensor(const GgufFile& file, const std::string& name, const Shape& expected,
                    bool matrix) {
  const GgufTensorInfo* info = file.find_tensor(name);
  if (info == nullptr) {
    return not_found_error(fmt::format("llama: tensor '{}' is missing", name));
  }
  if (!(info->shape == expected)) {
    return invalid_argument_error(
        fmt::format("llama: tensor '{}' has shape {}, the config needs {}", name,
                    info->shape.to_string(), expected.to_string()));
  }
  if (matrix ? !is_matrix_dtype(info->dtype) : info->dtype != DType::kF32) {
    return invalid_argument_error(
        fmt::format("llama: tensor '{}' has dtype {}; {} weights must be {}", name,
                    switchyard::name(info->dtype), matrix ? "matrix" : "norm",
                    matrix ? "f32, f16, bf16 or block-quantized" : "f32"));
  }
  return Status::ok();
}

}  // namespace

std::string block_tensor_name(std::int64_t block, std::string_view role) {
  return fmt::format("blk.{}.{}.weight", block, role);
}

std::string block_bias_name(std::int64_t block, std::string_view role) {
  return fmt::format("blk.{}.{}.bias", block, role);
}

Result<LlamaConfig> LlamaConfig::from_metadata(const GgufMetadata& md) {
  if (md.find(kArchitecture) == nullptr) {
    return invalid_argument_error(
        fmt::format("llama: metadata key '{}' is missing", kArchitecture));
  }
  SWITCHYARD_ASSIGN_OR_RETURN(std::string_view arch, md.get_string(kArchitecture));
  if (arch != "llama" && arch != "qwen2") {
    return invalid_argument_error(
        fmt::format("llama: general.architecture is '{}'; this builder reads 'llama' and 'qwen2'",
                    printable(arch)));
  }
  LlamaConfig c;
  c.architecture = std::string(arch);
  // Qwen2 files keep the weights as trained, rotating each head's first half
  // against its second; llama files' q and k rows are permuted by the converters
  // into adjacent pairs.
  c.rope_mode = arch == "qwen2" ? RopeMode::kNeox : RopeMode::kNormal;
  // Every hyperparameter key is "<architecture>.<name>".
  const auto key = [&](std::string_view name) { return fmt::format("{}.{}", arch, name); };
  SWITCHYARD_ASSIGN_OR_RETURN(c.context_length, positive_key(md, key("context_length")));
  SWITCHYARD_ASSIGN_OR_RETURN(c.embedding_length, positive_key(md, key("embedding_length")));
  SWITCHYARD_ASSIGN_OR_RETURN(c.block_count, positive_key(md, key("block_count")));
  SWITCHYARD_ASSIGN_OR_RETURN(c.feed_forward_length, positive_key(md, key("feed_forward_length")));
  SWITCHYARD_ASSIGN_OR_RETURN(c.head_count, positive_key(md, key("attention.head_count")));
  if (md.find(key("attention.head_count_kv")) != nullptr) {
    SWITCHYARD_ASSIGN_OR_RETURN(c.head_count_kv, positive_key(md, key("attention.head_count_kv")));
  } else {
    c.head_count_kv = c.head_count;
  }
  SWITCHYARD_ASSIGN_OR_RETURN(c.rope_freq_base,
                              positive_float_key(md, key("rope.freq_base"), 10000.0f));
  SWITCHYARD_ASSIGN_OR_RETURN(
      c.rms_eps, positive_float_key(md, key("attention.layer_norm_rms_epsilon"), std::nullopt));
  if (md.find(key("vocab_size")) != nullptr) {
    SWITCHYARD_ASSIGN_OR_RETURN(c.vocab_size, positive_key(md, key("vocab_size")));
  } else if (md.find("tokenizer.ggml.tokens") != nullptr) {
    SWITCHYARD_ASSIGN_OR_RETURN(GgufArray tokens,
                                md.get_array("tokenizer.ggml.tokens", GgufType::kString));
    c.vocab_size = static_cast<std::int64_t>(tokens.size());
  }  // else: from token_embd's rows (from_gguf)
  if (md.find("general.file_type") != nullptr) {
    SWITCHYARD_ASSIGN_OR_RETURN(c.file_type, md.get_integer("general.file_type"));
  }

  // The head size: stated (key_length, which value_length must equal), or the
  // embedding split evenly among the heads.
  if (md.find(key("attention.key_length")) != nullptr) {
    SWITCHYARD_ASSIGN_OR_RETURN(c.head_dimension, positive_key(md, key("attention.key_length")));
    if (md.find(key("attention.value_length")) != nullptr) {
      SWITCHYARD_ASSIGN_OR_RETURN(std::int64_t value_length,
                                  positive_key(md, key("attention.value_length")));
      if (value_length != c.head_dimension) {
        return invalid_argument_error(fmt::format(
            "llama: {} is {} but {} is {}; heads whose values differ in size from their keys "
            "are not supported",
            key("attention.value_length"), value_length, key("attention.key_length"),
            c.head_dimension));
      }
    }
  } else if (c.embedding_length % c.head_count != 0) {
    return invalid_argument_error(
        fmt::format("llama: embedding_length {} is not a multiple of head_count {}",
                    c.embedding_length, c.head_count));
  } else {
    c.head_dimension = c.embedding_length / c.head_count;
  }
  if (c.head_dim() % 2 != 0) {
    return invalid_argument_error(
        fmt::format("llama: head dimension {} is odd; rope rotates pairs", c.head_dim()));
  }
  c.rope_dims = c.head_dim();
  if (md.find(key("rope.dimension_count")) != nullptr) {
    SWITCHYARD_ASSIGN_OR_RETURN(c.rope_dims, positive_key(md, key("rope.dimension_count")));
    if (c.rope_dims > c.head_dim() || c.rope_dims % 2 != 0) {
      return invalid_argument_error(
          fmt::format("llama: rope.dimension_count {} must be even and at most the head "
                      "dimension {}",
                      c.rope_dims, c.head_dim()));
    }
  }
  // Rope scaling that stretches positions: linear (every angle divided by the
  // factor). Llama 3's long-context scaling comes as the rope_freqs.weight
  // tensor instead (from_gguf); other kinds change more than the angles.
  if (md.find(key("rope.scaling.type")) != nullptr) {
    SWITCHYARD_ASSIGN_OR_RETURN(std::string_view type, md.get_string(key("rope.scaling.type")));
    if (type == "linear") {
      SWITCHYARD_ASSIGN_OR_RETURN(c.rope_linear_scale,
                                  positive_float_key(md, key("rope.scaling.factor"), std::nullopt));
    } else if (type != "none") {
      return invalid_argument_error(fmt::format(
          "llama: {} is '{}'; supported: none, linear (and Llama 3's rope_freqs.weight)",
          key("rope.scaling.type"), printable(type)));
    }
  } else if (md.find(key("rope.scale_linear")) != nullptr) {
    SWITCHYARD_ASSIGN_OR_RETURN(c.rope_linear_scale,
                                positive_float_key(md, key("rope.scale_linear"), std::nullopt));
  }
  if (c.head_count % c.head_count_kv != 0) {
    return invalid_argument_error(
        fmt::format("llama: head_count {} is not a multiple of head_count_kv {} (grouped-query "
                    "attention shares each kv head among a whole number of query heads)",
                    c.head_count, c.head_count_kv));
  }
  return c;
}

Result<LlamaConfig> LlamaConfig::from_gguf(const GgufFile& file) {
  SWITCHYARD_ASSIGN_OR_RETURN(LlamaConfig c, from_metadata(file.metadata()));
  const std::int64_t d = c.embedding_length;
  const GgufTensorInfo* embd = file.find_tensor("token_embd.weight");
  if (embd == nullptr) return not_found_error("llama: tensor 'token_embd.weight' is missing");
  if (c.vocab_size == 0) {
    if (embd->shape.rank() != 2) {
      return invalid_argument_error(
          fmt::format("llama: tensor 'token_embd.weight' has shape {}, expected [vocab, {}]",
                      embd->shape.to_string(), d));
    }
    c.vocab_size = embd->shape[0];
  }
  // The tokens that end a sequence (end of text, end of a turn), where the file
  // names them: each must be a token of the vocabulary.
  for (std::string_view key : {"tokenizer.ggml.eos_token_id", "tokenizer.ggml.eot_token_id"}) {
    if (file.metadata().find(key) == nullptr) continue;
    Result<std::int64_t> id = file.metadata().get_integer(key);
    if (!id.is_ok() || *id < 0 || *id >= c.vocab_size) {
      return invalid_argument_error(fmt::format(
          "llama: metadata key '{}' is {}, not a token of the {}-token vocabulary", key,
          id.is_ok() ? std::to_string(*id) : std::string(id.status().message()), c.vocab_size));
    }
    const auto token = static_cast<std::int32_t>(*id);
    if (std::find(c.end_tokens.begin(), c.end_tokens.end(), token) == c.end_tokens.end()) {
      c.end_tokens.push_back(token);
    }
  }
  SWITCHYARD_RETURN_IF_ERROR(check_tensor(file, "token_embd.weight", {c.vocab_size, d}, true));
  SWITCHYARD_RETURN_IF_ERROR(check_tensor(file, "output_norm.weight", {d}, false));
  c.tied_embeddings = file.find_tensor("output.weight") == nullptr;
  if (!c.tied_embeddings) {
    SWITCHYARD_RETURN_IF_ERROR(check_tensor(file, "output.weight", {c.vocab_size, d}, true));
  }
  // q, k and v biases: Qwen2's always, a llama file's when its converter wrote
  // them (all three in every block, checked below).
  c.attention_bias =
      c.architecture == "qwen2" || file.find_tensor(block_bias_name(0, "attn_q")) != nullptr;
  // Per-pair frequency divisors (Llama 3's long-context rope scaling).
  c.rope_freq_factors = file.find_tensor(std::string(kRopeFreqsTensor)) != nullptr;
  if (c.rope_freq_factors) {
    SWITCHYARD_RETURN_IF_ERROR(
        check_tensor(file, std::string(kRopeFreqsTensor), {c.rope_dims / 2}, false));
  }
  const std::int64_t f = c.feed_forward_length;
  for (std::int64_t i = 0; i < c.block_count; ++i) {
    SWITCHYARD_RETURN_IF_ERROR(check_tensor(file, block_tensor_name(i, "attn_norm"), {d}, false));
    SWITCHYARD_RETURN_IF_ERROR(
        check_tensor(file, block_tensor_name(i, "attn_q"), {c.q_dim(), d}, true));
    SWITCHYARD_RETURN_IF_ERROR(
        check_tensor(file, block_tensor_name(i, "attn_k"), {c.kv_dim(), d}, true));
    SWITCHYARD_RETURN_IF_ERROR(
        check_tensor(file, block_tensor_name(i, "attn_v"), {c.kv_dim(), d}, true));
    SWITCHYARD_RETURN_IF_ERROR(
        check_tensor(file, block_tensor_name(i, "attn_output"), {d, c.q_dim()}, true));
    if (c.attention_bias) {
      SWITCHYARD_RETURN_IF_ERROR(
          check_tensor(file, block_bias_name(i, "attn_q"), {c.q_dim()}, false));
      SWITCHYARD_RETURN_IF_ERROR(
          check_tensor(file, block_bias_name(i, "attn_k"), {c.kv_dim()}, false));
      SWITCHYARD_RETURN_IF_ERROR(
          check_tensor(file, block_bias_name(i, "attn_v"), {c.kv_dim()}, false));
    }
    SWITCHYARD_RETURN_IF_ERROR(check_tensor(file, block_tensor_name(i, "ffn_norm"), {d}, false));
    SWITCHYARD_RETURN_IF_ERROR(check_tensor(file, block_tensor_name(i, "ffn_gate"), {f, d}, true));
    SWITCHYARD_RETURN_IF_ERROR(check_tensor(file, block_tensor_name(i, "ffn_up"), {f, d}, true));
    SWITCHYARD_RETURN_IF_ERROR(check_tensor(file, block_tensor_name(i, "ffn_down"), {d, f}, true));
  }
  return c;
}

}  // namespace switchyard
