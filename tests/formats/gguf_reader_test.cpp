#include <sys/stat.h>
#include <unistd.h>

#include <cstdint>
#include <filesystem>
#include <fstream>
#include <optional>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "formats/gguf_raw.h"
#include "switchyard/gguf.h"

namespace switchyard {
namespace {

using testing::RawGguf;
using testing::RawSpec;
using testing::RawTensor;

constexpr std::uint32_t kTypeU32 = 4, kTypeString = 8, kTypeArray = 9, kTypeBool = 7;

TEST(GgufReaderTest, ReadsAHandBuiltFile) {
  const std::vector<std::byte> bytes = RawSpec{}.build();
  Result<GgufFile> file = GgufFile::parse(bytes);
  ASSERT_TRUE(file.is_ok()) << file.status().to_string();
  EXPECT_EQ(file->version(), 3u);
  EXPECT_EQ(file->alignment(), 32u);
  EXPECT_EQ(*file->metadata().get_string("general.architecture"), "llama");
  ASSERT_EQ(file->tensors().size(), 2u);

  const GgufTensorInfo& a = file->tensors()[0];
  EXPECT_EQ(a.name, "a");
  // ne = [4, 2] in the file is Shape [2, 4]: two rows of four.
  EXPECT_EQ(a.shape, (Shape{2, 4}));
  EXPECT_EQ(a.dtype, DType::kF32);
  EXPECT_EQ(a.size_bytes, 32);
  const GgufTensorInfo& b = file->tensors()[1];
  EXPECT_EQ(b.shape, (Shape{8}));
  EXPECT_EQ(b.dtype, DType::kF16);
  EXPECT_EQ(b.offset, 32u);
  EXPECT_EQ(b.size_bytes, 16);

  // Header: 24 + two kvs + two tensor infos, padded to 32.
  EXPECT_EQ(file->data_offset() % 32, 0u);
  EXPECT_GT(file->data_offset(), file->header_bytes() - 1);
  EXPECT_LT(file->data_offset(), file->header_bytes() + 32);

  // Views point into the caller's bytes, not at a copy.
  Result<TensorView> view = file->tensor("b");
  ASSERT_TRUE(view.is_ok());
  EXPECT_EQ(view->first(), bytes.data() + file->data_offset() + 32);
  EXPECT_EQ(static_cast<std::uint8_t>(*view->first()), 32);  // data bytes count up
  EXPECT_EQ(view->shape(), (Shape{8}));
  EXPECT_TRUE(view->is_contiguous());
  EXPECT_EQ(file->tensor_bytes(b).size(), 16u);
}

TEST(GgufReaderTest, MissingTensorIsNotFound) {
  const std::vector<std::byte> bytes = RawSpec{}.build();
  Result<GgufFile> file = GgufFile::parse(bytes);
  ASSERT_TRUE(file.is_ok());
  EXPECT_EQ(file->find_tensor("zzz"), nullptr);
  Result<TensorView> v = file->tensor("zzz");
  ASSERT_FALSE(v.is_ok());
  EXPECT_EQ(v.status().code(), StatusCode::kNotFound);
  EXPECT_NE(v.status().message().find("zzz"), std::string_view::npos);
}

TEST(GgufReaderTest, ReadsVersionTwo) {
  RawSpec spec;
  spec.version = 2;
  const std::vector<std::byte> bytes = spec.build();
  Result<GgufFile> file = GgufFile::parse(bytes);
  ASSERT_TRUE(file.is_ok()) << file.status().to_string();
  EXPECT_EQ(file->version(), 2u);
}

TEST(GgufReaderTest, DefaultAlignmentIs32AndOtherAlignmentsAreHonoured) {
  RawSpec spec;
  spec.kvs.pop_back();  // no general.alignment
  Result<GgufFile> file = GgufFile::parse(spec.build());
  ASSERT_TRUE(file.is_ok()) << file.status().to_string();
  EXPECT_EQ(file->alignment(), 32u);

  RawSpec wide;
  wide.kvs[1] = [](RawGguf& g) { g.str("general.alignment").u32(kTypeU32).u32(64); };
  wide.alignment = 64;
  wide.tensors[1].offset = 64;
  wide.data_bytes = 128;
  const std::vector<std::byte> bytes = wide.build();
  Result<GgufFile> wide_file = GgufFile::parse(bytes);
  ASSERT_TRUE(wide_file.is_ok()) << wide_file.status().to_string();
  EXPECT_EQ(wide_file->alignment(), 64u);
  EXPECT_EQ(wide_file->data_offset() % 64, 0u);
}

TEST(GgufReaderTest, TensorsNeedNotBeInOffsetOrder) {
  RawSpec spec;
  spec.tensors[0].offset = 32;
  spec.tensors[1].offset = 0;
  const std::vector<std::byte> bytes = spec.build();
  Result<GgufFile> file = GgufFile::parse(bytes);
  ASSERT_TRUE(file.is_ok()) << file.status().to_string();
  EXPECT_EQ(file->tensors()[0].offset, 32u);
}

TEST(GgufReaderTest, FileWithoutTensorsNeedsNoDataSection) {
  RawSpec spec;
  spec.tensors.clear();
  spec.alignment = 1;  // no padding at all
  spec.data_bytes = 0;
  const std::vector<std::byte> bytes = spec.build();
  Result<GgufFile> file = GgufFile::parse(bytes);
  ASSERT_TRUE(file.is_ok()) << file.status().to_string();
  EXPECT_TRUE(file->tensors().empty());
}

// One malformed file and the error it must produce.
struct MalformedCase {
  const char* label;
  std::function<std::vector<std::byte>()> make;
  StatusCode code;
  const char* message;  // a substring of the error message
};

RawSpec with_kv(std::function<void(RawGguf&)> kv) {
  RawSpec spec;
  spec.kvs.push_back(std::move(kv));
  return spec;
}

RawSpec with_tensor(RawTensor t) {
  RawSpec spec;
  spec.tensors.push_back(std::move(t));
  return spec;
}

std::vector<MalformedCase> malformed_cases() {
  using SC = StatusCode;
  auto from = [](RawSpec spec) { return [spec] { return spec.build(); }; };
  RawSpec wrong_magic;
  wrong_magic.magic = 0x4c4c4747u;  // "GGLL"
  RawSpec v1, v4, big_endian;
  v1.version = 1;
  v4.version = 4;
  big_endian.version = 0x03000000u;
  RawSpec many_kvs, many_tensors, lying_kvs;
  many_kvs.kv_count = std::uint64_t{1} << 60;
  many_tensors.tensor_count = std::uint64_t{1} << 60;
  lying_kvs.kv_count = 3;  // claims one more entry than there is
  RawSpec dup_tensor;
  dup_tensor.tensors[1].name = "a";
  RawSpec misaligned;
  misaligned.tensors[1].offset = 40;
  RawSpec overlap;
  overlap.tensors[1].offset = 0;
  RawSpec past_end;
  past_end.tensors[1].offset = 64;
  RawSpec wrapping;
  wrapping.tensors[1].offset = ~std::uint64_t{31};  // offset + size wraps around
  RawSpec no_alignment_type, zero_alignment, odd_alignment;
  no_alignment_type.kvs[1] = [](RawGguf& g) { g.str("general.alignment").u32(10).u64(32); };
  zero_alignment.kvs[1] = [](RawGguf& g) { g.str("general.alignment").u32(kTypeU32).u32(0); };
  odd_alignment.kvs[1] = [](RawGguf& g) { g.str("general.alignment").u32(kTypeU32).u32(48); };

  return {
      {"empty file", [] { return std::vector<std::byte>{}; }, SC::kDataLoss, "truncated"},
      {"wrong magic", from(wrong_magic), SC::kInvalidArgument, "not a GGUF file"},
      {"version 1", from(v1), SC::kUnimplemented, "version 1"},
      {"version 4", from(v4), SC::kUnimplemented, "unsupported GGUF version 4"},
      {"big-endian", from(big_endian), SC::kUnimplemented, "big-endian"},
      {"kv count larger than the file", from(many_kvs), SC::kDataLoss, "metadata count"},
      {"tensor count larger than the file", from(many_tensors), SC::kDataLoss, "tensor count"},
      {"kv count one too many", from(lying_kvs), SC::kDataLoss, "tensor name"},
      {"key length larger than the file",
       from(with_kv([](RawGguf& g) { g.u64(std::uint64_t{1} << 62); })), SC::kDataLoss, "claims"},
      {"string value longer than the file",
       from(with_kv([](RawGguf& g) { g.str("k").u32(kTypeString).u64(1000000); })), SC::kDataLoss,
       "claims 1000000 bytes"},
      {"array length larger than the file", from(with_kv([](RawGguf& g) {
         g.str("k").u32(kTypeArray).u32(kTypeU32).u64(std::uint64_t{1} << 61);
       })),
       SC::kDataLoss, "array length"},
      {"string array length larger than the file",
       from(with_kv([](RawGguf& g) { g.str("k").u32(kTypeArray).u32(kTypeString).u64(1000); })),
       SC::kDataLoss, "array length"},
      {"unknown value type", from(with_kv([](RawGguf& g) { g.str("k").u32(13).u32(0); })),
       SC::kInvalidArgument, "not a GGUF value type"},
      {"unknown array element type",
       from(with_kv([](RawGguf& g) { g.str("k").u32(kTypeArray).u32(99).u64(1); })),
       SC::kInvalidArgument, "not a GGUF value type"},
      {"bool that is neither 0 nor 1",
       from(with_kv([](RawGguf& g) { g.str("flag").u32(kTypeBool).u8(2); })), SC::kInvalidArgument,
       "only 0 and 1"},
      {"arrays nested too deep", from(with_kv([](RawGguf& g) {
         g.str("deep").u32(kTypeArray);
         for (int i = 0; i < kGgufMaxArrayDepth + 1; ++i) g.u32(kTypeArray).u64(1);
         g.u32(kTypeU32).u64(0);
       })),
       SC::kInvalidArgument, "nested"},
      {"duplicate key",
       from(with_kv([](RawGguf& g) { g.str("general.architecture").u32(kTypeString).str("x"); })),
       SC::kInvalidArgument, "duplicate metadata key 'general.architecture'"},
      {"alignment of the wrong type", from(no_alignment_type), SC::kInvalidArgument,
       "general.alignment"},
      {"alignment zero", from(zero_alignment), SC::kInvalidArgument, "power of two"},
      {"alignment not a power of two", from(odd_alignment), SC::kInvalidArgument, "power of two"},
      {"duplicate tensor name", from(dup_tensor), SC::kInvalidArgument,
       "duplicate tensor name 'a'"},
      {"tensor name too long", from(with_tensor({std::string(65, 'n'), {8}, 0, 64})),
       SC::kInvalidArgument, "at most 64"},
      {"zero dimensions", from(with_tensor({"c", {}, 0, 64})), SC::kInvalidArgument,
       "has 0 dimensions"},
      {"too many dimensions", from(with_tensor({"c", {1, 1, 1, 1, 1}, 0, 64})),
       SC::kInvalidArgument, "has 5 dimensions"},
      {"dimension of zero", from(with_tensor({"c", {4, 0}, 0, 64})), SC::kInvalidArgument,
       "ne[1] = 0"},
      {"negative dimension", from(with_tensor({"c", {~std::uint64_t{0}}, 0, 64})),
       SC::kInvalidArgument, "(-1)"},
      {"dimension product overflows",
       from(with_tensor({"c", {std::uint64_t{1} << 32, std::uint64_t{1} << 32}, 0, 64})),
       SC::kOutOfRange, "overflows"},
      {"byte size overflows", from(with_tensor({"c", {std::uint64_t{1} << 62}, 0, 64})),
       SC::kOutOfRange, "overflow a 64-bit byte count"},
      {"unknown type id", from(with_tensor({"c", {8}, 9999, 64})), SC::kInvalidArgument,
       "ggml type id 9999"},
      {"retired type id", from(with_tensor({"c", {32}, 4, 64})), SC::kInvalidArgument,
       "ggml type id 4"},
      {"row not a whole number of blocks", from(with_tensor({"c", {33, 2}, 2, 64})),
       SC::kInvalidArgument, "not a whole number of 32-element blocks"},
      {"misaligned tensor data", from(misaligned), SC::kInvalidArgument,
       "not a multiple of the alignment 32"},
      {"overlapping tensor data", from(overlap), SC::kInvalidArgument, "overlaps"},
      {"tensor data past the end", from(past_end), SC::kDataLoss, "past the end"},
      {"tensor offset that wraps around", from(wrapping), SC::kDataLoss, "past the end"},
  };
}

TEST(GgufReaderTest, MalformedFilesGetClearErrors) {
  for (const MalformedCase& c : malformed_cases()) {
    SCOPED_TRACE(c.label);
    const std::vector<std::byte> bytes = c.make();
    Result<GgufFile> file = GgufFile::parse(bytes);
    ASSERT_FALSE(file.is_ok());
    EXPECT_EQ(file.status().code(), c.code) << file.status().to_string();
    EXPECT_NE(file.status().message().find(c.message), std::string_view::npos)
        << file.status().to_string();
  }
}

TEST(GgufReaderTest, EveryTruncationIsDataLoss) {
  const std::vector<std::byte> full = RawSpec{}.build();
  ASSERT_TRUE(GgufFile::parse(full).is_ok());
  // The last tensor ends at data offset 48, so the final 16 bytes are only padding.
  Result<GgufFile> parsed = GgufFile::parse(full);
  const std::size_t needed = parsed->data_offset() + 48;
  for (std::size_t n = 0; n < needed; ++n) {
    // An exact-size heap copy, so a sanitizer sees any read past the end.
    const std::vector<std::byte> prefix(full.begin(), full.begin() + static_cast<long>(n));
    Result<GgufFile> file = GgufFile::parse(prefix);
    ASSERT_FALSE(file.is_ok()) << "prefix of " << n << " bytes";
    EXPECT_EQ(file.status().code(), StatusCode::kDataLoss)
        << n << ": " << file.status().to_string();
  }
  const std::vector<std::byte> unpadded(full.begin(), full.begin() + static_cast<long>(needed));
  EXPECT_TRUE(GgufFile::parse(unpadded).is_ok());
}

TEST(GgufReaderTest, ErrorsNameTheKeyOrTensor) {
  Result<GgufFile> bad_key = GgufFile::parse(
      with_kv([](RawGguf& g) { g.str("tokenizer.scores").u32(kTypeBool).u8(7); }).build());
  ASSERT_FALSE(bad_key.is_ok());
  EXPECT_NE(bad_key.status().message().find("tokenizer.scores"), std::string_view::npos);

  Result<GgufFile> bad_tensor =
      GgufFile::parse(with_tensor({"blk.0.ffn_up.weight", {33}, 2, 64}).build());
  ASSERT_FALSE(bad_tensor.is_ok());
  EXPECT_NE(bad_tensor.status().message().find("blk.0.ffn_up.weight"), std::string_view::npos);
}

class GgufOpenTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = std::filesystem::temp_directory_path() /
           ("switchyard_gguf_open_" + std::to_string(::getpid()));
    std::filesystem::create_directories(dir_);
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }
  std::filesystem::path write(const std::string& name, const std::vector<std::byte>& bytes) {
    const std::filesystem::path path = dir_ / name;
    std::ofstream out(path, std::ios::binary);
    out.write(reinterpret_cast<const char*>(bytes.data()), static_cast<long>(bytes.size()));
    return path;
  }
  std::filesystem::path dir_;
};

TEST_F(GgufOpenTest, MapsTheFileAndViewsOutliveCopies) {
  const std::filesystem::path path = write("ok.gguf", RawSpec{}.build());
  std::optional<GgufFile> copy;
  TensorView view;
  {
    Result<GgufFile> file = GgufFile::open(path);
    ASSERT_TRUE(file.is_ok()) << file.status().to_string();
    view = *file->tensor("a");
    copy = *file;
  }
  // The copy keeps the mapping alive after the original is gone.
  EXPECT_EQ(static_cast<std::uint8_t>(view.first()[0]), 0);
  EXPECT_EQ(static_cast<std::uint8_t>(view.first()[31]), 31);
  EXPECT_EQ(copy->tensor("a")->first(), view.first());
  // Page-aligned mapping: every tensor is aligned in memory as in the file.
  EXPECT_EQ(reinterpret_cast<std::uintptr_t>(copy->tensor("b")->first()) % 32, 0u);
}

// Special files are refused by kind, without a read that could block: a FIFO with
// no writer would otherwise hang the open forever.
TEST_F(GgufOpenTest, SpecialFilesAreRefusedWithoutBlocking) {
  ASSERT_EQ(::mkfifo((dir_ / "fifo").c_str(), 0600), 0);
  Result<GgufFile> fifo = GgufFile::open(dir_ / "fifo");
  ASSERT_FALSE(fifo.is_ok());
  EXPECT_EQ(fifo.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(fifo.status().message().find("is a FIFO"), std::string_view::npos);

  Result<GgufFile> device = GgufFile::open("/dev/zero");
  ASSERT_FALSE(device.is_ok());
  EXPECT_NE(device.status().message().find("is a device"), std::string_view::npos);

  Result<GgufFile> directory = GgufFile::open(dir_);
  ASSERT_FALSE(directory.is_ok());
  EXPECT_NE(directory.status().message().find("is a directory"), std::string_view::npos);

  // A name with control bytes is printed escaped: the message stays one line.
  Result<GgufFile> odd = GgufFile::open(dir_ / "bad\nname\x1b[2J.gguf");
  ASSERT_FALSE(odd.is_ok());
  EXPECT_EQ(odd.status().message().find('\n'), std::string_view::npos);
  EXPECT_NE(odd.status().message().find("bad\\x0aname"), std::string_view::npos);
}

TEST_F(GgufOpenTest, FileErrors) {
  Result<GgufFile> missing = GgufFile::open(dir_ / "absent.gguf");
  ASSERT_FALSE(missing.is_ok());
  EXPECT_EQ(missing.status().code(), StatusCode::kNotFound);
  EXPECT_NE(missing.status().message().find("absent.gguf"), std::string_view::npos);

  Result<GgufFile> directory = GgufFile::open(dir_);
  ASSERT_FALSE(directory.is_ok());
  EXPECT_EQ(directory.status().code(), StatusCode::kInvalidArgument);

  Result<GgufFile> empty = GgufFile::open(write("empty.gguf", {}));
  ASSERT_FALSE(empty.is_ok());
  EXPECT_EQ(empty.status().code(), StatusCode::kDataLoss);
  EXPECT_NE(empty.status().message().find("empty.gguf"), std::string_view::npos);
}

}  // namespace
}  // namespace switchyard
