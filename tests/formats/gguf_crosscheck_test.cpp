// Cross-check against an independent GGUF implementation, the `gguf` Python package:
// its reader must read what our writer writes, and our reader what its writer writes.
// Skips (does not pass) when Python or the package is missing. The interpreter is
// $SWITCHYARD_PYTHON when set (scripts/test.sh points it at a venv it prepares),
// python3 otherwise.
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "switchyard/gguf.h"
#include "switchyard/half.h"

namespace switchyard {
namespace {

// From the build, not __FILE__: a compiler launcher may rewrite source paths to
// relative ones, which would then resolve against the test's working directory.
const std::filesystem::path kScript =
    std::filesystem::path(SWITCHYARD_TEST_SOURCE_DIR) / "formats" / "gguf_crosscheck.py";

std::string python() {
  const char* env = std::getenv("SWITCHYARD_PYTHON");
  return env != nullptr && *env != '\0' ? "'" + std::string(env) + "'" : "python3";
}

bool python_gguf_available() {
  return std::system((python() + " -c 'import gguf' >/dev/null 2>&1").c_str()) == 0;
}

// Runs the script; returns its stdout, or nullopt when it failed.
std::optional<std::string> run_script(const std::string& mode, const std::filesystem::path& file) {
  const std::string command =
      python() + " '" + kScript.string() + "' " + mode + " '" + file.string() + "' 2>/dev/null";
  FILE* pipe = popen(command.c_str(), "r");
  if (pipe == nullptr) return std::nullopt;
  std::string out;
  char buffer[4096];
  std::size_t n;
  while ((n = std::fread(buffer, 1, sizeof(buffer), pipe)) > 0) out.append(buffer, n);
  if (pclose(pipe) != 0) return std::nullopt;
  return out;
}

class GgufCrossCheckTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!python_gguf_available()) GTEST_SKIP() << "python3 with the gguf package is not installed";
    dir_ = std::filesystem::temp_directory_path() /
           ("switchyard_gguf_cross_" + std::to_string(::getpid()));
    std::filesystem::create_directories(dir_);
  }
  void TearDown() override {
    if (!dir_.empty()) std::filesystem::remove_all(dir_);
  }
  std::filesystem::path dir_;
};

std::vector<std::byte> pattern(std::size_t n, unsigned salt) {
  std::vector<std::byte> b(n);
  for (std::size_t i = 0; i < n; ++i) b[i] = static_cast<std::byte>((i * 31 + salt) & 0xff);
  return b;
}

std::uint64_t byte_sum(std::span<const std::byte> b) {
  std::uint64_t s = 0;
  for (std::byte x : b) s += static_cast<std::uint8_t>(x);
  return s;
}

TEST_F(GgufCrossCheckTest, PythonReaderReadsOurFiles) {
  GgufWriter writer;
  GgufMetadata& m = writer.metadata();
  m.set("general.architecture", GgufValue::string("llama"));
  m.set("general.alignment", GgufValue::u32(64));
  m.set("t.u8", GgufValue::u8(200));
  m.set("t.i8", GgufValue::i8(-3));
  m.set("t.u16", GgufValue::u16(60000));
  m.set("t.i16", GgufValue::i16(-300));
  m.set("t.u32", GgufValue::u32(4000000000u));
  m.set("t.i32", GgufValue::i32(-70000));
  m.set("t.f32", GgufValue::f32(0.375f));
  m.set("t.bool", GgufValue::boolean(true));
  m.set("t.string", GgufValue::string("gr\xc3\xbc\xc3\x9f"));
  m.set("t.u64", GgufValue::u64(1ull << 50));
  m.set("t.i64", GgufValue::i64(-(1ll << 50)));
  m.set("t.f64", GgufValue::f64(-2.5));
  m.set("t.tokens", GgufValue::string_array(std::vector<std::string>{"<s>", "", "x y"}));
  m.set("t.floats", GgufValue::array(GgufType::kF32, {GgufValue::f32(1), GgufValue::f32(-0.5f)}));
  m.set("t.nested",
        GgufValue::array(GgufType::kArray,
                         {GgufValue::array(GgufType::kU32, {GgufValue::u32(1), GgufValue::u32(2)}),
                          GgufValue::array(GgufType::kString, {GgufValue::string("s")})}));
  m.set("t.after_nested", GgufValue::u32(99));  // parsed correctly only if the nesting was

  struct Tensor {
    std::string name;
    DType dtype;
    Shape shape;
    std::vector<std::byte> data;
  };
  std::vector<Tensor> tensors = {
      {"rows", DType::kF32, Shape{2, 3}, pattern(24, 1)},
      {"vector", DType::kF16, Shape{5}, pattern(10, 2)},
      {"brain", DType::kBF16, Shape{3, 4}, pattern(24, 3)},
      {"quant", DType::kQ4_0, Shape{2, 64}, pattern(4 * 18, 4)},
      {"k_quant", DType::kQ6_K, Shape{1, 256}, pattern(210, 5)},
      {"four_d", DType::kF32, Shape{2, 1, 3, 4}, pattern(96, 6)},
  };
  for (const Tensor& t : tensors) {
    ASSERT_TRUE(writer.add_tensor_ref(t.name, t.dtype, t.shape, t.data).is_ok()) << t.name;
  }
  const std::filesystem::path path = dir_ / "ours.gguf";
  ASSERT_TRUE(writer.write(path).is_ok());

  std::optional<std::string> out = run_script("read", path);
  ASSERT_TRUE(out.has_value()) << "the gguf package could not read the file";
  const nlohmann::json j = nlohmann::json::parse(*out);
  Result<GgufFile> ours = GgufFile::open(path);
  ASSERT_TRUE(ours.is_ok());
  EXPECT_EQ(j["alignment"], 64);
  EXPECT_EQ(j["data_offset"], ours->data_offset());

  const nlohmann::json& md = j["metadata"];
  EXPECT_EQ(md["general.architecture"]["value"], "llama");
  EXPECT_EQ(md["t.u8"]["value"], 200);
  EXPECT_EQ(md["t.i8"]["value"], -3);
  EXPECT_EQ(md["t.u16"]["value"], 60000);
  EXPECT_EQ(md["t.i16"]["value"], -300);
  EXPECT_EQ(md["t.u32"]["value"], 4000000000u);
  EXPECT_EQ(md["t.i32"]["value"], -70000);
  EXPECT_EQ(md["t.f32"]["value"], 0.375);
  EXPECT_EQ(md["t.bool"]["value"], true);
  EXPECT_EQ(md["t.string"]["value"], "gr\xc3\xbc\xc3\x9f");
  EXPECT_EQ(md["t.u64"]["value"], 1ull << 50);
  EXPECT_EQ(md["t.i64"]["value"], -(1ll << 50));
  EXPECT_EQ(md["t.f64"]["value"], -2.5);
  EXPECT_EQ(md["t.tokens"]["value"], (std::vector<std::string>{"<s>", "", "x y"}));
  EXPECT_EQ(md["t.floats"]["value"], (std::vector<double>{1.0, -0.5}));
  EXPECT_EQ(md["t.nested"]["types"][0], 9);
  EXPECT_EQ(md["t.after_nested"]["value"], 99);
  // Each key's type ids as the package saw them.
  EXPECT_EQ(md["t.u8"]["types"][0], 0);
  EXPECT_EQ(md["t.f64"]["types"][0], 12);
  EXPECT_EQ(md["t.tokens"]["types"], (std::vector<int>{9, 8}));

  ASSERT_EQ(j["tensors"].size(), tensors.size());
  for (std::size_t i = 0; i < tensors.size(); ++i) {
    const nlohmann::json& t = j["tensors"][i];
    SCOPED_TRACE(tensors[i].name);
    EXPECT_EQ(t["name"], tensors[i].name);
    // The package reports ne innermost first: the reverse of our Shape.
    EXPECT_EQ(t["ne"].get<std::vector<std::int64_t>>(), gguf_dims(tensors[i].shape));
    EXPECT_EQ(t["type"], info(tensors[i].dtype).gguf_type_id);
    EXPECT_EQ(t["n_bytes"], tensors[i].data.size());
    EXPECT_EQ(t["data_offset"], ours->data_offset() + ours->tensors()[i].offset);
    EXPECT_EQ(t["byte_sum"], byte_sum(tensors[i].data));
  }
}

TEST_F(GgufCrossCheckTest, OurReaderReadsPythonFiles) {
  const std::filesystem::path path = dir_ / "theirs.gguf";
  ASSERT_TRUE(run_script("write", path).has_value()) << "the gguf package could not write";
  Result<GgufFile> file = GgufFile::open(path);
  ASSERT_TRUE(file.is_ok()) << file.status().to_string();
  const GgufMetadata& m = file->metadata();
  EXPECT_EQ(*m.get_string("general.architecture"), "llama");
  EXPECT_EQ(*m.get_u32("llama.block_count"), 3u);
  EXPECT_EQ(*m.get_i32("test.i32"), -7);
  EXPECT_EQ(*m.get_f32("test.f32"), 0.25f);
  EXPECT_EQ(*m.get_f64("test.f64"), -1.5);
  EXPECT_TRUE(*m.get_bool("test.bool"));
  EXPECT_EQ(*m.get_string("test.string"), "gr\xc3\xbc\xc3\x9f");
  EXPECT_EQ(*m.get_u64("test.u64"), 1ull << 40);
  Result<GgufArray> tokens = m.get_array("test.tokens", GgufType::kString);
  ASSERT_TRUE(tokens.is_ok()) << tokens.status().to_string();
  ASSERT_EQ(tokens->size(), 3u);
  EXPECT_EQ((*tokens->strings())[2], "</s>");
  Result<GgufArray> ints = m.get_array("test.ints");
  ASSERT_TRUE(ints.is_ok()) << ints.status().to_string();
  EXPECT_EQ(*ints->at(0).as_integer(), 1);

  // numpy (2, 3) is our Shape [2, 3]: the package reverses to ne on write, we reverse back.
  Result<TensorView> matrix = file->tensor("matrix");
  ASSERT_TRUE(matrix.is_ok());
  EXPECT_EQ(matrix->shape(), (Shape{2, 3}));
  EXPECT_EQ(matrix->dtype(), DType::kF32);
  const float* mv = matrix->first_as<const float>();
  for (int i = 0; i < 6; ++i) EXPECT_EQ(mv[i], static_cast<float>(i));  // row-major 0..5

  Result<TensorView> cube = file->tensor("cube");
  ASSERT_TRUE(cube.is_ok());
  EXPECT_EQ(cube->shape(), (Shape{2, 3, 4}));
  EXPECT_EQ(cube->first_as<const float>()[23], 23.0f);

  Result<TensorView> half = file->tensor("half");
  ASSERT_TRUE(half.is_ok());
  EXPECT_EQ(half->dtype(), DType::kF16);
  EXPECT_EQ(f16_to_f32(half->first_as<const std::uint16_t>()[1]), -2.0f);
}

}  // namespace
}  // namespace switchyard
