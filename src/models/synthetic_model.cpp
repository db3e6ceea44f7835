// Synthetic llama generator: deterministic weights, llama metadata, standard names.
#include "switchyard/synthetic_model.h"

#include <algorithm>
#include <array>
#include <atomic>
#include <cmath>
#include <limits>
#include <optional>
#include <thread>
#include <vector>

#include <fmt/format.h>

#include "switchyard/environment.h"
#include "switchyard/quant.h"
#include "switchyard/tokenizer.h"

namespace switchyard {
namespace {

// What the synthetic models' tokenizer learns its merges from: plain English
// about the library itself, so that common words become single tokens.
constexpr std::string_view kTokenizerSample =
    "The kernel binding table holds every kernel that an engine registers, keyed by the "
    "operation, the data type of each operand and the backend that runs it. Each entry has "
    "siblings: alternatives with their own capabilities, precision guarantees, cost functions "
    "and the place in the source where they were registered. When a model is planned, the "
    "sealed registry records every lookup that the planner makes. A lookup that finds no "
    "kernel on the selected backend is a violation, named at load time with the tensor and "
    "its type, and the strict mode refuses to run the model at all. The planner chooses a "
    "backend for each node, inserts the casts that the chosen kernels need, fuses what can "
    "be fused, and ranks the routes by their cost, so that the report can explain why one "
    "route won and the others lost. The executor then runs the plan on the CPU or on the "
    "GPU, one node after another, and a decode step that repeats the same shapes is recorded "
    "once and replayed. The conformance harness checks that every kernel keeps the precision "
    "it claims against a reference in double precision. A model file in the GGUF format "
    "carries the weights, the configuration and the tokenizer; the tokenizer turns the text "
    "into tokens, and the tokens that the model generates back into text. The numbers 1, 2, "
    "3, 10, 42, 100, 512 and 2048 appear here too, as do commas, periods, colons: and "
    "semicolons; because real text has them.\n"
    "In the morning the weights are loaded, the kernels are probed, and the first tokens of "
    "the prompt go through the model in one batch. Then the model writes one token at a time, "
    "each one chosen from the logits of the last, until it reaches the end of the text or the "
    "number of tokens that the user asked for.\n";

constexpr std::array<std::string_view, 9> kWeightRoles = {"token_embd", "attn_q",      "attn_k",
                                                          "attn_v",     "attn_output", "ffn_gate",
                                                          "ffn_up",     "ffn_down",    "output"};
constexpr std::array<std::string_view, 3> kNormRoles = {"attn_norm", "ffn_norm", "output_norm"};

// Llama-3.1-8B's 8.0e9 fit; the memory check below is the real bound.
constexpr double kMaxSyntheticParameters = 17179869184.0;  // 2^34

// splitmix64: tiny, fast, and the same sequence everywhere (std:: distributions are
// not specified bit for bit, so they cannot give cross-platform models).
class SplitMix64 {
 public:
  explicit SplitMix64(std::uint64_t seed) : state_(seed) {}
  std::uint64_t next() {
    std::uint64_t z = (state_ += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
  }

 private:
  std::uint64_t state_;
};

// FNV-1a: the per-tensor stream depends on the name, not on generation order, so
// changing one tensor's type or adding a tensor leaves the others' values alone.
std::uint64_t hash_name(std::string_view name) {
  std::uint64_t h = 0xcbf29ce484222325ull;
  for (char c : name) {
    h ^= static_cast<unsigned char>(c);
    h *= 0x100000001b3ull;
  }
  return h;
}

// `count` values uniform in (-bound, bound) around `center`. Each is an odd integer
// in (-2^24, 2^24) (exact in float) times bound * 2^-24 (exact: a power-of-two
// scaling), plus center: every operation is exactly specified IEEE arithmetic with
// no room for contraction or library differences.
std::vector<float> uniform_values(std::uint64_t seed, std::string_view name, std::int64_t count,
                                  float bound, float center) {
  SplitMix64 rng(seed ^ hash_name(name));
  const float step = bound * 0x1p-24f;
  std::vector<float> values(static_cast<std::size_t>(count));
  for (float& v : values) {
    const auto k = static_cast<std::int32_t>(rng.next() >> 40);  // 24 random bits
    const auto centered = static_cast<float>(2 * k + 1 - (1 << 24));
    const float scaled = centered * step;
    v = scaled + center;
  }
  return values;
}

// dtype.def's weight formats (dense float types, and the block formats except the
// activation-only q8_1 and q8_k, which GGUF files never use for weights), as far
// as quant.h quantizes them.
bool storable(DType t) { return is_weight_format(t) && (!is_quantized(t) || can_quantize(t)); }

constexpr std::string_view kStorableText =
    "f32, f16, bf16 and the block-quantized weight formats (not q8_1 or q8_k, which are for "
    "activations)";

Result<std::vector<std::byte>> encode(DType t, const std::vector<float>& values) {
  if (!storable(t)) {
    return invalid_argument_error(
        fmt::format("the synthetic generator stores {}, not {}", kStorableText, name(t)));
  }
  SWITCHYARD_ASSIGN_OR_RETURN(std::int64_t bytes,
                              row_bytes(t, static_cast<std::int64_t>(values.size())));
  std::vector<std::byte> out(static_cast<std::size_t>(bytes));
  SWITCHYARD_RETURN_IF_ERROR(row_from_f32(t, values, out));
  return out;
}

// Bytes per value of a storage type: its element size, or a block's bytes per
// value for a block format; 4 (f32) for a type that cannot store weights, whose
// rule generate_synthetic_llama refuses anyway.
double stored_bytes_per_value(DType t) {
  const std::int64_t values = is_quantized(t) ? block_elems(t) : 1;
  Result<std::int64_t> bytes = row_bytes(t, values);
  return bytes.is_ok() ? static_cast<double>(*bytes) / static_cast<double>(values) : 4.0;
}

Status check_size(std::string_view what, std::int64_t value) {
  if (value < 1 || value > std::numeric_limits<std::uint32_t>::max()) {
    return invalid_argument_error(
        fmt::format("synthetic llama: {} is {}; it must be 1 to 2^32-1", what, value));
  }
  return Status::ok();
}

}  // namespace

std::span<const std::string_view> synthetic_llama_weight_roles() { return kWeightRoles; }

const SyntheticTensor* SyntheticModel::find(std::string_view name) const {
  for (const SyntheticTensor& t : tensors) {
    if (t.name == name) return &t;
  }
  return nullptr;
}

Result<SyntheticModel> generate_synthetic_llama(const SyntheticLlamaConfig& c) {
  SWITCHYARD_RETURN_IF_ERROR(check_size("vocab_size", c.vocab_size));
  SWITCHYARD_RETURN_IF_ERROR(check_size("embedding_length", c.embedding_length));
  SWITCHYARD_RETURN_IF_ERROR(check_size("block_count", c.block_count));
  SWITCHYARD_RETURN_IF_ERROR(check_size("head_count", c.head_count));
  SWITCHYARD_RETURN_IF_ERROR(check_size("head_count_kv", c.head_count_kv));
  SWITCHYARD_RETURN_IF_ERROR(check_size("feed_forward_length", c.feed_forward_length));
  SWITCHYARD_RETURN_IF_ERROR(check_size("context_length", c.context_length));
  if (c.embedding_length % c.head_count != 0) {
    return invalid_argument_error(
        fmt::format("synthetic llama: embedding_length {} is not a multiple of head_count {}",
                    c.embedding_length, c.head_count));
  }
  const std::int64_t head_dim = c.embedding_length / c.head_count;
  if (head_dim % 2 != 0) {
    return invalid_argument_error(fmt::format(
        "synthetic llama: head dimension {} is odd; rotary embeddings rotate pairs", head_dim));
  }
  if (c.head_count % c.head_count_kv != 0) {
    return invalid_argument_error(
        fmt::format("synthetic llama: head_count {} is not a multiple of head_count_kv {}",
                    c.head_count, c.head_count_kv));
  }
  if (!(c.rope_freq_base > 0.0f) || !std::isfinite(c.rope_freq_base) || !(c.rms_epsilon > 0.0f) ||
      !std::isfinite(c.rms_epsilon)) {
    return invalid_argument_error(
        "synthetic llama: rope_freq_base and rms_epsilon must be positive and finite");
  }
  if (!storable(c.weight_type)) {
    return invalid_argument_error(
        fmt::format("synthetic llama: weight_type {}: the generator stores {}", name(c.weight_type),
                    kStorableText));
  }
  for (const TensorTypeRule& rule : c.type_rules) {
    bool known = false;
    for (std::string_view role : kWeightRoles) known = known || role == rule.role;
    for (std::string_view role : kNormRoles) {
      if (role == rule.role && rule.dtype != DType::kF32) {
        return invalid_argument_error(fmt::format(
            "synthetic llama: type rule for '{}': norm weights are always f32", rule.role));
      }
      known = known || role == rule.role;
    }
    if (!known) {
      return invalid_argument_error(fmt::format(
          "synthetic llama: type rule names '{}', which is not a llama weight role ({})", rule.role,
          fmt::join(kWeightRoles, ", ")));
    }
    if (rule.role == "output" && c.tied_embeddings) {
      return invalid_argument_error(
          "synthetic llama: type rule names 'output', but tied embeddings have no output tensor");
    }
    if (!storable(rule.dtype)) {
      return invalid_argument_error(
          fmt::format("synthetic llama: type rule for '{}': the generator stores {}, not {}",
                      rule.role, kStorableText, name(rule.dtype)));
    }
  }
  auto type_for = [&](std::string_view role) {
    for (const TensorTypeRule& rule : c.type_rules) {
      if (rule.role == role) return rule.dtype;
    }
    return c.weight_type;
  };

  SyntheticModel model;
  GgufMetadata& m = model.metadata;
  auto u32 = [](std::int64_t v) { return GgufValue::u32(static_cast<std::uint32_t>(v)); };
  m.set("general.architecture", GgufValue::string("llama"));
  m.set("general.name", GgufValue::string("switchyard synthetic llama"));
  m.set("llama.context_length", u32(c.context_length));
  m.set("llama.embedding_length", u32(c.embedding_length));
  m.set("llama.block_count", u32(c.block_count));
  m.set("llama.feed_forward_length", u32(c.feed_forward_length));
  m.set("llama.attention.head_count", u32(c.head_count));
  m.set("llama.attention.head_count_kv", u32(c.head_count_kv));
  m.set("llama.rope.dimension_count", u32(head_dim));
  m.set("llama.rope.freq_base", GgufValue::f32(c.rope_freq_base));
  m.set("llama.attention.layer_norm_rms_epsilon", GgufValue::f32(c.rms_epsilon));
  m.set("llama.vocab_size", u32(c.vocab_size));
  m.set("switchyard.synthetic.seed", GgufValue::u64(c.seed));
  if (c.tokenizer) {
    if (Status st = add_trained_tokenizer(kTokenizerSample, c.vocab_size, m); !st.is_ok()) {
      return st.with_context("synthetic llama");
    }
  }

  // Every tensor is listed first, then generated on all cores: each tensor's
  // values depend only on the seed and its name (uniform_values), so the model
  // is the same whatever the order or the number of threads.
  struct Pending {
    std::string name;
    std::string role;
    Shape shape;
    DType dtype;
    bool norm;
  };
  std::vector<Pending> pending;
  auto add = [&](std::string name, std::string_view role, Shape shape, bool norm) -> Status {
    const DType dtype = norm ? DType::kF32 : type_for(role);
    Result<std::int64_t> row = row_bytes(dtype, shape.inner());
    if (!row.is_ok()) {
      return invalid_argument_error(
          fmt::format("synthetic llama: tensor '{}' of shape {} cannot be stored as {}: {}", name,
                      shape.to_string(), switchyard::name(dtype), row.status().message()));
    }
    pending.push_back(Pending{std::move(name), std::string(role), shape, dtype, norm});
    return Status::ok();
  };
  auto make = [&](const Pending& p) -> Result<SyntheticTensor> {
    // Norm weights scale normalized activations, so they sit around 1; matrix
    // weights have standard deviation 1/sqrt(fan_in): uniform bound sqrt(3/fan_in).
    const float bound =
        p.norm ? 0.125f : static_cast<float>(std::sqrt(3.0 / static_cast<double>(p.shape.inner())));
    const std::vector<float> values =
        uniform_values(c.seed, p.name, p.shape.numel(), bound, p.norm ? 1.0f : 0.0f);
    SWITCHYARD_ASSIGN_OR_RETURN(std::vector<std::byte> data, encode(p.dtype, values));
    return SyntheticTensor{p.name, p.role, p.shape, p.dtype, std::move(data)};
  };

  const std::int64_t n_embd = c.embedding_length;
  const std::int64_t n_kv = c.head_count_kv * head_dim;
  const std::int64_t n_ff = c.feed_forward_length;
  // Synthetic models exist for tests and demos; a config that would need tens of
  // gigabytes is a mistake, refused before anything is allocated. Counted in double:
  // sizes up to 2^32 cannot overflow it.
  const double parameters =
      static_cast<double>(c.vocab_size) * static_cast<double>(n_embd) *
          (c.tied_embeddings ? 1.0 : 2.0) +
      static_cast<double>(c.block_count) *
          (2.0 * static_cast<double>(n_embd) * static_cast<double>(n_embd + n_kv) +
           3.0 * static_cast<double>(n_embd) * static_cast<double>(n_ff));
  if (parameters > kMaxSyntheticParameters) {
    return resource_exhausted_error(fmt::format(
        "synthetic llama: {:.3g} parameters is more than the generator's limit of {:.3g}",
        parameters, kMaxSyntheticParameters));
  }
  // The model is built in memory, then usually written to a file and mapped: it
  // must fit in half the machine's memory, at its widest storage type.
  double widest = stored_bytes_per_value(c.weight_type);
  for (const TensorTypeRule& rule : c.type_rules) {
    widest = std::max(widest, stored_bytes_per_value(rule.dtype));
  }
  const double memory = static_cast<double>(physical_memory_bytes());
  if (parameters * widest > memory / 2) {
    return resource_exhausted_error(fmt::format(
        "synthetic llama: {:.3g} parameters at {} bytes each need {:.1f} GiB, more than half "
        "of this machine's {:.1f} GiB of memory",
        parameters, widest, parameters * widest / 1073741824.0, memory / 1073741824.0));
  }

  SWITCHYARD_RETURN_IF_ERROR(
      add("token_embd.weight", "token_embd", Shape{c.vocab_size, n_embd}, false));
  for (std::int64_t b = 0; b < c.block_count; ++b) {
    auto blk = [b](std::string_view role) { return fmt::format("blk.{}.{}.weight", b, role); };
    SWITCHYARD_RETURN_IF_ERROR(add(blk("attn_norm"), "attn_norm", Shape{n_embd}, true));
    SWITCHYARD_RETURN_IF_ERROR(add(blk("attn_q"), "attn_q", Shape{n_embd, n_embd}, false));
    SWITCHYARD_RETURN_IF_ERROR(add(blk("attn_k"), "attn_k", Shape{n_kv, n_embd}, false));
    SWITCHYARD_RETURN_IF_ERROR(add(blk("attn_v"), "attn_v", Shape{n_kv, n_embd}, false));
    SWITCHYARD_RETURN_IF_ERROR(
        add(blk("attn_output"), "attn_output", Shape{n_embd, n_embd}, false));
    SWITCHYARD_RETURN_IF_ERROR(add(blk("ffn_norm"), "ffn_norm", Shape{n_embd}, true));
    SWITCHYARD_RETURN_IF_ERROR(add(blk("ffn_gate"), "ffn_gate", Shape{n_ff, n_embd}, false));
    SWITCHYARD_RETURN_IF_ERROR(add(blk("ffn_up"), "ffn_up", Shape{n_ff, n_embd}, false));
    SWITCHYARD_RETURN_IF_ERROR(add(blk("ffn_down"), "ffn_down", Shape{n_embd, n_ff}, false));
  }
  SWITCHYARD_RETURN_IF_ERROR(add("output_norm.weight", "output_norm", Shape{n_embd}, true));
  if (!c.tied_embeddings) {
    SWITCHYARD_RETURN_IF_ERROR(add("output.weight", "output", Shape{c.vocab_size, n_embd}, false));
  }
  std::vector<std::optional<Result<SyntheticTensor>>> made(pending.size());
  std::atomic<std::size_t> next{0};
  auto work = [&] {
    for (std::size_t i = next++; i < pending.size(); i = next++) made[i].emplace(make(pending[i]));
  };
  {
    const std::size_t threads = std::max<std::size_t>(
        1, std::min<std::size_t>(std::thread::hardware_concurrency(), pending.size()));
    std::vector<std::jthread> helpers;
    for (std::size_t t = 1; t < threads; ++t) helpers.emplace_back(work);
    work();
  }
  for (std::optional<Result<SyntheticTensor>>& t : made) {
    if (!t->is_ok()) return t->status();
    model.tensors.push_back(std::move(**t));
  }
  return model;
}

Result<GgufWriter> synthetic_model_writer(const SyntheticModel& model) {
  GgufWriter writer;
  for (const GgufMetadata::Entry& e : model.metadata.entries()) {
    SWITCHYARD_RETURN_IF_ERROR(writer.metadata().add(e.key, e.value));
  }
  for (const SyntheticTensor& t : model.tensors) {
    SWITCHYARD_RETURN_IF_ERROR(writer.add_tensor_ref(t.name, t.dtype, t.shape, t.data));
  }
  return writer;
}

Status write_synthetic_model(const SyntheticModel& model, const std::filesystem::path& path) {
  SWITCHYARD_ASSIGN_OR_RETURN(GgufWriter writer, synthetic_model_writer(model));
  return writer.write(path);
}

}  // namespace switchyard
