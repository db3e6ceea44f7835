// The SIMD activation quantizers against the reference quantizer, byte for byte.
#include "backends/cpu/quant/quantize_act.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <random>
#include <vector>

#include "backends/cpu/cpu_features.h"
#include "switchyard/dtype.h"
#include "switchyard/quant_blocks.h"

namespace switchyard::cpu {
namespace {

bool has_avx2() { return cpu_features().avx2 && cpu_features().f16c; }

using RowFn = void (*)(const float*, void*, std::int64_t);

// Rows of one kind per block, chosen to reach every rounding path.
std::vector<float> test_row(DType act, int kind, std::int64_t k, std::mt19937& rng) {
  std::vector<float> row(static_cast<std::size_t>(k));
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::uniform_int_distribution<int> level(-127, 127);
  const std::int64_t be = block_elems(act);
  for (std::int64_t b = 0; b < k / be; ++b) {
    float* x = row.data() + b * be;
    const int kind_b = kind == 0 ? static_cast<int>(rng() % 6) : kind;
    for (std::int64_t j = 0; j < be; ++j) {
      switch (kind_b) {
        case 1: x[j] = normal(rng); break;
        // Scale exactly one (q8_0: amax 127; q8_k: max -127), every element a tie.
        case 2: x[j] = static_cast<float>(level(rng)) + (j % 2 == 0 ? 0.5f : -0.5f); break;
        case 3: x[j] = 0.0f; break;
        case 4: x[j] = normal(rng) * 1e30f; break;
        case 5: x[j] = normal(rng) * 1e-40f; break;                     // subnormal
        default: x[j] = static_cast<float>(level(rng)) * 0.25f; break;  // small ties
      }
    }
    if (kind_b == 2) {
      x[0] = act == DType::kQ8_0 ? 127.0f : -127.0f;
      for (std::int64_t j = 1; j < be; ++j) x[j] = std::fmin(std::fmax(x[j], -126.5f), 126.5f);
    }
    // Largest magnitude twice with both signs: q8_k takes the first one's sign.
    if (kind_b == 1 && b % 2 == 1) {
      x[be / 2] = 9.0f;
      x[be - 1] = -9.0f;
    }
  }
  return row;
}

void expect_same_bytes(DType act, RowFn fn) {
  std::mt19937 rng(7);
  const std::int64_t be = block_elems(act);
  for (int kind = 0; kind <= 6; ++kind) {
    for (int rep = 0; rep < 40; ++rep) {
      const std::int64_t k = be * (1 + rep % 5);
      const std::vector<float> row = test_row(act, kind, k, rng);
      const std::size_t bytes = static_cast<std::size_t>(k / be * block_bytes(act));
      std::vector<std::uint8_t> want(bytes, 0x55);
      std::vector<std::uint8_t> got(bytes, 0xaa);
      quant::quantize_row(act, row.data(), want.data(), k);
      fn(row.data(), got.data(), k);
      std::size_t first = 0;
      while (first < bytes && got[first] == want[first]) ++first;
      ASSERT_EQ(first, bytes) << name(act) << " kind " << kind << " rep " << rep
                              << ": first different byte (block " << first / block_bytes(act)
                              << ", offset " << first % block_bytes(act) << ")";
    }
  }
}

TEST(QuantizeActAvx2, Q8_0SameBytesAsReference) {
  if (!has_avx2()) GTEST_SKIP() << "CPU lacks AVX2/F16C";
  expect_same_bytes(DType::kQ8_0, &quantize_row_q8_0_avx2);
}

TEST(QuantizeActAvx2, Q8_KSameBytesAsReference) {
  if (!has_avx2()) GTEST_SKIP() << "CPU lacks AVX2/F16C";
  expect_same_bytes(DType::kQ8_K, &quantize_row_q8_k_avx2);
}

}  // namespace
}  // namespace switchyard::cpu
