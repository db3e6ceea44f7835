// GgufArray: the compact array storage, its typed zero-copy views, materialised
// elements, equality and the round trip through the writer and the reader.
#include <array>
#include <cmath>
#include <cstdint>
#include <limits>
#include <string>
#include <string_view>
#include <vector>

#include <fmt/format.h>
#include <gtest/gtest.h>

#include "formats/gguf_raw.h"
#include "switchyard/gguf.h"

namespace switchyard {
namespace {

using testing::RawGguf;
using testing::RawSpec;

GgufMetadata round_trip(const GgufMetadata& m) {
  GgufWriter writer;
  for (const GgufMetadata::Entry& e : m.entries()) writer.metadata().set(e.key, e.value);
  Result<std::vector<std::byte>> bytes = writer.serialize();
  EXPECT_TRUE(bytes.is_ok()) << bytes.status().to_string();
  Result<GgufFile> file = GgufFile::parse(*bytes);
  EXPECT_TRUE(file.is_ok()) << file.status().to_string();
  return file.is_ok() ? file->metadata() : GgufMetadata{};
}

TEST(GgufArrayTest, TypedViewsForEveryScalarType) {
  const GgufValue u8 = GgufValue::u8_array({1, 255});
  const GgufValue i8 = GgufValue::i8_array({-128, 7});
  const GgufValue u16 = GgufValue::u16_array({65535});
  const GgufValue i16 = GgufValue::i16_array({-2, 3});
  const GgufValue u32 = GgufValue::u32_array({4000000000u});
  const GgufValue i32 = GgufValue::i32_array({-5, 6, 7});
  const GgufValue f32 = GgufValue::f32_array({0.5f, -2.0f});
  const GgufValue u64 = GgufValue::u64_array({~0ull});
  const GgufValue i64 = GgufValue::i64_array({-(1ll << 40)});
  const GgufValue f64 = GgufValue::f64_array({0.25});
  EXPECT_EQ(u8.as_array()->as_u8s()->back(), 255);
  EXPECT_EQ(i8.as_array()->as_i8s()->front(), -128);
  EXPECT_EQ(u16.as_array()->as_u16s()->front(), 65535);
  EXPECT_EQ(i16.as_array()->as_i16s()->front(), -2);
  EXPECT_EQ(u32.as_array()->as_u32s()->front(), 4000000000u);
  EXPECT_EQ(i32.as_array()->as_i32s()->size(), 3u);
  EXPECT_EQ((*i32.as_array()->as_i32s())[2], 7);
  EXPECT_EQ(f32.as_array()->as_f32s()->back(), -2.0f);
  EXPECT_EQ(u64.as_array()->as_u64s()->front(), ~0ull);
  EXPECT_EQ(i64.as_array()->as_i64s()->front(), -(1ll << 40));
  EXPECT_EQ(f64.as_array()->as_f64s()->front(), 0.25);
  EXPECT_EQ(f32.element_type(), GgufType::kF32);
  EXPECT_EQ(f32.as_array()->element_type(), GgufType::kF32);

  // Another element type: an error naming both, never a reinterpretation.
  Result<std::span<const std::uint32_t>> wrong = i32.as_array()->as_u32s();
  ASSERT_FALSE(wrong.is_ok());
  EXPECT_EQ(wrong.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(wrong.status().message().find("array of i32, not array of u32"),
            std::string_view::npos);
  EXPECT_FALSE(u8.as_array()->as_bool_bytes().is_ok());
  EXPECT_FALSE(u8.as_array()->strings().is_ok());
  EXPECT_FALSE(u8.as_array()->arrays().is_ok());
  // A scalar is not an array.
  Result<GgufArray> scalar = GgufValue::u32(3).as_array();
  ASSERT_FALSE(scalar.is_ok());
  EXPECT_NE(scalar.status().message().find("u32, not array"), std::string_view::npos);
}

TEST(GgufArrayTest, AtMaterialisesOneElement) {
  const GgufValue i32 = GgufValue::i32_array({-5, 6});
  EXPECT_EQ(i32.as_array()->at(0), GgufValue::i32(-5));
  EXPECT_EQ(*i32.as_array()->at(1).as_integer(), 6);
  const GgufValue strings = GgufValue::string_array(std::vector<std::string>{"ab", ""});
  EXPECT_EQ(strings.as_array()->at(0), GgufValue::string("ab"));
  EXPECT_EQ(strings.as_array()->at(1), GgufValue::string(""));
  const std::array<bool, 2> flags = {true, false};
  const GgufValue bools = GgufValue::bool_array(flags);
  EXPECT_EQ(bools.as_array()->at(0), GgufValue::boolean(true));
  EXPECT_EQ(bools.as_array()->at(1), GgufValue::boolean(false));
  const GgufValue inner = GgufValue::u16_array({1, 2});
  const GgufValue nested = GgufValue::array(GgufType::kArray, {inner, inner});
  EXPECT_EQ(nested.as_array()->at(1), inner);
}

TEST(GgufArrayTest, TypedViewsAreZeroCopyViewsOfTheStorage) {
  // A vocabulary-sized array: each view is the one buffer the value holds, the same
  // on every call and for every copy of the view, and the value holds nothing but
  // that buffer (no per-element objects).
  std::vector<std::int32_t> ids(128 * 1024);
  for (std::size_t i = 0; i < ids.size(); ++i) ids[i] = static_cast<std::int32_t>(i);
  const std::int32_t* original = ids.data();
  const GgufValue v = GgufValue::i32_array(std::move(ids));
  const GgufArray a = *v.as_array();
  const std::span<const std::int32_t> first = *a.as_i32s();
  const std::span<const std::int32_t> second = *v.as_array()->as_i32s();
  EXPECT_EQ(first.data(), original);  // the vector was taken over, not copied
  EXPECT_EQ(first.data(), second.data());
  EXPECT_EQ(first.size(), 128u * 1024u);
  EXPECT_EQ(v.heap_bytes(), detail::heap_block_bytes(first.size_bytes()));
  // A copy of the value has its own storage; views follow the value they came from.
  const GgufValue copy = v;
  EXPECT_NE(copy.as_array()->as_i32s()->data(), first.data());
  EXPECT_EQ(copy, v);

  // Strings: every view points into one character buffer.
  const GgufValue tokens =
      GgufValue::string_array(std::vector<std::string>{"<s>", "", "hello", "</s>"});
  const GgufStrings s = *tokens.as_array()->strings();
  ASSERT_EQ(s.size(), 4u);
  EXPECT_EQ(s.chars(), "<s>hello</s>");
  EXPECT_EQ(s.chars().data(), tokens.as_array()->strings()->chars().data());
  for (std::size_t i = 0; i < s.size(); ++i) {
    EXPECT_GE(s[i].data(), s.chars().data());
    EXPECT_LE(s[i].data() + s[i].size(), s.chars().data() + s.chars().size());
  }
  EXPECT_EQ(s[2].data(), s.chars().data() + 3);

  // Parsed arrays: views point into the metadata the file holds, not into the file
  // bytes (which the caller may drop) and not into a temporary.
  GgufMetadata m;
  m.set("ids", GgufValue::i32_array({1, 2, 3}));
  m.set("tokens", tokens);
  GgufWriter writer;
  for (const GgufMetadata::Entry& e : m.entries()) writer.metadata().set(e.key, e.value);
  std::vector<std::byte> bytes = *writer.serialize();
  Result<GgufFile> file = GgufFile::parse(bytes);
  ASSERT_TRUE(file.is_ok()) << file.status().to_string();
  const GgufMetadata& parsed = file->metadata();
  const std::int32_t* parsed_ids = parsed.get_array("ids")->as_i32s()->data();
  EXPECT_EQ(parsed.get_array("ids")->as_i32s()->data(), parsed_ids);
  const auto* file_begin = reinterpret_cast<const std::int32_t*>(bytes.data());
  const auto* file_end = reinterpret_cast<const std::int32_t*>(bytes.data() + bytes.size());
  EXPECT_TRUE(parsed_ids < file_begin || parsed_ids >= file_end);
  const GgufStrings parsed_tokens = *parsed.get_array("tokens")->strings();
  std::fill(bytes.begin(), bytes.end(), std::byte{0});  // the metadata owns its storage
  EXPECT_EQ(parsed_tokens[2], "hello");
  EXPECT_EQ((*parsed.get_array("ids")->as_i32s())[2], 3);
}

TEST(GgufArrayTest, StringArraysWithEmptyStrings) {
  const std::vector<std::string> words = {"", "a", "", "", "bc", ""};
  const GgufValue v = GgufValue::string_array(words);
  const GgufStrings s = *v.as_array()->strings();
  ASSERT_EQ(s.size(), words.size());
  std::vector<std::string> back;
  for (std::string_view w : s) back.emplace_back(w);
  EXPECT_EQ(back, words);
  EXPECT_EQ(s.chars(), "abc");
  EXPECT_EQ(v.to_string(), R"([string x 6: "", "a", "", "", "bc", ""])");
  // Every way of building the same strings gives the same value.
  const std::vector<std::string_view> views(words.begin(), words.end());
  EXPECT_EQ(GgufValue::string_array(std::span<const std::string_view>(views)), v);
  std::vector<GgufValue> elements;
  for (const std::string& w : words) elements.push_back(GgufValue::string(w));
  EXPECT_EQ(GgufValue::array(GgufType::kString, std::move(elements)), v);
  // The empty string is not the absence of a string.
  EXPECT_FALSE(GgufValue::string_array(std::vector<std::string>{""}) ==
               GgufValue::string_array(std::vector<std::string>{}));
  EXPECT_FALSE(GgufValue::string_array(std::vector<std::string>{"ab", ""}) ==
               GgufValue::string_array(std::vector<std::string>{"a", "b"}));

  GgufMetadata m;
  m.set("all_empty", GgufValue::string_array(std::vector<std::string>(5)));
  m.set("mixed", v);
  m.set("none", GgufValue::string_array(std::vector<std::string>{}));
  const GgufMetadata back_m = round_trip(m);
  EXPECT_EQ(back_m, m);
  EXPECT_EQ(back_m.get_array("all_empty")->size(), 5u);
  EXPECT_EQ((*back_m.get_array("all_empty")->strings())[4], "");
}

TEST(GgufArrayTest, BoolArrays) {
  const std::array<bool, 3> flags = {true, false, true};
  const GgufValue v = GgufValue::bool_array(flags);
  EXPECT_EQ(v.element_type(), GgufType::kBool);
  EXPECT_EQ(v.to_string(), "[bool x 3: true, false, true]");
  const std::span<const std::uint8_t> bytes = *v.as_array()->as_bool_bytes();
  EXPECT_EQ(std::vector<std::uint8_t>(bytes.begin(), bytes.end()),
            (std::vector<std::uint8_t>{1, 0, 1}));
  EXPECT_EQ(GgufValue::bool_array_from_bytes({1, 0, 1}), v);
  EXPECT_EQ(GgufValue::array(GgufType::kBool, {GgufValue::boolean(true), GgufValue::boolean(false),
                                               GgufValue::boolean(true)}),
            v);
  // The same bytes as u8: another array.
  EXPECT_FALSE(GgufValue::u8_array({1, 0, 1}) == v);
  GgufMetadata m;
  m.set("flags", v);
  m.set("no_flags", GgufValue::bool_array({}));
  EXPECT_EQ(round_trip(m), m);

  // A file's bool array with a byte other than 0 or 1 is refused, naming the key,
  // the element and its offset.
  RawSpec spec;
  spec.kvs.push_back([](RawGguf& g) {
    g.str("tokenizer.flags").u32(9).u32(7).u64(3);
    g.u8(1).u8(0).u8(2);
  });
  Result<GgufFile> bad = GgufFile::parse(spec.build());
  ASSERT_FALSE(bad.is_ok());
  EXPECT_EQ(bad.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(bad.status().message().find("tokenizer.flags"), std::string_view::npos);
  EXPECT_NE(bad.status().message().find("array element 2"), std::string_view::npos);
  EXPECT_NE(bad.status().message().find("only 0 and 1"), std::string_view::npos);
}

TEST(GgufArrayTest, EmptyArraysOfEveryType) {
  GgufMetadata m;
  for (std::uint32_t t = 0; t < kGgufTypeCount; ++t) {
    const auto type = static_cast<GgufType>(t);
    const GgufValue v = GgufValue::array(type, {});
    EXPECT_EQ(v.element_type(), type);
    EXPECT_TRUE(v.as_array()->empty());
    EXPECT_EQ(v.as_array()->size(), 0u);
    EXPECT_EQ(v.heap_bytes(), 0u);  // nothing allocated for nothing
    EXPECT_EQ(v.to_string(), fmt::format("[{} x 0]", name(type)));
    m.set(fmt::format("empty.{}", name(type)), v);
  }
  EXPECT_TRUE(GgufValue::f32_array({}).as_array()->as_f32s()->empty());
  EXPECT_TRUE(GgufValue::string_array(std::vector<std::string>{}).as_array()->strings()->empty());
  // Empty arrays of different element types differ.
  EXPECT_FALSE(GgufValue::u8_array({}) == GgufValue::i8_array({}));
  EXPECT_FALSE(GgufValue::u8_array({}) == GgufValue::bool_array({}));
  EXPECT_EQ(round_trip(m), m);
}

TEST(GgufArrayTest, NestedArrays) {
  const GgufValue ints = GgufValue::i32_array({1, 2});
  const GgufValue words = GgufValue::string_array(std::vector<std::string>{"x", ""});
  const GgufValue empty = GgufValue::array(GgufType::kArray, {});
  const GgufValue mixed = GgufValue::array(GgufType::kArray, {ints, words, empty});
  const GgufValue deep = GgufValue::array(GgufType::kArray, {mixed, mixed});
  EXPECT_EQ(mixed.to_string(),
            R"([array x 3: [i32 x 2: 1, 2], [string x 2: "x", ""], [array x 0]])");
  const std::span<const GgufValue> inner = *mixed.as_array()->arrays();
  ASSERT_EQ(inner.size(), 3u);
  EXPECT_EQ(inner[0], ints);
  EXPECT_EQ((*inner[1].as_array()->strings())[0], "x");
  EXPECT_EQ(inner[2].as_array()->element_type(), GgufType::kArray);
  EXPECT_EQ((*(*deep.as_array()->arrays())[1].as_array()->arrays())[0], ints);
  // Inner element types are part of the value.
  EXPECT_FALSE(GgufValue::array(GgufType::kArray, {GgufValue::u8_array({})}) ==
               GgufValue::array(GgufType::kArray, {GgufValue::i8_array({})}));

  GgufMetadata m;
  m.set("mixed", mixed);
  m.set("deep", deep);
  const GgufMetadata back = round_trip(m);
  EXPECT_EQ(back, m);
  EXPECT_EQ(back.find("deep")->to_string(), deep.to_string());
}

TEST(GgufArrayTest, FloatElementsCompareByBits) {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  EXPECT_EQ(GgufValue::f32_array({nan, 1.0f}), GgufValue::f32_array({nan, 1.0f}));
  EXPECT_FALSE(GgufValue::f32_array({0.0f}) == GgufValue::f32_array({-0.0f}));
  EXPECT_EQ(GgufValue::f64_array({std::nan("1")}), GgufValue::f64_array({std::nan("1")}));
  EXPECT_FALSE(GgufValue::f64_array({0.0}) == GgufValue::f64_array({-0.0}));
  GgufMetadata m;
  m.set("scores", GgufValue::f32_array({nan, -0.0f, std::numeric_limits<float>::infinity()}));
  EXPECT_EQ(round_trip(m), m);
}

TEST(GgufArrayTest, ToStringIsUnchangedForEveryKind) {
  EXPECT_EQ(GgufValue::u8_array({1, 2, 3}).to_string(), "[u8 x 3: 1, 2, 3]");
  EXPECT_EQ(GgufValue::i8_array({-1}).to_string(), "[i8 x 1: -1]");
  EXPECT_EQ(GgufValue::f32_array({0.5f, -2.0f}).to_string(), "[f32 x 2: 0.5, -2]");
  EXPECT_EQ(GgufValue::u32_array({1, 2, 3}).to_string(2), "[u32 x 3: 1, 2, ...]");
  EXPECT_EQ(GgufValue::string_array(std::vector<std::string>{"a\nb"}).to_string(),
            "[string x 1: \"a\\nb\"]");
  EXPECT_EQ(GgufValue::u64_array({7}).to_string(),
            GgufValue::array(GgufType::kU64, {GgufValue::u64(7)}).to_string());
}

TEST(GgufArrayDeathTest, ProgrammerErrorsAbort) {
  EXPECT_DEATH((void)GgufValue::bool_array_from_bytes({0, 2}), "bool array byte");
  EXPECT_DEATH((void)GgufValue::u8_array({1}).as_array()->at(1), "out of range");
}

}  // namespace
}  // namespace switchyard
