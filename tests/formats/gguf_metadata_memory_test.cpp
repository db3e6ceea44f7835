// The memory parsed metadata holds (Note [Metadata memory] in gguf_reader.cpp):
// measured for large arrays of each kind, both by GgufMetadata::memory_bytes() and
// by the allocator's own count, and the refusal of files whose bookkeeping would
// pass the limit.
#include <cstdint>
#include <cstdio>
#include <optional>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <gtest/gtest.h>

#include "formats/gguf_raw.h"
#include "switchyard/gguf.h"

#if defined(__GLIBC__)  // defined by <cstdint>'s C library headers
#include <malloc.h>
#endif

namespace switchyard {
namespace {

using testing::RawGguf;

constexpr std::uint32_t kTypeU8 = 0, kTypeArray = 9;

// The limit the reader promises for a file's parsed metadata.
std::uint64_t limit_for(const GgufFile& file) {
  return kGgufMetadataMemoryFactor * file.header_bytes() + kGgufMetadataMemorySlack;
}

// Bytes the allocator has handed out and not had back, or nothing where it does
// not say (not glibc, or a sanitizer's allocator).
std::optional<std::size_t> heap_in_use() {
#if defined(__GLIBC__)
  const struct mallinfo2 info = mallinfo2();
  return info.uordblks + info.hblkhd;
#else
  return std::nullopt;
#endif
}

// Whether heap_in_use() sees a known allocation: a sanitizer's allocator bypasses
// glibc's statistics.
bool allocator_counts() {
  const std::optional<std::size_t> before = heap_in_use();
  if (!before) return false;
  std::vector<char> probe(std::size_t{8} << 20, 1);
  const std::optional<std::size_t> after = heap_in_use();
  return *after >= *before + probe.size();
}

std::vector<std::byte> file_with(std::string key, GgufValue value) {
  GgufWriter writer;
  writer.metadata().set("general.architecture", GgufValue::string("llama"));
  writer.metadata().set(std::move(key), std::move(value));
  Result<std::vector<std::byte>> bytes = writer.serialize();
  EXPECT_TRUE(bytes.is_ok()) << bytes.status().to_string();
  return std::move(bytes).value();
}

struct Measured {
  std::size_t file_bytes = 0;
  std::size_t memory_bytes = 0;           // GgufMetadata::memory_bytes()
  std::optional<std::size_t> heap_bytes;  // what the allocator says parsing kept
};

// Parses `bytes` and measures the metadata it holds, checking the documented limit.
Measured parse_and_measure(const std::vector<std::byte>& bytes, const char* label) {
  Measured m;
  m.file_bytes = bytes.size();
  const std::optional<std::size_t> before = heap_in_use();
  Result<GgufFile> file = GgufFile::parse(bytes);
  const std::optional<std::size_t> after = heap_in_use();
  EXPECT_TRUE(file.is_ok()) << file.status().to_string();
  if (!file.is_ok()) return m;
  m.memory_bytes = file->metadata().memory_bytes();
  if (before && after && allocator_counts()) m.heap_bytes = *after - *before;
  EXPECT_LE(m.memory_bytes, limit_for(*file)) << label;
  std::printf("[ measured ] %-34s file %10zu B  memory_bytes %10zu B (%.3fx)  heap %s\n", label,
              m.file_bytes, m.memory_bytes,
              static_cast<double>(m.memory_bytes) / static_cast<double>(m.file_bytes),
              m.heap_bytes ? fmt::format("{} B ({:.3f}x)", *m.heap_bytes,
                                         static_cast<double>(*m.heap_bytes) /
                                             static_cast<double>(m.file_bytes))
                                 .c_str()
                           : "not measured");
  return m;
}

TEST(GgufMetadataMemoryTest, LargeU8ArrayCostsItsBytes) {
  // 64 MiB of u8 elements: one byte each in memory (each once took a 40-byte value).
  constexpr std::size_t kCount = std::size_t{64} << 20;
  std::vector<std::uint8_t> values(kCount);
  for (std::size_t i = 0; i < kCount; ++i) values[i] = static_cast<std::uint8_t>(i * 31);
  const std::vector<std::byte> bytes = file_with("big.u8", GgufValue::u8_array(std::move(values)));
  const Measured m = parse_and_measure(bytes, "u8 array, 64 MiB");
  // Within 1% and 4 KiB of the file's bytes: a multiple of 1.0, not 40.
  EXPECT_GE(m.memory_bytes, kCount);
  EXPECT_LE(m.memory_bytes, kCount + kCount / 100 + 4096);
  if (m.heap_bytes) {
    // The allocator agrees with the estimate (a mapping rounds up to pages).
    EXPECT_GE(*m.heap_bytes, kCount);
    EXPECT_LE(*m.heap_bytes, m.memory_bytes + 64 * 1024);
  }
}

TEST(GgufMetadataMemoryTest, NumberArraysCostTheirBytes) {
  constexpr std::size_t kCount = std::size_t{4} << 20;
  std::vector<std::int32_t> ids(kCount);
  for (std::size_t i = 0; i < kCount; ++i) ids[i] = static_cast<std::int32_t>(i);
  const Measured i32 = parse_and_measure(file_with("ids", GgufValue::i32_array(std::move(ids))),
                                         "i32 array, 16 MiB");
  EXPECT_LE(i32.memory_bytes, i32.file_bytes + i32.file_bytes / 100 + 4096);
  std::vector<double> f(kCount / 2, 0.5);
  const Measured f64 =
      parse_and_measure(file_with("f", GgufValue::f64_array(std::move(f))), "f64 array, 16 MiB");
  EXPECT_LE(f64.memory_bytes, f64.file_bytes + f64.file_bytes / 100 + 4096);
  if (i32.heap_bytes) {
    EXPECT_LE(*i32.heap_bytes, i32.memory_bytes + 64 * 1024);
  }
}

TEST(GgufMetadataMemoryTest, AVocabularyCostsAboutItsBytes) {
  // A llama-3-sized tokenizer: 128k tokens, their scores and types, and merges.
  constexpr std::size_t kTokens = 128 * 1024;
  std::vector<std::string> tokens, merges;
  for (std::size_t i = 0; i < kTokens; ++i) tokens.push_back(fmt::format("tok{}", i * 7919));
  for (std::size_t i = 0; i < 2 * kTokens; ++i) merges.push_back(fmt::format("m{} n{}", i, i % 97));
  GgufWriter writer;
  writer.metadata().set("tokenizer.ggml.tokens", GgufValue::string_array(tokens));
  writer.metadata().set("tokenizer.ggml.scores",
                        GgufValue::f32_array(std::vector<float>(kTokens, -1.0f)));
  writer.metadata().set("tokenizer.ggml.token_type",
                        GgufValue::i32_array(std::vector<std::int32_t>(kTokens, 1)));
  writer.metadata().set("tokenizer.ggml.merges", GgufValue::string_array(merges));
  const std::vector<std::byte> bytes = *writer.serialize();
  const Measured m = parse_and_measure(bytes, "tokenizer, 128k tokens");
  // Each string costs its bytes and an 8-byte end offset; the file spends its bytes
  // and an 8-byte length.
  EXPECT_LE(m.memory_bytes, m.file_bytes + 4096);
  if (m.heap_bytes) {
    EXPECT_LE(*m.heap_bytes, m.memory_bytes + 64 * 1024);
  }
}

TEST(GgufMetadataMemoryTest, BookkeepingStaysWithinTheLimit) {
  // Nested arrays and many small entries cost more than their bytes, but a file
  // that the reader accepts stays within the documented limit.
  std::vector<GgufValue> inner(100000, GgufValue::u8_array({1}));
  const Measured nested =
      parse_and_measure(file_with("nested", GgufValue::array(GgufType::kArray, std::move(inner))),
                        "100k one-element inner arrays");
  if (nested.heap_bytes) {
    EXPECT_LE(*nested.heap_bytes, nested.memory_bytes * 11 / 10 + 64 * 1024);
  }

  GgufWriter writer;
  for (int i = 0; i < 20000; ++i) {
    writer.metadata().set(fmt::format("some.long.key.name.number.{}", i), GgufValue::u32(i));
  }
  const Measured many = parse_and_measure(*writer.serialize(), "20k scalar entries");
  if (many.heap_bytes) {
    EXPECT_LE(*many.heap_bytes, many.memory_bytes * 11 / 10 + 64 * 1024);
  }
}

// A file with one array of `count` empty inner arrays under `key`.
std::vector<std::byte> nested_empty_arrays(std::string_view key, std::uint64_t count) {
  RawGguf g;
  g.u32(0x46554747u).u32(3).u64(0).u64(1);
  g.str(key).u32(kTypeArray).u32(kTypeArray).u64(count);
  for (std::uint64_t i = 0; i < count; ++i) g.u32(kTypeU8).u64(0);
  return std::move(g.bytes());
}

TEST(GgufMetadataMemoryTest, CostlyNestingIsRefusedBeforeAllocating) {
  // 12 file bytes per inner array, 40 bytes of memory each: past the limit once
  // 40 n > 2 * 12 n + 16 MiB, about a million.
  const std::uint64_t few = 100000, many = 2000000;
  EXPECT_TRUE(GgufFile::parse(nested_empty_arrays("k", few)).is_ok());
  const std::vector<std::byte> bytes = nested_empty_arrays("evil\nkey\x1b[31m", many);
  Result<GgufFile> file = GgufFile::parse(bytes);
  ASSERT_FALSE(file.is_ok());
  const Status& s = file.status();
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument) << s.to_string();
  // Names the key, escaped: the message stays one line.
  EXPECT_NE(s.message().find("metadata key 'evil\\x0akey\\x1b[31m'"), std::string_view::npos)
      << s.to_string();
  EXPECT_EQ(s.to_string().find('\n'), std::string::npos);
  EXPECT_NE(s.message().find("an array of 2000000 arrays"), std::string_view::npos)
      << s.to_string();
  EXPECT_NE(s.message().find("limit"), std::string_view::npos);
}

TEST(GgufMetadataMemoryTest, ManyEntriesAreRefusedByTheirBookkeeping) {
  // Declared entries are charged their slots before any is read: half a million
  // minimal entries cannot pay for theirs.
  {
    RawGguf g;
    constexpr std::uint64_t kEntries = 500000;
    g.u32(0x46554747u).u32(3).u64(0).u64(kEntries);
    for (std::uint64_t i = 0; i < kEntries; ++i) g.str(fmt::format("{:08}", i)).u32(kTypeU8).u8(1);
    Result<GgufFile> file = GgufFile::parse(g.bytes());
    ASSERT_FALSE(file.is_ok());
    EXPECT_EQ(file.status().code(), StatusCode::kInvalidArgument) << file.status().to_string();
    EXPECT_NE(file.status().message().find("bookkeeping of 500000 metadata entries"),
              std::string_view::npos)
        << file.status().to_string();
  }
  // Fewer entries pass that check, but their long keys (held twice) do not fit:
  // refused at the first key past the limit, naming it.
  {
    RawGguf g;
    constexpr std::uint64_t kEntries = 150000;
    g.u32(0x46554747u).u32(3).u64(0).u64(kEntries);
    for (std::uint64_t i = 0; i < kEntries; ++i) {
      g.str(fmt::format("a.key.long.enough.to.need.the.heap.{:08}", i)).u32(kTypeU8).u8(1);
    }
    Result<GgufFile> file = GgufFile::parse(g.bytes());
    ASSERT_FALSE(file.is_ok());
    EXPECT_EQ(file.status().code(), StatusCode::kInvalidArgument) << file.status().to_string();
    EXPECT_NE(file.status().message().find("metadata key 'a.key.long.enough.to.need.the.heap."),
              std::string_view::npos)
        << file.status().to_string();
    EXPECT_NE(file.status().message().find("its key and index entry"), std::string_view::npos);
  }
}

TEST(GgufMetadataMemoryTest, MemoryBytesCountsWhatTheValuesHold) {
  GgufMetadata m;
  const std::size_t empty = m.memory_bytes();
  EXPECT_GE(empty, sizeof(GgufMetadata));
  m.set("k", GgufValue::u8_array(std::vector<std::uint8_t>(1000)));
  EXPECT_GE(m.memory_bytes(), empty + 1000);
  EXPECT_EQ(GgufValue::u8_array(std::vector<std::uint8_t>(1000)).heap_bytes(),
            detail::heap_block_bytes(1000));
  EXPECT_EQ(detail::heap_block_bytes(1000), 1008u);  // glibc: 8-byte header, 16-byte granules
  EXPECT_EQ(detail::heap_block_bytes(1), 32u);       // and 32 bytes at least
  EXPECT_EQ(detail::heap_block_bytes(0), 0u);
  EXPECT_EQ(GgufValue::u32(1).heap_bytes(), 0u);
  EXPECT_EQ(GgufValue::string("short").heap_bytes(), 0u);  // held inside the object
  EXPECT_GE(GgufValue::string(std::string(100, 'x')).heap_bytes(), 101u);
  // A string array: one block of its count, one offset per string and the characters.
  const GgufValue tokens = GgufValue::string_array(std::vector<std::string>(1000, "abcd"));
  EXPECT_EQ(tokens.heap_bytes(), detail::heap_block_bytes(8 + 1000 * 8 + 1000 * 4));
  // Inner arrays count their values and what each holds.
  const GgufValue nested =
      GgufValue::array(GgufType::kArray, {GgufValue::u8_array({1, 2}), GgufValue::u8_array({})});
  EXPECT_EQ(nested.heap_bytes(),
            detail::heap_block_bytes(2 * sizeof(GgufValue)) + detail::heap_block_bytes(2));
}

}  // namespace
}  // namespace switchyard
