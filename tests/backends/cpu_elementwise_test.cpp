// CPU elementwise kernels (binary, unary, scale, casts): every registered sibling
// against a double-precision expectation under its declared bound, broadcasting,
// odd sizes, strided views, SIMD siblings against the reference, error paths.
#include <algorithm>
#include <cmath>
#include <functional>
#include <limits>

#include "backends/cpu/elementwise/elementwise.h"
#include "backends/cpu_test_util.h"

namespace switchyard::test {
namespace {

constexpr DType kFloats[] = {DType::kF32, DType::kF16, DType::kBF16};
constexpr std::int64_t kOddSizes[] = {1, 3, 17, 33};

double binary_expect(OpKind op, double a, double b) {
  switch (op) {
    case OpKind::kAdd: return a + b;
    case OpKind::kSub: return a - b;
    case OpKind::kMul: return a * b;
    default: return a / b;
  }
}

double unary_expect(OpKind op, double x, double scale) {
  switch (op) {
    case OpKind::kNeg: return -x;
    case OpKind::kExp: return std::exp(x);
    case OpKind::kSilu: return x / (1 + std::exp(-x));
    case OpKind::kGelu: {
      // 0.5 x (1 + tanh(y)) == x / (1 + e^(-2y)); the second form does not cancel.
      const double y = std::sqrt(2 / M_PI) * (x + 0.044715 * x * x * x);
      return x / (1 + std::exp(-2 * y));
    }
    case OpKind::kGeluErf: return 0.5 * x * std::erfc(-x / std::sqrt(2.0));
    case OpKind::kRelu: return x > 0 ? x : 0;
    case OpKind::kSqrt: return std::sqrt(x);
    case OpKind::kRsqrt: return 1 / std::sqrt(x);
    case OpKind::kSigmoid: return 1 / (1 + std::exp(-x));
    case OpKind::kTanh: return std::tanh(x);
    case OpKind::kGeluQuick: return x / (1 + std::exp(-1.702 * x));
    case OpKind::kScale: return x * scale;
    default: ADD_FAILURE() << "no expected value for unary op " << name(op); return std::nan("");
  }
}

// The input range each unary op is exercised on (inside f16's range).
std::pair<double, double> unary_range(OpKind op) {
  if (op == OpKind::kSqrt || op == OpKind::kRsqrt) return {0.01, 100};
  if (op == OpKind::kExp) return {-12, 10};
  return {-9, 9};
}

TEST(CpuElementwiseTest, AddIsHandCheckable) {
  for (const BindingEntry& e : cpu_entries(OpKind::kAdd, {DType::kF32, DType::kF32, DType::kF32})) {
    Tensor a = Tensor::of(DType::kF32, {3}, {1, 2, 3});
    Tensor b = Tensor::of(DType::kF32, {3}, {10, 20, 30.5});
    Tensor out(DType::kF32, {3});
    ASSERT_TRUE(call_entry(e, {a.view(), b.view()}, {out.view()}).is_ok()) << e.name;
    EXPECT_EQ(out.values(), (std::vector<double>{11, 22, 33.5})) << e.name;
  }
}

TEST(CpuElementwiseTest, BinaryOpsMatchDoubleAtOddSizes) {
  for (OpKind op : kOpsOfFamily<OpFamily::kBinary>) {
    for (DType t : kFloats) {
      const std::vector<BindingEntry> entries = cpu_entries(op, {t, t, t});
      ASSERT_FALSE(entries.empty()) << name(op) << " " << name(t);
      for (std::int64_t n : kOddSizes) {
        Tensor a = Tensor::of(t, {2, n}, random_values(2 * n, -4, 4, 1));
        Tensor b = Tensor::of(t, {2, n}, random_values(2 * n, 0.5, 3, 2));
        std::vector<double> expected(static_cast<std::size_t>(2 * n));
        for (std::size_t i = 0; i < expected.size(); ++i) {
          expected[i] = binary_expect(op, a.get(i), b.get(i));
        }
        for (const BindingEntry& e : entries) {
          Tensor out(t, {2, n});
          ASSERT_TRUE(call_entry(e, {a.view(), b.view()}, {out.view()}).is_ok()) << e.name;
          expect_within(out, expected, e, "n=" + std::to_string(n));
        }
      }
    }
  }
}

TEST(CpuElementwiseTest, BinaryOpsBroadcastRowsAndScalars) {
  for (OpKind op : kOpsOfFamily<OpFamily::kBinary>) {
    for (DType t : kFloats) {
      for (std::int64_t n : kOddSizes) {
        Tensor a = Tensor::of(t, {3, n}, random_values(3 * n, -4, 4, 3));
        Tensor row = Tensor::of(t, {n}, random_values(n, 0.5, 3, 4));
        Tensor scalar = Tensor::of(t, {1}, {1.75});
        const std::int64_t row_strides[] = {0, 1};
        const std::int64_t scalar_strides[] = {0, 0};
        const TensorView row_view = TensorView::strided(row.data(), t, {3, n}, row_strides);
        const TensorView scalar_view =
            TensorView::strided(scalar.data(), t, {3, n}, scalar_strides);
        for (const BindingEntry& e : cpu_entries(op, {t, t, t})) {
          ASSERT_TRUE(e.caps.broadcast_input) << e.name;
          Tensor out(t, {3, n});
          // a op row, broadcast over the leading dim.
          ASSERT_TRUE(call_entry(e, {a.view(), row_view}, {out.view()}).is_ok()) << e.name;
          std::vector<double> expected(static_cast<std::size_t>(3 * n));
          for (std::int64_t i = 0; i < 3 * n; ++i) {
            expected[i] = binary_expect(op, a.get(i), row.get(i % n));
          }
          expect_within(out, expected, e, "row broadcast");
          // scalar op a: the broadcast operand first.
          ASSERT_TRUE(call_entry(e, {scalar_view, a.view()}, {out.view()}).is_ok()) << e.name;
          for (std::int64_t i = 0; i < 3 * n; ++i) {
            expected[i] = binary_expect(op, scalar.get(0), a.get(i));
          }
          expect_within(out, expected, e, "scalar broadcast");
        }
      }
    }
  }
}

TEST(CpuElementwiseTest, BinaryOpsTakeStridedInputs) {
  // a is the transpose of a [n, 3] buffer: strides {1, 3}.
  for (DType t : kFloats) {
    for (std::int64_t n : kOddSizes) {
      Tensor base = Tensor::of(t, {n, 3}, random_values(3 * n, -4, 4, 5));
      Tensor b = Tensor::of(t, {3, n}, random_values(3 * n, 0.5, 3, 6));
      const std::int64_t strides[] = {1, 3};
      const TensorView at = TensorView::strided(base.data(), t, {3, n}, strides);
      for (const BindingEntry& e : cpu_entries(OpKind::kSub, {t, t, t})) {
        ASSERT_TRUE(e.caps.strided_input) << e.name;
        Tensor out(t, {3, n});
        ASSERT_TRUE(call_entry(e, {at, b.view()}, {out.view()}).is_ok()) << e.name;
        std::vector<double> expected(static_cast<std::size_t>(3 * n));
        for (std::int64_t i = 0; i < 3; ++i) {
          for (std::int64_t j = 0; j < n; ++j)
            expected[i * n + j] = base.get(j * 3 + i) - b.get(i * n + j);
        }
        expect_within(out, expected, e, "strided");
      }
    }
  }
}

TEST(CpuElementwiseTest, UnaryOpsMatchDoubleAtOddSizes) {
  OpParams params;
  params.scale = -0.375f;
  for (OpKind op : kOpsOfFamily<OpFamily::kUnary>) {
    for (DType t : kFloats) {
      const std::vector<BindingEntry> entries = cpu_entries(op, {t, t});
      ASSERT_FALSE(entries.empty()) << name(op) << " " << name(t);
      for (std::int64_t n : {std::int64_t{1}, std::int64_t{3}, std::int64_t{17}, std::int64_t{33},
                             std::int64_t{1001}}) {
        const auto [lo, hi] = unary_range(op);
        Tensor x = Tensor::of(t, {n}, random_values(n, lo, hi, static_cast<std::uint32_t>(n)));
        std::vector<double> expected(static_cast<std::size_t>(n));
        for (std::int64_t i = 0; i < n; ++i) expected[i] = unary_expect(op, x.get(i), params.scale);
        for (const BindingEntry& e : entries) {
          Tensor out(t, {n});
          ASSERT_TRUE(call_entry(e, {x.view()}, {out.view()}, params).is_ok()) << e.name;
          expect_within(out, expected, e, "n=" + std::to_string(n));
        }
      }
    }
  }
}

// Every f32 value pattern class the polynomial rows meet: tiny, near zero, the
// reduction boundaries, large, overflow and underflow, the specials.
std::vector<double> sweep_values() {
  std::vector<double> v;
  for (int e = -40; e <= 7; ++e) {
    for (double m : {1.0, 1.1, 1.37, 1.5, 1.73, 1.99}) {
      v.push_back(std::ldexp(m, e));
      v.push_back(-std::ldexp(m, e));
    }
  }
  for (double x = -110; x <= 95; x += 0.01171875) v.push_back(x);
  for (double x : {0.0, -0.0, 88.72, 88.73, -87.33, -103.9, -104.5, 1e30, -1e30}) v.push_back(x);
  v.push_back(std::numeric_limits<double>::infinity());
  v.push_back(-std::numeric_limits<double>::infinity());
  v.push_back(std::numeric_limits<double>::quiet_NaN());
  return v;
}

TEST(CpuElementwiseTest, SimdTranscendentalsHoldTheirBoundsOverTheF32Range) {
  const std::vector<double> raw = sweep_values();
  const auto n = static_cast<std::int64_t>(raw.size());
  Tensor x = Tensor::of(DType::kF32, {n}, raw);
  for (OpKind op : {OpKind::kExp, OpKind::kSilu, OpKind::kGelu, OpKind::kGeluQuick,
                    OpKind::kSigmoid, OpKind::kTanh, OpKind::kRsqrt}) {
    for (const BindingEntry& e : cpu_entries(op, {DType::kF32, DType::kF32})) {
      Tensor out(DType::kF32, {n});
      ASSERT_TRUE(call_entry(e, {x.view()}, {out.view()}).is_ok()) << e.name;
      std::vector<double> expected(static_cast<std::size_t>(n));
      for (std::int64_t i = 0; i < n; ++i) {
        const double xi = x.get(i);
        // Overflowing results are infinite in f32; the comparison accepts that.
        expected[i] = unary_expect(op, xi, 1.0);
        if (op == OpKind::kRsqrt && xi < 0) expected[i] = std::numeric_limits<double>::quiet_NaN();
      }
      expect_within(out, expected, e, "sweep");
    }
  }
}

// The f16 rows evaluate their exponentials to f16 accuracy (Note [Exponentials for
// f16 results]); every f16 input, specials included, must meet the stated bound.
TEST(CpuElementwiseTest, SimdTranscendentalsHoldTheirBoundsOnEveryF16Input) {
  std::vector<double> raw;
  for (std::uint32_t bits = 0; bits <= 0xffff; ++bits) {
    raw.push_back(f16_to_f32(static_cast<std::uint16_t>(bits)));
  }
  const auto n = static_cast<std::int64_t>(raw.size());
  Tensor x = Tensor::of(DType::kF16, {n}, raw);
  for (OpKind op : {OpKind::kExp, OpKind::kSilu, OpKind::kGelu, OpKind::kGeluQuick,
                    OpKind::kSigmoid, OpKind::kTanh}) {
    std::vector<double> expected(static_cast<std::size_t>(n));
    for (std::int64_t i = 0; i < n; ++i) expected[i] = unary_expect(op, x.get(i), 1.0);
    for (const BindingEntry& e : cpu_entries(op, {DType::kF16, DType::kF16})) {
      Tensor out(DType::kF16, {n});
      ASSERT_TRUE(call_entry(e, {x.view()}, {out.view()}).is_ok()) << e.name;
      expect_within(out, expected, e, "every f16 input");
    }
  }
}

// A vector with one lane outside the exponential's fast range takes the wide path;
// the other lanes must get the same bits as on the fast path, so an element's
// result never depends on its neighbours (and so not on how rows are split). Every
// storage type: f16 rows have their own exponential.
TEST(CpuElementwiseTest, TranscendentalLanesDoNotDependOnTheirNeighbours) {
  const std::int64_t n = 71;
  const std::vector<double> base = random_values(n, -60, 60, 23);
  const double specials[] = {std::numeric_limits<double>::quiet_NaN(), 200.0, -200.0,
                             -std::numeric_limits<double>::infinity(), 87.5,  -95.0};
  for (OpKind op : {OpKind::kExp, OpKind::kSilu, OpKind::kGelu, OpKind::kGeluQuick,
                    OpKind::kSigmoid, OpKind::kTanh}) {
    for (DType t : kFloats) {
      for (const BindingEntry& e : cpu_entries(op, {t, t})) {
        Tensor x = Tensor::of(t, {n}, base);
        Tensor plain(t, {n});
        ASSERT_TRUE(call_entry(e, {x.view()}, {plain.view()}).is_ok()) << e.name;
        for (std::int64_t pos : {std::int64_t{0}, std::int64_t{9}, std::int64_t{35}, n - 1}) {
          for (double special : specials) {
            std::vector<double> mixed = base;
            mixed[static_cast<std::size_t>(pos)] = special;
            Tensor y = Tensor::of(t, {n}, mixed);
            Tensor out(t, {n});
            ASSERT_TRUE(call_entry(e, {y.view()}, {out.view()}).is_ok()) << e.name;
            for (std::int64_t i = 0; i < n; ++i) {
              if (i == pos) continue;
              EXPECT_EQ(out.get(i), plain.get(i))
                  << e.name << " element " << i << " next to " << special << " at " << pos;
            }
          }
        }
      }
    }
  }
}

// Exponentials at the edges of the f32 range, exactly where the result is exact.
TEST(CpuElementwiseTest, ExpOfSpecialValues) {
  const double inf = std::numeric_limits<double>::infinity();
  const std::vector<double> in = {0.0, -inf, inf, 100.0, -120.0, 88.8, -104.5, 1.0, -1.0};
  Tensor x = Tensor::of(DType::kF32, {static_cast<std::int64_t>(in.size())}, in);
  for (const BindingEntry& e : cpu_entries(OpKind::kExp, {DType::kF32, DType::kF32})) {
    Tensor out(DType::kF32, {static_cast<std::int64_t>(in.size())});
    ASSERT_TRUE(call_entry(e, {x.view()}, {out.view()}).is_ok()) << e.name;
    EXPECT_EQ(out.get(0), 1.0) << e.name;
    EXPECT_EQ(out.get(1), 0.0) << e.name;
    EXPECT_EQ(out.get(2), inf) << e.name;
    EXPECT_EQ(out.get(3), inf) << e.name;
    EXPECT_EQ(out.get(4), 0.0) << e.name;
    EXPECT_EQ(out.get(5), inf) << e.name;
    EXPECT_EQ(out.get(6), 0.0) << e.name;
    EXPECT_NEAR(out.get(7), std::exp(1.0), 3e-7) << e.name;
    EXPECT_NEAR(out.get(8), std::exp(-1.0), 1e-7) << e.name;
  }
  Tensor nan = Tensor::of(DType::kF32, {3}, {std::numeric_limits<double>::quiet_NaN(), 1.0, 2.0});
  for (const BindingEntry& e : cpu_entries(OpKind::kExp, {DType::kF32, DType::kF32})) {
    Tensor out(DType::kF32, {3});
    ASSERT_TRUE(call_entry(e, {nan.view()}, {out.view()}).is_ok()) << e.name;
    EXPECT_TRUE(std::isnan(out.get(0))) << e.name;
    EXPECT_NEAR(out.get(2), std::exp(2.0), 1e-6) << e.name;
  }
}

// Exact operations give the reference's bytes in every SIMD sibling.
TEST(CpuElementwiseTest, SimdSiblingsOfExactOpsMatchTheReferenceBitForBit) {
  const std::int64_t n = 1037;
  for (DType t : kFloats) {
    Tensor a = Tensor::of(t, {n}, random_values(n, -50, 50, 11));
    Tensor b = Tensor::of(t, {n}, random_values(n, 0.25, 9, 12));
    for (OpKind op : kOpsOfFamily<OpFamily::kBinary>) {
      const std::vector<BindingEntry> entries = cpu_entries(op, {t, t, t});
      Tensor ref(t, {n});
      ASSERT_TRUE(call_entry(entries.back(), {a.view(), b.view()}, {ref.view()}).is_ok());
      for (const BindingEntry& e : entries) {
        Tensor out(t, {n});
        ASSERT_TRUE(call_entry(e, {a.view(), b.view()}, {out.view()}).is_ok());
        EXPECT_TRUE(out.same_bytes(ref)) << e.name;
      }
    }
    OpParams params;
    params.scale = 0.3f;
    for (OpKind op : {OpKind::kNeg, OpKind::kRelu, OpKind::kSqrt, OpKind::kScale}) {
      const std::vector<BindingEntry> entries = cpu_entries(op, {t, t});
      Tensor& in = op == OpKind::kSqrt ? b : a;
      Tensor ref(t, {n});
      ASSERT_TRUE(call_entry(entries.back(), {in.view()}, {ref.view()}, params).is_ok());
      for (const BindingEntry& e : entries) {
        Tensor out(t, {n});
        ASSERT_TRUE(call_entry(e, {in.view()}, {out.view()}, params).is_ok());
        EXPECT_TRUE(out.same_bytes(ref)) << e.name;
      }
    }
  }
}

TEST(CpuElementwiseTest, FloatCastsRoundToNearestEvenInEverySibling) {
  const std::vector<double> values = {0.0,   -0.0,      1.0,      1.00048828125, 1.000732421875,
                                      65504, 65520,     -70000,   1e-8,          3.0e-5,
                                      1e38,  1.0 / 3.0, -2.71828, 0x1.01p0,      0x1.018p0};
  const auto n = static_cast<std::int64_t>(values.size());
  for (DType from : kFloats) {
    Tensor x = Tensor::of(from, {n}, values);
    for (DType to : kFloats) {
      if (from == to) continue;
      const std::vector<BindingEntry> entries = cpu_entries(OpKind::kCast, {from, to});
      ASSERT_FALSE(entries.empty());
      Tensor expected(to, {n});
      for (std::int64_t i = 0; i < n; ++i) expected.set(i, x.get(i));
      for (const BindingEntry& e : entries) {
        Tensor out(to, {n});
        ASSERT_TRUE(call_entry(e, {x.view()}, {out.view()}).is_ok()) << e.name;
        EXPECT_TRUE(out.same_bytes(expected)) << e.name;
      }
    }
  }
}

TEST(CpuElementwiseTest, CastsToI32RoundHalfToEvenSaturateAndZeroNaN) {
  const double nan = std::numeric_limits<double>::quiet_NaN();
  const std::vector<double> values = {2.5,   3.5, -2.5, -0.5, 0.5, 1.4999,
                                      -7.75, 3e9, -3e9, nan,  1e6};
  const std::vector<double> expected = {2, 4, -2, 0, 0, 1, -8, 2147483647, -2147483648.0, 0, 1e6};
  const auto n = static_cast<std::int64_t>(values.size());
  for (DType from : kFloats) {
    Tensor x = Tensor::of(from, {n}, values);
    for (const BindingEntry& e : cpu_entries(OpKind::kCast, {from, DType::kI32})) {
      Tensor out(DType::kI32, {n});
      ASSERT_TRUE(call_entry(e, {x.view()}, {out.view()}).is_ok()) << e.name;
      for (std::int64_t i = 0; i < n; ++i) {
        // bf16 and f16 store 1.4999 and 1e6 rounded; compare against the stored value.
        const double want = (i == 5 || i == 10)
                                ? std::clamp(std::nearbyint(x.get(i)), -2147483648.0, 2147483647.0)
                                : expected[i];
        EXPECT_EQ(out.get(i), want) << e.name << " element " << i;
      }
    }
  }
}

TEST(CpuElementwiseTest, CastsFromI32RoundOnce) {
  // 2^24 + 2^16 + 1 lies just above the midpoint of two bf16 neighbours; rounding
  // through f32 first would land exactly on the midpoint and round down.
  const std::vector<double> values = {0,          1,     -1,    16777217,  16777216.0 + 65536 + 1,
                                      -123456789, 65519, 65520, 2147483647};
  const auto n = static_cast<std::int64_t>(values.size());
  Tensor x = Tensor::of(DType::kI32, {n}, values);
  for (DType to : kFloats) {
    for (const BindingEntry& e : cpu_entries(OpKind::kCast, {DType::kI32, to})) {
      Tensor out(to, {n});
      ASSERT_TRUE(call_entry(e, {x.view()}, {out.view()}).is_ok()) << e.name;
      for (std::int64_t i = 0; i < n; ++i) {
        EXPECT_TRUE(within(out.get(i), values[i], e.precision, to))
            << e.name << " element " << i << " got " << out.get(i);
      }
    }
  }
  Tensor bf(DType::kBF16, {n});
  const std::vector<BindingEntry> to_bf16 = cpu_entries(OpKind::kCast, {DType::kI32, DType::kBF16});
  ASSERT_TRUE(call_entry(to_bf16.back(), {x.view()}, {bf.view()}).is_ok());
  EXPECT_EQ(bf.get(4), 16777216.0 + 131072);
}

TEST(CpuElementwiseTest, KernelsRefuseMalformedCalls) {
  const DType t = DType::kF32;
  Tensor a(t, {4}), b(t, {4}), out(t, {4}), wrong_shape(t, {5});
  Tensor half(DType::kF16, {4});
  for (const BindingEntry& e : cpu_entries(OpKind::kAdd, {t, t, t})) {
    EXPECT_EQ(call_entry(e, {a.view()}, {out.view()}).code(), StatusCode::kInvalidArgument)
        << e.name;
    EXPECT_EQ(call_entry(e, {a.view(), half.view()}, {out.view()}).code(),
              StatusCode::kInvalidArgument)
        << e.name;
    EXPECT_EQ(call_entry(e, {a.view(), wrong_shape.view()}, {out.view()}).code(),
              StatusCode::kInvalidArgument)
        << e.name;
    // A broadcast output would be written by several elements.
    const std::int64_t zero_stride[] = {0};
    EXPECT_EQ(
        call_entry(e, {a.view(), b.view()}, {TensorView::strided(out.data(), t, {4}, zero_stride)})
            .code(),
        StatusCode::kInvalidArgument)
        << e.name;
  }
  for (const BindingEntry& e : cpu_entries(OpKind::kExp, {t, t})) {
    EXPECT_EQ(call_entry(e, {a.view(), b.view()}, {out.view()}).code(),
              StatusCode::kInvalidArgument)
        << e.name;
    EXPECT_EQ(call_entry(e, {a.view()}, {wrong_shape.view()}).code(), StatusCode::kInvalidArgument)
        << e.name;
  }
  for (const BindingEntry& e : cpu_entries(OpKind::kCast, {t, DType::kF16})) {
    EXPECT_EQ(call_entry(e, {half.view()}, {half.view()}).code(), StatusCode::kInvalidArgument)
        << e.name;
  }
}

}  // namespace
}  // namespace switchyard::test
