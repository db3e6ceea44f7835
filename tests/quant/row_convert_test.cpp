// Row conversion through f32 (row_to_f32 / row_from_f32): every dense dtype it
// takes agrees with half.h element by element, every block type with
// quantize() / dequantize() byte for byte, and every other dtype or a size that
// does not fit is refused.
#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <cstring>
#include <limits>
#include <vector>

#include "switchyard/half.h"
#include "switchyard/quant.h"

namespace switchyard {
namespace {

std::vector<std::byte> storage(DType t, std::size_t elems) {
  return std::vector<std::byte>(
      static_cast<std::size_t>(*row_bytes(t, static_cast<std::int64_t>(elems))));
}

std::uint16_t half_at(const std::vector<std::byte>& bytes, std::size_t i) {
  std::uint16_t h;
  std::memcpy(&h, bytes.data() + 2 * i, 2);
  return h;
}

// Special values and values each format rounds, so the f16 / bf16 cases check
// rounding as well as the trip back.
std::vector<float> awkward_values() {
  return {0.0f,
          -0.0f,
          1.0f,
          -2.5f,
          1.0f / 3.0f,
          65504.0f,  // largest finite f16
          1e6f,      // overflows f16
          5.96e-8f,  // f16 subnormal
          1e-40f,    // f32 subnormal
          std::numeric_limits<float>::infinity(),
          -std::numeric_limits<float>::infinity(),
          std::numeric_limits<float>::quiet_NaN(),
          3.14159265f,
          -123.456f};
}

std::vector<float> ramp(std::size_t n) {
  std::vector<float> x(n);
  for (std::size_t i = 0; i < n; ++i) x[i] = std::sin(0.37f * static_cast<float>(i)) * 4.0f;
  return x;
}

bool same_bits(float a, float b) {
  return std::bit_cast<std::uint32_t>(a) == std::bit_cast<std::uint32_t>(b);
}

TEST(RowConvert, F32RoundTripKeepsEveryBit) {
  const std::vector<float> x = awkward_values();
  std::vector<std::byte> bytes = storage(DType::kF32, x.size());
  ASSERT_TRUE(row_from_f32(DType::kF32, x, bytes).is_ok());
  EXPECT_EQ(std::memcmp(bytes.data(), x.data(), bytes.size()), 0);
  std::vector<float> back(x.size(), 7.0f);
  ASSERT_TRUE(row_to_f32(DType::kF32, bytes, back).is_ok());
  for (std::size_t i = 0; i < x.size(); ++i) EXPECT_TRUE(same_bits(back[i], x[i])) << i;
}

TEST(RowConvert, F16AndBF16AgreeWithHalfH) {
  const std::vector<float> x = awkward_values();
  for (DType t : {DType::kF16, DType::kBF16}) {
    SCOPED_TRACE(std::string(name(t)));
    const bool f16 = t == DType::kF16;
    std::vector<std::byte> bytes = storage(t, x.size());
    ASSERT_EQ(bytes.size(), 2 * x.size());
    ASSERT_TRUE(row_from_f32(t, x, bytes).is_ok());
    for (std::size_t i = 0; i < x.size(); ++i) {
      EXPECT_EQ(half_at(bytes, i), f16 ? f32_to_f16(x[i]) : f32_to_bf16(x[i])) << i;
    }
    std::vector<float> back(x.size());
    ASSERT_TRUE(row_to_f32(t, bytes, back).is_ok());
    for (std::size_t i = 0; i < x.size(); ++i) {
      const std::uint16_t h = half_at(bytes, i);
      EXPECT_TRUE(same_bits(back[i], f16 ? f16_to_f32(h) : bf16_to_f32(h))) << i;
    }
    // A value the format holds exactly makes the trip unchanged.
    EXPECT_EQ(back[2], 1.0f);
    EXPECT_EQ(back[3], -2.5f);
    EXPECT_TRUE(std::isnan(back[11]));
    EXPECT_EQ(back[9], std::numeric_limits<float>::infinity());
  }
}

TEST(RowConvert, F16RoundsToNearestEven) {
  // 1 + 2^-11 lies halfway between 1 and the next f16 (1 + 2^-10): even is 1.
  const std::vector<float> x = {1.0f + 0x1p-11f, 1.0f + 3 * 0x1p-11f};
  std::vector<std::byte> bytes = storage(DType::kF16, x.size());
  ASSERT_TRUE(row_from_f32(DType::kF16, x, bytes).is_ok());
  std::vector<float> back(x.size());
  ASSERT_TRUE(row_to_f32(DType::kF16, bytes, back).is_ok());
  EXPECT_EQ(back[0], 1.0f);
  EXPECT_EQ(back[1], 1.0f + 2 * 0x1p-10f);
}

TEST(RowConvert, BlockTypesMatchQuantizeAndDequantize) {
  for (DType t : {DType::kQ8_0, DType::kQ4_K, DType::kQ6_K, DType::kIQ4_NL}) {
    SCOPED_TRACE(std::string(name(t)));
    const std::vector<float> x = ramp(2 * 256);
    std::vector<std::byte> direct = storage(t, x.size());
    ASSERT_TRUE(quantize(t, x, direct).is_ok());
    std::vector<std::byte> bytes = storage(t, x.size());
    ASSERT_TRUE(row_from_f32(t, x, bytes).is_ok());
    EXPECT_EQ(bytes, direct);

    std::vector<float> expected(x.size());
    ASSERT_TRUE(dequantize(t, direct, expected).is_ok());
    std::vector<float> back(x.size());
    ASSERT_TRUE(row_to_f32(t, bytes, back).is_ok());
    double worst = 0;
    for (std::size_t i = 0; i < x.size(); ++i) {
      EXPECT_TRUE(same_bits(back[i], expected[i])) << i;
      worst = std::max(worst, std::abs(static_cast<double>(back[i]) - x[i]));
    }
    // Lossy but close: with |x| <= 4 the coarsest of these formats (iq4_nl, 16
    // uneven levels) is off by at most half its widest gap, about 0.38.
    EXPECT_LT(worst, 0.5);
  }
}

TEST(RowConvert, RequantizesThroughF32) {
  // bf16 -> f32 -> q8_0, as model quantization converts a row.
  const std::vector<float> x = ramp(64);
  std::vector<std::byte> bf16 = storage(DType::kBF16, x.size());
  ASSERT_TRUE(row_from_f32(DType::kBF16, x, bf16).is_ok());
  std::vector<float> f32(x.size());
  ASSERT_TRUE(row_to_f32(DType::kBF16, bf16, f32).is_ok());
  std::vector<std::byte> q = storage(DType::kQ8_0, x.size());
  ASSERT_TRUE(row_from_f32(DType::kQ8_0, f32, q).is_ok());
  std::vector<std::byte> direct = storage(DType::kQ8_0, x.size());
  ASSERT_TRUE(quantize(DType::kQ8_0, f32, direct).is_ok());
  EXPECT_EQ(q, direct);
}

TEST(RowConvert, EmptyRowSucceeds) {
  for (DType t : {DType::kF32, DType::kF16, DType::kBF16, DType::kQ4_0}) {
    EXPECT_TRUE(row_to_f32(t, {}, {}).is_ok()) << name(t);
    EXPECT_TRUE(row_from_f32(t, {}, {}).is_ok()) << name(t);
  }
}

TEST(RowConvert, RefusesDTypesWithoutAnF32Conversion) {
  std::vector<float> f(4, 1.0f);
  for (DType t : {DType::kI32, DType::kF64, DType::kI8, DType::kBool}) {
    SCOPED_TRACE(std::string(name(t)));
    std::vector<std::byte> bytes(static_cast<std::size_t>(*row_bytes(t, 4)));
    const Status to = row_to_f32(t, bytes, f);
    EXPECT_EQ(to.code(), StatusCode::kInvalidArgument);
    EXPECT_NE(to.message().find(name(t)), std::string_view::npos) << to.to_string();
    const Status from = row_from_f32(t, f, bytes);
    EXPECT_EQ(from.code(), StatusCode::kInvalidArgument);
    EXPECT_NE(from.message().find(name(t)), std::string_view::npos) << from.to_string();
  }
}

TEST(RowConvert, RefusesBytesThatDoNotMatchTheElementCount) {
  std::vector<float> f(8, 1.0f);
  for (DType t : {DType::kF32, DType::kF16, DType::kBF16}) {
    SCOPED_TRACE(std::string(name(t)));
    const std::size_t exact = storage(t, f.size()).size();
    for (std::size_t n : {exact - 1, exact + 1, exact + static_cast<std::size_t>(dense_bytes(t))}) {
      std::vector<std::byte> bytes(n, std::byte{0x3c});
      EXPECT_EQ(row_from_f32(t, f, bytes).code(), StatusCode::kInvalidArgument) << n;
      std::vector<float> out(f.size(), 42.0f);
      EXPECT_EQ(row_to_f32(t, bytes, out).code(), StatusCode::kInvalidArgument) << n;
      // Refused before anything is written.
      for (float v : out) EXPECT_EQ(v, 42.0f);
    }
  }
}

TEST(RowConvert, RefusesRowsThatAreNotWholeBlocks) {
  // 40 elements are not whole q8_0 blocks (32); 32 elements with 35 bytes do not fit.
  std::vector<float> f(40, 1.0f);
  std::vector<std::byte> bytes(storage(DType::kQ8_0, 64).size());
  EXPECT_EQ(row_from_f32(DType::kQ8_0, f, bytes).code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(row_to_f32(DType::kQ8_0, bytes, f).code(), StatusCode::kInvalidArgument);
  std::vector<float> one_block(32, 1.0f);
  std::vector<std::byte> wrong(storage(DType::kQ8_0, 32).size() + 1);
  EXPECT_EQ(row_from_f32(DType::kQ8_0, one_block, wrong).code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(row_to_f32(DType::kQ8_0, wrong, one_block).code(), StatusCode::kInvalidArgument);
}

TEST(RowConvert, BlockTypesRefuseWhatQuantizeRefuses) {
  std::vector<float> f(32, 1.0f);
  f[5] = std::numeric_limits<float>::quiet_NaN();
  std::vector<std::byte> bytes = storage(DType::kQ4_0, f.size());
  EXPECT_EQ(row_from_f32(DType::kQ4_0, f, bytes).code(), StatusCode::kInvalidArgument);
  // The dense formats store NaN as it is.
  std::vector<std::byte> half = storage(DType::kF16, f.size());
  EXPECT_TRUE(row_from_f32(DType::kF16, f, half).is_ok());
}

}  // namespace
}  // namespace switchyard
