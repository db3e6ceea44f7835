// Synthetic llama-family models: small, deterministic models with the metadata keys
// and tensor names of real llama GGUF files, so the loader, planner and executor can
// be exercised end to end with nothing to download.
//
// Overview
//   `generate_synthetic_llama` builds the model in memory: `llama.*` metadata and one
//   tensor per standard name (`token_embd.weight`, `blk.N.attn_q.weight`, ...,
//   `output_norm.weight`, `output.weight` unless embeddings are tied). Weights come
//   from a seeded splitmix64 stream per tensor (keyed by the seed and the tensor
//   name), turned into floats with integer arithmetic and one rounding, so the same
//   config gives the same bytes on every platform and compiler. Matrix weights are
//   uniform with standard deviation 1/sqrt(row length) (the fan-in of the matmul that
//   uses them), which keeps activations of the order of one through the layers; norm
//   weights are 1 +- 0.125 and always f32.
//
//   Shapes follow Switchyard's outermost-first order with weights stored [out, in]
//   (a row per output feature), which is what llama GGUF files hold once their
//   innermost-first ne is reversed: `attn_k` is [head_count_kv * head_dim, n_embd],
//   `ffn_down` is [n_embd, n_ff], `token_embd` and `output` are [n_vocab, n_embd].
//
//   Each matrix weight is stored in `weight_type` unless a rule names its role.
//   Types available: f32, f16, bf16 and every block-quantized weight format (q4_0,
//   q4_1, q5_0, q5_1, q8_0, q2_k .. q6_k, iq4_nl, iq4_xs, mxfp4), quantized from the
//   f32 values by quant.h's `quantize`; the activation-only formats q8_1 and q8_k are
//   refused. A quantized weight's row length (its input dimension) must be a whole
//   number of blocks: 32 elements, or 256 for the k-quants and iq4_xs.
//
// Example
//   SyntheticLlamaConfig config;
//   config.embedding_length = 256;  // k-quant rows are 256-element super-blocks
//   config.weight_type = DType::kQ4_K;
//   config.type_rules = {{"ffn_down", DType::kQ6_K}, {"token_embd", DType::kQ8_0}};
//   SWITCHYARD_ASSIGN_OR_RETURN(SyntheticModel model, generate_synthetic_llama(config));
//   SWITCHYARD_RETURN_IF_ERROR(write_synthetic_model(model, "/tmp/tiny-llama.gguf"));
#pragma once

#include <cstdint>
#include <filesystem>
#include <string>
#include <string_view>
#include <vector>

#include "switchyard/dtype.h"
#include "switchyard/gguf.h"
#include "switchyard/status.h"
#include "switchyard/tensor.h"

namespace switchyard {

// Gives the tensors of one role a storage type. The role is the tensor name without
// its "blk.N." prefix and ".weight" suffix: token_embd, attn_q, attn_k, attn_v,
// attn_output, ffn_gate, ffn_up, ffn_down, output.
struct TensorTypeRule {
  std::string role;
  DType dtype = DType::kF32;
};

struct SyntheticLlamaConfig {
  std::int64_t vocab_size = 256;
  std::int64_t embedding_length = 64;
  std::int64_t block_count = 2;
  std::int64_t head_count = 4;
  std::int64_t head_count_kv = 2;
  std::int64_t feed_forward_length = 128;
  std::int64_t context_length = 256;
  float rope_freq_base = 10000.0f;
  float rms_epsilon = 1e-5f;
  std::uint64_t seed = 1;
  // No `output` tensor: the output projection reuses `token_embd`.
  bool tied_embeddings = false;
  // Storage type of every matrix weight that no rule names.
  DType weight_type = DType::kF32;
  // Per-role types; the first rule naming a role wins. Norm weights are always f32.
  std::vector<TensorTypeRule> type_rules;
  // Give the model a tokenizer: add_trained_tokenizer (switchyard/tokenizer.h) on a
  // built-in English sample text, so that text goes in and out of a model whose
  // weights know no language. Needs a vocab_size of at least 258.
  bool tokenizer = false;
};

struct SyntheticTensor {
  std::string name;  // "blk.0.attn_q.weight"
  std::string role;  // "attn_q"
  Shape shape;       // outermost first
  DType dtype = DType::kF32;
  std::vector<std::byte> data;  // row_bytes(dtype, shape.inner()) * shape.outer() bytes
};

struct SyntheticModel {
  GgufMetadata metadata;
  // In the order real llama files use: token_embd, the blocks in order, output_norm,
  // output.
  std::vector<SyntheticTensor> tensors;

  // The tensor named `name`, or null.
  [[nodiscard]] const SyntheticTensor* find(std::string_view name) const;
};

// The roles a type rule may name, in file order.
[[nodiscard]] std::span<const std::string_view> synthetic_llama_weight_roles();

// Builds the model. kInvalidArgument for a size below 1 (or above u32, as the
// metadata stores them as u32), an embedding length that the head count does not
// divide, an odd head dimension (rotary embeddings rotate pairs), a head count that
// the kv head count does not divide, a rule naming an unknown role, a norm or an
// `output` that tied embeddings do not have, a type the generator cannot store, and
// a type whose blocks do not divide the weight's rows (the message names both);
// kResourceExhausted for more than 2^31 parameters (synthetic models are small).
[[nodiscard]] Result<SyntheticModel> generate_synthetic_llama(const SyntheticLlamaConfig& config);

// A writer holding the model's metadata and tensors. Tensor bytes are borrowed: the
// model must outlive the writer's last write.
[[nodiscard]] Result<GgufWriter> synthetic_model_writer(const SyntheticModel& model);

// Writes the model as a GGUF file through GgufWriter (atomically; errors as
// GgufWriter::write).
[[nodiscard]] Status write_synthetic_model(const SyntheticModel& model,
                                           const std::filesystem::path& path);

}  // namespace switchyard
