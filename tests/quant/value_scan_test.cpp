// Scanning stored floats: exact NaN / infinity / subnormal counts and first indices
// for every dense float dtype and every block format's scale fields, at chunk and
// stream boundaries, and the edges of each class (zero, the smallest normal, the
// largest subnormal, negative values).
#include "switchyard/value_scan.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstddef>
#include <cstring>
#include <limits>
#include <random>
#include <vector>

#include "switchyard/half.h"
#include "switchyard/quant.h"
#include "switchyard/quant_blocks.h"

namespace switchyard {
namespace {

template <typename T>
std::vector<std::byte> bytes_of(const std::vector<T>& v) {
  std::vector<std::byte> out(v.size() * sizeof(T));
  std::memcpy(out.data(), v.data(), out.size());
  return out;
}

ValueScan scan(DType t, std::span<const std::byte> bytes, std::int64_t first = 0) {
  Result<ValueScan> s = scan_values(t, bytes, first);
  EXPECT_TRUE(s.is_ok()) << s.status().to_string();
  return s.is_ok() ? *s : ValueScan{};
}

// Normal values of either sign (none subnormal, none zero).
std::vector<float> normal_values(std::size_t n, unsigned seed = 1) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> dist(0.5f, 2.0f);
  std::vector<float> v(n);
  for (std::size_t i = 0; i < n; ++i) v[i] = (i % 3 == 0 ? -1.0f : 1.0f) * dist(rng);
  return v;
}

TEST(ValueScanTest, CleanF32CountsNothing) {
  std::vector<float> v = normal_values(10000);
  v[17] = 0.0f;
  v[18] = -0.0f;
  v[19] = std::numeric_limits<float>::min();  // the smallest normal
  v[20] = std::numeric_limits<float>::max();
  const ValueScan s = scan(DType::kF32, bytes_of(v));
  EXPECT_EQ(s.values, 10000);
  EXPECT_EQ(s.nan, 0);
  EXPECT_EQ(s.inf, 0);
  EXPECT_EQ(s.subnormal, 0);
  EXPECT_EQ(s.first_nonfinite, -1);
  EXPECT_EQ(s.first_subnormal, -1);
  EXPECT_TRUE(s.finite());
}

TEST(ValueScanTest, F32CountsEachClassAndFindsTheFirst) {
  // Long enough for several chunks in each of the parts read side by side, so
  // the first finding must be the lowest index, not the first part's.
  std::vector<float> v = normal_values(50001);
  const float nan = std::numeric_limits<float>::quiet_NaN();
  const float inf = std::numeric_limits<float>::infinity();
  const float denorm = std::numeric_limits<float>::denorm_min();
  v[49999] = nan;  // last part
  v[30001] = -nan;
  v[12345] = inf;
  v[40000] = -inf;
  v[50000] = denorm;                                                   // the scalar tail
  v[25000] = -std::numeric_limits<float>::min() * 0.5f;                // negative subnormal
  v[33333] = std::nextafter(std::numeric_limits<float>::min(), 0.0f);  // the largest
  const ValueScan s = scan(DType::kF32, bytes_of(v));
  EXPECT_EQ(s.values, 50001);
  EXPECT_EQ(s.nan, 2);
  EXPECT_EQ(s.inf, 2);
  EXPECT_EQ(s.subnormal, 3);
  EXPECT_EQ(s.first_nonfinite, 12345);
  EXPECT_EQ(s.first_subnormal, 25000);
  EXPECT_EQ(s.first_nonfinite_field, "");
  EXPECT_FALSE(s.finite());
}

TEST(ValueScanTest, FirstIndexIsTheFilesNotThePartsAtEveryPosition) {
  // One NaN at every position of a short run in turn, including chunk edges.
  for (std::size_t n : {1u, 7u, 1023u, 1024u, 1025u, 4096u, 4100u}) {
    for (std::size_t at : {std::size_t{0}, n / 2, n - 1}) {
      std::vector<float> v = normal_values(n, static_cast<unsigned>(n));
      v[at] = std::numeric_limits<float>::quiet_NaN();
      const ValueScan s = scan(DType::kF32, bytes_of(v), 100);
      EXPECT_EQ(s.nan, 1) << n << " " << at;
      EXPECT_EQ(s.first_nonfinite, static_cast<std::int64_t>(100 + at)) << n << " " << at;
    }
  }
}

TEST(ValueScanTest, F16AndBF16ClassifyOnTheirOwnBits) {
  std::vector<std::uint16_t> h(3000, 0x3c00);  // 1.0
  h[5] = 0x7c00;                               // +inf
  h[6] = 0xfc00;                               // -inf
  h[2000] = 0x7e00;                            // NaN
  h[2999] = 0x7c01;                            // signalling NaN pattern, the tail
  h[10] = 0x0001;                              // smallest subnormal
  h[11] = 0x83ff;                              // largest subnormal, negative
  h[12] = 0x0400;                              // smallest normal: not subnormal
  h[13] = 0x8000;                              // -0: not subnormal
  ValueScan s = scan(DType::kF16, bytes_of(h));
  EXPECT_EQ(s.nan, 2);
  EXPECT_EQ(s.inf, 2);
  EXPECT_EQ(s.subnormal, 2);
  EXPECT_EQ(s.first_nonfinite, 5);
  EXPECT_EQ(s.first_subnormal, 10);

  // The same bits as bf16 mean other things: 0x7c00 is 2^121, finite.
  std::vector<std::uint16_t> b(3000, 0x3f80);  // 1.0
  b[7] = 0x7c00;                               // finite in bf16
  b[8] = 0x7f80;                               // +inf
  b[9] = 0xffc0;                               // NaN
  b[100] = 0x007f;                             // largest subnormal
  b[101] = 0x0080;                             // smallest normal
  s = scan(DType::kBF16, bytes_of(b));
  EXPECT_EQ(s.nan, 1);
  EXPECT_EQ(s.inf, 1);
  EXPECT_EQ(s.subnormal, 1);
  EXPECT_EQ(s.first_nonfinite, 8);
  EXPECT_EQ(s.first_subnormal, 100);
}

TEST(ValueScanTest, F64) {
  std::vector<double> v(100, 1.0);
  v[3] = std::numeric_limits<double>::denorm_min();
  v[50] = -std::numeric_limits<double>::infinity();
  v[99] = std::numeric_limits<double>::quiet_NaN();
  v[4] = static_cast<double>(std::numeric_limits<float>::denorm_min());  // normal in f64
  const ValueScan s = scan(DType::kF64, bytes_of(v));
  EXPECT_EQ(s.nan, 1);
  EXPECT_EQ(s.inf, 1);
  EXPECT_EQ(s.subnormal, 1);
  EXPECT_EQ(s.first_nonfinite, 50);
  EXPECT_EQ(s.first_subnormal, 3);
}

// Each scale field of each block format, as quant_blocks.h lays it out.
struct Field {
  DType dtype;
  std::size_t offset;
  const char* name;
  int bytes;  // 2: f16, 4: f32, 1: E8M0
};
const Field kFields[] = {
    {DType::kQ4_0, offsetof(quant::BlockQ4_0, d), "d", 2},
    {DType::kQ4_1, offsetof(quant::BlockQ4_1, d), "d", 2},
    {DType::kQ4_1, offsetof(quant::BlockQ4_1, m), "m", 2},
    {DType::kQ5_0, offsetof(quant::BlockQ5_0, d), "d", 2},
    {DType::kQ5_1, offsetof(quant::BlockQ5_1, d), "d", 2},
    {DType::kQ5_1, offsetof(quant::BlockQ5_1, m), "m", 2},
    {DType::kQ8_0, offsetof(quant::BlockQ8_0, d), "d", 2},
    {DType::kQ8_1, offsetof(quant::BlockQ8_1, d), "d", 2},
    {DType::kQ8_1, offsetof(quant::BlockQ8_1, s), "s", 2},
    {DType::kQ2_K, offsetof(quant::BlockQ2_K, d), "d", 2},
    {DType::kQ2_K, offsetof(quant::BlockQ2_K, dmin), "dmin", 2},
    {DType::kQ3_K, offsetof(quant::BlockQ3_K, d), "d", 2},
    {DType::kQ4_K, offsetof(quant::BlockQ4_K, d), "d", 2},
    {DType::kQ4_K, offsetof(quant::BlockQ4_K, dmin), "dmin", 2},
    {DType::kQ5_K, offsetof(quant::BlockQ5_K, d), "d", 2},
    {DType::kQ5_K, offsetof(quant::BlockQ5_K, dmin), "dmin", 2},
    {DType::kQ6_K, offsetof(quant::BlockQ6_K, d), "d", 2},
    {DType::kQ8_K, offsetof(quant::BlockQ8_K, d), "d", 4},
    {DType::kIQ4_NL, offsetof(quant::BlockIQ4_NL, d), "d", 2},
    {DType::kIQ4_XS, offsetof(quant::BlockIQ4_XS, d), "d", 2},
    {DType::kMXFP4, offsetof(quant::BlockMXFP4, e), "e", 1},
};

TEST(ValueScanTest, EveryBlockFormatHasItsScaleFieldsListed) {
  for (DType t : kQuantizedDTypes) {
    bool listed = false;
    for (const Field& f : kFields) listed = listed || f.dtype == t;
    EXPECT_TRUE(listed) << name(t) << " has no scale field in this test";
  }
}

// Well-formed blocks of `t`, `blocks` of them: 64 quantized from normal values,
// repeated.
std::vector<std::byte> clean_blocks(DType t, std::int64_t blocks) {
  const std::int64_t distinct = std::min<std::int64_t>(blocks, 64);
  const std::vector<float> x =
      normal_values(static_cast<std::size_t>(distinct * block_elems(t)), 3);
  std::vector<std::byte> q(static_cast<std::size_t>(*row_bytes(t, distinct * block_elems(t))));
  EXPECT_TRUE(quantize(t, x, q).is_ok()) << name(t);
  std::vector<std::byte> out(static_cast<std::size_t>(blocks * block_bytes(t)));
  for (std::size_t at = 0; at < out.size(); at += q.size()) {
    std::memcpy(out.data() + at, q.data(), std::min(q.size(), out.size() - at));
  }
  return out;
}

void put_bits(std::byte* p, const Field& f, std::uint32_t bits) {
  std::memcpy(p + f.offset, &bits, static_cast<std::size_t>(f.bytes));
}

TEST(ValueScanTest, EveryScaleFieldOfEveryBlockFormat) {
  constexpr std::int64_t kBlocks = 5000;  // several chunks in each part
  for (const Field& f : kFields) {
    SCOPED_TRACE(std::string(name(f.dtype)) + "." + f.name);
    std::vector<std::byte> q = clean_blocks(f.dtype, kBlocks);
    const auto stride = static_cast<std::size_t>(block_bytes(f.dtype));
    const ValueScan clean = scan(f.dtype, q);
    ASSERT_TRUE(clean.finite());
    const std::int64_t fields_per_block = clean.values / kBlocks;
    EXPECT_EQ(clean.values % kBlocks, 0);

    // NaN, infinity and subnormal patterns of the field's encoding.
    const std::uint32_t nan = f.bytes == 2 ? 0x7e00u : f.bytes == 4 ? 0x7fc00000u : 0xffu;
    const std::uint32_t inf = f.bytes == 2 ? 0xfc00u : 0xff800000u;
    const std::uint32_t sub = f.bytes == 2 ? 0x0003u : f.bytes == 4 ? 0x00000005u : 0x00u;
    put_bits(q.data() + 4321 * stride, f, nan);
    put_bits(q.data() + 1717 * stride, f, nan);
    // Alone in its chunk (kChunk = 1024 blocks), so only its own count finds it.
    if (f.bytes != 1) put_bits(q.data() + 3000 * stride, f, inf);  // E8M0 has no infinity
    put_bits(q.data() + 2500 * stride, f, sub);
    const std::int64_t subnormal_before = clean.subnormal;

    const ValueScan s = scan(f.dtype, q, 7);
    EXPECT_EQ(s.values, kBlocks * fields_per_block);
    EXPECT_EQ(s.nan, 2);
    EXPECT_EQ(s.inf, f.bytes != 1 ? 1 : 0);
    EXPECT_EQ(s.first_nonfinite, 7 + 1717);
    EXPECT_EQ(s.first_nonfinite_field, f.name);
    // The clean blocks may hold subnormal scales of their own (a tiny dmin).
    EXPECT_GE(s.subnormal, 1);
    if (subnormal_before == 0) {
      EXPECT_EQ(s.subnormal, 1);
      EXPECT_EQ(s.first_subnormal, 7 + 2500);
      EXPECT_EQ(s.first_subnormal_field, f.name);
    }
  }
}

TEST(ValueScanTest, QuantsAreNotScales) {
  // Bytes that are NaN patterns everywhere but in the scales: nothing found.
  for (DType t : {DType::kQ4_0, DType::kQ8_0, DType::kQ4_K, DType::kQ6_K}) {
    std::vector<std::byte> q = clean_blocks(t, 64);
    const ValueScan clean = scan(t, q);
    const auto stride = static_cast<std::size_t>(block_bytes(t));
    for (std::size_t b = 0; b < 64; ++b) {
      for (std::size_t i = 0; i < stride; ++i) {
        bool scale = false;
        for (const Field& f : kFields) {
          scale = scale || (f.dtype == t && i >= f.offset &&
                            i < f.offset + static_cast<std::size_t>(f.bytes));
        }
        if (!scale) q[b * stride + i] = std::byte{0xff};
      }
    }
    EXPECT_EQ(scan(t, q), clean) << name(t);
  }
}

TEST(ValueScanTest, MxFp4ExponentEdges) {
  std::vector<std::byte> q = clean_blocks(DType::kMXFP4, 10);
  const std::size_t e = offsetof(quant::BlockMXFP4, e);
  q[3 * sizeof(quant::BlockMXFP4) + e] = std::byte{0xfe};  // 2^127: finite, normal
  q[4 * sizeof(quant::BlockMXFP4) + e] = std::byte{0x01};  // 2^-126: normal
  const ValueScan s = scan(DType::kMXFP4, q);
  EXPECT_TRUE(s.finite());
  EXPECT_EQ(s.subnormal, 0);
}

// The scan's bit tricks against the obvious code: each stored float widened
// through half.h (or read as f32 / f64) and classified by std::fpclassify, on
// random bits of every length up to a few chunks (every tail and part split).
ValueScan reference_scan(DType t, std::span<const std::byte> bytes) {
  ValueScan s;
  const auto note = [&s](double v, bool subnormal, std::int64_t block, std::string_view field) {
    ++s.values;
    if (std::isnan(v) || std::isinf(v)) {
      (std::isnan(v) ? s.nan : s.inf) += 1;
      if (s.first_nonfinite < 0) {
        s.first_nonfinite = block;
        s.first_nonfinite_field = field;
      }
    } else if (subnormal) {
      ++s.subnormal;
      if (s.first_subnormal < 0) {
        s.first_subnormal = block;
        s.first_subnormal_field = field;
      }
    }
  };
  const auto bb = static_cast<std::size_t>(block_bytes(t));
  for (std::size_t b = 0; b < bytes.size() / bb; ++b) {
    const std::byte* p = bytes.data() + b * bb;
    const auto block = static_cast<std::int64_t>(b);
    std::uint16_t h;
    std::memcpy(&h, p, 2);
    if (t == DType::kF32) {
      float f;
      std::memcpy(&f, p, 4);
      note(f, std::fpclassify(f) == FP_SUBNORMAL, block, "");
    } else if (t == DType::kF64) {
      double d;
      std::memcpy(&d, p, 8);
      note(d, std::fpclassify(d) == FP_SUBNORMAL, block, "");
    } else if (t == DType::kBF16) {
      const float f = bf16_to_f32(h);
      note(f, std::fpclassify(f) == FP_SUBNORMAL, block, "");
    } else if (t == DType::kF16) {
      // An f16 subnormal: exponent field 0, mantissa not (its f32 is normal).
      note(f16_to_f32(h), (h & 0x7c00) == 0 && (h & 0x03ff) != 0, block, "");
    } else {
      for (const Field& f : kFields) {
        if (f.dtype != t) continue;
        if (f.bytes == 2) {
          const std::uint16_t v =
              static_cast<std::uint16_t>(std::to_integer<unsigned>(p[f.offset]) |
                                         (std::to_integer<unsigned>(p[f.offset + 1]) << 8));
          note(f16_to_f32(v), (v & 0x7c00) == 0 && (v & 0x03ff) != 0, block, f.name);
        } else if (f.bytes == 4) {
          const float v = quant::load_f32(reinterpret_cast<const std::uint8_t*>(p + f.offset));
          note(v, std::fpclassify(v) == FP_SUBNORMAL, block, f.name);
        } else {
          const auto e = std::to_integer<unsigned>(p[f.offset]);
          note(e == 0xff ? std::nan("") : 1.0, e == 0, block, f.name);
        }
      }
    }
  }
  return s;
}

TEST(ValueScanTest, MatchesAScalarReferenceOnRandomBits) {
  std::mt19937 rng(42);
  std::vector<DType> dtypes = {DType::kF64, DType::kF32, DType::kF16, DType::kBF16};
  for (DType t : kQuantizedDTypes) dtypes.push_back(t);
  for (DType t : dtypes) {
    const auto bb = static_cast<std::size_t>(block_bytes(t));
    for (std::size_t blocks :
         {0u, 1u, 15u, 16u, 17u, 63u, 64u, 65u, 1023u, 1024u, 1025u, 4099u, 9000u}) {
      // Bits that are mostly normal values, with every special class sprinkled:
      // random bytes, then one byte in 8 forced to a byte of an infinity, a NaN,
      // a zero or a subnormal.
      std::vector<std::byte> bytes(blocks * bb);
      for (std::byte& b : bytes) {
        const unsigned r = rng();
        b = static_cast<std::byte>((r >> 8) % 8 != 0 ? r & 0xff
                                                     : std::array{0x00u, 0x7cu, 0xfcu, 0x7fu, 0x80u,
                                                                  0xffu, 0x03u, 0x04u}[r & 7]);
      }
      const ValueScan want = reference_scan(t, bytes);
      if (!has_float_values(t)) continue;
      EXPECT_EQ(scan(t, bytes), want) << name(t) << " " << blocks << " blocks";
    }
  }
}

TEST(ValueScanTest, ChunkedScansAppendToTheWholeScan) {
  std::vector<float> v = normal_values(9000);
  v[100] = std::numeric_limits<float>::denorm_min();
  v[5000] = std::numeric_limits<float>::infinity();
  v[8000] = std::numeric_limits<float>::quiet_NaN();
  const std::vector<std::byte> b = bytes_of(v);
  const ValueScan whole = scan(DType::kF32, b);
  ValueScan pieces;
  for (std::size_t at = 0; at < v.size(); at += 1000) {
    pieces.append(
        scan(DType::kF32, std::span(b).subspan(at * 4, 4000), static_cast<std::int64_t>(at)));
  }
  EXPECT_EQ(pieces, whole);
  EXPECT_EQ(whole.first_nonfinite, 5000);
  EXPECT_EQ(whole.first_subnormal, 100);
}

TEST(ValueScanTest, RefusesPartialBlocksAndNegativeIndices) {
  const std::vector<std::byte> b(35);
  EXPECT_EQ(scan_values(DType::kQ8_0, b).status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(scan_values(DType::kF32, std::span(b).first(6)).status().code(),
            StatusCode::kInvalidArgument);
  EXPECT_EQ(scan_values(DType::kF32, std::span(b).first(8), -1).status().code(),
            StatusCode::kInvalidArgument);
  EXPECT_TRUE(scan_values(DType::kQ8_0, std::span(b).first(0)).is_ok());
}

TEST(ValueScanTest, IntegerDtypesHoldNoFloats) {
  const std::vector<std::int32_t> v(64, 0x7fc00000);  // a NaN's bits, as integers
  EXPECT_FALSE(has_float_values(DType::kI32));
  EXPECT_TRUE(has_float_values(DType::kBF16));
  EXPECT_TRUE(has_float_values(DType::kQ4_K));
  const ValueScan s = scan(DType::kI32, bytes_of(v));
  EXPECT_EQ(s, ValueScan{});
}

TEST(ValueScanTest, SubnormalInF32) {
  EXPECT_TRUE(subnormal_in_f32(DType::kF32));
  EXPECT_TRUE(subnormal_in_f32(DType::kBF16));
  EXPECT_TRUE(subnormal_in_f32(DType::kMXFP4));
  EXPECT_FALSE(subnormal_in_f32(DType::kF16));
  EXPECT_FALSE(subnormal_in_f32(DType::kQ6_K));
  // An f16 subnormal is a normal f32, which is why it is not warned about.
  EXPECT_TRUE(std::isnormal(f16_to_f32(0x0001)));
  EXPECT_FALSE(std::isnormal(bf16_to_f32(0x0001)));
}

}  // namespace
}  // namespace switchyard
