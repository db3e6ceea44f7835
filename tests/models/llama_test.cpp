#include "switchyard/llama.h"

#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <functional>
#include <limits>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "models/llama_reference.h"
#include "switchyard/backend_memory.h"
#include "switchyard/backends.h"
#include "switchyard/collective.h"
#include "switchyard/dispatch.h"
#include "switchyard/kernel_mask.h"
#include "switchyard/thread_pool.h"

namespace switchyard {
namespace {

// Writes the writer's model to a temporary file and maps it back through the
// reader, as `switchyard run` does.
GgufFile write_and_open(const GgufWriter& writer, const std::string& tag) {
  const std::filesystem::path path =
      std::filesystem::path(::testing::TempDir()) / ("switchyard_llama_" + tag + ".gguf");
  Status st = writer.write(path);
  EXPECT_TRUE(st.is_ok()) << st.to_string();
  Result<GgufFile> file = GgufFile::open(path);
  EXPECT_TRUE(file.is_ok()) << file.status().to_string();
  std::filesystem::remove(path);
  return std::move(*file);
}

// The embedded default's shape with two blocks, which keeps the float64 reference
// quick; f32 weights unless `types` re-stores some; no tokenizer (so no end of
// sequence token either, unless a test adds one).
SyntheticLlamaConfig test_config(bool tied = false) {
  SyntheticLlamaConfig c = default_synthetic_llama_config();
  c.tokenizer = false;
  c.block_count = 2;
  c.context_length = 64;
  c.tied_embeddings = tied;
  return c;
}

GgufFile synthetic_file(const SyntheticLlamaConfig& config, std::span<const TensorTypeRule> types,
                        const std::string& tag) {
  Result<SyntheticModel> m = generate_synthetic_llama(config);
  EXPECT_TRUE(m.is_ok()) << m.status().to_string();
  Status st = quantize_synthetic_llama(*m, types);
  EXPECT_TRUE(st.is_ok()) << st.to_string();
  Result<GgufWriter> w = synthetic_model_writer(*m);
  EXPECT_TRUE(w.is_ok()) << w.status().to_string();
  return write_and_open(*w, tag);
}

GgufFile f32_file(const std::string& tag, bool tied = false) {
  return synthetic_file(test_config(tied), {}, tag);
}

GgufFile mixed_file(const std::string& tag) {
  const std::vector<TensorTypeRule> types = default_synthetic_llama_types();
  return synthetic_file(test_config(), types, tag);
}

std::vector<std::int32_t> tokens(std::int64_t n, std::int64_t vocab) {
  std::vector<std::int32_t> t(static_cast<std::size_t>(n));
  for (std::int64_t i = 0; i < n; ++i)
    t[static_cast<std::size_t>(i)] = static_cast<std::int32_t>((i * 37 + 5) % vocab);
  return t;
}

// A registry of the test's own, silent, so seal reports do not mix between tests.
struct TestRegistry {
  Registry registry{RegistryConfig{.sink = [](std::string_view) {}}};
};

// An f32 cache, as the float64 reference keeps its keys and values; the f16
// default has a test of its own (AnF16CacheIsWithinItsRounding).
LlamaLoadOptions options(Registry& registry, ParallelRunner* runner = nullptr) {
  LlamaLoadOptions o;
  o.registry = &registry;
  o.runner = runner;
  o.max_context = 32;
  o.max_batch = 16;
  o.cache_dtype = DType::kF32;
  return o;
}

std::vector<float> eval(LlamaModel& model, std::span<const std::int32_t> t) {
  std::vector<float> logits(t.size() * static_cast<std::size_t>(model.config().vocab_size));
  Status st = model.eval(t, logits);
  EXPECT_TRUE(st.is_ok()) << st.to_string();
  return logits;
}

// The largest |got - ref| relative to the reference logits' largest magnitude.
double max_scaled_error(std::span<const float> got, std::span<const double> ref) {
  double err = 0, scale = 0;
  for (std::size_t i = 0; i < ref.size(); ++i) {
    err = std::max(err, std::abs(static_cast<double>(got[i]) - ref[i]));
    scale = std::max(scale, std::abs(ref[i]));
  }
  return err / scale;
}

// --- configuration -----------------------------------------------------------------

GgufMetadata good_metadata() { return generate_synthetic_llama(test_config())->metadata; }

TEST(LlamaConfigTest, ReadsEveryKey) {
  Result<LlamaConfig> c = LlamaConfig::from_metadata(good_metadata());
  ASSERT_TRUE(c.is_ok()) << c.status().to_string();
  EXPECT_EQ(c->embedding_length, 256);
  EXPECT_EQ(c->block_count, 2);
  EXPECT_EQ(c->head_count, 8);
  EXPECT_EQ(c->head_count_kv, 4);
  EXPECT_EQ(c->feed_forward_length, 768);
  EXPECT_EQ(c->vocab_size, 512);
  EXPECT_EQ(c->context_length, 64);
  EXPECT_EQ(c->head_dim(), 32);
  EXPECT_EQ(c->kv_dim(), 128);
  EXPECT_FLOAT_EQ(c->rms_eps, 1e-5f);
}

TEST(LlamaConfigTest, MissingKeyIsNamed) {
  for (const char* key :
       {"llama.block_count", "llama.embedding_length", "llama.attention.head_count",
        "llama.feed_forward_length", "llama.context_length",
        "llama.attention.layer_norm_rms_epsilon", "general.architecture"}) {
    GgufMetadata md;
    const GgufMetadata good = good_metadata();
    for (const auto& e : good.entries()) {
      if (e.key != key) md.set(e.key, e.value);
    }
    Result<LlamaConfig> c = LlamaConfig::from_metadata(md);
    ASSERT_FALSE(c.is_ok()) << key;
    EXPECT_EQ(c.status().code(), StatusCode::kInvalidArgument);
    EXPECT_NE(c.status().message().find(key), std::string::npos) << c.status().to_string();
  }
}

TEST(LlamaConfigTest, OptionalKeysDefault) {
  GgufMetadata md;
  const GgufMetadata good = good_metadata();
  for (const auto& e : good.entries()) {
    if (e.key != "llama.attention.head_count_kv" && e.key != "llama.rope.freq_base") {
      md.set(e.key, e.value);
    }
  }
  Result<LlamaConfig> c = LlamaConfig::from_metadata(md);
  ASSERT_TRUE(c.is_ok()) << c.status().to_string();
  EXPECT_EQ(c->head_count_kv, c->head_count);
  EXPECT_FLOAT_EQ(c->rope_freq_base, 10000.0f);
}

TEST(LlamaConfigTest, InconsistentHeadCountsAreRefused) {
  struct Case {
    const char* key;
    std::uint32_t value;
    const char* mentions;
  };
  for (const Case& k :
       {Case{"llama.attention.head_count", 6, "head_count"},
        Case{"llama.attention.head_count_kv", 3, "head_count_kv"},
        Case{"llama.attention.head_count", 256, "odd"}, Case{"llama.block_count", 0, "positive"}}) {
    GgufMetadata md = good_metadata();
    md.set(k.key, GgufValue::u32(k.value));
    Result<LlamaConfig> c = LlamaConfig::from_metadata(md);
    ASSERT_FALSE(c.is_ok()) << k.key << "=" << k.value;
    EXPECT_EQ(c.status().code(), StatusCode::kInvalidArgument);
    EXPECT_NE(c.status().message().find(k.mentions), std::string::npos) << c.status().to_string();
  }
}

TEST(LlamaConfigTest, WrongArchitectureAndKeyTypesAreRefused) {
  GgufMetadata md = good_metadata();
  md.set("general.architecture", GgufValue::string("gpt2"));
  EXPECT_EQ(LlamaConfig::from_metadata(md).status().code(), StatusCode::kInvalidArgument);
  md = good_metadata();
  md.set("llama.block_count", GgufValue::string("four"));
  Result<LlamaConfig> c = LlamaConfig::from_metadata(md);
  ASSERT_FALSE(c.is_ok());
  EXPECT_NE(c.status().message().find("not an integer"), std::string::npos);
}

// Copies `file` into a new writer, leaving out `skip` and replacing `replace` by an
// f32 tensor of `shape`.
GgufWriter rewrite(const GgufFile& file, const std::string& skip, const std::string& replace = {},
                   Shape shape = {}) {
  GgufWriter w;
  for (const auto& e : file.metadata().entries()) w.metadata().set(e.key, e.value);
  for (const GgufTensorInfo& t : file.tensors()) {
    if (t.name == skip) continue;
    if (t.name == replace) {
      std::vector<std::byte> zeros(static_cast<std::size_t>(shape.numel()) * sizeof(float));
      EXPECT_TRUE(w.add_tensor(t.name, DType::kF32, shape, std::move(zeros)).is_ok());
      continue;
    }
    EXPECT_TRUE(w.add_tensor_ref(t.name, t.dtype, t.shape, file.tensor_bytes(t)).is_ok());
  }
  return w;
}

TEST(LlamaConfigTest, MissingTensorIsNamed) {
  GgufFile file = f32_file("full");
  ASSERT_TRUE(LlamaConfig::from_gguf(file).is_ok());
  GgufFile missing = write_and_open(rewrite(file, "blk.1.ffn_up.weight"), "missing");
  Result<LlamaConfig> c = LlamaConfig::from_gguf(missing);
  ASSERT_FALSE(c.is_ok());
  EXPECT_EQ(c.status().code(), StatusCode::kNotFound);
  EXPECT_NE(c.status().message().find("blk.1.ffn_up.weight"), std::string::npos);
}

TEST(LlamaConfigTest, WrongShapeIsNamed) {
  GgufFile file = f32_file("full2");
  GgufFile bad = write_and_open(rewrite(file, "", "blk.0.attn_k.weight", Shape{256, 256}), "shape");
  Result<LlamaConfig> c = LlamaConfig::from_gguf(bad);
  ASSERT_FALSE(c.is_ok());
  EXPECT_EQ(c.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(c.status().message().find("blk.0.attn_k.weight"), std::string::npos);
  EXPECT_NE(c.status().message().find("[128, 256]"), std::string::npos) << c.status().to_string();
}

TEST(LlamaConfigTest, TiedEmbeddingsWhenOutputIsAbsent) {
  GgufFile file = f32_file("tied", /*tied=*/true);
  Result<LlamaConfig> c = LlamaConfig::from_gguf(file);
  ASSERT_TRUE(c.is_ok()) << c.status().to_string();
  EXPECT_TRUE(c->tied_embeddings);
}

// Hides bindings from the published table for the test's duration.
struct MaskGuard {
  explicit MaskGuard(std::string_view pattern) {
    Result<KernelMask> mask = KernelMask::parse(pattern);
    EXPECT_TRUE(mask.is_ok());
    EXPECT_TRUE(set_kernel_mask(*mask).is_ok());
  }
  ~MaskGuard() { EXPECT_TRUE(clear_kernel_mask().is_ok()); }
};

// --- forward pass against the float64 reference -----------------------------------

// f32 weights: both sides compute on the same values, so the difference is f32
// rounding alone: dot products of length <= 768 in f32 (relative error ~1e-6 of
// sum |a*w|), compounded over two blocks and the attention softmax. 1e-4 of the
// logit range is two orders above that and far below any real mistake (a wrong
// rope pair, a wrong kv head or a missing residual moves logits by O(1)).
TEST(LlamaForwardTest, F32ModelMatchesFloat64Reference) {
  GgufFile file = f32_file("f32");
  TestRegistry r;
  Result<LlamaModel> model = LlamaModel::load(file, options(r.registry));
  ASSERT_TRUE(model.is_ok()) << model.status().to_string();
  const auto t = tokens(12, model->config().vocab_size);
  const std::vector<float> got = eval(*model, t);
  const std::vector<double> ref = testing::LlamaReference(file).logits(t);
  EXPECT_LT(max_scaled_error(got, ref), 1e-4);
}

// 12 tokens, a prompt of 8 then a decode step each: how far their logits are from
// the float64 reference's (max_scaled_error).
double prompt_then_decode_error(LlamaModel& model, const GgufFile& file) {
  const auto t = tokens(12, model.config().vocab_size);
  std::vector<float> got = eval(model, std::span(t).first(8));
  for (std::size_t i = 8; i < t.size(); ++i) {
    const std::vector<float> step = eval(model, std::span(t).subspan(i, 1));
    got.insert(got.end(), step.begin(), step.end());
  }
  return max_scaled_error(got, testing::LlamaReference(file).logits(t));
}

// The default f16 cache rounds each key and value once, to 2^-11 relative: the
// logits move by a few times that against the float64 reference, and less than
// 1e-4 would mean the cache was not f16 at all. A prompt then decode steps.
TEST(LlamaForwardTest, AnF16CacheIsWithinItsRounding) {
  GgufFile file = f32_file("f16_cache");
  TestRegistry r;
  LlamaLoadOptions o = options(r.registry);
  o.cache_dtype = LlamaLoadOptions{}.cache_dtype;
  ASSERT_EQ(o.cache_dtype, DType::kF16);
  Result<LlamaModel> model = LlamaModel::load(file, o);
  ASSERT_TRUE(model.is_ok()) << model.status().to_string();
  const double error = prompt_then_decode_error(*model, file);
  EXPECT_LT(error, 3e-3);
  EXPECT_GT(error, 1e-5);
  // A cache of another dtype is refused by name, and so is a context past the
  // model's.
  o.cache_dtype = DType::kBF16;
  Result<LlamaModel> bf16 = LlamaModel::load(file, o);
  EXPECT_EQ(bf16.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(bf16.status().message().find("f16, f32 or q8_0"), std::string::npos);
  o.cache_dtype = DType::kF16;
  o.max_context = model->config().context_length + 1;
  Result<LlamaModel> long_context = LlamaModel::load(file, o);
  EXPECT_EQ(long_context.status().code(), StatusCode::kOutOfRange);
  EXPECT_NE(long_context.status().message().find("context length"), std::string::npos)
      << long_context.status().to_string();
}

// A q8_0 cache keeps each key and value within 1/254 of its block's largest
// magnitude (Note [A q8_0 KV cache]): the logits move by more than an f16
// cache's rounding moves them, and still little; a prompt then decode steps, so
// set_rows quantizes both many rows and one. A model whose heads are not whole
// 32-value blocks is refused by name.
TEST(LlamaForwardTest, AQ8_0CacheIsWithinItsRounding) {
  GgufFile file = f32_file("q8_0_cache");
  TestRegistry r;
  LlamaLoadOptions o = options(r.registry);
  o.cache_dtype = DType::kQ8_0;
  Result<LlamaModel> model = LlamaModel::load(file, o);
  ASSERT_TRUE(model.is_ok()) << model.status().to_string();
  const double error = prompt_then_decode_error(*model, file);
  EXPECT_LT(error, 2e-2);  // 0.0099 measured
  EXPECT_GT(error, 1e-3);

  SyntheticLlamaConfig narrow = test_config();
  narrow.embedding_length = 64;
  narrow.head_count = 4;  // heads of 16 values
  narrow.head_count_kv = 2;
  GgufFile narrow_file = synthetic_file(narrow, {}, "q8_0_narrow");
  Result<LlamaModel> refused = LlamaModel::load(narrow_file, o);
  EXPECT_EQ(refused.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(refused.status().message().find("blocks of 32"), std::string::npos)
      << refused.status().to_string();
}

// The end-of-sequence tokens a file names become LlamaConfig::end_tokens (each
// once); one outside the vocabulary is refused by key.
TEST(LlamaConfigTest, EndOfSequenceTokensComeFromTheTokenizerKeys) {
  auto with_keys = [](std::vector<std::pair<std::string, std::int64_t>> keys,
                      const std::string& tag) {
    Result<SyntheticModel> m = generate_synthetic_llama(test_config());
    EXPECT_TRUE(m.is_ok()) << m.status().to_string();
    Result<GgufWriter> w = synthetic_model_writer(*m);
    EXPECT_TRUE(w.is_ok()) << w.status().to_string();
    for (const auto& [key, id] : keys) {
      w->metadata().set(key, GgufValue::i32(static_cast<std::int32_t>(id)));
    }
    return write_and_open(*w, tag);
  };
  EXPECT_TRUE(LlamaConfig::from_gguf(f32_file("no_eos"))->end_tokens.empty());
  Result<LlamaConfig> c = LlamaConfig::from_gguf(with_keys(
      {{"tokenizer.ggml.eos_token_id", 2}, {"tokenizer.ggml.eot_token_id", 7}}, "eos_eot"));
  ASSERT_TRUE(c.is_ok()) << c.status().to_string();
  EXPECT_EQ(c->end_tokens, (std::vector<std::int32_t>{2, 7}));
  c = LlamaConfig::from_gguf(
      with_keys({{"tokenizer.ggml.eos_token_id", 5}, {"tokenizer.ggml.eot_token_id", 5}}, "same"));
  ASSERT_TRUE(c.is_ok()) << c.status().to_string();
  EXPECT_EQ(c->end_tokens, (std::vector<std::int32_t>{5}));
  for (std::int64_t bad : {std::int64_t{-1}, test_config().vocab_size}) {
    c = LlamaConfig::from_gguf(with_keys({{"tokenizer.ggml.eos_token_id", bad}}, "bad_eos"));
    EXPECT_EQ(c.status().code(), StatusCode::kInvalidArgument) << bad;
    EXPECT_NE(c.status().message().find("tokenizer.ggml.eos_token_id"), std::string::npos)
        << c.status().to_string();
  }
}

// Note [Non-finite logits]: a NaN in one weight makes the step fail, naming the
// node that wrote the first NaN, and the position does not move. In a key or
// value projection the NaN reaches every attention score of its head: a NaN
// score row is NaN, not a masked row that attends to nothing (docs/ops.md).
class NonFiniteWeightTest : public ::testing::TestWithParam<std::string> {};

TEST_P(NonFiniteWeightTest, LogitsAreRefusedNamingTheNode) {
  const std::string tensor = GetParam();
  Result<SyntheticModel> m = generate_synthetic_llama(test_config());
  ASSERT_TRUE(m.is_ok());
  bool poisoned = false;
  for (SyntheticTensor& t : m->tensors) {
    if (t.name != tensor) continue;
    const float nan = std::numeric_limits<float>::quiet_NaN();
    std::memcpy(t.data.data() + 4 * 5, &nan, sizeof nan);
    poisoned = true;
  }
  ASSERT_TRUE(poisoned);
  Result<GgufWriter> w = synthetic_model_writer(*m);
  ASSERT_TRUE(w.is_ok());
  // One file per parameter: ctest runs the parameters as parallel processes.
  GgufFile file = write_and_open(*w, "nan_" + tensor);
  TestRegistry r;
  Result<LlamaModel> model = LlamaModel::load(file, options(r.registry));
  ASSERT_TRUE(model.is_ok()) << model.status().to_string();
  const auto t = tokens(4, model->config().vocab_size);
  std::vector<float> logits(t.size() * static_cast<std::size_t>(model->config().vocab_size));
  const Status st = model->eval(t, logits);
  ASSERT_FALSE(st.is_ok());
  EXPECT_EQ(st.code(), StatusCode::kFailedPrecondition);
  const std::string node = tensor.substr(0, tensor.rfind(".weight"));
  EXPECT_NE(st.message().find(node), std::string_view::npos) << st.to_string();
  EXPECT_NE(st.message().find("nan"), std::string_view::npos) << st.to_string();
  EXPECT_EQ(model->position(), 0);
}

INSTANTIATE_TEST_SUITE_P(Weights, NonFiniteWeightTest,
                         ::testing::Values("blk.1.ffn_down.weight", "blk.0.attn_k.weight",
                                           "blk.1.attn_v.weight", "blk.0.attn_q.weight"),
                         [](const ::testing::TestParamInfo<std::string>& p) {
                           std::string n = p.param;
                           for (char& c : n)
                             if (c == '.') c = '_';
                           return n;
                         });

// --- split over devices (Note [Tensor-parallel llama]) -------------------------------

LlamaLoadOptions split_options(Registry& registry, int devices) {
  LlamaLoadOptions o = options(registry);
  o.devices = devices;
  return o;
}

// One rank (collectives as copies), two and four simulated ranks: a prompt then
// decode steps match the float64 reference as the whole model does, and the
// unsplit model's logits to f32 rounding (the ranks add their partial sums in
// another order).
class LlamaSplitTest : public ::testing::TestWithParam<int> {};

TEST_P(LlamaSplitTest, ConcurrentRanksMatchTheReferenceAndTheWholeModel) {
  const int devices = GetParam();
  GgufFile file = f32_file(fmt::format("split_{}", devices));
  TestRegistry r;
  Result<LlamaModel> split = LlamaModel::load(file, split_options(r.registry, devices));
  ASSERT_TRUE(split.is_ok()) << split.status().to_string();
  EXPECT_EQ(split->devices(), devices);
  EXPECT_TRUE(split->kernel_report().violations.empty()) << split->kernel_report().render();
  EXPECT_LT(prompt_then_decode_error(*split, file), 1e-4);
  TestRegistry whole_registry;
  Result<LlamaModel> whole = LlamaModel::load(file, options(whole_registry.registry));
  ASSERT_TRUE(whole.is_ok()) << whole.status().to_string();
  EXPECT_EQ(whole->devices(), 0);
  split->reset();
  const auto t = tokens(10, split->config().vocab_size);
  const std::vector<float> a = eval(*split, t);
  const std::vector<float> b = eval(*whole, t);
  const std::vector<double> b64(b.begin(), b.end());
  EXPECT_LT(max_scaled_error(a, b64), 2e-5);
  // The plan has two all_reduces per layer and the two all_gathers.
  int reduces = 0, gathers = 0;
  for (const Node& n : split->plan().graph().nodes()) {
    reduces += n.op == OpKind::kAllReduce;
    gathers += n.op == OpKind::kAllGather;
  }
  EXPECT_EQ(reduces, 2 * split->config().block_count);
  EXPECT_EQ(gathers, 2);
}

TEST_P(LlamaSplitTest, RunsAreIdenticalAndTiedEmbeddingsSplitToo) {
  const int devices = GetParam();
  GgufFile file = f32_file(fmt::format("split_tied_{}", devices), /*tied=*/true);
  TestRegistry r;
  ThreadPool pool(2);
  LlamaLoadOptions o = split_options(r.registry, devices);
  o.runner = &pool;
  Result<LlamaModel> model = LlamaModel::load(file, o);
  ASSERT_TRUE(model.is_ok()) << model.status().to_string();
  const auto t = tokens(7, model->config().vocab_size);
  const std::vector<float> first = eval(*model, t);
  EXPECT_LT(max_scaled_error(first, testing::LlamaReference(file).logits(t)), 1e-4);
  model->reset();
  EXPECT_EQ(eval(*model, t), first);
}

INSTANTIATE_TEST_SUITE_P(Devices, LlamaSplitTest, ::testing::Values(1, 2, 4));

// The mixed file split in two: the embedding's and attn_output's columns (q4_k,
// 256 wide) split at 128, inside a block, so each rank's share is converted to
// f32 and the report says so; ffn_down's 768 (q6_k) split at whole blocks and
// stay q6_k.
TEST(LlamaSplitLoadTest, AQuantizedShareThatCutsABlockIsConvertedAndReported) {
  GgufFile file = mixed_file("split_mixed");
  TestRegistry r;
  Result<LlamaModel> model = LlamaModel::load(file, split_options(r.registry, 2));
  ASSERT_TRUE(model.is_ok()) << model.status().to_string();
  const LlamaKernelReport& rep = model->kernel_report();
  std::vector<std::string> converted;
  for (const auto& v : rep.violations) converted.push_back(v.tensor);
  EXPECT_THAT(converted,
              ::testing::UnorderedElementsAre("token_embd.weight", "blk.0.attn_output.weight",
                                              "blk.1.attn_output.weight"))
      << rep.render();
  EXPECT_NE(
      rep.render().find("rank 0's columns [0, 128) cut q4_k blocks of 256 -> converted to f32"),
      std::string::npos)
      << rep.render();
  const auto t = tokens(12, model->config().vocab_size);
  EXPECT_LT(max_scaled_error(eval(*model, t), testing::LlamaReference(file).logits(t)), 5e-2);
}

TEST(LlamaSplitLoadTest, DevicesThatDoNotDivideTheModelAreRefused) {
  GgufFile file = f32_file("split_bad");
  for (const int devices : {3, -1, HostRankGroup::kMaxRanks + 1}) {
    TestRegistry r;
    Result<LlamaModel> model = LlamaModel::load(file, split_options(r.registry, devices));
    ASSERT_FALSE(model.is_ok()) << devices;
    EXPECT_EQ(model.status().code(), StatusCode::kInvalidArgument) << model.status().to_string();
  }
  TestRegistry r;
  Result<LlamaModel> three = LlamaModel::load(file, split_options(r.registry, 3));
  EXPECT_NE(three.status().message().find("4 kv heads do not split evenly over 3"),
            std::string::npos)
      << three.status().to_string();
}

// A missing collective is as loud as a missing matmul: the load names it.
TEST(LlamaSplitLoadTest, AMissingCollectiveFailsTheLoadNamingIt) {
  GgufFile file = f32_file("split_masked");
  MaskGuard guard("cpu:all_reduce:*");
  TestRegistry r;
  Result<LlamaModel> model = LlamaModel::load(file, split_options(r.registry, 2));
  ASSERT_FALSE(model.is_ok());
  EXPECT_EQ(model.status().code(), StatusCode::kFailedPrecondition) << model.status().to_string();
  EXPECT_NE(model.status().message().find(
                "blk.0.attn_all_reduce (attn_all_reduce, f32) has no all_reduce kernel on cpu"),
            std::string::npos)
      << model.status().to_string();
}

// A failing eval moves no rank's position, and the next eval runs: the group a
// failure aborted is reset. A NaN weight fails on one rank's share only, and the
// others, waiting for it in a collective, are released with its error.
TEST(LlamaSplitLoadTest, ConcurrentRanksAreReadyForTheNextEvalAfterAFailedOne) {
  Result<SyntheticModel> m = generate_synthetic_llama(test_config());
  ASSERT_TRUE(m.is_ok());
  for (SyntheticTensor& t : m->tensors) {
    if (t.name != "blk.1.ffn_up.weight") continue;
    const float nan = std::numeric_limits<float>::quiet_NaN();
    std::memcpy(t.data.data() + 4 * 5, &nan, sizeof nan);  // row 0: rank 0's share
  }
  Result<GgufWriter> w = synthetic_model_writer(*m);
  ASSERT_TRUE(w.is_ok());
  GgufFile file = write_and_open(*w, "split_nan");
  TestRegistry r;
  Result<LlamaModel> model = LlamaModel::load(file, split_options(r.registry, 2));
  ASSERT_TRUE(model.is_ok()) << model.status().to_string();
  const auto t = tokens(4, model->config().vocab_size);
  std::vector<float> logits(t.size() * static_cast<std::size_t>(model->config().vocab_size));
  const Status nan = model->eval(t, logits);
  EXPECT_EQ(nan.code(), StatusCode::kFailedPrecondition) << nan.to_string();
  EXPECT_NE(nan.message().find("nan"), std::string_view::npos) << nan.to_string();
  EXPECT_EQ(model->position(), 0);
  const std::int32_t out_of_vocab = 512;
  std::vector<float> one(512);
  EXPECT_EQ(model->eval(std::span(&out_of_vocab, 1), one).code(), StatusCode::kOutOfRange);
  EXPECT_EQ(model->position(), 0);
}

// Note [One device per rank]: a split over more GPUs than the machine has is
// refused at load, saying how many it has (none, where no driver is).
TEST(LlamaSplitLoadTest, ACudaSplitNeedsAGpuPerRank) {
  if (!is_compiled(BackendId::kCuda)) GTEST_SKIP() << "cuda is not compiled into this build";
  BackendMemory* memory = current_table()->backend_memory(BackendId::kCuda);
  ASSERT_NE(memory, nullptr);
  constexpr int kRanks = 4;  // the test model's kv heads
  if (memory->device_count() >= kRanks) GTEST_SKIP() << "this machine has a GPU for every rank";
  GgufFile file = f32_file("split_cuda");
  TestRegistry r;
  LlamaLoadOptions o = split_options(r.registry, kRanks);
  o.backend = BackendId::kCuda;
  Result<LlamaModel> model = LlamaModel::load(file, o);
  EXPECT_EQ(model.status().code(), StatusCode::kUnavailable) << model.status().to_string();
  EXPECT_NE(model.status().message().find("needs 4 cuda devices"), std::string_view::npos)
      << model.status().to_string();
}

// A file may claim any context length, and a caller may ask for all of it: the KV
// cache is checked against the machine's memory before it is allocated.
TEST(LlamaLoadTest, AKvCacheLargerThanMemoryIsRefusedBeforeAllocating) {
  // The largest context the synthetic writer stores (2^32 - 1): 8 TiB of cache.
  constexpr std::int64_t kContext = 0xffffffff;
  SyntheticLlamaConfig config = test_config();
  config.context_length = kContext;
  GgufFile file = synthetic_file(config, {}, "huge_context");
  TestRegistry r;
  LlamaLoadOptions o = options(r.registry);
  o.max_context = kContext;
  Result<LlamaModel> model = LlamaModel::load(std::move(file), o);
  ASSERT_FALSE(model.is_ok());
  EXPECT_EQ(model.status().code(), StatusCode::kResourceExhausted);
  EXPECT_NE(model.status().message().find("KV cache"), std::string_view::npos)
      << model.status().to_string();
  EXPECT_NE(model.status().message().find("fewer tokens"), std::string_view::npos);
}

// Mixed quantized weights (q4_k, q8_0, q6_k): the reference uses the exact
// dequantized weights, so weight quantization cancels out. What remains is the CPU
// quantized matmuls quantizing each activation block to 8 bits for their integer
// dot product, which they claim within 1/64 of sum |a*w| per dot (registration).
// Over the 7 projections of each of two blocks and the head that has been measured
// at 2.3% of the largest logit; 5% bounds it with margin, while a structural
// mistake (a wrong rope pair, kv head or residual) moves logits by O(1). The next
// test removes the activation rounding and shows the graph itself is exact.
TEST(LlamaForwardTest, MixedQuantModelMatchesFloat64Reference) {
  GgufFile file = mixed_file("mixed");
  TestRegistry r;
  Result<LlamaModel> model = LlamaModel::load(file, options(r.registry));
  ASSERT_TRUE(model.is_ok()) << model.status().to_string();
  EXPECT_TRUE(model->kernel_report().violations.empty()) << model->kernel_report().render();
  const auto t = tokens(12, model->config().vocab_size);
  const std::vector<float> got = eval(*model, t);
  const std::vector<double> ref = testing::LlamaReference(file).logits(t);
  EXPECT_LT(max_scaled_error(got, ref), 5e-2);
}

// The same mixed model with its quantized matmul kernels masked: the load converts
// those weights to f32 (the slow path) and f32 kernels compute on exactly the
// values the reference dequantized, so only f32 rounding remains (as for the f32
// model).
TEST(LlamaForwardTest, MixedQuantModelOnF32FallbackIsExactToRounding) {
  GgufFile file = mixed_file("mixed_fallback");
  MaskGuard guard("cpu:matmul:q4_k,cpu:matmul:q6_k,cpu:matmul:q8_0");
  TestRegistry r;
  Result<LlamaModel> model = LlamaModel::load(file, options(r.registry));
  ASSERT_TRUE(model.is_ok()) << model.status().to_string();
  // 2 blocks x 7 matrices + the output head, all converted.
  EXPECT_EQ(model->kernel_report().violations.size(), 15u) << model->kernel_report().render();
  const auto t = tokens(12, model->config().vocab_size);
  const std::vector<float> got = eval(*model, t);
  EXPECT_LT(max_scaled_error(got, testing::LlamaReference(file).logits(t)), 1e-4);
}

TEST(LlamaForwardTest, TiedEmbeddingsMatchReference) {
  GgufFile file = f32_file("tied_fwd", /*tied=*/true);
  TestRegistry r;
  Result<LlamaModel> model = LlamaModel::load(file, options(r.registry));
  ASSERT_TRUE(model.is_ok()) << model.status().to_string();
  const auto t = tokens(5, model->config().vocab_size);
  const std::vector<float> got = eval(*model, t);
  EXPECT_LT(max_scaled_error(got, testing::LlamaReference(file).logits(t)), 1e-4);
}

TEST(LlamaForwardTest, LogitsAreIdenticalRunToRun) {
  GgufFile file = mixed_file("determinism");
  ThreadPool pool(2);
  TestRegistry r1, r2;
  Result<LlamaModel> a = LlamaModel::load(file, options(r1.registry, &pool));
  Result<LlamaModel> b = LlamaModel::load(file, options(r2.registry, &pool));
  ASSERT_TRUE(a.is_ok() && b.is_ok());
  const auto t = tokens(9, a->config().vocab_size);
  const std::vector<float> first = eval(*a, t);
  a->reset();
  const std::vector<float> again = eval(*a, t);
  const std::vector<float> other = eval(*b, t);
  EXPECT_EQ(0, std::memcmp(first.data(), again.data(), first.size() * sizeof(float)));
  EXPECT_EQ(0, std::memcmp(first.data(), other.data(), first.size() * sizeof(float)));
  // And a decode step after it.
  const std::int32_t next = argmax_token(std::span(first).last(512));
  std::vector<float> d1 = eval(*a, std::span(&next, 1));
  std::vector<float> d2 = eval(*b, std::span(&next, 1));
  EXPECT_EQ(0, std::memcmp(d1.data(), d2.data(), d1.size() * sizeof(float)));
}

// Note [Logits of chosen rows]: asking for the last token's logits alone gives
// that row of the full answer (the head may take a different matmul sibling for
// one row, so to f32 rounding), leaves the same cache behind (the next step is
// bit-identical), and any other size is refused without moving the cache.
TEST(LlamaForwardTest, TheLastTokensLogitsAloneMatchThatRowOfAll) {
  GgufFile file = mixed_file("last_row");
  TestRegistry r1, r2;
  Result<LlamaModel> all = LlamaModel::load(file, options(r1.registry));
  Result<LlamaModel> last = LlamaModel::load(file, options(r2.registry));
  ASSERT_TRUE(all.is_ok() && last.is_ok());
  const std::int64_t vocab = all->config().vocab_size;
  const auto t = tokens(9, vocab);
  const std::vector<float> every = eval(*all, t);
  std::vector<float> wrong(static_cast<std::size_t>(2 * vocab));
  EXPECT_EQ(last->eval(t, wrong).code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(last->position(), 0);
  std::vector<float> one(static_cast<std::size_t>(vocab));
  ASSERT_TRUE(last->eval(t, one).is_ok());
  EXPECT_EQ(last->position(), 9);
  const auto tail = std::span(every).last(static_cast<std::size_t>(vocab));
  const std::vector<double> want(tail.begin(), tail.end());
  EXPECT_LT(max_scaled_error(one, want), 1e-5);
  const std::int32_t next = argmax_token(tail);
  const std::vector<float> a = eval(*all, std::span(&next, 1));
  const std::vector<float> b = eval(*last, std::span(&next, 1));
  EXPECT_EQ(0, std::memcmp(a.data(), b.data(), a.size() * sizeof(float)));
}

// warm_up runs both buckets and leaves nothing behind: the cache is empty again,
// and the logits after it are the bits a model that never warmed up computes. A
// warm-up with tokens in the cache is refused, without touching them.
TEST(LlamaForwardTest, WarmingUpLeavesNoTrace) {
  GgufFile file = f32_file("warm");
  TestRegistry r1, r2;
  Result<LlamaModel> warm = LlamaModel::load(file, options(r1.registry));
  Result<LlamaModel> cold = LlamaModel::load(file, options(r2.registry));
  ASSERT_TRUE(warm.is_ok() && cold.is_ok());
  ASSERT_TRUE(warm->warm_up().is_ok());
  EXPECT_EQ(warm->position(), 0);
  const auto t = tokens(7, warm->config().vocab_size);
  const std::vector<float> a = eval(*warm, t);
  const std::vector<float> b = eval(*cold, t);
  EXPECT_EQ(0, std::memcmp(a.data(), b.data(), a.size() * sizeof(float)));
  const Status again = warm->warm_up();
  EXPECT_EQ(again.code(), StatusCode::kFailedPrecondition) << again.to_string();
  EXPECT_EQ(warm->position(), 7);
  const std::int32_t next = 5;
  const std::vector<float> da = eval(*warm, std::span(&next, 1));
  const std::vector<float> db = eval(*cold, std::span(&next, 1));
  EXPECT_EQ(0, std::memcmp(da.data(), db.data(), da.size() * sizeof(float)));
}

// The cache path (decode, and prefill continuing a cache) against recomputing the
// whole sequence in one prefill. The two use different kernels (matvec and GEMM
// siblings, sums split differently), so agreement is to f32 rounding, not bits.
TEST(LlamaForwardTest, DecodeAfterPrefillEqualsFullRecompute) {
  GgufFile file = f32_file("decode");
  TestRegistry r;
  Result<LlamaModel> model = LlamaModel::load(file, options(r.registry));
  ASSERT_TRUE(model.is_ok()) << model.status().to_string();
  const std::int64_t vocab = model->config().vocab_size;
  const auto t = tokens(12, vocab);
  const std::vector<float> full = eval(*model, t);
  model->reset();

  // 6 tokens of prefill, 3 of prefill continuing the cache, then 3 decode steps.
  std::vector<float> pieced = eval(*model, std::span(t).first(6));
  for (float v : eval(*model, std::span(t).subspan(6, 3))) pieced.push_back(v);
  EXPECT_EQ(model->plan().bucket_count(), 2u);
  for (std::size_t i = 9; i < 12; ++i) {
    for (float v : eval(*model, std::span(t).subspan(i, 1))) pieced.push_back(v);
  }
  EXPECT_EQ(model->position(), 12);
  ASSERT_EQ(pieced.size(), full.size());
  std::vector<double> full_d(full.begin(), full.end());
  EXPECT_LT(max_scaled_error(pieced, full_d), 1e-5);
}

TEST(LlamaForwardTest, EvalRejectsBadInputWithoutMovingTheCache) {
  GgufFile file = f32_file("bad");
  TestRegistry r;
  Result<LlamaModel> model = LlamaModel::load(file, options(r.registry));
  ASSERT_TRUE(model.is_ok()) << model.status().to_string();
  std::vector<float> logits(512);
  const std::int32_t out_of_vocab = 512;
  EXPECT_EQ(model->eval(std::span(&out_of_vocab, 1), logits).code(), StatusCode::kOutOfRange);
  const auto many = tokens(17, 512);  // max_batch is 16
  std::vector<float> big(many.size() * 512);
  EXPECT_EQ(model->eval(many, big).code(), StatusCode::kInvalidArgument);
  const std::int32_t ok = 3;
  std::vector<float> small(10);
  EXPECT_EQ(model->eval(std::span(&ok, 1), small).code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(model->position(), 0);
  // Fill the 32-token cache, then one more overflows.
  const auto sixteen = tokens(16, 512);
  std::vector<float> l16(16 * 512);
  ASSERT_TRUE(model->eval(sixteen, l16).is_ok());
  ASSERT_TRUE(model->eval(sixteen, l16).is_ok());
  EXPECT_EQ(model->eval(std::span(&ok, 1), logits).code(), StatusCode::kOutOfRange);
  EXPECT_EQ(model->position(), 32);
}

// A profiled model times every node: per node of the plan's graph, summed over the
// buckets that ran, adding up to the time by op family; reset_profile clears both.
TEST(LlamaForwardTest, TheProfileTimesEveryNodeAndAddsUpToTheFamilies) {
  GgufFile file = mixed_file("profile");
  TestRegistry r;
  LlamaLoadOptions o = options(r.registry);
  o.profile = true;
  Result<LlamaModel> model = LlamaModel::load(file, o);
  ASSERT_TRUE(model.is_ok()) << model.status().to_string();
  EXPECT_TRUE(model->profile().node_ns.empty());
  const auto prompt = tokens(5, model->config().vocab_size);
  eval(*model, prompt);
  const std::int32_t next = 3;
  eval(*model, std::span(&next, 1));
  const LlamaProfile& p = model->profile();
  const Graph& graph = model->plan().graph();
  ASSERT_EQ(p.node_ns.size(), graph.nodes().size());
  double nodes = 0, families = 0;
  std::size_t timed = 0;
  for (double ns : p.node_ns) {
    EXPECT_GE(ns, 0);
    nodes += ns;
    timed += ns > 0 ? 1 : 0;
  }
  for (double ns : p.family_ns) families += ns;
  EXPECT_NEAR(nodes, families, 1e-9 * families);
  // Every matmul ran, in both buckets.
  for (std::size_t i = 0; i < graph.nodes().size(); ++i) {
    if (graph.nodes()[i].op == OpKind::kMatmul) {
      EXPECT_GT(p.node_ns[i], 0) << graph.nodes()[i].name;
    }
  }
  EXPECT_GT(timed, graph.nodes().size() / 2);
  model->reset_profile();
  EXPECT_TRUE(model->profile().node_ns.empty());
  EXPECT_EQ(model->profile().family_ns[static_cast<std::size_t>(OpFamily::kMatmul)], 0);
}

// --- the kernel report and strict mode -------------------------------------------

TEST(LlamaKernelsTest, ReportCountsNodesPerBucket) {
  GgufFile file = mixed_file("report");
  TestRegistry r;
  Result<LlamaModel> model = LlamaModel::load(file, options(r.registry));
  ASSERT_TRUE(model.is_ok()) << model.status().to_string();
  const LlamaKernelReport& rep = model->kernel_report();
  ASSERT_EQ(rep.buckets.size(), 2u);
  EXPECT_EQ(rep.buckets[0].bucket, "decode");
  EXPECT_EQ(rep.buckets[1].bucket, "prefill");
  ASSERT_FALSE(rep.buckets[0].nodes.empty());
  EXPECT_EQ(rep.buckets[0].nodes[0].first, BackendId::kCpu);
  EXPECT_GT(rep.buckets[0].nodes[0].second, 0);
  // Every weight matrix and every other node was probed.
  EXPECT_GE(rep.probes, 2 * 7 + 2);
  EXPECT_NE(rep.render().find("0 violations"), std::string::npos) << rep.render();
}

TEST(LlamaKernelsTest, StrictModeRefusesAMaskedKernel) {
  GgufFile file = mixed_file("strict");
  MaskGuard guard("cpu:matmul:q4_k");
  TestRegistry r;
  LlamaLoadOptions o = options(r.registry);
  o.strict = StrictPolicy::all();
  Result<LlamaModel> model = LlamaModel::load(file, o);
  ASSERT_FALSE(model.is_ok());
  EXPECT_EQ(model.status().code(), StatusCode::kFailedPrecondition);
  EXPECT_NE(model.status().message().find("q4_k"), std::string::npos) << model.status().to_string();
}

TEST(LlamaKernelsTest, MaskedKernelIsAViolationAndTheSlowPathStillComputes) {
  GgufFile file = mixed_file("masked");
  MaskGuard guard("cpu:matmul:q4_k");
  TestRegistry r;
  Result<LlamaModel> model = LlamaModel::load(file, options(r.registry));
  ASSERT_TRUE(model.is_ok()) << model.status().to_string();
  const LlamaKernelReport& rep = model->kernel_report();
  ASSERT_FALSE(rep.violations.empty());
  bool named = false;
  for (const auto& v : rep.violations) {
    EXPECT_EQ(v.dtype, DType::kQ4_K);
    named |= v.tensor == "blk.0.attn_q.weight" && v.role == "attn_q";
  }
  EXPECT_TRUE(named) << rep.render();
  EXPECT_NE(rep.render().find("VIOLATION blk.0.attn_q.weight (attn_q, q4_k)"), std::string::npos)
      << rep.render();
  EXPECT_FALSE(rep.seal.masked.empty());
  EXPECT_FALSE(rep.seal.violations.empty());
  // The dequantized fallback computes the same model.
  const auto t = tokens(6, model->config().vocab_size);
  const std::vector<float> got = eval(*model, t);
  EXPECT_LT(max_scaled_error(got, testing::LlamaReference(file).logits(t)), 2e-2);
}

// Every probe and seal of a load goes to the registry the caller passed: the
// loader's probes (recorded from llama.cpp) and the planner's records (from
// planner.cpp), each followed by a seal. The process-wide registry sees nothing.
TEST(LlamaKernelsTest, PassedRegistryGetsEveryProbeAndSeal) {
  Registry& global = global_registry();
  if (!global.enabled()) GTEST_SKIP() << "SWITCHYARD_KERNEL_REGISTRY disables the global registry";
  global.reset();
  GgufFile file = mixed_file("own_registry");
  TestRegistry r;
  Result<LlamaModel> model = LlamaModel::load(file, options(r.registry));
  ASSERT_TRUE(model.is_ok()) << model.status().to_string();

  const std::vector<RegistryEntry> leaked = global.entries();
  EXPECT_TRUE(leaked.empty()) << leaked.size() << " rows, the first: " << leaked[0].to_string();
  EXPECT_FALSE(global.is_sealed());

  EXPECT_TRUE(r.registry.is_sealed());
  auto recorded_from = [&](std::string_view file_suffix) {
    for (const RegistryEntry& e : r.registry.entries()) {
      if (std::string_view(e.site.file_name()).ends_with(file_suffix)) return true;
    }
    return false;
  };
  EXPECT_TRUE(recorded_from("models/llama.cpp"));
  EXPECT_TRUE(recorded_from("plan/planner.cpp"));
  global.reset();
}

// Note [KV cache as graph state]: each block's set_rows nodes write the step's k
// and v rows into the cache (a graph input, and their output, which the caller
// binds to the same memory), and the attention reads their outputs, so the data
// itself orders the writes before the read in every bucket.
TEST(LlamaKernelsTest, AttentionReadsTheCacheThroughItsWrites) {
  GgufFile file = mixed_file("cache_order");
  TestRegistry r;
  Result<LlamaModel> model = LlamaModel::load(file, options(r.registry));
  ASSERT_TRUE(model.is_ok()) << model.status().to_string();
  const Graph& g = model->plan().graph();
  const std::int64_t blocks = model->config().block_count;
  auto base = [&](ValueId id) {
    const Value& v = g.value(id);
    return v.kind == ValueKind::kView ? v.source : id;
  };
  for (std::int64_t i = 0; i < blocks; ++i) {
    const std::string p = "blk." + std::to_string(i) + ".";
    const std::int32_t attention = g.find_node(p + "attention");
    const std::int32_t k = g.find_node(p + "k_cache_set");
    const std::int32_t v = g.find_node(p + "v_cache_set");
    ASSERT_GE(attention, 0);
    ASSERT_GE(k, 0);
    ASSERT_GE(v, 0);
    EXPECT_EQ(g.node(k).op, OpKind::kSetRows);
    EXPECT_EQ(g.value(g.node(k).inputs[0]).name, p + "k_cache");
    EXPECT_EQ(g.value(g.node(v).inputs[0]).name, p + "v_cache");
    EXPECT_EQ(base(g.node(attention).inputs[1]), g.node(k).output) << p;
    EXPECT_EQ(base(g.node(attention).inputs[2]), g.node(v).output) << p;
    EXPECT_TRUE(g.node(attention).after.empty()) << p << ": no control edge is needed";
  }
  ASSERT_EQ(model->plan().report().buckets.size(), 2u);
  for (const BucketReport& bucket : model->plan().report().buckets) {
    std::vector<std::string> order;
    for (const NodeReport& n : bucket.nodes) order.push_back(n.name);
    auto at = [&](const std::string& name) {
      return std::find(order.begin(), order.end(), name) - order.begin();
    };
    for (std::int64_t i = 0; i < blocks; ++i) {
      const std::string p = "blk." + std::to_string(i) + ".";
      EXPECT_LT(at(p + "k_cache_set"), at(p + "attention")) << bucket.name << " " << p;
      EXPECT_LT(at(p + "v_cache_set"), at(p + "attention")) << bucket.name << " " << p;
    }
  }
}

TEST(LlamaKernelsTest, MissingBackendIsUnavailable) {
  const auto compiled = compiled_backends();
  if (std::find(compiled.begin(), compiled.end(), BackendId::kCuda) != compiled.end()) {
    GTEST_SKIP() << "this build has CUDA";
  }
  GgufFile file = mixed_file("nocuda");
  TestRegistry r;
  LlamaLoadOptions o = options(r.registry);
  o.backend = BackendId::kCuda;
  EXPECT_EQ(LlamaModel::load(file, o).status().code(), StatusCode::kUnavailable);
}

TEST(LlamaSyntheticTest, MixedTypesAsSpecified) {
  GgufFile file = mixed_file("types");
  EXPECT_EQ(file.find_tensor("blk.0.attn_q.weight")->dtype, DType::kQ4_K);
  EXPECT_EQ(file.find_tensor("blk.0.attn_v.weight")->dtype, DType::kQ8_0);
  EXPECT_EQ(file.find_tensor("blk.1.ffn_down.weight")->dtype, DType::kQ6_K);
  EXPECT_EQ(file.find_tensor("output.weight")->dtype, DType::kQ6_K);
  EXPECT_EQ(file.find_tensor("output_norm.weight")->dtype, DType::kF32);
}

TEST(LlamaSyntheticTest, UnknownRoleOrUnstorableTypeIsRefused) {
  Result<SyntheticModel> m = generate_synthetic_llama(test_config());
  ASSERT_TRUE(m.is_ok());
  const std::vector<TensorTypeRule> unknown = {{"attn_x", DType::kQ4_K}};
  EXPECT_EQ(quantize_synthetic_llama(*m, unknown).code(), StatusCode::kInvalidArgument);
  SyntheticLlamaConfig small = test_config();
  small.embedding_length = 64;  // 64-element rows are not whole q4_k blocks (256)
  small.head_count = 4;
  small.head_count_kv = 2;
  small.feed_forward_length = 128;
  Result<SyntheticModel> s = generate_synthetic_llama(small);
  ASSERT_TRUE(s.is_ok());
  const std::vector<TensorTypeRule> q4k = {{"attn_q", DType::kQ4_K}};
  Status st = quantize_synthetic_llama(*s, q4k);
  EXPECT_EQ(st.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(st.message().find("blk.0.attn_q.weight"), std::string::npos) << st.to_string();
}

}  // namespace
}  // namespace switchyard

namespace switchyard {
namespace {

// --- files as the converters lay them out ----------------------------------------

std::string python() {
  const char* env = std::getenv("SWITCHYARD_PYTHON");
  return env != nullptr && *env != '\0' ? "'" + std::string(env) + "'" : "python3";
}

struct LayoutCase {
  std::string kind;
  // The largest logit difference allowed, relative to the largest logit: f32
  // rounding for f32 and f16 weights (the f16 values are the reference's too);
  // q8_0 also rounds the activations to 8 bits per product (Note [Activation
  // quantization] in the CPU's quantized matmul), as the mixed model's test.
  double tolerance;
};

class ConverterLayoutTest : public ::testing::TestWithParam<LayoutCase> {};

// tests/models/converter_layout.py writes a file in the layout real converters
// use (qwen2 keys and biases, Llama 3's rope_freqs.weight and key_length, linear
// rope scaling), random weights, through the `gguf` package; a prompt and then
// decode steps must give the float64 reference's logits.
TEST_P(ConverterLayoutTest, LoadsAndMatchesTheFloat64Reference) {
  const LayoutCase& c = GetParam();
  if (std::system((python() + " -c 'import gguf' >/dev/null 2>&1").c_str()) != 0) {
    GTEST_SKIP() << "python3 with the gguf package is not installed";
  }
  const std::filesystem::path path =
      std::filesystem::path(::testing::TempDir()) /
      ("switchyard_layout_" + c.kind + "_" + std::to_string(::getpid()) + ".gguf");
  const std::string command =
      python() + " '" +
      (std::filesystem::path(SWITCHYARD_TEST_SOURCE_DIR) / "models" / "converter_layout.py")
          .string() +
      "' " + c.kind + " '" + path.string() + "'";
  ASSERT_EQ(std::system(command.c_str()), 0) << command;
  Result<GgufFile> file = GgufFile::open(path);
  std::filesystem::remove(path);
  ASSERT_TRUE(file.is_ok()) << file.status().to_string();

  Result<LlamaConfig> config = LlamaConfig::from_gguf(*file);
  ASSERT_TRUE(config.is_ok()) << config.status().to_string();
  if (c.kind == "llama3") {
    EXPECT_TRUE(config->rope_freq_factors);
    EXPECT_TRUE(config->tied_embeddings);
    EXPECT_EQ(config->head_dim(), 32);  // wider than 64 / 4
    EXPECT_EQ(config->file_type, 1);
  } else if (c.kind == "qwen2") {
    EXPECT_EQ(config->architecture, "qwen2");
    EXPECT_TRUE(config->attention_bias);
    EXPECT_EQ(config->rope_mode, RopeMode::kNeox);
    EXPECT_EQ(config->file_type, 7);
  } else {
    EXPECT_EQ(config->rope_linear_scale, 4.0f);
    EXPECT_EQ(config->rope_dims, 8);
  }

  TestRegistry r;
  Result<LlamaModel> model = LlamaModel::load(*file, options(r.registry));
  ASSERT_TRUE(model.is_ok()) << model.status().to_string();
  EXPECT_TRUE(model->kernel_report().violations.empty()) << model->kernel_report().render();
  const auto t = tokens(12, model->config().vocab_size);
  std::vector<float> got = eval(*model, std::span(t).first(8));
  for (std::size_t i = 8; i < t.size(); ++i) {
    const std::vector<float> step = eval(*model, std::span(t).subspan(i, 1));
    got.insert(got.end(), step.begin(), step.end());
  }
  EXPECT_LT(max_scaled_error(got, testing::LlamaReference(*file).logits(t)), c.tolerance);
}

INSTANTIATE_TEST_SUITE_P(Files, ConverterLayoutTest,
                         ::testing::Values(LayoutCase{"llama3", 1e-4}, LayoutCase{"qwen2", 5e-2},
                                           LayoutCase{"linear", 1e-4}),
                         [](const ::testing::TestParamInfo<LayoutCase>& param) {
                           return param.param.kind;
                         });

// What a file must not get past: an architecture this build does not read, a
// scaling it does not apply, key_length and value_length that disagree, and a
// qwen2 file without its biases.
TEST(LlamaConfigTest, RefusesLayoutsItCannotRunNamingTheKey) {
  Result<SyntheticModel> m = generate_synthetic_llama(test_config());
  ASSERT_TRUE(m.is_ok());
  auto error = [&](const std::function<void(GgufMetadata&)>& edit) {
    GgufMetadata md = m->metadata;
    edit(md);
    return LlamaConfig::from_metadata(md).status();
  };
  EXPECT_THAT(error([](GgufMetadata& md) {
                md.set("general.architecture", GgufValue::string("gemma"));
              }).message(),
              ::testing::HasSubstr("'gemma'"));
  EXPECT_THAT(error([](GgufMetadata& md) {
                md.set("llama.rope.scaling.type", GgufValue::string("yarn"));
              }).message(),
              ::testing::HasSubstr("llama.rope.scaling.type is 'yarn'"));
  EXPECT_THAT(error([](GgufMetadata& md) {
                md.set("llama.rope.scaling.type", GgufValue::string("linear"));
              }).message(),
              ::testing::HasSubstr("llama.rope.scaling.factor"));
  EXPECT_THAT(error([](GgufMetadata& md) {
                md.set("llama.attention.key_length", GgufValue::u32(32));
                md.set("llama.attention.value_length", GgufValue::u32(16));
              }).message(),
              ::testing::HasSubstr("value_length"));
  // The same tensors under the qwen2 architecture: its biases are missing.
  Result<GgufWriter> w = synthetic_model_writer(*m);
  ASSERT_TRUE(w.is_ok());
  GgufMetadata renamed;
  for (const GgufMetadata::Entry& e : m->metadata.entries()) {
    std::string key = e.key;
    if (key.starts_with("llama.")) key = "qwen2." + key.substr(6);
    renamed.set(key, e.value);
  }
  renamed.set("general.architecture", GgufValue::string("qwen2"));
  w->metadata() = renamed;
  Result<LlamaConfig> qwen = LlamaConfig::from_gguf(write_and_open(*w, "qwen_no_bias"));
  EXPECT_EQ(qwen.status().code(), StatusCode::kNotFound);
  EXPECT_THAT(qwen.status().message(), ::testing::HasSubstr("blk.0.attn_q.bias"));
}

}  // namespace
}  // namespace switchyard
