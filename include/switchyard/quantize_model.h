// Quantizing a GGUF model: a copy of a file with its weight matrices re-stored in
// another type, chosen per tensor by rules, as `switchyard quantize` does.
//
// Overview
//   `plan_quantization` decides a type for every tensor of an input file; the plan
//   can be inspected before anything is written. `write_quantized` then writes the
//   output through GgufWriter: every metadata key/value copied in order (with
//   `general.file_type` and `general.quantization_version` set, see below) and
//   every tensor in the input's order, converted or copied. `quantize_gguf` does
//   both from paths.
//
// How a tensor's type is chosen (first that applies)
//   1. A 1-D tensor (norm weights, biases) is stored in f32: f16 and bf16 are
//      widened, f32 is copied; a 1-D tensor of any other type is copied unchanged.
//   2. A tensor that is neither f32, f16, bf16 nor block-quantized (integer tables,
//      f64) is copied.
//   3. The caller's rules (`QuantizeOptions::rules`), in order: the first whose
//      pattern matches the tensor's name gives the type.
//   4. The preset's own rules, when `type` names a mix preset (below).
//   5. The base type: `type` itself, or the preset's base.
//   The chosen type must store the tensor's rows as whole blocks. When it cannot
//   (a k-quant's 256-element super-blocks on a row of 4000), the tensor falls back,
//   as common quantizers do, to a 32-element format of at least the same precision:
//   q2_k, q3_k and iq4_xs to iq4_nl; q4_k to q5_0; q5_k to q5_1; q6_k to q8_0; and
//   any type whose blocks still do not divide the row to f16. The plan records the
//   fallback (`TensorQuantizeDecision::fallback_from`).
//
// Input types
//   f32, f16 and bf16 tensors are converted through f32. A tensor already in its
//   chosen type is copied byte for byte. An already block-quantized tensor whose
//   chosen type differs is refused (kInvalidArgument naming the tensor) unless
//   `allow_requantize` is set: it would then be dequantized and quantized again,
//   compounding two roundings.
//
// Rule patterns
//   A rule is `PATTERN=TYPE`. Names are split at dots (`blk.12.ffn_down.weight` is
//   blk / 12 / ffn_down / weight), and so is the pattern; the pattern matches a name
//   when its components match a run of consecutive components of the name. Within a
//   component `*` matches any run of characters and `?` one character. So
//   `ffn_down` matches every block's ffn_down weight, `output` matches
//   `output.weight` but neither `attn_output.weight` nor `output_norm.weight`,
//   `blk.1?.attn_v` matches blocks 10 to 19, `blk.0` every weight of block 0 and
//   `attn_*` every attention matrix. TYPE is f32, f16, bf16 or a block-quantized
//   weight format (not the activation formats q8_1 and q8_k).
//
// Presets (mixes), in the spirit of the common k-quant mixes
//   `q4_k_m`: q4_k, with q6_k for `output` (or `token_embd` when there is no output
//             tensor: tied embeddings), and q6_k for attn_v and ffn_down in the
//             "more bits" blocks: the first and last eighth of the blocks and every
//             third block between (i < n/8, i >= 7n/8, or (i - n/8) % 3 == 2).
//   `q5_k_m`: the same with q5_k as the base.
//   `q4_k_s`: q4_k, q6_k for output, q5_k for attn_v in blocks 0-3 and for
//             ffn_down in the first eighth of the blocks.
//   `q5_k_s`: q5_k, q6_k for output.
//   A plain type (`q4_k`, `q8_0`, `f16` ...) stores every matrix in that type.
//   Block indices come from the `blk.N.` tensor names; n is the number of blocks.
//
// File-type keys
//   `general.file_type` (u32) gets the common numbering of the mix: 0 f32, 1 f16,
//   2 q4_0, 3 q4_1, 7 q8_0, 8 q5_0, 9 q5_1, 10 q2_k, 11 q3_k (as the small q3_k mix),
//   14 q4_k and q4_k_s, 15 q4_k_m, 16 q5_k and q5_k_s, 17 q5_k_m, 18 q6_k, 25 iq4_nl,
//   30 iq4_xs, 32 bf16, 38 mxfp4. `general.quantization_version` (u32) is 2, the
//   version of the block layouts quant.h writes. Every other key is copied as is.
//
// Memory
//   The input is memory-mapped; the output is produced tensor by tensor, in chunks of
//   at most GgufWriter::kSourceChunkBytes, while the file is written. A model larger
//   than memory needs one chunk of output and a row of f32 per thread, never the
//   whole output in memory.
//
// Example
//   QuantizeOptions options;
//   options.type = "q4_k_m";
//   SWITCHYARD_ASSIGN_OR_RETURN(QuantizeRule rule, parse_quantize_rule("ffn_up=q5_k"));
//   options.rules.push_back(rule);
//   SWITCHYARD_ASSIGN_OR_RETURN(QuantizeSummary s,
//                               quantize_gguf("model-f16.gguf", "model-q4_k_m.gguf", options));
#pragma once

#include <cstdint>
#include <filesystem>
#include <functional>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "switchyard/dtype.h"
#include "switchyard/gguf.h"
#include "switchyard/kernel.h"
#include "switchyard/status.h"

namespace switchyard {

// The version of the block layouts, written as `general.quantization_version`.
inline constexpr std::uint32_t kQuantizationVersion = 2;

// Gives the tensors whose name matches `pattern` the type `dtype` (see "Rule
// patterns" above).
struct QuantizeRule {
  std::string pattern;
  DType dtype = DType::kF32;
};

// Whether `pattern` matches the tensor name `name` (see "Rule patterns").
[[nodiscard]] bool tensor_name_matches(std::string_view pattern, std::string_view name);

// Parses `PATTERN=TYPE`. kInvalidArgument naming the text for a missing `=`, an
// empty pattern or pattern component, whitespace in the pattern, an unknown type
// name and a type that cannot store weights.
[[nodiscard]] Result<QuantizeRule> parse_quantize_rule(std::string_view text);

// The names of the mix presets, in the order documented above.
[[nodiscard]] std::span<const std::string_view> quantize_presets();

// What a `type` argument names: a plain type or a preset.
struct QuantizeTarget {
  std::string name;  // as given, lower case
  DType base = DType::kF32;
  bool preset = false;
  std::uint32_t file_type = 0;  // for `general.file_type`
};

// Parses a type or preset name (case-insensitive). kInvalidArgument listing the
// accepted names for anything else, and for types that cannot store weights.
[[nodiscard]] Result<QuantizeTarget> parse_quantize_target(std::string_view text);

// The rules a preset adds for a model of `block_count` blocks, in the order they
// apply, for example `blk.0.attn_v=q6_k`. `has_output` is whether the model has
// its own output tensor (without one, the preset's output type goes to
// token_embd). Empty for a plain type.
[[nodiscard]] std::vector<QuantizeRule> preset_rules(const QuantizeTarget& target,
                                                     std::int64_t block_count, bool has_output);

// Reports progress while the output is written, on the writing thread.
struct QuantizeProgress {
  std::size_t tensor_index = 0;  // 0-based, of tensor_count
  std::size_t tensor_count = 0;
  std::string_view tensor_name;
  // Output tensor bytes written so far and in all.
  std::int64_t bytes_done = 0;
  std::int64_t bytes_total = 0;
};

struct QuantizeOptions {
  // A plain type or a preset name; see parse_quantize_target.
  std::string type = "q4_k_m";
  // Rules that apply before the preset's, first match first.
  std::vector<QuantizeRule> rules;
  // Dequantize and quantize again an already quantized tensor whose type changes.
  bool allow_requantize = false;
  // CPU parallelism for the conversion; null runs on the calling thread.
  ParallelRunner* runner = nullptr;
  // Called before each tensor's conversion starts and after each of its chunks is
  // converted; may be empty.
  std::function<void(const QuantizeProgress&)> progress;
};

// What happens to one tensor.
struct TensorQuantizeDecision {
  std::string name;
  Shape shape;
  DType from = DType::kF32;
  DType to = DType::kF32;
  // True when the bytes are copied unchanged (same type, or a type not converted).
  bool copy = false;
  // Set when `to` is a fallback for a type whose blocks do not divide the rows.
  std::optional<DType> fallback_from;
  // Why this type: "1-D tensor: f32", "rule ffn_down=q6_k", "q4_k_m: blk.0.attn_v",
  // "base type q4_k", "i32 tensor: copied".
  std::string reason;
  std::int64_t input_bytes = 0;
  std::int64_t output_bytes = 0;
};

struct QuantizePlan {
  QuantizeTarget target;
  // Blocks found in the tensor names (the n of the presets' layer rules).
  std::int64_t block_count = 0;
  // The preset's rules for this model (after the caller's, which the options hold).
  std::vector<QuantizeRule> preset_rules;
  // One per input tensor, in file order.
  std::vector<TensorQuantizeDecision> tensors;
};

// Decides every tensor's type. kInvalidArgument for an unknown type (or a rule
// naming one) and for a quantized tensor that would be requantized without
// `allow_requantize` (naming the tensor, its type and the chosen one).
[[nodiscard]] Result<QuantizePlan> plan_quantization(const GgufFile& input,
                                                     const QuantizeOptions& options);

// The metadata of the output: the input's, in order, with the file-type keys set.
[[nodiscard]] GgufMetadata quantized_metadata(const GgufFile& input, const QuantizePlan& plan);

// Writes the planned output of `input` to `path` atomically (GgufWriter::write).
// Errors: the writer's; kInvalidArgument naming the tensor and row for a value
// that cannot be quantized (NaN, infinity, too large for the format's scale).
[[nodiscard]] Status write_quantized(const GgufFile& input, const QuantizePlan& plan,
                                     const std::filesystem::path& path,
                                     const QuantizeOptions& options);

struct QuantizeSummary {
  QuantizePlan plan;
  std::uint64_t input_file_bytes = 0;
  std::uint64_t output_file_bytes = 0;
  std::int64_t input_tensor_bytes = 0;
  std::int64_t output_tensor_bytes = 0;
};

// Opens `input`, plans and writes `output`. kInvalidArgument when `output` is the
// input file (the same path, or another name for the same file); the reader's
// errors for the input; otherwise as plan_quantization and write_quantized.
[[nodiscard]] Result<QuantizeSummary> quantize_gguf(const std::filesystem::path& input,
                                                    const std::filesystem::path& output,
                                                    const QuantizeOptions& options);

}  // namespace switchyard
