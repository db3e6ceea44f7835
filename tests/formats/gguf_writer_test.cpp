#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <csignal>
#include <cstdlib>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "switchyard/gguf.h"

namespace switchyard {
namespace {

std::vector<std::byte> counting_bytes(std::size_t n, unsigned start = 0) {
  std::vector<std::byte> b(n);
  for (std::size_t i = 0; i < n; ++i) b[i] = static_cast<std::byte>((start + i * 7) & 0xff);
  return b;
}

// Every value type, including arrays of every type, nested arrays with inner arrays
// of different element types, empty arrays and strings, and awkward float values.
GgufMetadata all_value_types() {
  GgufMetadata m;
  EXPECT_TRUE(m.add("u8", GgufValue::u8(250)).is_ok());
  EXPECT_TRUE(m.add("i8", GgufValue::i8(-100)).is_ok());
  EXPECT_TRUE(m.add("u16", GgufValue::u16(65000)).is_ok());
  EXPECT_TRUE(m.add("i16", GgufValue::i16(-32000)).is_ok());
  EXPECT_TRUE(m.add("u32", GgufValue::u32(4000000000u)).is_ok());
  EXPECT_TRUE(m.add("i32", GgufValue::i32(-2000000000)).is_ok());
  EXPECT_TRUE(m.add("f32", GgufValue::f32(-0.0f)).is_ok());
  EXPECT_TRUE(m.add("f32.nan", GgufValue::f32(std::numeric_limits<float>::quiet_NaN())).is_ok());
  EXPECT_TRUE(m.add("bool.true", GgufValue::boolean(true)).is_ok());
  EXPECT_TRUE(m.add("bool.false", GgufValue::boolean(false)).is_ok());
  EXPECT_TRUE(m.add("string", GgufValue::string("llama \xe2\x9c\x93")).is_ok());
  EXPECT_TRUE(m.add("string.empty", GgufValue::string("")).is_ok());
  EXPECT_TRUE(m.add("string.nul", GgufValue::string(std::string("a\0b", 3))).is_ok());
  EXPECT_TRUE(m.add("u64", GgufValue::u64(~std::uint64_t{0})).is_ok());
  EXPECT_TRUE(m.add("i64", GgufValue::i64(std::numeric_limits<std::int64_t>::min())).is_ok());
  EXPECT_TRUE(m.add("f64", GgufValue::f64(1e300)).is_ok());
  std::vector<GgufValue> every;
  every.push_back(GgufValue::array(GgufType::kU8, {GgufValue::u8(1), GgufValue::u8(2)}));
  every.push_back(GgufValue::array(GgufType::kI8, {GgufValue::i8(-1)}));
  every.push_back(GgufValue::array(GgufType::kU16, {GgufValue::u16(3)}));
  every.push_back(GgufValue::array(GgufType::kI16, {GgufValue::i16(-3)}));
  every.push_back(GgufValue::array(GgufType::kU32, {GgufValue::u32(5), GgufValue::u32(6)}));
  every.push_back(GgufValue::array(GgufType::kI32, {GgufValue::i32(-5)}));
  every.push_back(GgufValue::array(GgufType::kF32, {GgufValue::f32(0.5f), GgufValue::f32(-2)}));
  every.push_back(GgufValue::array(GgufType::kBool, {GgufValue::boolean(true)}));
  every.push_back(GgufValue::string_array(std::vector<std::string>{"<s>", "", "</s>"}));
  every.push_back(GgufValue::array(GgufType::kU64, {GgufValue::u64(7)}));
  every.push_back(GgufValue::array(GgufType::kI64, {GgufValue::i64(-7)}));
  every.push_back(GgufValue::array(GgufType::kF64, {GgufValue::f64(0.25)}));
  every.push_back(GgufValue::array(GgufType::kArray, {}));  // empty array of arrays
  EXPECT_TRUE(m.add("array.nested", GgufValue::array(GgufType::kArray, std::move(every))).is_ok());
  EXPECT_TRUE(m.add("array.empty", GgufValue::array(GgufType::kF32, {})).is_ok());
  // Three levels deep.
  GgufValue inner = GgufValue::array(GgufType::kI32, {GgufValue::i32(1), GgufValue::i32(2)});
  GgufValue middle = GgufValue::array(GgufType::kArray, {inner, inner});
  EXPECT_TRUE(m.add("array.deep", GgufValue::array(GgufType::kArray, {middle})).is_ok());
  return m;
}

TEST(GgufWriterTest, RoundTripsEveryValueTypeShapeAndByte) {
  GgufWriter writer;
  const GgufMetadata metadata = all_value_types();
  for (const GgufMetadata::Entry& e : metadata.entries()) writer.metadata().set(e.key, e.value);
  const std::vector<std::byte> w1 = counting_bytes(4 * 3 * 5 * 4);
  const std::vector<std::byte> w2 = counting_bytes(7 * 2, 3);
  const std::vector<std::byte> w3 = counting_bytes(2 * 18, 5);             // 2 q4_0 blocks
  const std::vector<std::byte> w4 = counting_bytes(2 * 3 * 4 * 5 * 2, 9);  // 4-d bf16
  ASSERT_TRUE(writer.add_tensor("w1", DType::kF32, Shape{4, 3, 5}, w1).is_ok());
  ASSERT_TRUE(writer.add_tensor_ref("w2", DType::kF16, Shape{7}, w2).is_ok());
  ASSERT_TRUE(writer.add_tensor("w3", DType::kQ4_0, Shape{1, 64}, w3).is_ok());
  ASSERT_TRUE(writer.add_tensor("w4", DType::kBF16, Shape{2, 3, 4, 5}, w4).is_ok());

  Result<std::vector<std::byte>> bytes = writer.serialize();
  ASSERT_TRUE(bytes.is_ok()) << bytes.status().to_string();
  Result<GgufFile> file = GgufFile::parse(*bytes);
  ASSERT_TRUE(file.is_ok()) << file.status().to_string();
  EXPECT_EQ(file->version(), kGgufVersion);
  EXPECT_EQ(file->alignment(), kGgufDefaultAlignment);
  EXPECT_TRUE(file->metadata() == writer.metadata());
  // Bit-exact floats: -0 stays -0, NaN stays NaN.
  EXPECT_TRUE(std::signbit(*file->metadata().get_f32("f32")));
  EXPECT_TRUE(std::isnan(*file->metadata().get_f32("f32.nan")));
  EXPECT_EQ(file->metadata().get_string("string.nul")->size(), 3u);

  struct Expected {
    const char* name;
    DType dtype;
    Shape shape;
    const std::vector<std::byte>* data;
  };
  const Expected expected[] = {{"w1", DType::kF32, Shape{4, 3, 5}, &w1},
                               {"w2", DType::kF16, Shape{7}, &w2},
                               {"w3", DType::kQ4_0, Shape{1, 64}, &w3},
                               {"w4", DType::kBF16, Shape{2, 3, 4, 5}, &w4}};
  ASSERT_EQ(file->tensors().size(), 4u);
  std::uint64_t next_offset = 0;
  for (std::size_t i = 0; i < 4; ++i) {
    const GgufTensorInfo& t = file->tensors()[i];
    SCOPED_TRACE(t.name);
    EXPECT_EQ(t.name, expected[i].name);
    EXPECT_EQ(t.dtype, expected[i].dtype);
    EXPECT_EQ(t.shape, expected[i].shape);
    // Packed in order, each at the next aligned offset (what ggml readers demand).
    EXPECT_EQ(t.offset, next_offset);
    next_offset += (t.size_bytes + 31) / 32 * 32;
    std::span<const std::byte> data = file->tensor_bytes(t);
    ASSERT_EQ(data.size(), expected[i].data->size());
    EXPECT_EQ(std::memcmp(data.data(), expected[i].data->data(), data.size()), 0);
  }
  // The last tensor is padded too, and nothing follows the data.
  EXPECT_EQ(bytes->size(), file->data_offset() + next_offset);
}

// A sourced tensor is produced chunk by chunk, in row order, each chunk within the
// limit (at least one row), and the file is byte for byte the one the same bytes
// give through add_tensor.
TEST(GgufWriterTest, SourcedTensorsMatchOwnedOnesChunkByChunk) {
  const std::vector<std::byte> a = counting_bytes(4 * 10 * 6, 1);  // f32 [10, 6]: 24-byte rows
  const std::vector<std::byte> b = counting_bytes(3 * 18, 2);      // q4_0 [3, 32]: 18-byte rows
  const std::vector<std::byte> c = counting_bytes(4 * 5, 3);       // f32 [5]
  GgufWriter owned;
  ASSERT_TRUE(owned.add_tensor("a", DType::kF32, Shape{10, 6}, a).is_ok());
  ASSERT_TRUE(owned.add_tensor("b", DType::kQ4_0, Shape{3, 32}, b).is_ok());
  ASSERT_TRUE(owned.add_tensor("c", DType::kF32, Shape{5}, c).is_ok());

  GgufWriter sourced;
  sourced.set_source_chunk_bytes(50);  // two 24-byte rows of `a`, two 18-byte rows of `b`
  std::vector<std::pair<std::int64_t, std::int64_t>> calls;
  auto from = [&calls](const std::vector<std::byte>& bytes, std::size_t row) {
    return [&calls, &bytes, row](std::int64_t first, std::int64_t rows, std::span<std::byte> out) {
      calls.emplace_back(first, rows);
      EXPECT_EQ(out.size(), static_cast<std::size_t>(rows) * row);
      std::memcpy(out.data(), bytes.data() + static_cast<std::size_t>(first) * row, out.size());
      return Status::ok();
    };
  };
  ASSERT_TRUE(sourced.add_tensor_source("a", DType::kF32, Shape{10, 6}, from(a, 24)).is_ok());
  ASSERT_TRUE(sourced.add_tensor_source("b", DType::kQ4_0, Shape{3, 32}, from(b, 18)).is_ok());
  ASSERT_TRUE(sourced.add_tensor_source("c", DType::kF32, Shape{5}, from(c, 20)).is_ok());

  Result<std::vector<std::byte>> want = owned.serialize();
  Result<std::vector<std::byte>> got = sourced.serialize();
  ASSERT_TRUE(got.is_ok()) << got.status().to_string();
  EXPECT_TRUE(*got == *want);
  const std::vector<std::pair<std::int64_t, std::int64_t>> expected = {
      {0, 2}, {2, 2}, {4, 2}, {6, 2}, {8, 2},  // a
      {0, 2}, {2, 1},                          // b
      {0, 1}};                                 // c: one 20-byte row
  EXPECT_EQ(calls, expected);

  // A row longer than the limit is still asked for whole.
  GgufWriter tiny;
  tiny.set_source_chunk_bytes(1);
  calls.clear();
  ASSERT_TRUE(tiny.add_tensor_source("b", DType::kQ4_0, Shape{3, 32}, from(b, 18)).is_ok());
  ASSERT_TRUE(tiny.serialize().is_ok());
  EXPECT_EQ(calls, (std::vector<std::pair<std::int64_t, std::int64_t>>{{0, 1}, {1, 1}, {2, 1}}));
}

TEST(GgufWriterTest, RefusesBadSourcedTensors) {
  GgufWriter writer;
  auto ok = [](std::int64_t, std::int64_t, std::span<std::byte>) { return Status::ok(); };
  EXPECT_EQ(writer.add_tensor_source("q", DType::kQ4_K, Shape{2, 100}, ok).code(),
            StatusCode::kInvalidArgument);  // rows not whole blocks
  EXPECT_EQ(writer.add_tensor_source("n", DType::kF32, Shape{2}, {}).code(),
            StatusCode::kInvalidArgument);  // no source
  ASSERT_TRUE(writer.add_tensor_source("t", DType::kF32, Shape{2}, ok).is_ok());
  EXPECT_EQ(writer.add_tensor_source("t", DType::kF32, Shape{2}, ok).code(),
            StatusCode::kAlreadyExists);
}

// Dimensions are written innermost first: Shape [2, 3] is ne = [3, 2].
TEST(GgufWriterTest, WritesDimensionsInnermostFirst) {
  GgufWriter writer;
  ASSERT_TRUE(writer.add_tensor("m", DType::kF32, Shape{2, 3}, counting_bytes(24)).is_ok());
  Result<std::vector<std::byte>> bytes = writer.serialize();
  ASSERT_TRUE(bytes.is_ok());
  // magic, version, tensor count, kv count, then the info: name "m", n_dims, ne...
  const std::size_t info = 4 + 4 + 8 + 8;
  auto u64_at = [&](std::size_t at) {
    std::uint64_t v;
    std::memcpy(&v, bytes->data() + at, 8);
    return v;
  };
  auto u32_at = [&](std::size_t at) {
    std::uint32_t v;
    std::memcpy(&v, bytes->data() + at, 4);
    return v;
  };
  EXPECT_EQ(std::memcmp(bytes->data(), "GGUF", 4), 0);
  EXPECT_EQ(u32_at(4), 3u);
  EXPECT_EQ(u64_at(info), 1u);  // name length
  EXPECT_EQ(static_cast<char>((*bytes)[info + 8]), 'm');
  EXPECT_EQ(u32_at(info + 9), 2u);   // n_dims
  EXPECT_EQ(u64_at(info + 13), 3u);  // ne[0]: the row length
  EXPECT_EQ(u64_at(info + 21), 2u);  // ne[1]: rows
  EXPECT_EQ(u32_at(info + 29), 0u);  // f32
  EXPECT_EQ(u64_at(info + 33), 0u);  // offset
  EXPECT_EQ(gguf_dims(Shape{2, 3}), (std::vector<std::int64_t>{3, 2}));
}

TEST(GgufWriterTest, HonoursGeneralAlignment) {
  GgufWriter writer;
  writer.metadata().set("general.alignment", GgufValue::u32(256));
  ASSERT_TRUE(writer.add_tensor("a", DType::kF32, Shape{3}, counting_bytes(12)).is_ok());
  ASSERT_TRUE(writer.add_tensor("b", DType::kF32, Shape{5}, counting_bytes(20)).is_ok());
  Result<std::vector<std::byte>> bytes = writer.serialize();
  ASSERT_TRUE(bytes.is_ok());
  Result<GgufFile> file = GgufFile::parse(*bytes);
  ASSERT_TRUE(file.is_ok()) << file.status().to_string();
  EXPECT_EQ(file->alignment(), 256u);
  EXPECT_EQ(file->data_offset(), 256u);
  EXPECT_EQ(file->tensors()[1].offset, 256u);
  EXPECT_EQ(bytes->size(), 256u * 3);
  // Padding is zero.
  for (std::size_t i = file->header_bytes(); i < 256; ++i) EXPECT_EQ((*bytes)[i], std::byte{0});
  for (std::size_t i = 256 + 12; i < 512; ++i) EXPECT_EQ((*bytes)[i], std::byte{0});

  for (std::uint32_t bad : {0u, 4u, 48u}) {
    writer.metadata().set("general.alignment", GgufValue::u32(bad));
    Result<std::vector<std::byte>> r = writer.serialize();
    ASSERT_FALSE(r.is_ok()) << bad;
    EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument);
  }
  writer.metadata().set("general.alignment", GgufValue::u64(32));
  EXPECT_FALSE(writer.serialize().is_ok());
}

TEST(GgufWriterTest, RefusesBadTensors) {
  GgufWriter writer;
  auto code = [](const Status& s) { return s.code(); };
  EXPECT_EQ(code(writer.add_tensor("", DType::kF32, Shape{1}, counting_bytes(4))),
            StatusCode::kInvalidArgument);
  EXPECT_EQ(code(writer.add_tensor(std::string(64, 'x'), DType::kF32, Shape{1}, counting_bytes(4))),
            StatusCode::kInvalidArgument);
  EXPECT_TRUE(
      writer.add_tensor(std::string(63, 'x'), DType::kF32, Shape{1}, counting_bytes(4)).is_ok());
  EXPECT_EQ(code(writer.add_tensor("u", DType::kU8, Shape{1}, counting_bytes(1))),
            StatusCode::kInvalidArgument);  // GGUF has no u8 tensors
  EXPECT_EQ(code(writer.add_tensor("s", DType::kF32, Shape{}, counting_bytes(4))),
            StatusCode::kInvalidArgument);  // rank 0
  EXPECT_EQ(code(writer.add_tensor("r", DType::kF32, Shape{1, 1, 1, 1, 1}, counting_bytes(4))),
            StatusCode::kInvalidArgument);  // rank 5
  EXPECT_EQ(code(writer.add_tensor("z", DType::kF32, Shape{2, 0}, {})),
            StatusCode::kInvalidArgument);
  EXPECT_EQ(code(writer.add_tensor("q", DType::kQ4_K, Shape{2, 128}, counting_bytes(144))),
            StatusCode::kInvalidArgument);  // half a super-block per row
  Status wrong_size = writer.add_tensor("n", DType::kF32, Shape{2, 3}, counting_bytes(20));
  EXPECT_EQ(wrong_size.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(wrong_size.message().find("takes 24 bytes, but 20"), std::string_view::npos);
  ASSERT_TRUE(writer.add_tensor("d", DType::kF32, Shape{1}, counting_bytes(4)).is_ok());
  EXPECT_EQ(code(writer.add_tensor("d", DType::kF32, Shape{1}, counting_bytes(4))),
            StatusCode::kAlreadyExists);
  EXPECT_EQ(writer.tensor_count(), 2u);
}

TEST(GgufWriterTest, RefusesArraysTooDeepForReaders) {
  GgufValue v = GgufValue::array(GgufType::kU8, {});
  for (int i = 0; i < kGgufMaxArrayDepth; ++i) v = GgufValue::array(GgufType::kArray, {v});
  GgufWriter writer;
  writer.metadata().set("deep", v);
  Result<std::vector<std::byte>> r = writer.serialize();
  ASSERT_FALSE(r.is_ok());
  EXPECT_NE(r.status().message().find("deep"), std::string_view::npos);
}

class GgufWriteFileTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = std::filesystem::temp_directory_path() /
           ("switchyard_gguf_write_" + std::to_string(::getpid()));
    std::filesystem::remove_all(dir_);
    std::filesystem::create_directories(dir_);
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }
  std::size_t files_in_dir() const {
    return static_cast<std::size_t>(std::distance(std::filesystem::directory_iterator(dir_),
                                                  std::filesystem::directory_iterator()));
  }
  std::filesystem::path dir_;
};

TEST_F(GgufWriteFileTest, WritesAndReplacesAtomically) {
  const std::filesystem::path path = dir_ / "model.gguf";
  {
    std::ofstream old(path);
    old << "an older file";
  }
  GgufWriter writer;
  writer.metadata().set("general.architecture", GgufValue::string("llama"));
  const std::vector<std::byte> data = counting_bytes(4 * 8);
  ASSERT_TRUE(writer.add_tensor("t", DType::kF32, Shape{8}, data).is_ok());
  ASSERT_TRUE(writer.write(path).is_ok());
  EXPECT_EQ(files_in_dir(), 1u);  // no temporary left behind

  Result<GgufFile> file = GgufFile::open(path);
  ASSERT_TRUE(file.is_ok()) << file.status().to_string();
  EXPECT_EQ(*file->metadata().get_string("general.architecture"), "llama");
  std::span<const std::byte> read = file->tensor_bytes(file->tensors()[0]);
  EXPECT_EQ(std::memcmp(read.data(), data.data(), data.size()), 0);
  Result<std::vector<std::byte>> in_memory = writer.serialize();
  EXPECT_EQ(std::filesystem::file_size(path), in_memory->size());
}

// A failing source stops the write with its status, naming the tensor, and leaves
// neither the file nor a temporary behind.
TEST_F(GgufWriteFileTest, SourceFailureStopsTheWriteAndLeavesNothingBehind) {
  GgufWriter writer;
  ASSERT_TRUE(writer
                  .add_tensor_source("broken", DType::kF32, Shape{4, 2},
                                     [](std::int64_t, std::int64_t, std::span<std::byte>) {
                                       return invalid_argument_error("no bytes today");
                                     })
                  .is_ok());
  Status st = writer.write(dir_ / "m.gguf");
  ASSERT_FALSE(st.is_ok());
  EXPECT_EQ(st.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(st.message().find("broken"), std::string_view::npos) << st.to_string();
  EXPECT_NE(st.message().find("no bytes today"), std::string_view::npos) << st.to_string();
  EXPECT_EQ(files_in_dir(), 0u);
}

TEST_F(GgufWriteFileTest, IoErrorsAreStatusesAndLeaveNothingBehind) {
  GgufWriter writer;
  ASSERT_TRUE(writer.add_tensor("t", DType::kF32, Shape{1}, counting_bytes(4)).is_ok());

  Status missing_dir = writer.write(dir_ / "no" / "such" / "dir" / "m.gguf");
  ASSERT_FALSE(missing_dir.is_ok());
  EXPECT_EQ(missing_dir.code(), StatusCode::kNotFound);
  EXPECT_NE(missing_dir.message().find("m.gguf"), std::string_view::npos);

  // A directory where the file should go is refused before anything is written.
  std::filesystem::create_directories(dir_ / "taken.gguf" / "child");
  Status onto_dir = writer.write(dir_ / "taken.gguf");
  ASSERT_FALSE(onto_dir.is_ok());
  EXPECT_EQ(onto_dir.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(onto_dir.message().find("is a directory"), std::string_view::npos);
  EXPECT_EQ(files_in_dir(), 1u);  // only the directory, with its child
  EXPECT_TRUE(std::filesystem::exists(dir_ / "taken.gguf" / "child"));

  // A failed serialization writes nothing either.
  writer.metadata().set("general.alignment", GgufValue::u32(3));
  Status bad = writer.write(dir_ / "bad.gguf");
  ASSERT_FALSE(bad.is_ok());
  EXPECT_EQ(bad.code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(files_in_dir(), 1u);
  EXPECT_FALSE(std::filesystem::exists(dir_ / "bad.gguf"));
}

// Only a regular file is ever replaced: a link, a FIFO or a device at the output
// path stays as it was.
TEST_F(GgufWriteFileTest, RefusesToReplaceWhatIsNotARegularFile) {
  GgufWriter writer;
  ASSERT_TRUE(writer.add_tensor("t", DType::kF32, Shape{1}, counting_bytes(4)).is_ok());
  const std::filesystem::path target = dir_ / "real.gguf";
  { std::ofstream(target) << "keep me"; }
  std::filesystem::create_symlink(target, dir_ / "link.gguf");
  Status link = writer.write(dir_ / "link.gguf");
  ASSERT_FALSE(link.is_ok());
  EXPECT_EQ(link.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(link.message().find("symbolic link"), std::string_view::npos);
  EXPECT_TRUE(std::filesystem::is_symlink(dir_ / "link.gguf"));

  ASSERT_EQ(::mkfifo((dir_ / "fifo").c_str(), 0600), 0);
  Status fifo = writer.write(dir_ / "fifo");
  ASSERT_FALSE(fifo.is_ok());
  EXPECT_NE(fifo.message().find("a FIFO"), std::string_view::npos);
  EXPECT_TRUE(std::filesystem::is_fifo(dir_ / "fifo"));

  Status device = writer.write("/dev/null");
  ASSERT_FALSE(device.is_ok());
  EXPECT_NE(device.message().find("a device"), std::string_view::npos);
  std::ifstream kept(target);
  std::string text;
  std::getline(kept, text);
  EXPECT_EQ(text, "keep me");
  EXPECT_EQ(files_in_dir(), 3u);  // no temporary left anywhere
}

// A write refused by the system part-way (here a file-size limit, as a full disk
// would) leaves the existing file untouched and no temporary behind.
TEST_F(GgufWriteFileTest, AWriteFailingPartWayLeavesTheOldFile) {
  const std::filesystem::path path = dir_ / "model.gguf";
  { std::ofstream(path) << "the previous model"; }
  GgufWriter writer;
  ASSERT_TRUE(
      writer.add_tensor("big", DType::kF32, Shape{64 * 1024}, counting_bytes(256 * 1024)).is_ok());
  // In a child process: the limit must not reach the rest of the suite.
  auto write_under_a_limit = [&] {
    std::signal(SIGXFSZ, SIG_IGN);
    rlimit small{};
    small.rlim_cur = 4096;
    small.rlim_max = RLIM_INFINITY;
    if (::setrlimit(RLIMIT_FSIZE, &small) != 0) std::exit(3);
    const Status st = writer.write(path);
    const bool ok = !st.is_ok() && st.code() == StatusCode::kUnavailable &&
                    st.message().find("model.gguf") != std::string_view::npos;
    std::exit(ok ? 0 : 1);
  };
  EXPECT_EXIT(write_under_a_limit(), ::testing::ExitedWithCode(0), "");
  std::ifstream kept(path);
  std::string text;
  std::getline(kept, text);
  EXPECT_EQ(text, "the previous model");
  EXPECT_EQ(files_in_dir(), 1u);
}

// Note [Temporary files and signals]: a SIGTERM in the middle of a write removes
// the temporary, and the process still dies of the signal.
TEST_F(GgufWriteFileTest, ASignalDuringTheWriteRemovesTheTemporary) {
  GgufWriter writer;
  ASSERT_TRUE(writer
                  .add_tensor_source("slow", DType::kF32, Shape{8, 4},
                                     [](std::int64_t, std::int64_t, std::span<std::byte> out) {
                                       std::fill(out.begin(), out.end(), std::byte{1});
                                       std::raise(SIGTERM);
                                       return Status::ok();
                                     })
                  .is_ok());
  EXPECT_EXIT((void)writer.write(dir_ / "m.gguf"), ::testing::KilledBySignal(SIGTERM), "");
  EXPECT_EQ(files_in_dir(), 0u);
}

}  // namespace
}  // namespace switchyard
