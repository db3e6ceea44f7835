// The Sampler: its options' checks, greedy choice, each filter's effect on what
// can be drawn, the draw's frequencies against the distribution it claims, the
// repetition penalty, and the same tokens from the same seed.
#include "switchyard/sampling.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <map>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

namespace switchyard {
namespace {

using ::testing::HasSubstr;

// Logits whose softmax is `p` (at temperature 1).
std::vector<float> logits_of(std::initializer_list<double> p) {
  std::vector<float> l;
  for (double x : p) l.push_back(static_cast<float>(std::log(x)));
  return l;
}

// How often each token is drawn in `n` draws.
std::map<std::int32_t, int> draw_counts(const SamplingOptions& o, const std::vector<float>& l,
                                        int n, const std::vector<std::int32_t>& history = {}) {
  Result<Sampler> s = Sampler::create(o);
  EXPECT_TRUE(s.is_ok()) << s.status().to_string();
  std::map<std::int32_t, int> counts;
  for (int i = 0; i < n && s.is_ok(); ++i) {
    Result<std::int32_t> t = s->sample(l, history);
    EXPECT_TRUE(t.is_ok()) << t.status().to_string();
    if (t.is_ok()) ++counts[*t];
  }
  return counts;
}

SamplingOptions unfiltered(float temperature = 1.0f) {
  return {.temperature = temperature, .top_k = 0, .top_p = 1.0f, .min_p = 0.0f};
}

TEST(SamplerTest, BadOptionsAreRefusedNamingTheOption) {
  const std::pair<SamplingOptions, const char*> cases[] = {
      {{.temperature = -0.5f}, "temperature"},
      {{.temperature = std::nanf("")}, "temperature"},
      {{.top_k = -1}, "top-k"},
      {{.top_p = 0.0f}, "top-p"},
      {{.top_p = 1.5f}, "top-p"},
      {{.min_p = 1.0f}, "min-p"},
      {{.min_p = -0.1f}, "min-p"},
      {{.repeat_penalty = 0.0f}, "repetition penalty"},
      {{.repeat_penalty = INFINITY}, "repetition penalty"},
      {{.repeat_last_n = -2}, "repeat-last-n"},
  };
  for (const auto& [options, word] : cases) {
    Result<Sampler> s = Sampler::create(options);
    ASSERT_FALSE(s.is_ok()) << word;
    EXPECT_EQ(s.status().code(), StatusCode::kInvalidArgument);
    EXPECT_THAT(std::string(s.status().message()), HasSubstr(word));
  }
  EXPECT_TRUE(Sampler::create({}).is_ok());
}

TEST(SamplerTest, GreedyTakesTheFirstMostLikelyAndRefusesNaN) {
  Result<Sampler> s = Sampler::create({});  // temperature 0
  ASSERT_TRUE(s.is_ok());
  const std::vector<float> tie = {0.5f, 2.0f, -1.0f, 2.0f};
  EXPECT_EQ(*s->sample(tie, {}), 1);
  const std::vector<float> all_masked(3, -INFINITY);
  EXPECT_EQ(*s->sample(all_masked, {}), 0);
  const std::vector<float> with_nan = {0.5f, std::nanf(""), 1.0f};
  const Result<std::int32_t> nan = s->sample(with_nan, {});
  EXPECT_EQ(nan.status().code(), StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(nan.status().message()), HasSubstr("logit 1 is NaN"));
  EXPECT_EQ(s->sample({}, {}).status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(describe(SamplingOptions{}), "greedy");
}

// 40,000 draws: each frequency within 0.01 of its probability (about four
// standard deviations at p = 0.5).
TEST(SamplerTest, DrawsFollowTheTemperedDistribution) {
  const std::vector<float> l = logits_of({0.5, 0.3, 0.15, 0.05});
  constexpr int kDraws = 40000;
  for (float t : {1.0f, 0.5f, 2.0f}) {
    std::vector<double> want(l.size());
    double total = 0;
    for (std::size_t i = 0; i < l.size(); ++i) total += want[i] = std::exp(l[i] / t);
    const auto counts = draw_counts(unfiltered(t), l, kDraws);
    for (std::size_t i = 0; i < l.size(); ++i) {
      const double got = counts.count(static_cast<std::int32_t>(i)) != 0
                             ? counts.at(static_cast<std::int32_t>(i)) / double(kDraws)
                             : 0.0;
      EXPECT_NEAR(got, want[i] / total, 0.01) << "token " << i << " at temperature " << t;
    }
  }
}

TEST(SamplerTest, EachFilterRemovesWhatItSays) {
  const std::vector<float> l = logits_of({0.5, 0.3, 0.15, 0.05});
  // top-k 2: only the two most likely.
  SamplingOptions k2 = unfiltered();
  k2.top_k = 2;
  auto counts = draw_counts(k2, l, 4000);
  EXPECT_EQ(counts.size(), 2u);
  EXPECT_GT(counts[0], counts[1]);
  EXPECT_GT(counts[1], 0);
  // top-k 1 is greedy.
  SamplingOptions k1 = unfiltered();
  k1.top_k = 1;
  EXPECT_EQ(draw_counts(k1, l, 200)[0], 200);
  // min-p 0.2: 0.05 / 0.5 = 0.1 falls out, 0.15 / 0.5 = 0.3 stays.
  SamplingOptions mp = unfiltered();
  mp.min_p = 0.2f;
  counts = draw_counts(mp, l, 8000);
  EXPECT_EQ(counts.count(3), 0u);
  EXPECT_GT(counts[2], 0);
  // top-p 0.75: 0.5 + 0.3 reach it, so tokens 2 and 3 are never drawn, and the
  // two kept are drawn 5:3.
  SamplingOptions tp = unfiltered();
  tp.top_p = 0.75f;
  counts = draw_counts(tp, l, 16000);
  EXPECT_EQ(counts.size(), 2u);
  EXPECT_NEAR(counts[0] / 16000.0, 0.625, 0.015);
  // top-p smaller than the top token's share still keeps it.
  SamplingOptions tiny = unfiltered();
  tiny.top_p = 0.01f;
  EXPECT_EQ(draw_counts(tiny, l, 100)[0], 100);
  // A masked token (-inf) is never drawn.
  std::vector<float> masked = l;
  masked[0] = -INFINITY;
  EXPECT_EQ(draw_counts(unfiltered(), masked, 2000).count(0), 0u);
}

// top-p over a flat distribution keeps hundreds of tokens: more than the first
// selection of 64 and its first growth, so the kept set comes from the growing
// partial selection. Here token i has logit -0.002 i: the kept set is a prefix of
// the ids, whose length the test counts by brute force.
TEST(SamplerTest, TopPKeepsExactlyThePrefixThatHoldsItsMass) {
  constexpr int kVocab = 5000;
  std::vector<float> l(kVocab);
  for (int i = 0; i < kVocab; ++i) l[static_cast<std::size_t>(i)] = -0.002f * static_cast<float>(i);
  SamplingOptions o = unfiltered();
  o.top_p = 0.5f;
  double total = 0;
  for (float x : l) total += std::exp(static_cast<double>(x - l[0]));
  double mass = 0;
  int kept = 0;
  while (mass < 0.5 * total)
    mass += std::exp(static_cast<double>(l[static_cast<std::size_t>(kept++)] - l[0]));
  ASSERT_GT(kept, 4 * 64);
  const auto counts = draw_counts(o, l, 1000);
  int highest = 0;
  for (const auto& [token, n] : counts) highest = std::max(highest, token);
  EXPECT_LT(highest, kept);
  EXPECT_GE(highest, kept * 9 / 10) << "the kept set is cut short";
}

TEST(SamplerTest, TheRepetitionPenaltyLowersRecentTokens) {
  // Token 1 leads; penalized by 4 it falls below token 0 (2.0 / 4 = 0.5 < 1.0);
  // a negative logit is multiplied instead (-1 * 4).
  const std::vector<float> l = {1.0f, 2.0f, -1.0f, 0.9f};
  SamplingOptions o;
  o.repeat_penalty = 4.0f;
  o.repeat_last_n = 2;
  Result<Sampler> greedy = Sampler::create(o);
  ASSERT_TRUE(greedy.is_ok());
  const std::vector<std::int32_t> recent = {3, 1, 1};
  EXPECT_EQ(*greedy->sample(l, recent), 0);
  // Only the last repeat_last_n tokens count: here token 1 is too old.
  const std::vector<std::int32_t> old = {1, 2, 3};
  EXPECT_EQ(*greedy->sample(l, old), 1);
  // Penalizing tokens 0 and 3 (to 0.25 and 0.225) leaves token 1 in the lead.
  const std::vector<std::int32_t> both = {0, 3};
  EXPECT_EQ(*greedy->sample(l, both), 1);
  const std::vector<std::int32_t> outside = {7};
  EXPECT_EQ(greedy->sample(l, outside).status().code(), StatusCode::kInvalidArgument);
  // Drawn: a negative logit times the penalty is drawn less often.
  SamplingOptions drawn = unfiltered();
  drawn.repeat_penalty = 3.0f;
  const std::vector<float> flat = {-1.0f, -1.0f};
  const auto counts = draw_counts(drawn, flat, 8000, {0});
  // p(0) = e^-3 / (e^-3 + e^-1) = 0.119.
  EXPECT_NEAR(counts.count(0) != 0 ? counts.at(0) / 8000.0 : 0.0, 0.119, 0.015);
}

TEST(SamplerTest, TheSameSeedGivesTheSameTokens) {
  std::vector<float> l(1000);
  for (std::size_t i = 0; i < l.size(); ++i) l[i] = static_cast<float>(std::sin(i * 0.37) * 3);
  auto draws = [&](std::uint64_t seed) {
    SamplingOptions o{.temperature = 0.9f, .seed = seed};
    Result<Sampler> s = Sampler::create(o);
    std::vector<std::int32_t> out;
    for (int i = 0; i < 64; ++i) out.push_back(*s->sample(l, out));
    return out;
  };
  EXPECT_EQ(draws(7), draws(7));
  EXPECT_NE(draws(7), draws(8));
  EXPECT_EQ(describe(SamplingOptions{.temperature = 0.9f, .seed = 3}),
            "temperature 0.9, top-k 40, top-p 0.95, min-p 0.05, seed 3");
}

// A vocabulary of Llama-3's size with the default filters: the draw is among the
// few tokens near the top, and the sampler's scratch stays in use across draws.
TEST(SamplerTest, ALargeVocabularyDrawsNearTheTop) {
  std::vector<float> l(128256);
  for (std::size_t i = 0; i < l.size(); ++i) l[i] = static_cast<float>(std::cos(i * 0.001) * 8);
  l[123456] = 20.0f;
  l[17] = 19.5f;
  Result<Sampler> s = Sampler::create({.temperature = 0.7f});
  ASSERT_TRUE(s.is_ok());
  for (int i = 0; i < 50; ++i) {
    const std::int32_t t = *s->sample(l, {});
    EXPECT_TRUE(t == 123456 || t == 17) << t;
  }
}

}  // namespace
}  // namespace switchyard
