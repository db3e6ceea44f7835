// Chunked perplexity: the value and its standard error against the float64
// reference forward pass (tests/models/llama_reference.h), which scored rows and
// which first token each chunk gets, batches smaller than a chunk, and the
// refusals.
#include "switchyard/perplexity.h"

#include <unistd.h>

#include <cmath>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "models/llama_reference.h"
#include "switchyard/synthetic_model.h"

namespace switchyard {
namespace {

using ::testing::HasSubstr;

GgufFile small_model_file() {
  SyntheticLlamaConfig c = default_synthetic_llama_config();
  c.tokenizer = false;
  c.block_count = 2;
  c.context_length = 64;
  Result<SyntheticModel> m = generate_synthetic_llama(c);
  EXPECT_TRUE(m.is_ok()) << m.status().to_string();
  const std::filesystem::path path =
      std::filesystem::path(::testing::TempDir()) /
      ("switchyard_perplexity_" + std::to_string(::getpid()) + ".gguf");
  Status st = write_synthetic_model(*m, path);
  EXPECT_TRUE(st.is_ok()) << st.to_string();
  Result<GgufFile> file = GgufFile::open(path);
  EXPECT_TRUE(file.is_ok()) << file.status().to_string();
  std::filesystem::remove(path);
  return std::move(*file);
}

class PerplexityTest : public ::testing::Test {
 protected:
  void SetUp() override {
    file_ = small_model_file();
    LlamaLoadOptions o;
    o.registry = &registry_;
    o.max_context = 16;
    o.max_batch = 16;
    o.cache_dtype = DType::kF32;
    Result<LlamaModel> m = LlamaModel::load(*file_, o);
    ASSERT_TRUE(m.is_ok()) << m.status().to_string();
    model_.emplace(std::move(*m));
    for (int i = 0; i < 40; ++i) tokens_.push_back((i * 131 + 7) % 512);
  }

  // The perplexity the definition gives, from the float64 reference's logits.
  std::pair<double, double> reference(std::int64_t context, std::int32_t bos) const {
    testing::LlamaReference ref(*file_);
    double sum = 0, squares = 0;
    int count = 0;
    for (std::size_t c = 0; (c + 1) * context <= tokens_.size(); ++c) {
      std::vector<std::int32_t> chunk(tokens_.begin() + c * context,
                                      tokens_.begin() + (c + 1) * context);
      if (bos >= 0) chunk[0] = bos;
      const std::vector<double> logits = ref.logits(chunk);
      for (std::int64_t j = context / 2; j < context - 1; ++j) {
        const double* row = logits.data() + j * ref.vocab();
        double top = row[0];
        for (std::int64_t v = 0; v < ref.vocab(); ++v) top = std::max(top, row[v]);
        double z = 0;
        for (std::int64_t v = 0; v < ref.vocab(); ++v) z += std::exp(row[v] - top);
        const double nll = std::log(z) + top - row[chunk[j + 1]];
        sum += nll;
        squares += nll * nll;
        ++count;
      }
    }
    const double mean = sum / count;
    return {std::exp(mean),
            std::exp(mean) * std::sqrt((squares / count - mean * mean) / (count - 1))};
  }

  Registry registry_{RegistryConfig{.sink = [](std::string_view) {}}};
  std::optional<GgufFile> file_;
  std::optional<LlamaModel> model_;
  std::vector<std::int32_t> tokens_;
};

TEST_F(PerplexityTest, MatchesTheDefinitionOnTheReferenceForwardPass) {
  for (std::int32_t bos : {-1, 1}) {
    std::int64_t scored = 0;
    std::vector<std::int32_t> targets;
    Result<PerplexityResult> r =
        compute_perplexity(*model_, tokens_,
                           {.context = 16,
                            .batch = 16,
                            .bos = bos,
                            .on_scored = [&](std::span<const float> row, std::int32_t target) {
                              EXPECT_EQ(row.size(), 512u);
                              targets.push_back(target);
                              ++scored;
                              return Status::ok();
                            }});
    ASSERT_TRUE(r.is_ok()) << r.status().to_string();
    // 40 tokens: two chunks of 16 (the last 8 tokens make no chunk), positions
    // 8..14 of each scored.
    EXPECT_EQ(r->chunks, 2);
    EXPECT_EQ(r->scored_tokens, 14);
    EXPECT_EQ(scored, 14);
    EXPECT_EQ(r->evaluated_tokens, 32);
    EXPECT_EQ(targets.front(), tokens_[9]);
    EXPECT_EQ(targets.back(), tokens_[16 + 15]);
    const auto [ppl, err] = reference(16, bos);
    EXPECT_NEAR(r->perplexity, ppl, 1e-4 * ppl) << "bos " << bos;
    EXPECT_NEAR(r->perplexity_stderr, err, 1e-3 * err + 1e-9) << "bos " << bos;
  }
}

TEST_F(PerplexityTest, SmallerBatchesAndFewerChunksGiveTheSameScores) {
  Result<PerplexityResult> whole =
      compute_perplexity(*model_, tokens_, {.context = 16, .batch = 16});
  Result<PerplexityResult> batched =
      compute_perplexity(*model_, tokens_, {.context = 16, .batch = 5});
  ASSERT_TRUE(whole.is_ok() && batched.is_ok());
  EXPECT_NEAR(batched->perplexity, whole->perplexity, 1e-5 * whole->perplexity);
  Result<PerplexityResult> one =
      compute_perplexity(*model_, tokens_, {.context = 16, .batch = 16, .max_chunks = 1});
  ASSERT_TRUE(one.is_ok());
  EXPECT_EQ(one->chunks, 1);
  EXPECT_EQ(one->scored_tokens, perplexity_scored_per_chunk(16));
}

TEST_F(PerplexityTest, RefusesWhatItCannotScore) {
  auto error = [&](std::span<const std::int32_t> t, const PerplexityOptions& o) {
    return compute_perplexity(*model_, t, o).status();
  };
  EXPECT_THAT(error(tokens_, {.context = 3, .batch = 3}).message(), HasSubstr("context"));
  EXPECT_THAT(error(tokens_, {.context = 32, .batch = 16}).message(), HasSubstr("context"));
  EXPECT_THAT(error(tokens_, {.context = 16, .batch = 17}).message(), HasSubstr("batch"));
  EXPECT_THAT(error(std::span(tokens_).first(10), {.context = 16, .batch = 16}).message(),
              HasSubstr("10 tokens, fewer than one chunk of 16"));
  std::vector<std::int32_t> bad = tokens_;
  bad[3] = 100000;
  EXPECT_EQ(error(bad, {.context = 16, .batch = 16}).code(), StatusCode::kOutOfRange);
  // An error from the caller's row callback stops the computation.
  Status stop = error(
      tokens_, {.context = 16, .batch = 16, .on_scored = [](std::span<const float>, std::int32_t) {
                  return unavailable_error("disk full");
                }});
  EXPECT_THAT(stop.message(), HasSubstr("disk full"));
}

}  // namespace
}  // namespace switchyard
