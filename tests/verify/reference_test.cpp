// The float64 references checked against values computed by hand: a wrong
// reference would make every verdict of the harness worthless.
#include "verify/reference.h"

#include <cmath>
#include <limits>
#include <numbers>

#include <gtest/gtest.h>

namespace switchyard::verify_detail {
namespace {

constexpr double kTol = 1e-12;
constexpr double kInf = std::numeric_limits<double>::infinity();

RefTensor t(Shape shape, std::vector<double> values, DType dtype = DType::kF32) {
  return {dtype, shape, std::move(values)};
}

RefOutput run(OpKind op, std::vector<RefTensor> in, OpParams p = {}, DType out = DType::kF32) {
  Result<RefOutput> r = compute_reference(op, in, p, out);
  EXPECT_TRUE(r.is_ok()) << r.status().to_string();
  return r.is_ok() ? *r : RefOutput{};
}

void expect_values(const RefOutput& out, Shape shape, std::vector<double> expected,
                   double tol = kTol) {
  EXPECT_EQ(out.shape, shape) << out.shape.to_string();
  ASSERT_EQ(out.values.size(), expected.size());
  for (std::size_t i = 0; i < expected.size(); ++i) {
    EXPECT_NEAR(out.values[i], expected[i], tol) << "element " << i;
  }
}

TEST(VerifyReferenceTest, BinaryOps) {
  const Shape s{2, 2};
  auto a = t(s, {1, -2, 3.5, 0});
  auto b = t(s, {4, 0.5, -1, 2});
  expect_values(run(OpKind::kAdd, {a, b}), s, {5, -1.5, 2.5, 2});
  expect_values(run(OpKind::kSub, {a, b}), s, {-3, -2.5, 4.5, -2});
  expect_values(run(OpKind::kMul, {a, b}), s, {4, -1, -3.5, 0});
  expect_values(run(OpKind::kDiv, {a, b}), s, {0.25, -4, -3.5, 0});
  EXPECT_FALSE(
      compute_reference(OpKind::kAdd, std::vector{a, t(Shape{4}, {1, 2, 3, 4})}, {}, DType::kF32)
          .is_ok());
}

TEST(VerifyReferenceTest, UnaryOps) {
  const Shape s{1};
  auto one = [&](OpKind op, double x, OpParams p = {}) {
    return run(op, {t(s, {x})}, p).values[0];
  };
  EXPECT_NEAR(one(OpKind::kNeg, 2.5), -2.5, kTol);
  EXPECT_NEAR(one(OpKind::kExp, 1.0), std::numbers::e, kTol);
  EXPECT_NEAR(one(OpKind::kSilu, 1.0), 0.7310585786300049, kTol);
  EXPECT_NEAR(one(OpKind::kSilu, -2.0), -0.2384058440442351, kTol);
  // gelu (tanh form) and gelu_erf differ slightly at 1.
  EXPECT_NEAR(one(OpKind::kGelu, 1.0), 0.8411919906082768, kTol);
  EXPECT_NEAR(one(OpKind::kGeluErf, 1.0), 0.8413447460685429, kTol);
  EXPECT_NEAR(one(OpKind::kGeluErf, -1.0), -0.15865525393145707, kTol);
  // The negative tails, where the textbook forms cancel: relative accuracy holds.
  EXPECT_NEAR(one(OpKind::kGelu, -6.0) / -8.4396467007622970837e-11, 1.0, 1e-13);
  EXPECT_NEAR(one(OpKind::kGeluErf, -6.0) / -5.9195258702261888442e-9, 1.0, 1e-13);
  EXPECT_NEAR(one(OpKind::kSilu, -6.0) / -0.014835738939808646004, 1.0, 1e-13);
  EXPECT_EQ(one(OpKind::kRelu, -2.0), 0.0);
  EXPECT_EQ(one(OpKind::kRelu, 3.0), 3.0);
  EXPECT_EQ(one(OpKind::kSqrt, 6.25), 2.5);
  EXPECT_EQ(one(OpKind::kRsqrt, 4.0), 0.5);
  EXPECT_EQ(one(OpKind::kSigmoid, 0.0), 0.5);
  EXPECT_NEAR(one(OpKind::kSigmoid, 2.0), 0.8807970779778823, kTol);
  EXPECT_NEAR(one(OpKind::kTanh, 0.5), 0.46211715726000974, kTol);
  EXPECT_EQ(one(OpKind::kScale, 1.5, {.scale = 2.0f}), 3.0);
}

TEST(VerifyReferenceTest, CastRoundsToNearestEvenAndSaturates) {
  const double nan = std::numeric_limits<double>::quiet_NaN();
  const auto x = t(Shape{8}, {2.5, 3.5, -2.5, 300, -300, nan, 1.49, -0.5});
  expect_values(run(OpKind::kCast, {x}, {}, DType::kI8), Shape{8}, {2, 4, -2, 127, -128, 0, 1, -0});
  expect_values(run(OpKind::kCast, {x}, {}, DType::kU8), Shape{8}, {2, 4, 0, 255, 0, 0, 1, 0});
  expect_values(run(OpKind::kCast, {t(Shape{3}, {0, -1, 0.25})}, {}, DType::kBool), Shape{3},
                {0, 1, 1});
  // Float to float is the exact value: the harness judges the rounding.
  expect_values(run(OpKind::kCast, {t(Shape{1}, {0.1})}, {}, DType::kF16), Shape{1}, {0.1});
  EXPECT_FALSE(compute_reference(OpKind::kCast, std::vector{x}, {}, DType::kQ8_0).is_ok());
}

TEST(VerifyReferenceTest, MatmulSharedAndBatchedWeights) {
  // [[1,2,3],[4,5,6]] x [[1,0,-1],[2,1,0]]^T
  const RefOutput out = run(
      OpKind::kMatmul, {t(Shape{2, 3}, {1, 2, 3, 4, 5, 6}), t(Shape{2, 3}, {1, 0, -1, 2, 1, 0})});
  expect_values(out, Shape{2, 2}, {-2, 4, -2, 13});
  // The relative-bound scale is sum |a*w|, not |result|.
  EXPECT_EQ(out.scale, (std::vector<double>{4, 4, 10, 13}));
  // The NMSE floor: the sum of the squared terms (1 + 9 cancel to -2 in the first).
  EXPECT_EQ(out.energy, (std::vector<double>{10, 8, 52, 89}));
  // Batched weights: each batch has its own w.
  expect_values(
      run(OpKind::kMatmul, {t(Shape{2, 1, 2}, {1, 2, 3, 4}), t(Shape{2, 1, 2}, {1, 1, 0, 2})}),
      Shape{2, 1, 1}, {3, 8});
  // Shared weights across a batch.
  expect_values(run(OpKind::kMatmul, {t(Shape{2, 1, 2}, {1, 2, 3, 4}), t(Shape{1, 2}, {1, 1})}),
                Shape{2, 1, 1}, {3, 7});
  EXPECT_FALSE(compute_reference(OpKind::kMatmul,
                                 std::vector{t(Shape{1, 2}, {1, 2}), t(Shape{1, 3}, {1, 2, 3})}, {},
                                 DType::kF32)
                   .is_ok());
}

TEST(VerifyReferenceTest, RmsNormWithAndWithoutWeight) {
  const OpParams p{.eps = 0.0f};
  const double r = 1.0 / std::sqrt(12.5);  // mean of 9 and 16
  expect_values(run(OpKind::kRmsNorm, {t(Shape{1, 2}, {3, 4})}, p), Shape{1, 2}, {3 * r, 4 * r});
  expect_values(run(OpKind::kRmsNorm, {t(Shape{1, 2}, {3, 4}), t(Shape{2}, {2, -1})}, p),
                Shape{1, 2}, {6 * r, -4 * r});
  expect_values(run(OpKind::kRmsNormMul, {t(Shape{2}, {3, 4}), t(Shape{2}, {2, -1})}, p), Shape{2},
                {6 * r, -4 * r});
  // eps joins the mean square: x = [1], eps = 3 gives 1 / 2.
  expect_values(run(OpKind::kRmsNorm, {t(Shape{1}, {1})}, {.eps = 3.0f}), Shape{1}, {0.5});
  EXPECT_FALSE(
      compute_reference(OpKind::kRmsNormMul, std::vector{t(Shape{2}, {3, 4})}, p, DType::kF32)
          .is_ok());
}

TEST(VerifyReferenceTest, LayerNormUsesPopulationVariance) {
  const OpParams p{.eps = 0.0f};
  const double r = 1.0 / std::sqrt(2.0 / 3.0);
  const auto x = t(Shape{3}, {1, 2, 3});
  expect_values(run(OpKind::kLayerNorm, {x}, p), Shape{3}, {-r, 0, r});
  expect_values(run(OpKind::kLayerNorm, {x, t(Shape{3}, {1, 2, 3})}, p), Shape{3}, {-r, 0, 3 * r});
  expect_values(
      run(OpKind::kLayerNorm, {x, t(Shape{3}, {1, 2, 3}), t(Shape{3}, {0.5, 0.5, 0.5})}, p),
      Shape{3}, {0.5 - r, 0.5, 0.5 + 3 * r});
}

TEST(VerifyReferenceTest, SoftmaxScaleMaskAndCausal) {
  const double l2 = std::log(2.0), l3 = std::log(3.0);
  expect_values(run(OpKind::kSoftmax, {t(Shape{1, 3}, {0, l2, l3})}), Shape{1, 3},
                {1.0 / 6, 2.0 / 6, 3.0 / 6});
  expect_values(run(OpKind::kSoftmax, {t(Shape{1, 2}, {0, 2 * l2})}, {.scale = 0.5f}), Shape{1, 2},
                {1.0 / 3, 2.0 / 3});
  expect_values(run(OpKind::kSoftmax, {t(Shape{1, 3}, {0, l2, l3}), t(Shape{1, 3}, {0, -kInf, 0})}),
                Shape{1, 3}, {0.25, 0, 0.75});
  // Causal: row i sees columns j <= i + query_offset.
  const auto x = t(Shape{2, 3}, {0, 7, 7, 0, l3, 9});
  expect_values(run(OpKind::kSoftmax, {x}, {.causal = true}), Shape{2, 3},
                {1, 0, 0, 0.25, 0.75, 0});
  // query_offset -1 masks all of row 0: a fully masked row is zeros.
  expect_values(run(OpKind::kSoftmax, {x}, {.causal = true, .query_offset = -1}), Shape{2, 3},
                {0, 0, 0, 1, 0, 0});
  // The mask is [R, C] and repeats over the batch.
  expect_values(
      run(OpKind::kSoftmax, {t(Shape{2, 1, 2}, {0, 0, 5, 5}), t(Shape{1, 2}, {0, -kInf})}),
      Shape{2, 1, 2}, {1, 0, 1, 0});
}

TEST(VerifyReferenceTest, RopeNormalNeoxAndPartial) {
  // D = 4, base 100: pair 0 turns by pos, pair 1 by pos / 10. pos = 2.
  const auto x = t(Shape{1, 1, 4}, {1, 0, 0, 1});
  const auto pos = t(Shape{1}, {2}, DType::kI32);
  const OpParams normal{.rope_mode = RopeMode::kNormal, .rope_base = 100.0f};
  expect_values(run(OpKind::kRope, {x, pos}, normal), Shape{1, 1, 4},
                {std::cos(2.0), std::sin(2.0), -std::sin(0.2), std::cos(0.2)}, 1e-9);
  const OpParams neox{.rope_mode = RopeMode::kNeox, .rope_base = 100.0f};
  expect_values(run(OpKind::kRope, {x, pos}, neox), Shape{1, 1, 4},
                {std::cos(2.0), -std::sin(0.2), std::sin(2.0), std::cos(0.2)}, 1e-9);
  // rope_dims = 2: only the first pair turns (by pos), the rest is copied.
  const OpParams partial{.rope_mode = RopeMode::kNormal, .rope_base = 100.0f, .rope_dims = 2};
  expect_values(run(OpKind::kRope, {t(Shape{1, 1, 4}, {1, 0, 5, 6}), pos}, partial), Shape{1, 1, 4},
                {std::cos(2.0), std::sin(2.0), 5, 6}, 1e-9);
  // Position comes from the T index: two tokens, one head each.
  expect_values(run(OpKind::kRope, {t(Shape{2, 1, 2}, {1, 0, 1, 0}), t(Shape{2}, {0, 1})}, normal),
                Shape{2, 1, 2}, {1, 0, std::cos(1.0), std::sin(1.0)}, 1e-9);
  EXPECT_FALSE(
      compute_reference(OpKind::kRope, std::vector{x, pos}, {.rope_dims = 3}, DType::kF32).is_ok());
}

TEST(VerifyReferenceTest, GetRowsAndRangeCheck) {
  const auto table = t(Shape{3, 2}, {1, 2, 3, 4, 5, 6});
  expect_values(run(OpKind::kGetRows, {table, t(Shape{3}, {2, 0, 2}, DType::kI32)}), Shape{3, 2},
                {5, 6, 1, 2, 5, 6});
  for (double bad : {3.0, -1.0}) {
    Result<RefOutput> r = compute_reference(
        OpKind::kGetRows, std::vector{table, t(Shape{1}, {bad}, DType::kI32)}, {}, DType::kF32);
    ASSERT_FALSE(r.is_ok());
    EXPECT_EQ(r.status().code(), StatusCode::kOutOfRange);
  }
}

TEST(VerifyReferenceTest, Reductions) {
  const auto x = t(Shape{2, 3}, {1, -2, 3, 4, 5, 6});
  const RefOutput sum = run(OpKind::kSum, {x});
  expect_values(sum, Shape{2, 1}, {2, 15});
  EXPECT_EQ(sum.scale, (std::vector<double>{6, 15}));
  expect_values(run(OpKind::kMean, {x}), Shape{2, 1}, {2.0 / 3, 5});
  expect_values(run(OpKind::kMax, {t(Shape{2}, {-3, -1})}), Shape{1}, {-1});
}

TEST(VerifyReferenceTest, LayoutOps) {
  const auto x = t(Shape{2, 3}, {1, 2, 3, 4, 5, 6});
  expect_values(run(OpKind::kCopy, {x}), Shape{2, 3}, {1, 2, 3, 4, 5, 6});
  expect_values(run(OpKind::kTranspose, {x}), Shape{3, 2}, {1, 4, 2, 5, 3, 6});
  expect_values(run(OpKind::kTranspose, {t(Shape{2, 1, 2}, {1, 2, 3, 4})}), Shape{2, 2, 1},
                {1, 2, 3, 4});
  expect_values(run(OpKind::kConcat, {t(Shape{1, 2}, {1, 2}), t(Shape{1, 1}, {3})}, {.axis = -1}),
                Shape{1, 3}, {1, 2, 3});
  expect_values(
      run(OpKind::kConcat, {t(Shape{1, 2}, {1, 2}), t(Shape{2, 2}, {3, 4, 5, 6})}, {.axis = 0}),
      Shape{3, 2}, {1, 2, 3, 4, 5, 6});
  // Middle axis of [2, *, 1]: per outer index, x0's rows then x1's.
  expect_values(
      run(OpKind::kConcat,
          {t(Shape{2, 1, 1}, {1, 2}), t(Shape{2, 2, 1}, {3, 4, 5, 6}), t(Shape{2, 1, 1}, {7, 8})},
          {.axis = 1}),
      Shape{2, 4, 1}, {1, 3, 4, 7, 2, 5, 6, 8});
  EXPECT_FALSE(compute_reference(OpKind::kConcat,
                                 std::vector{t(Shape{1, 2}, {1, 2}), t(Shape{2, 1}, {3, 4})},
                                 {.axis = 0}, DType::kF32)
                   .is_ok());
}

TEST(VerifyReferenceTest, AttentionGroupedQueryCausalAndMask) {
  const double l3 = std::log(3.0);
  // One query, two keys with logits 0 and ln 3: weights 1/4, 3/4 over v = 10, 20.
  // k = [0, ln3] with q = 1, scale 1.
  auto k = t(Shape{2, 1, 1}, {0, l3});
  auto v = t(Shape{2, 1, 1}, {10, 20});
  expect_values(run(OpKind::kAttention, {t(Shape{1, 1, 1}, {1}), k, v}), Shape{1, 1, 1}, {17.5});
  // Two query heads share kv head 0; head 1 has q = 0, so equal weights.
  expect_values(run(OpKind::kAttention, {t(Shape{1, 2, 1}, {1, 0}), k, v}), Shape{1, 2, 1},
                {17.5, 15});
  // Causal with two queries: row 0 sees key 0 only.
  expect_values(run(OpKind::kAttention, {t(Shape{2, 1, 1}, {1, 1}), k, v}, {.causal = true}),
                Shape{2, 1, 1}, {10, 17.5});
  // A mask [Sq, Skv] hides key 1.
  expect_values(run(OpKind::kAttention, {t(Shape{1, 1, 1}, {1}), k, v, t(Shape{1, 2}, {0, -kInf})}),
                Shape{1, 1, 1}, {10});
  // Scale multiplies the logits: scale 0 gives equal weights.
  expect_values(run(OpKind::kAttention, {t(Shape{1, 1, 1}, {1}), k, v}, {.scale = 0.0f}),
                Shape{1, 1, 1}, {15});
  // H not a multiple of Hkv is refused.
  EXPECT_FALSE(
      compute_reference(OpKind::kAttention,
                        std::vector{t(Shape{1, 3, 1}, {1, 1, 1}), t(Shape{2, 2, 1}, {1, 1, 1, 1}),
                                    t(Shape{2, 2, 1}, {1, 1, 1, 1})},
                        {}, DType::kF32)
          .is_ok());
}

TEST(VerifyReferenceTest, LinearAndFfnSwiglu) {
  expect_values(run(OpKind::kLinear, {t(Shape{1, 2}, {1, 2}), t(Shape{2, 2}, {1, 1, 2, -1}),
                                      t(Shape{2}, {0.5, -1})}),
                Shape{1, 2}, {3.5, -1});
  // D = F = 1: g = 2, u = 6, silu(2) = 2 sigmoid(2), out = silu(2) * 6 * 0.5.
  const double silu2 = 2.0 / (1.0 + std::exp(-2.0));
  expect_values(run(OpKind::kFfnSwiglu, {t(Shape{1, 1}, {2}), t(Shape{1, 1}, {1}),
                                         t(Shape{1, 1}, {3}), t(Shape{1, 1}, {0.5})}),
                Shape{1, 1}, {silu2 * 3.0});
  // D = 1, F = 2: gate [1, -1], up [1, 1], down [[1, 2]]; x = 1.
  const double s1 = 1.0 / (1.0 + std::exp(-1.0)), sm1 = -1.0 / (1.0 + std::exp(1.0));
  expect_values(run(OpKind::kFfnSwiglu, {t(Shape{1}, {1}), t(Shape{2, 1}, {1, -1}),
                                         t(Shape{2, 1}, {1, 1}), t(Shape{1, 2}, {1, 2})}),
                Shape{1}, {s1 + 2 * sm1});
}

}  // namespace
}  // namespace switchyard::verify_detail
