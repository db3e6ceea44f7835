// CPU rms_norm, layer_norm, softmax and sum/mean/max: every registered sibling
// against a double-precision expectation under its declared bound, at odd row
// lengths, with the optional operands, causal masking and the error paths.
#include <cmath>
#include <limits>

#include <fmt/format.h>

#include "backends/cpu_test_util.h"

namespace switchyard::test {
namespace {

constexpr DType kFloats[] = {DType::kF32, DType::kF16, DType::kBF16};
constexpr std::int64_t kOddSizes[] = {1, 3, 17, 33, 1031};
constexpr double kInf = std::numeric_limits<double>::infinity();

std::vector<double> norm_expect(OpKind op, const Tensor& x, const Tensor* w, const Tensor* b,
                                double eps) {
  const std::int64_t d = x.shape().inner();
  const std::int64_t rows = x.numel() / d;
  std::vector<double> out(static_cast<std::size_t>(x.numel()));
  for (std::int64_t r = 0; r < rows; ++r) {
    double mean = 0, sq = 0;
    for (std::int64_t j = 0; j < d; ++j) mean += x.get(r * d + j);
    mean /= static_cast<double>(d);
    for (std::int64_t j = 0; j < d; ++j) {
      const double c = x.get(r * d + j) - (op == OpKind::kLayerNorm ? mean : 0.0);
      sq += c * c;
    }
    const double inv = 1 / std::sqrt(sq / static_cast<double>(d) + eps);
    for (std::int64_t j = 0; j < d; ++j) {
      double v = (x.get(r * d + j) - (op == OpKind::kLayerNorm ? mean : 0.0)) * inv;
      if (w != nullptr) v *= w->get(j);
      if (b != nullptr) v += b->get(j);
      out[r * d + j] = v;
    }
  }
  return out;
}

TEST(CpuNormTest, RmsNormIsHandCheckable) {
  // [3, 4]: mean of squares 12.5.
  const DType t = DType::kF32;
  Tensor x = Tensor::of(t, {1, 2}, {3, 4});
  Tensor w = Tensor::of(t, {2}, {2, 0.5});
  OpParams params;
  params.eps = 0;
  for (const BindingEntry& e : cpu_entries(OpKind::kRmsNorm, {t, t, t})) {
    Tensor out(t, {1, 2});
    ASSERT_TRUE(call_entry(e, {x.view(), w.view()}, {out.view()}, params).is_ok()) << e.name;
    EXPECT_NEAR(out.get(0), 6 / std::sqrt(12.5), 1e-6) << e.name;
    EXPECT_NEAR(out.get(1), 2 / std::sqrt(12.5), 1e-6) << e.name;
  }
}

TEST(CpuNormTest, NormsMatchDoubleWithEveryArity) {
  OpParams params;
  params.eps = 1e-5f;
  for (DType t : kFloats) {
    for (std::int64_t d : kOddSizes) {
      Tensor x = Tensor::of(t, {3, d}, random_values(3 * d, -2, 3, 21));
      Tensor w = Tensor::of(t, {d}, random_values(d, 0.5, 1.5, 22));
      Tensor b = Tensor::of(t, {d}, random_values(d, -1, 1, 23));
      for (OpKind op : {OpKind::kRmsNorm, OpKind::kLayerNorm}) {
        for (int inputs = 1; inputs <= (op == OpKind::kLayerNorm ? 3 : 2); ++inputs) {
          DTypeList dtypes = inputs == 1   ? DTypeList{t, t}
                             : inputs == 2 ? DTypeList{t, t, t}
                                           : DTypeList{t, t, t, t};
          std::vector<TensorView> in = {x.view()};
          if (inputs >= 2) in.push_back(w.view());
          if (inputs >= 3) in.push_back(b.view());
          const std::vector<double> expected = norm_expect(op, x, inputs >= 2 ? &w : nullptr,
                                                           inputs >= 3 ? &b : nullptr, params.eps);
          const std::vector<BindingEntry> entries = cpu_entries(op, dtypes);
          ASSERT_FALSE(entries.empty()) << name(op) << " " << inputs;
          for (const BindingEntry& e : entries) {
            Tensor out(t, {3, d});
            ASSERT_TRUE(call_entry(e, in, {out.view()}, params).is_ok()) << e.name;
            expect_within(out, expected, e, "d=" + std::to_string(d));
          }
        }
      }
    }
  }
}

TEST(CpuNormTest, NormsRefuseMalformedCalls) {
  const DType t = DType::kF32;
  Tensor x(t, {2, 8}), out(t, {2, 8}), short_w(t, {7}), half(DType::kF16, {8});
  for (const BindingEntry& e : cpu_entries(OpKind::kRmsNorm, {t, t, t})) {
    EXPECT_EQ(call_entry(e, {x.view(), short_w.view()}, {out.view()}).code(),
              StatusCode::kInvalidArgument);
    EXPECT_EQ(call_entry(e, {x.view(), half.view()}, {out.view()}).code(),
              StatusCode::kInvalidArgument);
    EXPECT_EQ(call_entry(e, {x.view()}, {out.view()}).code(), StatusCode::kInvalidArgument);
  }
}

std::vector<double> softmax_expect(const Tensor& x, const Tensor* mask, double scale, bool causal,
                                   std::int64_t offset) {
  const std::int64_t c = x.shape().inner();
  const std::int64_t r_per = x.shape().rank() >= 2 ? x.shape()[x.shape().rank() - 2] : 1;
  const std::int64_t rows = x.numel() / c;
  std::vector<double> out(static_cast<std::size_t>(x.numel()), 0.0);
  for (std::int64_t r = 0; r < rows; ++r) {
    const std::int64_t i = r % r_per;
    std::vector<double> l(static_cast<std::size_t>(c));
    double m = -kInf;
    for (std::int64_t j = 0; j < c; ++j) {
      l[j] = x.get(r * c + j) * scale + (mask ? mask->get(i * c + j) : 0.0);
      if (causal && j > i + offset) l[j] = -kInf;
      m = std::max(m, l[j]);
    }
    if (m == -kInf) continue;
    double s = 0;
    for (std::int64_t j = 0; j < c; ++j) s += std::exp(l[j] - m);
    for (std::int64_t j = 0; j < c; ++j) out[r * c + j] = std::exp(l[j] - m) / s;
  }
  return out;
}

TEST(CpuSoftmaxTest, SoftmaxMatchesDoubleWithMaskAndCausal) {
  for (DType t : kFloats) {
    for (std::int64_t c : kOddSizes) {
      Tensor x = Tensor::of(t, {2, 3, c}, random_values(6 * c, -6, 6, 31));
      Tensor mask = Tensor::of(t, {3, c}, random_values(3 * c, -2, 0, 32));
      mask.set(0, -kInf);
      for (bool with_mask : {false, true}) {
        for (bool causal : {false, true}) {
          for (std::int64_t offset : {std::int64_t{0}, std::int64_t{2}, std::int64_t{-1}}) {
            OpParams params;
            params.scale = 0.7f;
            params.causal = causal;
            params.query_offset = offset;
            const std::vector<double> expected =
                softmax_expect(x, with_mask ? &mask : nullptr, params.scale, causal, offset);
            const DTypeList dtypes = with_mask ? DTypeList{t, t, t} : DTypeList{t, t};
            std::vector<TensorView> in = {x.view()};
            if (with_mask) in.push_back(mask.view());
            for (const BindingEntry& e : cpu_entries(OpKind::kSoftmax, dtypes)) {
              Tensor out(t, {2, 3, c});
              ASSERT_TRUE(call_entry(e, in, {out.view()}, params).is_ok()) << e.name;
              expect_within(out, expected, e,
                            fmt::format("c={} causal={} offset={}", c, causal, offset));
            }
          }
        }
      }
    }
  }
}

// Logits so large that one f32 ulp of the maximum exceeds the exponential's range:
// the shift by the maximum must leave the maximum's own lane at 0 (or near it), or
// its exponential overflows.
TEST(CpuSoftmaxTest, HugeLogitsGiveTheOneHotRow) {
  const DType t = DType::kF32;
  const std::int64_t c = 37;
  std::vector<double> v = random_values(2 * c, -6, 6, 41);
  v[5] = 3.1e9;
  v[20] = 3.0e9;
  v[c + 30] = -2.9e9;
  Tensor x = Tensor::of(t, {2, c}, v);
  for (float scale : {1.0f, 0.7f, -1.3f}) {
    OpParams params;
    params.scale = scale;
    const std::vector<double> expected = softmax_expect(x, nullptr, scale, false, 0);
    for (const BindingEntry& e : cpu_entries(OpKind::kSoftmax, {t, t})) {
      Tensor out(t, {2, c});
      ASSERT_TRUE(call_entry(e, {x.view()}, {out.view()}, params).is_ok()) << e.name;
      expect_within(out, expected, e, fmt::format("scale={}", scale));
    }
  }
}

TEST(CpuSoftmaxTest, FullyMaskedRowsAreZero) {
  const DType t = DType::kF32;
  Tensor x = Tensor::of(t, {2, 3}, {1, 2, 3, 4, 5, 6});
  OpParams params;
  params.causal = true;
  params.query_offset = -1;  // row 0 sees nothing, row 1 sees column 0
  for (const BindingEntry& e : cpu_entries(OpKind::kSoftmax, {t, t})) {
    Tensor out = Tensor::of(t, {2, 3}, {9, 9, 9, 9, 9, 9});
    ASSERT_TRUE(call_entry(e, {x.view()}, {out.view()}, params).is_ok()) << e.name;
    EXPECT_EQ(out.values(), (std::vector<double>{0, 0, 0, 1, 0, 0})) << e.name;
  }
}

TEST(CpuSoftmaxTest, SoftmaxRefusesAMaskOfTheWrongShape) {
  const DType t = DType::kF32;
  Tensor x(t, {2, 3}), mask(t, {3, 2}), out(t, {2, 3});
  for (const BindingEntry& e : cpu_entries(OpKind::kSoftmax, {t, t, t})) {
    EXPECT_EQ(call_entry(e, {x.view(), mask.view()}, {out.view()}).code(),
              StatusCode::kInvalidArgument);
  }
}

TEST(CpuReduceTest, SumMeanMaxMatchDouble) {
  for (DType t : kFloats) {
    for (std::int64_t d : kOddSizes) {
      Tensor x = Tensor::of(t, {3, d}, random_values(3 * d, -1, 2, 41));
      for (OpKind op : {OpKind::kSum, OpKind::kMean, OpKind::kMax}) {
        std::vector<double> expected(3);
        for (std::int64_t r = 0; r < 3; ++r) {
          double s = 0, m = -kInf;
          for (std::int64_t j = 0; j < d; ++j) {
            s += x.get(r * d + j);
            m = std::max(m, x.get(r * d + j));
          }
          expected[r] = op == OpKind::kSum    ? s
                        : op == OpKind::kMean ? s / static_cast<double>(d)
                                              : m;
        }
        for (const BindingEntry& e : cpu_entries(op, {t, t})) {
          Tensor out(t, {3, 1});
          ASSERT_TRUE(call_entry(e, {x.view()}, {out.view()}).is_ok()) << e.name;
          if (e.precision.audit == AuditState::kNoBound) {
            // No claim, but positive-mean data does not cancel: f32 lanes stay close.
            for (int r = 0; r < 3; ++r) {
              EXPECT_NEAR(out.get(r), expected[r], 1e-5 * d + 4 * ulp_of(expected[r], t)) << e.name;
            }
          } else {
            expect_within(out, expected, e, "d=" + std::to_string(d));
          }
        }
      }
    }
  }
}

TEST(CpuReduceTest, MaxPropagatesNaNAndSumIsHandCheckable) {
  const DType t = DType::kF32;
  Tensor x = Tensor::of(t, {2, 3}, {1, std::nan(""), 3, -4, -5, 6.5});
  for (const BindingEntry& e : cpu_entries(OpKind::kMax, {t, t})) {
    Tensor out(t, {2, 1});
    ASSERT_TRUE(call_entry(e, {x.view()}, {out.view()}).is_ok()) << e.name;
    EXPECT_TRUE(std::isnan(out.get(0))) << e.name;
    EXPECT_EQ(out.get(1), 6.5) << e.name;
  }
  for (const BindingEntry& e : cpu_entries(OpKind::kSum, {t, t})) {
    Tensor out(t, {2, 1});
    ASSERT_TRUE(call_entry(e, {x.view()}, {out.view()}).is_ok()) << e.name;
    EXPECT_EQ(out.get(1), -2.5) << e.name;
  }
}

TEST(CpuReduceTest, ReductionsRefuseAWrongOutputShape) {
  const DType t = DType::kF32;
  Tensor x(t, {2, 3}), out(t, {2, 2}), flat(t, {2});
  for (OpKind op : {OpKind::kSum, OpKind::kMean, OpKind::kMax}) {
    for (const BindingEntry& e : cpu_entries(op, {t, t})) {
      EXPECT_EQ(call_entry(e, {x.view()}, {out.view()}).code(), StatusCode::kInvalidArgument);
      EXPECT_EQ(call_entry(e, {x.view()}, {flat.view()}).code(), StatusCode::kInvalidArgument);
    }
  }
}

}  // namespace
}  // namespace switchyard::test
