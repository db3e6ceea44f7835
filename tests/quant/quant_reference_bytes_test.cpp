// Quantized bytes against the reference quantizers of the GGUF ecosystem, for every
// format Switchyard quantizes (the k-quants, iq4 and q8_k included, which the
// Python `gguf` package cannot quantize).
//
// The expected values are FNV-1a 64 hashes of the bytes that the reference C
// quantizers wrote for the same three inputs, computed once outside this
// repository with those quantizers built with GCC 12 at -O1 on x86-64 (SSE
// arithmetic, no FMA contraction). They are the file-writing quantizers used
// without an importance matrix (`quantize_<format>(src, dst, rows, n, NULL)`),
// which for every format here but iq4_nl is the row quantizer
// `quantize_row_<format>_ref`; for iq4_nl the file path searches 7 scales either
// side and the row quantizer none, and Switchyard follows the file path (see the
// note in src/quant/quant.cpp). A mismatch means Switchyard writes different bytes
// from the tools that produce the GGUF files users download.
#include <gtest/gtest.h>

#include <cstdint>
#include <vector>

#include "switchyard/quant.h"

namespace switchyard {
namespace {

std::uint64_t fnv1a(const std::vector<std::byte>& bytes) {
  std::uint64_t h = 0xcbf29ce484222325ull;
  for (std::byte b : bytes) {
    h ^= static_cast<std::uint8_t>(b);
    h *= 0x100000001b3ull;
  }
  return h;
}

constexpr int kN = 2048;

// Set 0: a sawtooth over [-27, 27]. Set 1: small hashed noise (sd ~0.01, the scale
// of real weights) with one 51x outlier per 256 values. Set 2: small values whose
// magnitude grows by block, with runs of exact zeros.
std::vector<float> input(int set) {
  std::vector<float> x(kN);
  for (int i = 0; i < kN; ++i) {
    float v = 0.0f;
    if (set == 0) {
      v = static_cast<float>((i * 7919 + 13) % 2001 - 1000) / 37.0f;
    } else if (set == 1) {
      std::uint32_t s = static_cast<std::uint32_t>(i) * 2654435761u;
      s ^= s >> 13;
      s *= 0x5bd1e995u;
      s ^= s >> 15;
      const float unit = static_cast<float>(s & 0xffff) / 65535.0f - 0.5f;
      v = unit * 0.04f * static_cast<float>(1 + (i % 256 == 7 ? 50 : 0));
    } else {
      v = i % 64 < 8
              ? 0.0f
              : static_cast<float>((i * 37) % 101 - 50) * 1e-3f * static_cast<float>(i / 256 + 1);
    }
    x[static_cast<std::size_t>(i)] = v;
  }
  return x;
}

struct Expected {
  DType type;
  std::uint64_t hash[3];  // per input set
};

constexpr Expected kExpected[] = {
    {DType::kQ4_0, {0x35e6c9c4cd7b95dcull, 0x748364a12e393a2dull, 0xa2366b727b159cfaull}},
    {DType::kQ4_1, {0x1c558dae9dfec19aull, 0x1fc3f24f7ae9446bull, 0x9de10dd5c19e690aull}},
    {DType::kQ5_0, {0x632c12142bac85cdull, 0xda26f36c003eabb8ull, 0x017c77049b1d2505ull}},
    {DType::kQ5_1, {0x0307d2d64442ff62ull, 0x67e361850f1b7fe5ull, 0x1100de233bd633f1ull}},
    {DType::kQ8_0, {0x1ea6426cddb7154aull, 0x4ad11ef736b5d8daull, 0x186c1f5b4bf4e0a2ull}},
    {DType::kMXFP4, {0x4325a1501e411e5full, 0xecc3af997acc6908ull, 0xba7e9ec5dab167abull}},
    {DType::kQ2_K, {0x088f63976a978a3full, 0xf36d93452acaac85ull, 0xd56381799fb8cbb0ull}},
    {DType::kQ3_K, {0xf82a2e0f2f3d9c24ull, 0x00fadff0fd0cd1f8ull, 0x87cc0a08a310a474ull}},
    {DType::kQ4_K, {0x9adfa65008611c54ull, 0xf6b737d3419c8771ull, 0x0341e76beee68a49ull}},
    {DType::kQ5_K, {0xe12531b014faa94bull, 0x21d83e04f6ecf7e9ull, 0xe62bc8593bd721e4ull}},
    {DType::kQ6_K, {0x8f4846a99a0f3b8cull, 0xd4245b6ef0048cdaull, 0x7fdc72f7f685fde1ull}},
    {DType::kIQ4_NL, {0xf4f2e66824c6f626ull, 0x13ab992ab7a48f1cull, 0x76d0c2bb4aea5412ull}},
    {DType::kIQ4_XS, {0xc222bb2f17f5ef3bull, 0x05a0f4411fc3cd53ull, 0x8d1d096f0b658c85ull}},
    {DType::kQ8_K, {0x8c5d3ea719a4067dull, 0xff1fcb120dc298d5ull, 0x1708bc9bb19823ecull}},
};

TEST(QuantReferenceBytes, EveryFormatWritesTheReferenceQuantizersBytes) {
  for (int set = 0; set < 3; ++set) {
    const std::vector<float> x = input(set);
    for (const Expected& e : kExpected) {
      ASSERT_TRUE(can_quantize(e.type)) << name(e.type);
      std::vector<std::byte> q(static_cast<std::size_t>(*row_bytes(e.type, kN)));
      ASSERT_TRUE(quantize(e.type, x, q).is_ok()) << name(e.type);
      EXPECT_EQ(fnv1a(q), e.hash[set]) << name(e.type) << ", input set " << set;
    }
  }
}

}  // namespace
}  // namespace switchyard
