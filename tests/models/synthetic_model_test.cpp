#include "switchyard/synthetic_model.h"
#include "switchyard/llama.h"

#include <unistd.h>

#include <bit>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <functional>
#include <set>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "switchyard/gguf.h"
#include "switchyard/half.h"
#include "switchyard/quant.h"
#include "switchyard/tokenizer.h"

namespace switchyard {
namespace {

std::vector<float> as_f32(const SyntheticTensor& t) {
  std::vector<float> v(static_cast<std::size_t>(t.shape.numel()));
  for (std::size_t i = 0; i < v.size(); ++i) {
    if (t.dtype == DType::kF32) {
      std::memcpy(&v[i], t.data.data() + 4 * i, 4);
    } else {
      std::uint16_t h;
      std::memcpy(&h, t.data.data() + 2 * i, 2);
      v[i] = t.dtype == DType::kF16 ? f16_to_f32(h) : bf16_to_f32(h);
    }
  }
  return v;
}

TEST(SyntheticModelTest, HasLlamaMetadataAndStandardTensors) {
  SyntheticLlamaConfig config;
  config.vocab_size = 100;
  config.embedding_length = 32;
  config.block_count = 3;
  config.head_count = 4;
  config.head_count_kv = 2;
  config.feed_forward_length = 96;
  config.context_length = 512;
  config.rope_freq_base = 500000.0f;
  config.rms_epsilon = 1e-6f;
  Result<SyntheticModel> model = generate_synthetic_llama(config);
  ASSERT_TRUE(model.is_ok()) << model.status().to_string();

  const GgufMetadata& m = model->metadata;
  EXPECT_EQ(*m.get_string("general.architecture"), "llama");
  EXPECT_EQ(*m.get_u32("llama.context_length"), 512u);
  EXPECT_EQ(*m.get_u32("llama.embedding_length"), 32u);
  EXPECT_EQ(*m.get_u32("llama.block_count"), 3u);
  EXPECT_EQ(*m.get_u32("llama.feed_forward_length"), 96u);
  EXPECT_EQ(*m.get_u32("llama.attention.head_count"), 4u);
  EXPECT_EQ(*m.get_u32("llama.attention.head_count_kv"), 2u);
  EXPECT_EQ(*m.get_u32("llama.rope.dimension_count"), 8u);
  EXPECT_EQ(*m.get_f32("llama.rope.freq_base"), 500000.0f);
  EXPECT_EQ(*m.get_f32("llama.attention.layer_norm_rms_epsilon"), 1e-6f);
  EXPECT_EQ(*m.get_u32("llama.vocab_size"), 100u);

  // token_embd, 9 per block, output_norm, output.
  ASSERT_EQ(model->tensors.size(), 2u + 9u * 3u + 1u);
  EXPECT_EQ(model->tensors.front().name, "token_embd.weight");
  EXPECT_EQ(model->tensors.back().name, "output.weight");
  struct Expected {
    const char* name;
    Shape shape;
  };
  const Expected expected[] = {
      {"token_embd.weight", Shape{100, 32}},  {"blk.0.attn_norm.weight", Shape{32}},
      {"blk.0.attn_q.weight", Shape{32, 32}}, {"blk.0.attn_k.weight", Shape{16, 32}},
      {"blk.0.attn_v.weight", Shape{16, 32}}, {"blk.0.attn_output.weight", Shape{32, 32}},
      {"blk.2.ffn_norm.weight", Shape{32}},   {"blk.2.ffn_gate.weight", Shape{96, 32}},
      {"blk.2.ffn_up.weight", Shape{96, 32}}, {"blk.2.ffn_down.weight", Shape{32, 96}},
      {"output_norm.weight", Shape{32}},      {"output.weight", Shape{100, 32}},
  };
  for (const Expected& e : expected) {
    const SyntheticTensor* t = model->find(e.name);
    ASSERT_NE(t, nullptr) << e.name;
    EXPECT_EQ(t->shape, e.shape) << e.name;
    EXPECT_EQ(t->dtype, DType::kF32) << e.name;
    EXPECT_EQ(t->data.size(), static_cast<std::size_t>(e.shape.numel() * 4)) << e.name;
  }
  EXPECT_EQ(model->find("blk.3.attn_q.weight"), nullptr);
}

TEST(SyntheticModelTest, TiedEmbeddingsHaveNoOutput) {
  SyntheticLlamaConfig config;
  config.tied_embeddings = true;
  Result<SyntheticModel> model = generate_synthetic_llama(config);
  ASSERT_TRUE(model.is_ok());
  EXPECT_EQ(model->find("output.weight"), nullptr);
  EXPECT_NE(model->find("token_embd.weight"), nullptr);
  EXPECT_EQ(model->tensors.back().name, "output_norm.weight");
}

TEST(SyntheticModelTest, DeterministicPerSeedAndPerName) {
  SyntheticLlamaConfig config;
  Result<SyntheticModel> a = generate_synthetic_llama(config);
  Result<SyntheticModel> b = generate_synthetic_llama(config);
  ASSERT_TRUE(a.is_ok() && b.is_ok());
  for (std::size_t i = 0; i < a->tensors.size(); ++i) {
    EXPECT_EQ(a->tensors[i].data, b->tensors[i].data) << a->tensors[i].name;
  }
  config.seed = 2;
  Result<SyntheticModel> c = generate_synthetic_llama(config);
  EXPECT_NE(a->tensors[0].data, c->tensors[0].data);
  // Tensors draw from streams keyed by name: q and k of one block differ.
  EXPECT_NE(as_f32(*a->find("blk.0.attn_q.weight"))[0], as_f32(*a->find("blk.0.attn_k.weight"))[0]);
}

// Values computed independently (Python, from the documented algorithm: splitmix64
// seeded with seed ^ fnv1a64(name), top 24 bits k, (2k + 1 - 2^24) * bound * 2^-24).
// A change here changes every synthetic model: only on purpose.
TEST(SyntheticModelTest, ValuesMatchTheDocumentedGenerator) {
  SyntheticLlamaConfig config;  // seed 1, embedding_length 64
  Result<SyntheticModel> model = generate_synthetic_llama(config);
  ASSERT_TRUE(model.is_ok());
  const std::vector<float> embd = as_f32(*model->find("token_embd.weight"));
  const std::vector<float> norm = as_f32(*model->find("blk.1.ffn_norm.weight"));
  const std::uint32_t expected_embd[] = {0x3e26c501u, 0x3d875dd3u, 0xbe07d974u, 0x3c964f8au};
  const std::uint32_t expected_norm[] = {0x3f6b507du, 0x3f835907u, 0x3f8f82e7u, 0x3f850f3eu};
  for (int i = 0; i < 4; ++i) {
    EXPECT_EQ(std::bit_cast<std::uint32_t>(embd[i]), expected_embd[i]) << i;
    EXPECT_EQ(std::bit_cast<std::uint32_t>(norm[i]), expected_norm[i]) << i;
  }
}

TEST(SyntheticModelTest, WeightsAreScaledByFanIn) {
  SyntheticLlamaConfig config;
  config.embedding_length = 128;
  config.feed_forward_length = 512;
  Result<SyntheticModel> model = generate_synthetic_llama(config);
  ASSERT_TRUE(model.is_ok());
  for (const SyntheticTensor& t : model->tensors) {
    SCOPED_TRACE(t.name);
    const std::vector<float> v = as_f32(t);
    const bool norm = t.role.find("norm") != std::string::npos;
    double sum = 0, sum2 = 0;
    float lo = v[0], hi = v[0];
    for (float x : v) {
      sum += x;
      sum2 += static_cast<double>(x) * x;
      lo = std::min(lo, x);
      hi = std::max(hi, x);
    }
    const double n = static_cast<double>(v.size());
    if (norm) {
      EXPECT_GE(lo, 0.875f);
      EXPECT_LE(hi, 1.125f);
      EXPECT_NEAR(sum / n, 1.0, 0.05);
    } else {
      const double bound = std::sqrt(3.0 / static_cast<double>(t.shape.inner()));
      EXPECT_GE(lo, -bound);
      EXPECT_LE(hi, bound);
      const double stddev = std::sqrt(sum2 / n - (sum / n) * (sum / n));
      EXPECT_NEAR(stddev * std::sqrt(static_cast<double>(t.shape.inner())), 1.0, 0.1);
    }
  }
}

// With std 1/sqrt(fan_in), a matmul keeps an input of RMS 1 at RMS about 1 through
// every projection, which is what keeps the forward pass bounded.
TEST(SyntheticModelTest, ProjectionsPreserveActivationScale) {
  SyntheticLlamaConfig config;
  config.embedding_length = 128;
  config.feed_forward_length = 384;
  Result<SyntheticModel> model = generate_synthetic_llama(config);
  ASSERT_TRUE(model.is_ok());
  for (const char* name :
       {"blk.0.attn_q.weight", "blk.0.ffn_up.weight", "blk.1.ffn_down.weight", "output.weight"}) {
    SCOPED_TRACE(name);
    const SyntheticTensor& t = *model->find(name);
    const std::vector<float> w = as_f32(t);
    const std::int64_t rows = t.shape[0], cols = t.shape[1];
    // Input of RMS exactly 1 with alternating signs.
    double out_sq = 0;
    for (std::int64_t r = 0; r < rows; ++r) {
      double acc = 0;
      for (std::int64_t c = 0; c < cols; ++c) acc += w[r * cols + c] * ((c % 2) ? 1.0 : -1.0);
      out_sq += acc * acc;
    }
    const double rms = std::sqrt(out_sq / static_cast<double>(rows));
    EXPECT_GT(rms, 0.7);
    EXPECT_LT(rms, 1.4);
  }
}

TEST(SyntheticModelTest, TypeRulesChooseStorageAndKeepNormsF32) {
  SyntheticLlamaConfig config;
  config.weight_type = DType::kF16;
  config.type_rules = {{"ffn_down", DType::kBF16}, {"output", DType::kF32}};
  Result<SyntheticModel> mixed = generate_synthetic_llama(config);
  ASSERT_TRUE(mixed.is_ok()) << mixed.status().to_string();
  Result<SyntheticModel> plain = generate_synthetic_llama(SyntheticLlamaConfig{});
  ASSERT_TRUE(plain.is_ok());
  std::set<std::string> seen_roles;
  for (const SyntheticTensor& t : mixed->tensors) {
    SCOPED_TRACE(t.name);
    seen_roles.insert(t.role);
    DType expected = DType::kF16;
    if (t.role.find("norm") != std::string::npos || t.role == "output") expected = DType::kF32;
    if (t.role == "ffn_down") expected = DType::kBF16;
    EXPECT_EQ(t.dtype, expected);
    // Same values as the f32 model, rounded to the storage type.
    const std::vector<float> reference = as_f32(*plain->find(t.name));
    const std::vector<float> stored = as_f32(t);
    for (std::size_t i = 0; i < stored.size(); i += 97) {
      const float want = t.dtype == DType::kF16    ? f16_to_f32(f32_to_f16(reference[i]))
                         : t.dtype == DType::kBF16 ? bf16_to_f32(f32_to_bf16(reference[i]))
                                                   : reference[i];
      ASSERT_EQ(stored[i], want) << i;
    }
  }
  EXPECT_EQ(seen_roles.size(), 12u);
}

TEST(SyntheticModelTest, RefusesBadConfigs) {
  struct Case {
    const char* label;
    std::function<void(SyntheticLlamaConfig&)> change;
    const char* message;
  };
  const Case cases[] = {
      {"zero vocab", [](SyntheticLlamaConfig& c) { c.vocab_size = 0; }, "vocab_size"},
      {"negative blocks", [](SyntheticLlamaConfig& c) { c.block_count = -1; }, "block_count"},
      {"huge context", [](SyntheticLlamaConfig& c) { c.context_length = 1ll << 33; },
       "context_length"},
      {"heads do not divide", [](SyntheticLlamaConfig& c) { c.head_count = 5; },
       "not a multiple of head_count"},
      {"odd head dim",
       [](SyntheticLlamaConfig& c) {
         c.embedding_length = 12;
         c.head_count = 4;
       },
       "odd"},
      {"kv heads do not divide", [](SyntheticLlamaConfig& c) { c.head_count_kv = 3; },
       "head_count_kv"},
      {"bad eps", [](SyntheticLlamaConfig& c) { c.rms_epsilon = 0; }, "rms_epsilon"},
      {"unknown role",
       [](SyntheticLlamaConfig& c) {
         c.type_rules = {{"attn_z", DType::kF16}};
       },
       "attn_z"},
      {"f16 norm",
       [](SyntheticLlamaConfig& c) {
         c.type_rules = {{"ffn_norm", DType::kF16}};
       },
       "always f32"},
      {"tied output",
       [](SyntheticLlamaConfig& c) {
         c.tied_embeddings = true;
         c.type_rules = {{"output", DType::kF16}};
       },
       "tied"},
      {"unstorable type", [](SyntheticLlamaConfig& c) { c.weight_type = DType::kI32; }, "i32"},
      {"unstorable rule type",
       [](SyntheticLlamaConfig& c) {
         c.type_rules = {{"attn_q", DType::kF64}};
       },
       "f64"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.label);
    SyntheticLlamaConfig config;
    c.change(config);
    Result<SyntheticModel> model = generate_synthetic_llama(config);
    ASSERT_FALSE(model.is_ok());
    EXPECT_EQ(model.status().code(), StatusCode::kInvalidArgument);
    EXPECT_NE(model.status().message().find(c.message), std::string_view::npos)
        << model.status().to_string();
  }
}

// The presets of `run --synthetic`: the real models' shapes, the embedded default
// under "tiny", a clear error for any other name. A shape that would not fit in
// memory is refused before anything is allocated.
TEST(SyntheticModelTest, PresetsHaveTheRealShapes) {
  ASSERT_EQ(synthetic_llama_presets().size(), 3u);
  const SyntheticLlamaConfig tiny = synthetic_llama_preset("tiny").value();
  EXPECT_EQ(tiny.embedding_length, default_synthetic_llama_config().embedding_length);
  const SyntheticLlamaConfig big = synthetic_llama_preset("llama3-8b").value();
  EXPECT_EQ(big.embedding_length, 4096);
  EXPECT_EQ(big.block_count, 32);
  EXPECT_EQ(big.head_count, 32);
  EXPECT_EQ(big.head_count_kv, 8);
  EXPECT_EQ(big.feed_forward_length, 14336);
  EXPECT_EQ(big.vocab_size, 128256);
  EXPECT_FALSE(big.tied_embeddings);
  const SyntheticLlamaConfig small = synthetic_llama_preset("llama3-1b").value();
  EXPECT_EQ(small.embedding_length, 2048);
  EXPECT_EQ(small.block_count, 16);
  EXPECT_EQ(small.feed_forward_length, 8192);
  EXPECT_TRUE(small.tied_embeddings);

  Result<SyntheticLlamaConfig> unknown = synthetic_llama_preset("llama3-70b\n");
  ASSERT_FALSE(unknown.is_ok());
  EXPECT_EQ(unknown.status().code(), StatusCode::kInvalidArgument);
  const std::string message(unknown.status().message());
  EXPECT_NE(message.find("llama3-8b"), std::string::npos) << message;
  EXPECT_EQ(message.find('\n'), std::string::npos) << "the name is printed escaped";

  // 2^38 parameters: beyond the generator's limit on any machine.
  SyntheticLlamaConfig huge = big;
  huge.embedding_length = 1 << 17;
  huge.feed_forward_length = 1 << 17;
  Result<SyntheticModel> refused = generate_synthetic_llama(huge);
  ASSERT_FALSE(refused.is_ok());
  EXPECT_EQ(refused.status().code(), StatusCode::kResourceExhausted);
}

// Real files mix block formats: q4_k for most weights, q6_k for some, q8_0 or f16
// for others, f32 norms. Each quantized weight holds exactly quantize() of the f32
// model's values, so the format layer adds nothing of its own.
TEST(SyntheticModelTest, QuantizedWeightsAreTheQuantizerOutputOfTheF32Values) {
  SyntheticLlamaConfig config;
  config.embedding_length = 256;
  config.head_count = 4;
  config.head_count_kv = 2;
  config.feed_forward_length = 512;
  config.vocab_size = 64;
  Result<SyntheticModel> plain = generate_synthetic_llama(config);
  ASSERT_TRUE(plain.is_ok());
  config.weight_type = DType::kQ4_K;
  config.type_rules = {{"ffn_down", DType::kQ6_K},
                       {"attn_v", DType::kQ5_0},
                       {"token_embd", DType::kQ8_0},
                       {"output", DType::kF16}};
  Result<SyntheticModel> mixed = generate_synthetic_llama(config);
  ASSERT_TRUE(mixed.is_ok()) << mixed.status().to_string();
  int quantized = 0;
  for (const SyntheticTensor& t : mixed->tensors) {
    SCOPED_TRACE(t.name);
    DType expected = DType::kQ4_K;
    if (t.role.find("norm") != std::string::npos) expected = DType::kF32;
    if (t.role == "ffn_down") expected = DType::kQ6_K;
    if (t.role == "attn_v") expected = DType::kQ5_0;
    if (t.role == "token_embd") expected = DType::kQ8_0;
    if (t.role == "output") expected = DType::kF16;
    ASSERT_EQ(t.dtype, expected);
    EXPECT_EQ(static_cast<std::int64_t>(t.data.size()),
              *row_bytes(t.dtype, t.shape.inner()) * t.shape.outer());
    if (!is_quantized(t.dtype)) continue;
    ++quantized;
    const std::vector<float> reference = as_f32(*plain->find(t.name));
    std::vector<std::byte> want(t.data.size());
    ASSERT_TRUE(quantize(t.dtype, reference, want).is_ok());
    EXPECT_EQ(t.data, want);
    // And it decodes close to the f32 values (weights are ~1/16 here).
    std::vector<float> back(reference.size());
    ASSERT_TRUE(dequantize(t.dtype, t.data, back).is_ok());
    double err = 0, norm = 0;
    for (std::size_t i = 0; i < back.size(); ++i) {
      err += (back[i] - reference[i]) * (back[i] - reference[i]);
      norm += reference[i] * reference[i];
    }
    EXPECT_LT(err / norm, 0.01);
  }
  EXPECT_EQ(quantized, 1 + 2 * 7);  // token_embd and seven matrices per block
}

TEST(SyntheticModelTest, QuantizedModelRoundTripsThroughTheFile) {
  SyntheticLlamaConfig config;
  config.weight_type = DType::kQ4_0;
  config.type_rules = {{"ffn_down", DType::kQ8_0}};
  config.tied_embeddings = true;
  Result<SyntheticModel> model = generate_synthetic_llama(config);
  ASSERT_TRUE(model.is_ok()) << model.status().to_string();
  Result<GgufWriter> writer = synthetic_model_writer(*model);
  ASSERT_TRUE(writer.is_ok());
  Result<std::vector<std::byte>> bytes = writer->serialize();
  ASSERT_TRUE(bytes.is_ok());
  Result<GgufFile> file = GgufFile::parse(*bytes);
  ASSERT_TRUE(file.is_ok()) << file.status().to_string();
  for (const SyntheticTensor& t : model->tensors) {
    SCOPED_TRACE(t.name);
    Result<TensorView> view = file->tensor(t.name);
    ASSERT_TRUE(view.is_ok());
    EXPECT_EQ(view->dtype(), t.dtype);
    EXPECT_EQ(view->shape(), t.shape);
    EXPECT_EQ(std::memcmp(view->first(), t.data.data(), t.data.size()), 0);
  }
}

// The presets carry a trained byte-level tokenizer: text in and out works on them,
// and its end of sequence token ends generation.
TEST(SyntheticModelTest, PresetsCarryATrainedTokenizer) {
  Result<SyntheticLlamaConfig> config = synthetic_llama_preset("tiny");
  ASSERT_TRUE(config.is_ok());
  config->block_count = 1;
  Result<SyntheticModel> m = generate_synthetic_llama(*config);
  ASSERT_TRUE(m.is_ok()) << m.status().to_string();
  Result<Tokenizer> t = Tokenizer::from_metadata(m->metadata);
  ASSERT_TRUE(t.is_ok()) << t.status().to_string();
  EXPECT_EQ(t->vocab_size(), config->vocab_size);
  EXPECT_EQ(t->describe(), "gpt2 (llama-bpe)");
  const std::string text = "The kernel binding table holds every kernel, 42 times.\n";
  const std::vector<std::int32_t> ids = t->encode(text);
  EXPECT_EQ(ids.front(), t->bos());
  // Merges learned from the sample make common words single tokens.
  EXPECT_LT(ids.size(), text.size() / 2);
  Result<std::string> back = t->decode(ids);
  ASSERT_TRUE(back.is_ok());
  EXPECT_EQ(*back, text);
  EXPECT_EQ(t->token(t->eos()), "<|end_of_text|>");

  GgufMetadata md;
  EXPECT_EQ(add_trained_tokenizer("abc", 257, md).code(), StatusCode::kInvalidArgument);
  // A text with no pair twice: bytes, BOS, EOS, then reserved tokens.
  ASSERT_TRUE(add_trained_tokenizer("abc", 300, md).is_ok());
  Result<Tokenizer> small = Tokenizer::from_metadata(md);
  ASSERT_TRUE(small.is_ok()) << small.status().to_string();
  EXPECT_EQ(small->vocab_size(), 300);
  EXPECT_EQ(small->bos(), 256);
  EXPECT_EQ(small->token_type(299), TokenType::kControl);
  config->tokenizer = true;
  config->vocab_size = 100;
  EXPECT_EQ(generate_synthetic_llama(*config).status().code(), StatusCode::kInvalidArgument);
}

TEST(SyntheticModelTest, RefusesModelsTooLargeToBeSynthetic) {
  SyntheticLlamaConfig config;
  config.vocab_size = 1ll << 20;
  config.embedding_length = 1ll << 12;
  config.head_count = 32;
  config.head_count_kv = 8;
  Result<SyntheticModel> model = generate_synthetic_llama(config);
  ASSERT_FALSE(model.is_ok());
  EXPECT_EQ(model.status().code(), StatusCode::kResourceExhausted);
}

TEST(SyntheticModelTest, WritesThroughTheWriterAndReadsBack) {
  SyntheticLlamaConfig config;
  config.weight_type = DType::kBF16;
  config.type_rules = {{"attn_v", DType::kF16}};
  Result<SyntheticModel> model = generate_synthetic_llama(config);
  ASSERT_TRUE(model.is_ok());
  const std::filesystem::path path = std::filesystem::temp_directory_path() /
                                     ("switchyard_synth_" + std::to_string(::getpid()) + ".gguf");
  ASSERT_TRUE(write_synthetic_model(*model, path).is_ok());
  Result<GgufFile> file = GgufFile::open(path);
  std::filesystem::remove(path);  // the mapping stays valid after unlink
  ASSERT_TRUE(file.is_ok()) << file.status().to_string();
  EXPECT_TRUE(file->metadata() == model->metadata);
  ASSERT_EQ(file->tensors().size(), model->tensors.size());
  for (std::size_t i = 0; i < model->tensors.size(); ++i) {
    const GgufTensorInfo& t = file->tensors()[i];
    const SyntheticTensor& s = model->tensors[i];
    SCOPED_TRACE(s.name);
    EXPECT_EQ(t.name, s.name);
    EXPECT_EQ(t.shape, s.shape);
    EXPECT_EQ(t.dtype, s.dtype);
    std::span<const std::byte> bytes = file->tensor_bytes(t);
    ASSERT_EQ(bytes.size(), s.data.size());
    EXPECT_EQ(std::memcmp(bytes.data(), s.data.data(), bytes.size()), 0);
  }
}

}  // namespace
}  // namespace switchyard
