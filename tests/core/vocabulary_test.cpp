#include <optional>
#include <set>
#include <span>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "switchyard/backend.h"
#include "switchyard/dtype.h"
#include "switchyard/half.h"
#include "switchyard/op.h"

namespace switchyard {
namespace {

TEST(DTypeTest, NamesRoundTripAndAreUnique) {
  std::set<std::string_view> seen;
  for (DType t : kAllDTypes) {
    EXPECT_TRUE(seen.insert(name(t)).second) << name(t);
    Result<DType> parsed = parse_dtype(name(t));
    ASSERT_TRUE(parsed.is_ok());
    EXPECT_EQ(*parsed, t);
  }
  EXPECT_EQ(seen.size(), static_cast<std::size_t>(kDTypeCount));
  EXPECT_EQ(*parse_dtype("Q4_K"), DType::kQ4_K);
}

TEST(DTypeTest, UnknownNameListsTheValidOnes) {
  Result<DType> r = parse_dtype("q4_z");
  ASSERT_FALSE(r.is_ok());
  EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(r.status().message().find("q4_k"), std::string_view::npos);
}

TEST(DTypeTest, BlockLayoutsMatchTheGgufSpecification) {
  struct Expected {
    DType t;
    int gguf, elems, bytes;
  };
  const Expected expected[] = {
      {DType::kF32, 0, 1, 4},       {DType::kF16, 1, 1, 2},         {DType::kBF16, 30, 1, 2},
      {DType::kQ4_0, 2, 32, 18},    {DType::kQ4_1, 3, 32, 20},      {DType::kQ5_0, 6, 32, 22},
      {DType::kQ5_1, 7, 32, 24},    {DType::kQ8_0, 8, 32, 34},      {DType::kQ8_1, 9, 32, 36},
      {DType::kQ2_K, 10, 256, 84},  {DType::kQ3_K, 11, 256, 110},   {DType::kQ4_K, 12, 256, 144},
      {DType::kQ5_K, 13, 256, 176}, {DType::kQ6_K, 14, 256, 210},   {DType::kQ8_K, 15, 256, 292},
      {DType::kIQ4_NL, 20, 32, 18}, {DType::kIQ4_XS, 23, 256, 136}, {DType::kMXFP4, 39, 32, 17},
  };
  for (const Expected& e : expected) {
    EXPECT_EQ(info(e.t).gguf_type_id, e.gguf) << name(e.t);
    EXPECT_EQ(block_elems(e.t), e.elems) << name(e.t);
    EXPECT_EQ(block_bytes(e.t), e.bytes) << name(e.t);
    EXPECT_EQ(dtype_from_gguf(e.gguf), e.t) << name(e.t);
  }
  EXPECT_EQ(dtype_from_gguf(-1), std::nullopt);
  EXPECT_EQ(dtype_from_gguf(1000), std::nullopt);
}

// The roles and file types as llama.cpp's ggml.h / llama.h state them, written out
// here so that a slip in dtype.def's columns shows as a difference.
TEST(DTypeTest, RolesAndFileTypesMatchGguf) {
  struct Expected {
    DType t;
    bool weight, activation;
    int file_type;
  };
  const Expected expected[] = {
      {DType::kF64, false, false, -1},   {DType::kF32, true, false, 0},
      {DType::kF16, true, false, 1},     {DType::kBF16, true, false, 32},
      {DType::kI64, false, false, -1},   {DType::kI32, false, false, -1},
      {DType::kI16, false, false, -1},   {DType::kI8, false, false, -1},
      {DType::kU8, false, false, -1},    {DType::kBool, false, false, -1},
      {DType::kQ4_0, true, false, 2},    {DType::kQ4_1, true, false, 3},
      {DType::kQ5_0, true, false, 8},    {DType::kQ5_1, true, false, 9},
      {DType::kQ8_0, true, true, 7},     {DType::kQ8_1, false, true, -1},
      {DType::kQ2_K, true, false, 10},   {DType::kQ3_K, true, false, 11},
      {DType::kQ4_K, true, false, 14},   {DType::kQ5_K, true, false, 16},
      {DType::kQ6_K, true, false, 18},   {DType::kQ8_K, false, true, -1},
      {DType::kIQ4_NL, true, false, 25}, {DType::kIQ4_XS, true, false, 30},
      {DType::kMXFP4, true, false, 38},
  };
  ASSERT_EQ(std::size(expected), static_cast<std::size_t>(kDTypeCount));
  for (const Expected& e : expected) {
    EXPECT_EQ(is_weight_format(e.t), e.weight) << name(e.t);
    EXPECT_EQ(is_activation_format(e.t), e.activation) << name(e.t);
    const std::optional<std::uint32_t> want =
        e.file_type < 0 ? std::nullopt : std::optional<std::uint32_t>(e.file_type);
    EXPECT_EQ(gguf_file_type(e.t), want) << name(e.t);
  }
}

// The filtered lists hold exactly the dtypes their predicate accepts, in dtype.def
// order.
TEST(DTypeTest, FilteredListsFollowTheirColumns) {
  auto expect_filter = [](std::span<const DType> list, bool (*pred)(DType), const char* what) {
    std::vector<DType> want;
    for (DType t : kAllDTypes) {
      if (pred(t)) want.push_back(t);
    }
    EXPECT_EQ(std::vector<DType>(list.begin(), list.end()), want) << what;
  };
  expect_filter(kQuantizedDTypes, &is_quantized, "kQuantizedDTypes");
  expect_filter(kWeightDTypes, &is_weight_format, "kWeightDTypes");
  expect_filter(kQuantizedWeightDTypes, &is_quantized_weight_format, "kQuantizedWeightDTypes");
  expect_filter(kActivationFormats, &is_activation_format, "kActivationFormats");
  EXPECT_EQ(kQuantizedDTypes.size(), 15u);
  EXPECT_EQ(kQuantizedWeightDTypes.size(), 13u);
  EXPECT_EQ((std::vector<DType>(kActivationFormats.begin(), kActivationFormats.end())),
            (std::vector<DType>{DType::kQ8_0, DType::kQ8_1, DType::kQ8_K}));
}

TEST(DTypeTest, RowBytesRejectsPartialBlocksAndOverflow) {
  EXPECT_EQ(*row_bytes(DType::kQ4_K, 4096), 4096 / 256 * 144);
  EXPECT_EQ(*row_bytes(DType::kF16, 7), 14);
  EXPECT_EQ(row_bytes(DType::kQ4_0, 33).status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(row_bytes(DType::kF32, -1).status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(row_bytes(DType::kF64, std::int64_t{1} << 62).status().code(), StatusCode::kOutOfRange);
}

TEST(OpTest, EveryOpHasAFamilyAndRoundTrips) {
  for (OpKind op : kAllOps) {
    EXPECT_EQ(*parse_op(name(op)), op);
  }
  EXPECT_EQ(op_family(OpKind::kAdd), OpFamily::kBinary);
  EXPECT_EQ(op_family(OpKind::kMatmul), OpFamily::kMatmul);
  EXPECT_EQ(op_family(OpKind::kFfnSwiglu), OpFamily::kFused);
  EXPECT_EQ(*parse_op_family("attention"), OpFamily::kAttention);
  EXPECT_FALSE(parse_op("matmull").is_ok());
}

TEST(BackendTest, AcceleratorFlagsAndNames) {
  EXPECT_FALSE(is_accelerator(BackendId::kCpu));
  EXPECT_TRUE(is_accelerator(BackendId::kCuda));
  for (BackendId b : kAllBackends) EXPECT_EQ(*parse_backend(name(b)), b);
  EXPECT_FALSE(parse_backend("tpu").is_ok());
}

TEST(HalfTest, F16RoundTripsEveryFiniteValue) {
  for (std::uint32_t bits = 0; bits < 0x10000u; ++bits) {
    const auto h = static_cast<std::uint16_t>(bits);
    const float f = f16_to_f32(h);
    if (f != f) {
      EXPECT_NE(f32_to_f16(f) & 0x7fffu, 0x7c00u);  // NaN stays NaN
      continue;
    }
    EXPECT_EQ(f32_to_f16(f), h) << std::hex << bits;
  }
}

TEST(HalfTest, F16RoundsToNearestEven) {
  // 1 + 2^-11 is halfway between 1 and the next f16 (1 + 2^-10): ties to even -> 1.
  EXPECT_EQ(f32_to_f16(1.0f + 0x1p-11f), 0x3c00u);
  // 1 + 3*2^-11 is halfway between 1+2^-10 (odd) and 1+2^-9 (even) -> up.
  EXPECT_EQ(f32_to_f16(1.0f + 3 * 0x1p-11f), 0x3c02u);
  EXPECT_EQ(f32_to_f16(65520.0f), 0x7c00u);  // rounds to infinity
  EXPECT_EQ(f32_to_f16(0x1p-25f), 0x0000u);  // half the smallest subnormal: even -> 0
  EXPECT_EQ(f32_to_f16(0x1p-24f * 1.5f), 0x0002u);
}

TEST(HalfTest, Bf16RoundsToNearestEvenAndKeepsNan) {
  EXPECT_EQ(f32_to_bf16(1.0f), 0x3f80u);
  EXPECT_EQ(f32_to_bf16(std::bit_cast<float>(0x3f808000u)), 0x3f80u);  // tie -> even
  EXPECT_EQ(f32_to_bf16(std::bit_cast<float>(0x3f818000u)), 0x3f82u);  // tie -> even
  const std::uint16_t nan = f32_to_bf16(std::bit_cast<float>(0x7f800001u));
  EXPECT_TRUE(bf16_to_f32(nan) != bf16_to_f32(nan));
}

}  // namespace
}  // namespace switchyard
