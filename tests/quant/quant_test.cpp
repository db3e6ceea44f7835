// Block quantization: layouts decoded from hand-built blocks, quantizers on data
// with a worked-out answer, agreement with an independent GGUF implementation,
// round-trip error per format, and refusal of bad input.
#include "switchyard/quant.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <vector>

#include "switchyard/half.h"
#include "switchyard/quant_blocks.h"

namespace switchyard {
namespace {

// Every block-quantized dtype in dtype.def.
constexpr auto kAllQuant = kQuantizedDTypes;

std::vector<std::byte> quantized(DType t, const std::vector<float>& x) {
  std::vector<std::byte> q(
      static_cast<std::size_t>(*row_bytes(t, static_cast<std::int64_t>(x.size()))));
  const Status s = quantize(t, x, q);
  EXPECT_TRUE(s.is_ok()) << name(t) << ": " << s.to_string();
  return q;
}

std::vector<float> dequantized(DType t, const std::vector<std::byte>& q, std::size_t n) {
  std::vector<float> y(n);
  const Status s = dequantize(t, q, y);
  EXPECT_TRUE(s.is_ok()) << name(t) << ": " << s.to_string();
  return y;
}

std::vector<std::byte> bytes_of(const void* p, std::size_t n) {
  std::vector<std::byte> out(n);
  std::memcpy(out.data(), p, n);
  return out;
}

void put_f16(std::uint8_t* p, float v) { quant::store_f16(p, v); }

std::uint64_t fnv1a(const void* data, std::size_t n) {
  const auto* p = static_cast<const unsigned char*>(data);
  std::uint64_t h = 0xcbf29ce484222325ull;
  for (std::size_t i = 0; i < n; ++i) {
    h ^= p[i];
    h *= 0x100000001b3ull;
  }
  return h;
}

// --- Hand-built blocks, decoded against the specification's formulas. -------

TEST(QuantLayout, Q4_0NibbleOrder) {
  quant::BlockQ4_0 b{};
  put_f16(b.d, 0.5f);
  for (int j = 0; j < 16; ++j) b.qs[j] = static_cast<std::uint8_t>(j | ((15 - j) << 4));
  const auto y = dequantized(DType::kQ4_0, bytes_of(&b, sizeof b), 32);
  for (int j = 0; j < 16; ++j) {
    EXPECT_EQ(y[j], (j - 8) * 0.5f) << j;            // low nibbles: elements 0..15
    EXPECT_EQ(y[j + 16], (7 - j) * 0.5f) << j + 16;  // high nibbles: 16..31
  }
}

TEST(QuantLayout, Q5_1HighBitsAndMin) {
  quant::BlockQ5_1 b{};
  put_f16(b.d, 0.25f);
  put_f16(b.m, -2.0f);
  for (int j = 0; j < 16; ++j) b.qs[j] = 0x31;  // low 1, high 3
  // qh bit i is the fifth bit of element i: set elements 0 and 31.
  b.qh[0] = 0x01;
  b.qh[3] = 0x80;
  const auto y = dequantized(DType::kQ5_1, bytes_of(&b, sizeof b), 32);
  EXPECT_EQ(y[0], 17 * 0.25f - 2.0f);
  EXPECT_EQ(y[1], 1 * 0.25f - 2.0f);
  EXPECT_EQ(y[16], 3 * 0.25f - 2.0f);
  EXPECT_EQ(y[31], 19 * 0.25f - 2.0f);
}

TEST(QuantLayout, Q5_0SignedLevels) {
  quant::BlockQ5_0 b{};
  put_f16(b.d, 2.0f);
  b.qs[0] = 0xff;  // elements 0 and 16: low bits 15
  b.qh[0] = 0x01;  // element 0 gets the fifth bit: 31
  const auto y = dequantized(DType::kQ5_0, bytes_of(&b, sizeof b), 32);
  EXPECT_EQ(y[0], (31 - 16) * 2.0f);
  EXPECT_EQ(y[16], (15 - 16) * 2.0f);
  EXPECT_EQ(y[1], -16 * 2.0f);
}

TEST(QuantLayout, Q8_KScaleIsF32) {
  quant::BlockQ8_K b{};
  quant::store_f32(b.d, 0.1f);
  for (int j = 0; j < 256; ++j) b.qs[j] = static_cast<std::int8_t>(j - 128);
  const auto y = dequantized(DType::kQ8_K, bytes_of(&b, sizeof b), 256);
  for (int j = 0; j < 256; ++j) EXPECT_EQ(y[j], 0.1f * static_cast<float>(j - 128));
}

TEST(QuantLayout, Q2_KGroupsAndShifts) {
  quant::BlockQ2_K b{};
  put_f16(b.d, 1.0f);
  put_f16(b.dmin, 0.5f);
  for (int g = 0; g < 16; ++g) b.scales[g] = static_cast<std::uint8_t>((g % 16) | (1 << 4));
  // Byte 5 of the second half holds elements 128+5, 160+5, 192+5, 224+5.
  b.qs[32 + 5] = static_cast<std::uint8_t>(1 | (2 << 2) | (3 << 4) | (0 << 6));
  const auto y = dequantized(DType::kQ2_K, bytes_of(&b, sizeof b), 256);
  const auto expect = [](int e, int q) { return static_cast<float>((e / 16) * q) - 0.5f; };
  EXPECT_EQ(y[133], expect(133, 1));
  EXPECT_EQ(y[165], expect(165, 2));
  EXPECT_EQ(y[197], expect(197, 3));
  EXPECT_EQ(y[229], expect(229, 0));
  EXPECT_EQ(y[0], -0.5f);
}

TEST(QuantLayout, Q3_KScalesAndHighMask) {
  quant::BlockQ3_K b{};
  put_f16(b.d, 1.0f);
  // Group 13: low nibble in the high half of byte 5, top bits at byte 8 + 1, bits 6..7.
  // Scale 45 - 32 = 13: 45 = 0b10'1101.
  b.scales[5] = static_cast<std::uint8_t>(0xd << 4);
  b.scales[9] = static_cast<std::uint8_t>(0x2 << 6);
  // Element 210 = group 13: half 1, quarter 2, byte 32 + 18, bits 4..5; its third
  // bit is hmask[18] bit 6.
  b.qs[32 + 18] = static_cast<std::uint8_t>(3 << 4);
  b.hmask[18] = 1 << 6;
  const auto y = dequantized(DType::kQ3_K, bytes_of(&b, sizeof b), 256);
  EXPECT_EQ(y[210], 13.0f * (7 - 4));
  // Another element of group 13 with all bits clear: level 0 - 4.
  EXPECT_EQ(y[211], 13.0f * (0 - 4));
  // Group 0 has scale 0 - 32.
  EXPECT_EQ(y[0], -32.0f * (0 - 4));
}

TEST(QuantLayout, Q4_KSixBitScalesOfUpperGroups) {
  quant::BlockQ4_K b{};
  put_f16(b.d, 1.0f);
  put_f16(b.dmin, 1.0f);
  // Group 6: scale 0b11'0101 = 53, min 0b10'0110 = 38.
  b.scales[10] = static_cast<std::uint8_t>(0x5 | (0x6 << 4));
  b.scales[2] = static_cast<std::uint8_t>(0x3 << 6);
  b.scales[6] = static_cast<std::uint8_t>(0x2 << 6);
  // Group 1 (scale 0, min 0 except the bits above): byte 1 and 5.
  b.scales[1] = 7;
  b.scales[5] = 2;
  b.qs[32 * 3 + 4] = 0x9a;  // group 6 = low nibbles of chunk 3; group 7 the high
  b.qs[4] = 0x30;           // group 1 = high nibbles of chunk 0
  const auto y = dequantized(DType::kQ4_K, bytes_of(&b, sizeof b), 256);
  EXPECT_EQ(y[6 * 32 + 4], 53.0f * 0xa - 38.0f);
  EXPECT_EQ(y[1 * 32 + 4], 7.0f * 3 - 2.0f);
}

TEST(QuantLayout, Q5_KFifthBit) {
  quant::BlockQ5_K b{};
  put_f16(b.d, 1.0f);
  put_f16(b.dmin, 0.0f);
  b.scales[3] = 1;          // group 3 scale 1
  b.qs[32 * 1 + 7] = 0x20;  // group 3: high nibbles of chunk 1 -> 2
  b.qh[7] = 1 << 3;         // group 3's fifth bit is bit 3
  const auto y = dequantized(DType::kQ5_K, bytes_of(&b, sizeof b), 256);
  EXPECT_EQ(y[3 * 32 + 7], 18.0f);
}

TEST(QuantLayout, Q6_KQuarters) {
  quant::BlockQ6_K b{};
  put_f16(b.d, 0.5f);
  for (int g = 0; g < 16; ++g) b.scales[g] = static_cast<std::int8_t>(g - 8);
  // Element 128 + 96 + 3 = 227: half 1, quarter 3 -> high nibble of ql[64 + 32 + 3],
  // bits 6..7 of qh[32 + 3]. Level 0b10'0101 = 37 -> 37 - 32 = 5.
  b.ql[64 + 32 + 3] = 0x50;
  b.qh[32 + 3] = static_cast<std::uint8_t>(2 << 6);
  const auto y = dequantized(DType::kQ6_K, bytes_of(&b, sizeof b), 256);
  EXPECT_EQ(y[227], 0.5f * static_cast<float>(227 / 16 - 8) * 5.0f);
  EXPECT_EQ(y[0], 0.5f * -8.0f * -32.0f);
}

TEST(QuantLayout, IQ4_XSScalesAndTable) {
  quant::BlockIQ4_XS b{};
  put_f16(b.d, 0.25f);
  // Group 5: low nibble 3 (scales_l[2], high half), top bits 2: 0b10_0011 = 35 -> 3.
  b.scales_l[2] = static_cast<std::uint8_t>(0x3 << 4);
  b.scales_h[1] = static_cast<std::uint8_t>(0x2 << 2);  // bits 10..11 of the 16-bit word
  b.qs[16 * 5 + 2] = 0xf0;  // element 5*32 + 2 -> code 0, element 5*32 + 18 -> code 15
  const auto y = dequantized(DType::kIQ4_XS, bytes_of(&b, sizeof b), 256);
  EXPECT_EQ(y[5 * 32 + 2], 0.25f * 3.0f * -127.0f);
  EXPECT_EQ(y[5 * 32 + 18], 0.25f * 3.0f * 113.0f);
}

TEST(QuantLayout, MXFP4E2M1AndE8M0) {
  quant::BlockMXFP4 b{};
  b.e = 130;                                              // 2^3
  b.qs[0] = static_cast<std::uint8_t>(0x7 | (0xd << 4));  // +6 and -3
  b.qs[1] = static_cast<std::uint8_t>(0x1 | (0x9 << 4));  // +0.5 and -0.5
  const auto y = dequantized(DType::kMXFP4, bytes_of(&b, sizeof b), 32);
  EXPECT_EQ(y[0], 6.0f * 8.0f);
  EXPECT_EQ(y[16], -3.0f * 8.0f);
  EXPECT_EQ(y[1], 0.5f * 8.0f);
  EXPECT_EQ(y[17], -0.5f * 8.0f);
}

TEST(QuantLayout, E8M0HalfCoversSubnormals) {
  for (int e = 0; e < 256; ++e) {
    EXPECT_EQ(quant::e8m0_half(static_cast<std::uint8_t>(e)), std::ldexp(1.0f, e - 128)) << e;
  }
}

// --- Quantizers on data with a worked-out answer. ---------------------------

TEST(QuantQuantize, Q4_0ExactLevels) {
  std::vector<float> x(32);
  for (int j = 0; j < 32; ++j) x[j] = static_cast<float>(j % 16 - 8) * 0.5f;
  // max |x| is 4 at element 0 (value -4): d = -4 / -8 = 0.5, level = x / d + 8.
  const auto q = quantized(DType::kQ4_0, x);
  const auto& b = *reinterpret_cast<const quant::BlockQ4_0*>(q.data());
  EXPECT_EQ(quant::load_f16(b.d), 0.5f);
  for (int j = 0; j < 16; ++j) EXPECT_EQ(b.qs[j], j | (j << 4)) << j;
}

TEST(QuantQuantize, Q8_0Integers) {
  std::vector<float> x(32);
  for (int j = 0; j < 32; ++j) x[j] = static_cast<float>(j * 8 - 127);
  x[31] = 127.0f;
  const auto q = quantized(DType::kQ8_0, x);
  const auto& b = *reinterpret_cast<const quant::BlockQ8_0*>(q.data());
  EXPECT_EQ(quant::load_f16(b.d), 1.0f);
  for (int j = 0; j < 32; ++j) EXPECT_EQ(b.qs[j], static_cast<int>(x[j])) << j;
}

TEST(QuantQuantize, Q8_1StoresScaledSum) {
  std::vector<float> x(32, 0.0f);
  x[0] = 127.0f;
  x[1] = -27.0f;
  x[2] = 3.0f;
  const auto q = quantized(DType::kQ8_1, x);
  const auto& b = *reinterpret_cast<const quant::BlockQ8_1*>(q.data());
  EXPECT_EQ(quant::load_f16(b.d), 1.0f);
  EXPECT_EQ(quant::load_f16(b.s), 103.0f);
}

TEST(QuantQuantize, Q8_KScaleSignAndSums) {
  std::vector<float> x(256, 0.0f);
  x[0] = -12.7f;  // the extreme value maps to -127 exactly
  x[17] = 6.35f;
  const auto q = quantized(DType::kQ8_K, x);
  const auto& b = *reinterpret_cast<const quant::BlockQ8_K*>(q.data());
  EXPECT_EQ(b.qs[0], -127);
  EXPECT_EQ(b.qs[17], 64);  // 63.5 rounds to even
  EXPECT_EQ(quant::load_i16(b.bsums), -127);
  EXPECT_EQ(quant::load_i16(b.bsums + 2), 64);
  EXPECT_FLOAT_EQ(quant::load_f32(b.d), 0.1f);
}

TEST(QuantQuantize, MXFP4PicksExponentAndCodes) {
  std::vector<float> x(32, 0.0f);
  x[0] = 6.0f;   // floor(log2 6) = 2 -> e = 127, scale 0.5 on doubled codes
  x[1] = -1.5f;  // -3 * 0.5 -> code 8 + 3
  x[16] = 0.7f;  // nearest of 0.5 and 1.0 is 0.5 -> code 1
  const auto q = quantized(DType::kMXFP4, x);
  const auto& b = *reinterpret_cast<const quant::BlockMXFP4*>(q.data());
  EXPECT_EQ(b.e, 127);
  EXPECT_EQ(b.qs[0], 0x7 | (0x1 << 4));
  EXPECT_EQ(b.qs[1], 0xb);
}

TEST(QuantQuantize, ZeroBlocksDecodeToZeroInEveryFormat) {
  for (DType t : kAllQuant) {
    const std::vector<float> x(256, 0.0f);
    const auto y = dequantized(t, quantized(t, x), 256);
    for (float v : y) ASSERT_EQ(v, 0.0f) << name(t);
  }
  // The reference writes level 8 (value 1 * 0) for an all-zero iq4_nl block.
  const auto q = quantized(DType::kIQ4_NL, std::vector<float>(32, 0.0f));
  EXPECT_EQ(static_cast<int>(q[2]), 0x88);
  const auto q40 = quantized(DType::kQ4_0, std::vector<float>(32, 0.0f));
  EXPECT_EQ(static_cast<int>(q40[2]), 0x88);
}

// --- Agreement with an independent implementation. ---------------------------
// The expected hashes were produced by the `gguf` Python package (0.x, the
// reference implementation's own Python port, numpy 2.4) on the same input:
// FNV-1a 64 over the quantized bytes, and over the dequantized f32 values (NaN
// replaced by 12345) of pseudo-random bytes. It offers quantizers for q4_0..q8_0
// and mxfp4 and dequantizers for every format below.

std::vector<float> golden_input() {
  std::vector<float> x(2048);
  for (std::int64_t i = 0; i < 2048; ++i) {
    x[static_cast<std::size_t>(i)] = static_cast<float>((i * 7919 + 13) % 2001 - 1000) / 37.0f;
  }
  return x;
}

TEST(QuantGolden, QuantizedBytesMatchIndependentImplementation) {
  const std::pair<DType, std::uint64_t> cases[] = {
      {DType::kQ4_0, 0x35e6c9c4cd7b95dcull}, {DType::kQ4_1, 0x1c558dae9dfec19aull},
      {DType::kQ5_0, 0x632c12142bac85cdull}, {DType::kQ5_1, 0x307d2d64442ff62ull},
      {DType::kQ8_0, 0x1ea6426cddb7154aull}, {DType::kMXFP4, 0x4325a1501e411e5full}};
  const auto x = golden_input();
  for (const auto& [t, expected] : cases) {
    const auto q = quantized(t, x);
    EXPECT_EQ(fnv1a(q.data(), q.size()), expected) << name(t);
  }
}

TEST(QuantGolden, DequantizedValuesMatchIndependentImplementation) {
  const std::pair<DType, std::uint64_t> cases[] = {
      {DType::kQ4_0, 0xdf5a99ce139e84dfull},  {DType::kQ4_1, 0x29240901a771277dull},
      {DType::kQ5_0, 0x1e134611a09e67f8ull},  {DType::kQ5_1, 0x2a5a651230c3b1a2ull},
      {DType::kQ8_0, 0xf7d36639b7a3bd75ull},  {DType::kMXFP4, 0x1e53a0fad848c09dull},
      {DType::kQ2_K, 0x8bf6e5e76ed44881ull},  {DType::kQ3_K, 0x1c40166e3c7837dcull},
      {DType::kQ4_K, 0xee98b7d41927c421ull},  {DType::kQ5_K, 0xb01b0d2595149e8dull},
      {DType::kQ6_K, 0x9888f0c164cd24f9ull},  {DType::kIQ4_NL, 0x96402f42e568231dull},
      {DType::kIQ4_XS, 0xb4fe7e368d29aa81ull}};
  for (const auto& [t, expected] : cases) {
    const std::size_t nbytes = static_cast<std::size_t>(*row_bytes(t, 2048));
    std::vector<std::byte> raw(nbytes);
    std::uint32_t s = 1;
    for (auto& byte : raw) {
      s = s * 1103515245u + 12345u;
      byte = static_cast<std::byte>(s >> 24);
    }
    auto y = dequantized(t, raw, 2048);
    for (float& v : y) {
      if (std::isnan(v)) v = 12345.0f;
    }
    EXPECT_EQ(fnv1a(y.data(), y.size() * sizeof(float)), expected) << name(t);
  }
}

// --- Round trip. --------------------------------------------------------------

// RMS error of a quantize/dequantize round trip relative to the RMS of Gaussian
// data, with the bound each format's bit budget implies (measured values in
// brackets: the bound leaves ~25% headroom).
TEST(QuantRoundTrip, ErrorWithinFormatRange) {
  const std::pair<DType, double> cases[] = {
      {DType::kQ8_0, 0.008}, {DType::kQ8_1, 0.008}, {DType::kQ8_K, 0.009},  {DType::kQ6_K, 0.025},
      {DType::kQ5_0, 0.06},  {DType::kQ5_1, 0.06},  {DType::kQ5_K, 0.045},  {DType::kQ4_0, 0.12},
      {DType::kQ4_1, 0.12},  {DType::kQ4_K, 0.09},  {DType::kIQ4_NL, 0.11}, {DType::kIQ4_XS, 0.11},
      {DType::kMXFP4, 0.17}, {DType::kQ3_K, 0.22},  {DType::kQ2_K, 0.42}};
  std::mt19937 rng(7);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::vector<float> x(256 * 64);
  for (float& v : x) v = normal(rng);
  for (const auto& [t, bound] : cases) {
    const auto y = dequantized(t, quantized(t, x), x.size());
    double err = 0.0;
    double ref = 0.0;
    for (std::size_t i = 0; i < x.size(); ++i) {
      err += (double{y[i]} - x[i]) * (double{y[i]} - x[i]);
      ref += double{x[i]} * x[i];
    }
    const double rel = std::sqrt(err / ref);
    EXPECT_LT(rel, bound) << name(t);
    EXPECT_GT(rel, 0.0) << name(t);
    RecordProperty(std::string(name(t)), std::to_string(rel));
  }
}

TEST(QuantRoundTrip, SameInputSameBytes) {
  std::mt19937 rng(3);
  std::uniform_real_distribution<float> u(-3.0f, 3.0f);
  std::vector<float> x(512);
  for (float& v : x) v = u(rng);
  for (DType t : kAllQuant) EXPECT_EQ(quantized(t, x), quantized(t, x)) << name(t);
}

// --- Bad input and edge blocks. ----------------------------------------------

TEST(QuantErrors, NonFiniteInputIsInvalidArgument) {
  for (DType t : kAllQuant) {
    for (float bad :
         {std::numeric_limits<float>::quiet_NaN(), std::numeric_limits<float>::infinity(),
          -std::numeric_limits<float>::infinity()}) {
      std::vector<float> x(256, 1.0f);
      x[77] = bad;
      std::vector<std::byte> q(static_cast<std::size_t>(*row_bytes(t, 256)));
      const Status s = quantize(t, x, q);
      EXPECT_EQ(s.code(), StatusCode::kInvalidArgument) << name(t);
      EXPECT_NE(s.message().find("element 77"), std::string::npos) << s.message();
    }
  }
}

TEST(QuantErrors, SizeMismatchAndDenseTypesAreRefused) {
  std::vector<float> x(64, 1.0f);
  std::vector<std::byte> q(36);  // q4_0 needs 36 for 64 elements
  EXPECT_TRUE(quantize(DType::kQ4_0, x, q).is_ok());
  std::vector<std::byte> short_q(35);
  EXPECT_EQ(quantize(DType::kQ4_0, x, short_q).code(), StatusCode::kInvalidArgument);
  std::vector<float> ragged(40, 1.0f);
  EXPECT_EQ(quantize(DType::kQ4_0, ragged, q).code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(quantize(DType::kQ4_K, x, q).code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(quantize(DType::kF16, x, q).code(), StatusCode::kInvalidArgument);
  std::vector<float> y(64);
  EXPECT_EQ(dequantize(DType::kQ4_0, short_q, y).code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(dequantize(DType::kF32, q, y).code(), StatusCode::kInvalidArgument);
  EXPECT_FALSE(can_quantize(DType::kF32));
  for (DType t : kAllQuant) EXPECT_TRUE(can_quantize(t)) << name(t);
}

TEST(QuantEdges, LargeMagnitudesEitherFitOrAreRefused) {
  for (DType t : kAllQuant) {
    for (float big : {1e4f, 1e6f, 1e20f, 3e38f}) {
      std::vector<float> x(256, 0.0f);
      for (int i = 0; i < 256; ++i) x[i] = (i % 3 - 1) * big * static_cast<float>(i) / 256.0f;
      std::vector<std::byte> q(static_cast<std::size_t>(*row_bytes(t, 256)));
      const Status s = quantize(t, x, q);
      if (s.is_ok()) {
        std::vector<float> y(256);
        ASSERT_TRUE(dequantize(t, q, y).is_ok());
        for (float v : y) ASSERT_TRUE(std::isfinite(v)) << name(t) << " " << big;
      } else {
        EXPECT_EQ(s.code(), StatusCode::kInvalidArgument) << name(t);
      }
    }
  }
  // 1e6 needs a q4_0 scale of 1.25e5, beyond f16: refused, not written as inf.
  std::vector<float> x(32, 1e6f);
  std::vector<std::byte> q(18);
  EXPECT_EQ(quantize(DType::kQ4_0, x, q).code(), StatusCode::kInvalidArgument);
  // q8_k's scale is f32: the same data fits.
  std::vector<float> xk(256, 1e30f);
  std::vector<std::byte> qk(292);
  EXPECT_TRUE(quantize(DType::kQ8_K, xk, qk).is_ok());
}

TEST(QuantEdges, TinyValuesQuantizeWithoutUndefinedBehaviour) {
  for (DType t : kAllQuant) {
    for (float tiny : {1e-30f, 1e-40f, 1e-45f}) {
      std::vector<float> x(256);
      for (int i = 0; i < 256; ++i) x[i] = (i % 2 ? tiny : -tiny) * static_cast<float>(i % 5);
      const auto y = dequantized(t, quantized(t, x), 256);
      for (std::size_t i = 0; i < y.size(); ++i) {
        ASSERT_TRUE(std::isfinite(y[i])) << name(t);
        ASSERT_LE(std::fabs(y[i]), 1e-20f) << name(t);
      }
    }
  }
}

}  // namespace
}  // namespace switchyard
