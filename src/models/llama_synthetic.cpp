// The synthetic llama model: seeded weights, standard names, mixed dtypes, written
// through the real GGUF writer.
#include <cmath>
#include <cstring>
#include <vector>

#include <fmt/format.h>

#include "switchyard/half.h"
#include "switchyard/llama.h"
#include "switchyard/quant.h"

namespace switchyard {
namespace {

// splitmix64: a small, well-mixed generator whose stream depends only on the seed,
// so the same spec gives the same bytes on every machine.
class Rng {
 public:
  explicit Rng(std::uint64_t seed) : state_(seed) {}
  std::uint64_t next() {
    std::uint64_t z = (state_ += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
  }
  // Uniform in [-1, 1).
  double uniform() { return static_cast<double>(next() >> 11) * 0x1p-52 - 1.0; }
  // Approximately normal (sum of four uniforms, variance 4/3), scaled to unit variance.
  double normal() { return (uniform() + uniform() + uniform() + uniform()) * 0.8660254037844386; }

 private:
  std::uint64_t state_;
};

// Each tensor draws from its own stream (seed mixed with its name), so changing
// one tensor's dtype or shape leaves every other tensor's values as they were.
std::uint64_t tensor_seed(std::uint64_t seed, std::string_view name) {
  std::uint64_t h = 1469598103934665603ULL;
  for (char c : name) h = (h ^ static_cast<unsigned char>(c)) * 1099511628211ULL;
  return seed ^ h;
}

Result<std::vector<std::byte>> encode(DType dtype, const std::vector<float>& values,
                                      std::int64_t row) {
  const std::int64_t rows = static_cast<std::int64_t>(values.size()) / row;
  SWITCHYARD_ASSIGN_OR_RETURN(std::int64_t row_size, row_bytes(dtype, row));
  std::vector<std::byte> out(static_cast<std::size_t>(row_size * rows));
  if (dtype == DType::kF32) {
    std::memcpy(out.data(), values.data(), out.size());
  } else if (dtype == DType::kF16 || dtype == DType::kBF16) {
    for (std::size_t i = 0; i < values.size(); ++i) {
      const std::uint16_t h = dtype == DType::kF16 ? f32_to_f16(values[i]) : f32_to_bf16(values[i]);
      std::memcpy(out.data() + 2 * i, &h, 2);
    }
  } else if (is_quantized(dtype) && can_quantize(dtype)) {
    SWITCHYARD_RETURN_IF_ERROR(quantize(dtype, values, out));
  } else {
    return invalid_argument_error(
        fmt::format("synthetic llama: cannot write weights as {}", name(dtype)));
  }
  return out;
}

struct Writer {
  GgufWriter& w;
  std::uint64_t seed;

  // A [rows, cols] matrix with entries of standard deviation `scale`.
  Status matrix(const std::string& name, DType dtype, std::int64_t rows, std::int64_t cols,
                double scale) {
    Rng rng(tensor_seed(seed, name));
    std::vector<float> v(static_cast<std::size_t>(rows * cols));
    for (float& x : v) x = static_cast<float>(rng.normal() * scale);
    Result<std::vector<std::byte>> bytes = encode(dtype, v, cols);
    if (!bytes.is_ok()) return bytes.status().with_context(name);
    return w.add_tensor(name, dtype, {rows, cols}, std::move(*bytes));
  }
  // A norm weight near one, as trained norms are.
  Status norm(const std::string& name, std::int64_t d) {
    Rng rng(tensor_seed(seed, name));
    std::vector<float> v(static_cast<std::size_t>(d));
    for (float& x : v) x = static_cast<float>(1.0 + 0.1 * rng.uniform());
    std::vector<std::byte> bytes(v.size() * sizeof(float));
    std::memcpy(bytes.data(), v.data(), bytes.size());
    return w.add_tensor(name, DType::kF32, {d}, std::move(bytes));
  }
};

}  // namespace

SyntheticLlamaSpec SyntheticLlamaSpec::uniform(DType dtype) {
  SyntheticLlamaSpec s;
  s.token_embd = s.attn_q = s.attn_k = s.attn_v = s.attn_output = dtype;
  s.ffn_gate = s.ffn_up = s.ffn_down = dtype;
  s.output = dtype;
  return s;
}

Result<GgufWriter> synthetic_llama(const SyntheticLlamaSpec& spec) {
  GgufWriter writer;
  GgufMetadata& md = writer.metadata();
  auto u32 = [](std::int64_t v) { return GgufValue::u32(static_cast<std::uint32_t>(v)); };
  md.set("general.architecture", GgufValue::string("llama"));
  md.set("general.name", GgufValue::string("switchyard-synthetic-llama"));
  md.set("general.alignment", GgufValue::u32(kGgufDefaultAlignment));
  md.set("llama.context_length", u32(spec.context_length));
  md.set("llama.embedding_length", u32(spec.embedding_length));
  md.set("llama.block_count", u32(spec.block_count));
  md.set("llama.feed_forward_length", u32(spec.feed_forward_length));
  md.set("llama.attention.head_count", u32(spec.head_count));
  md.set("llama.attention.head_count_kv", u32(spec.head_count_kv));
  md.set("llama.rope.freq_base", GgufValue::f32(spec.rope_freq_base));
  md.set("llama.attention.layer_norm_rms_epsilon", GgufValue::f32(spec.rms_eps));
  md.set("llama.vocab_size", u32(spec.vocab_size));
  // The same consistency checks a loader applies, before any weight is generated.
  SWITCHYARD_ASSIGN_OR_RETURN(LlamaConfig c, LlamaConfig::from_metadata(md));

  Writer w{writer, spec.seed};
  const std::int64_t d = c.embedding_length;
  const std::int64_t f = c.feed_forward_length;
  // Standard deviations 1/sqrt(fan_in) keep each projection's output near unit
  // scale; the embedding is unit scale, which the first norm takes as it comes.
  const double in_d = 1.0 / std::sqrt(static_cast<double>(d));
  const double in_f = 1.0 / std::sqrt(static_cast<double>(f));
  SWITCHYARD_RETURN_IF_ERROR(w.matrix("token_embd.weight", spec.token_embd, c.vocab_size, d, 1.0));
  for (std::int64_t i = 0; i < c.block_count; ++i) {
    SWITCHYARD_RETURN_IF_ERROR(w.norm(block_tensor_name(i, "attn_norm"), d));
    SWITCHYARD_RETURN_IF_ERROR(w.matrix(block_tensor_name(i, "attn_q"), spec.attn_q, d, d, in_d));
    SWITCHYARD_RETURN_IF_ERROR(
        w.matrix(block_tensor_name(i, "attn_k"), spec.attn_k, c.kv_dim(), d, in_d));
    SWITCHYARD_RETURN_IF_ERROR(
        w.matrix(block_tensor_name(i, "attn_v"), spec.attn_v, c.kv_dim(), d, in_d));
    SWITCHYARD_RETURN_IF_ERROR(
        w.matrix(block_tensor_name(i, "attn_output"), spec.attn_output, d, d, in_d));
    SWITCHYARD_RETURN_IF_ERROR(w.norm(block_tensor_name(i, "ffn_norm"), d));
    SWITCHYARD_RETURN_IF_ERROR(
        w.matrix(block_tensor_name(i, "ffn_gate"), spec.ffn_gate, f, d, in_d));
    SWITCHYARD_RETURN_IF_ERROR(w.matrix(block_tensor_name(i, "ffn_up"), spec.ffn_up, f, d, in_d));
    SWITCHYARD_RETURN_IF_ERROR(
        w.matrix(block_tensor_name(i, "ffn_down"), spec.ffn_down, d, f, in_f));
  }
  SWITCHYARD_RETURN_IF_ERROR(w.norm("output_norm.weight", d));
  if (spec.output) {
    SWITCHYARD_RETURN_IF_ERROR(w.matrix("output.weight", *spec.output, c.vocab_size, d, in_d));
  }
  return writer;
}

}  // namespace switchyard
