#include <cstdint>
#include <limits>
#include <set>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "switchyard/gguf.h"

namespace switchyard {
namespace {

TEST(GgufValueTest, TypeIdsAreTheSpecificationsAndNamesAreUnique) {
  EXPECT_EQ(GgufValue::u8(0).type(), GgufType::kU8);
  EXPECT_EQ(static_cast<int>(GgufValue::i8(0).type()), 1);
  EXPECT_EQ(static_cast<int>(GgufValue::u16(0).type()), 2);
  EXPECT_EQ(static_cast<int>(GgufValue::i16(0).type()), 3);
  EXPECT_EQ(static_cast<int>(GgufValue::u32(0).type()), 4);
  EXPECT_EQ(static_cast<int>(GgufValue::i32(0).type()), 5);
  EXPECT_EQ(static_cast<int>(GgufValue::f32(0).type()), 6);
  EXPECT_EQ(static_cast<int>(GgufValue::boolean(false).type()), 7);
  EXPECT_EQ(static_cast<int>(GgufValue::string("").type()), 8);
  EXPECT_EQ(static_cast<int>(GgufValue::array(GgufType::kU8, {}).type()), 9);
  EXPECT_EQ(static_cast<int>(GgufValue::u64(0).type()), 10);
  EXPECT_EQ(static_cast<int>(GgufValue::i64(0).type()), 11);
  EXPECT_EQ(static_cast<int>(GgufValue::f64(0).type()), 12);
  std::set<std::string_view> names;
  for (std::uint32_t t = 0; t < kGgufTypeCount; ++t) {
    EXPECT_TRUE(names.insert(name(static_cast<GgufType>(t))).second);
  }
  EXPECT_EQ(name(static_cast<GgufType>(77)), "unknown");
}

TEST(GgufValueTest, AccessorsCheckTheExactType) {
  GgufValue v = GgufValue::u32(7);
  EXPECT_EQ(*v.as_u32(), 7u);
  Result<std::int32_t> wrong = v.as_i32();
  ASSERT_FALSE(wrong.is_ok());
  EXPECT_EQ(wrong.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(wrong.status().message().find("u32, not i32"), std::string_view::npos);
  EXPECT_FALSE(GgufValue::string("x").as_u8().is_ok());
  EXPECT_EQ(*GgufValue::string("x").as_string(), "x");
  EXPECT_FALSE(GgufValue::u8(1).as_bool().is_ok());
}

TEST(GgufValueTest, IntegerAndFloatAccessorsWidenButDoNotConvertKinds) {
  EXPECT_EQ(*GgufValue::u8(200).as_integer(), 200);
  EXPECT_EQ(*GgufValue::i16(-5).as_integer(), -5);
  EXPECT_EQ(*GgufValue::u32(4000000000u).as_integer(), 4000000000LL);
  EXPECT_EQ(*GgufValue::i64(-1).as_integer(), -1);
  EXPECT_EQ(*GgufValue::u64(1ull << 62).as_integer(), 1LL << 62);
  Result<std::int64_t> too_big = GgufValue::u64(~0ull).as_integer();
  ASSERT_FALSE(too_big.is_ok());
  EXPECT_EQ(too_big.status().code(), StatusCode::kOutOfRange);
  EXPECT_FALSE(GgufValue::f32(1).as_integer().is_ok());
  EXPECT_FALSE(GgufValue::boolean(true).as_integer().is_ok());
  EXPECT_EQ(*GgufValue::f32(0.5f).as_float(), 0.5);
  EXPECT_EQ(*GgufValue::f64(0.1).as_float(), 0.1);
  EXPECT_FALSE(GgufValue::i32(1).as_float().is_ok());
}

TEST(GgufValueTest, ArraysAndToString) {
  GgufValue a = GgufValue::array(GgufType::kU32, {GgufValue::u32(1), GgufValue::u32(2)});
  EXPECT_TRUE(a.is_array());
  EXPECT_EQ(a.element_type(), GgufType::kU32);
  EXPECT_EQ(a.as_array()->size(), 2u);
  EXPECT_EQ(a.to_string(), "[u32 x 2: 1, 2]");
  EXPECT_EQ(a.to_string(1), "[u32 x 2: 1, ...]");
  EXPECT_EQ(GgufValue::string("a\"b\n").to_string(), "\"a\\\"b\\n\"");
  EXPECT_EQ(GgufValue::boolean(true).to_string(), "true");
  EXPECT_EQ(GgufValue::array(GgufType::kF32, {}).to_string(), "[f32 x 0]");
  GgufValue nested = GgufValue::array(GgufType::kArray, {a});
  EXPECT_EQ(nested.to_string(), "[array x 1: [u32 x 2: 1, 2]]");
  EXPECT_FALSE(a == nested);
  EXPECT_TRUE(a == GgufValue::array(GgufType::kU32, {GgufValue::u32(1), GgufValue::u32(2)}));
  // Same elements, another element type: not equal.
  EXPECT_FALSE(GgufValue::array(GgufType::kU8, {}) == GgufValue::array(GgufType::kI8, {}));
}

TEST(GgufValueDeathTest, MixedArrayIsAProgrammerError) {
  EXPECT_DEATH((void)GgufValue::array(GgufType::kU32, {GgufValue::u32(1), GgufValue::i32(2)}),
               "array element of another type");
}

TEST(GgufMetadataTest, KeepsOrderAndRefusesDuplicates) {
  GgufMetadata m;
  ASSERT_TRUE(m.add("b", GgufValue::u32(1)).is_ok());
  ASSERT_TRUE(m.add("a", GgufValue::string("x")).is_ok());
  Status dup = m.add("b", GgufValue::u32(2));
  EXPECT_EQ(dup.code(), StatusCode::kAlreadyExists);
  EXPECT_EQ(*m.get_u32("b"), 1u);  // unchanged
  m.set("b", GgufValue::f32(2));   // replaces in place
  m.set("c", GgufValue::boolean(true));
  ASSERT_EQ(m.size(), 3u);
  EXPECT_EQ(m.entries()[0].key, "b");
  EXPECT_EQ(m.entries()[1].key, "a");
  EXPECT_EQ(m.entries()[2].key, "c");
  EXPECT_EQ(*m.get_f32("b"), 2.0f);
}

TEST(GgufMetadataTest, TypedGettersNameKeyAndTypes) {
  GgufMetadata m;
  m.set("llama.block_count", GgufValue::u32(4));
  m.set("llama.rope.freq_base", GgufValue::f32(10000));
  m.set("tokens", GgufValue::string_array(std::vector<std::string>{"a", "b"}));
  m.set("counts", GgufValue::array(GgufType::kI32, {GgufValue::i32(3)}));

  Result<std::uint32_t> missing = m.get_u32("llama.context_length");
  ASSERT_FALSE(missing.is_ok());
  EXPECT_EQ(missing.status().code(), StatusCode::kNotFound);
  EXPECT_NE(missing.status().message().find("llama.context_length"), std::string_view::npos);

  Result<std::uint64_t> wrong = m.get_u64("llama.block_count");
  ASSERT_FALSE(wrong.is_ok());
  EXPECT_EQ(wrong.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(wrong.status().message().find("llama.block_count"), std::string_view::npos);
  EXPECT_NE(wrong.status().message().find("u32, not u64"), std::string_view::npos);

  EXPECT_EQ(*m.get_integer("llama.block_count"), 4);
  EXPECT_EQ(*m.get_float("llama.rope.freq_base"), 10000.0);
  EXPECT_FALSE(m.get_string("llama.rope.freq_base").is_ok());

  Result<GgufArray> tokens = m.get_array("tokens", GgufType::kString);
  ASSERT_TRUE(tokens.is_ok());
  EXPECT_EQ((*tokens->strings())[1], "b");
  Result<GgufArray> wrong_elements = m.get_array("counts", GgufType::kU32);
  ASSERT_FALSE(wrong_elements.is_ok());
  EXPECT_NE(wrong_elements.status().message().find("array of i32, not array of u32"),
            std::string_view::npos);
  EXPECT_FALSE(m.get_array("llama.block_count", GgufType::kU32).is_ok());
  Result<GgufArray> not_array = m.get_array("llama.block_count");
  ASSERT_FALSE(not_array.is_ok());
  EXPECT_EQ(not_array.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(not_array.status().message().find("llama.block_count"), std::string_view::npos);
  EXPECT_EQ(m.get_array("counts")->element_type(), GgufType::kI32);
  Result<GgufStrings> strings = m.get_strings("tokens");
  ASSERT_TRUE(strings.is_ok());
  EXPECT_EQ((*strings)[0], "a");
  Result<GgufStrings> not_strings = m.get_strings("counts");
  ASSERT_FALSE(not_strings.is_ok());
  EXPECT_NE(not_strings.status().message().find("metadata key 'counts': value is array of i32, "
                                                "not array of string"),
            std::string_view::npos);
  EXPECT_EQ(m.get_array("nope", GgufType::kU32).status().code(), StatusCode::kNotFound);

  // One getter per type.
  GgufMetadata all;
  all.set("u8", GgufValue::u8(1));
  all.set("i8", GgufValue::i8(-1));
  all.set("u16", GgufValue::u16(2));
  all.set("i16", GgufValue::i16(-2));
  all.set("i32", GgufValue::i32(-3));
  all.set("bool", GgufValue::boolean(true));
  all.set("u64", GgufValue::u64(4));
  all.set("i64", GgufValue::i64(-4));
  all.set("f64", GgufValue::f64(0.5));
  EXPECT_EQ(*all.get_u8("u8"), 1);
  EXPECT_EQ(*all.get_i8("i8"), -1);
  EXPECT_EQ(*all.get_u16("u16"), 2);
  EXPECT_EQ(*all.get_i16("i16"), -2);
  EXPECT_EQ(*all.get_i32("i32"), -3);
  EXPECT_TRUE(*all.get_bool("bool"));
  EXPECT_EQ(*all.get_u64("u64"), 4u);
  EXPECT_EQ(*all.get_i64("i64"), -4);
  EXPECT_EQ(*all.get_f64("f64"), 0.5);
}

}  // namespace
}  // namespace switchyard
