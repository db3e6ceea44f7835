// Checking a GGUF file's weights: files written with known garbage in known places
// (a NaN f32 weight, an infinite f16 value, NaN scales of q4_0, q8_0, q4_k and
// q6_k, subnormal values) must be reported tensor by tensor with exact counts and
// first indices; clean files must pass; the result must not depend on threads.
#include "switchyard/weight_check.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstddef>
#include <cstring>
#include <limits>
#include <random>
#include <vector>

#include "switchyard/gguf.h"
#include "switchyard/half.h"
#include "switchyard/quant.h"
#include "switchyard/quant_blocks.h"
#include "switchyard/thread_pool.h"

namespace switchyard {
namespace {

std::vector<float> normal_values(std::size_t n, unsigned seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> dist(0.25f, 1.0f);
  std::vector<float> v(n);
  for (std::size_t i = 0; i < n; ++i) v[i] = (i % 2 == 0 ? -1.0f : 1.0f) * dist(rng);
  return v;
}

// A tensor of `rows` x `cols` normal values stored as `t`.
std::vector<std::byte> stored(DType t, std::int64_t rows, std::int64_t cols, unsigned seed) {
  const std::vector<float> v = normal_values(static_cast<std::size_t>(rows * cols), seed);
  std::vector<std::byte> out(static_cast<std::size_t>(*row_bytes(t, cols) * rows));
  EXPECT_TRUE(row_from_f32(t, v, out).is_ok()) << name(t);
  return out;
}

void put_f16(std::vector<std::byte>& b, std::size_t at, std::uint16_t h) {
  std::memcpy(b.data() + at, &h, 2);
}
void put_f32(std::vector<std::byte>& b, std::size_t at, float f) {
  std::memcpy(b.data() + at, &f, 4);
}

class WeightCheckTest : public ::testing::Test {
 protected:
  void add(std::string name, DType t, Shape shape, std::vector<std::byte> bytes) {
    ASSERT_TRUE(writer_.add_tensor(std::move(name), t, std::move(shape), std::move(bytes)).is_ok());
  }
  GgufFile parse() {
    Result<std::vector<std::byte>> bytes = writer_.serialize();
    EXPECT_TRUE(bytes.is_ok());
    bytes_ = std::move(*bytes);
    Result<GgufFile> file = GgufFile::parse(bytes_);
    EXPECT_TRUE(file.is_ok()) << file.status().to_string();
    return *file;
  }
  static const TensorCheck& find(const GgufFile& file, const WeightCheckReport& r,
                                 std::string_view name) {
    for (const TensorCheck& t : r.tensors) {
      if (file.tensors()[t.tensor].name == name) return t;
    }
    ADD_FAILURE() << "no tensor " << name;
    return r.tensors.front();
  }

  GgufWriter writer_;
  std::vector<std::byte> bytes_;
};

TEST_F(WeightCheckTest, CleanFilePasses) {
  add("token_embd.weight", DType::kF16, Shape{64, 256}, stored(DType::kF16, 64, 256, 1));
  add("blk.0.attn_q.weight", DType::kQ4_K, Shape{32, 256}, stored(DType::kQ4_K, 32, 256, 2));
  add("blk.0.ffn_down.weight", DType::kQ8_0, Shape{32, 256}, stored(DType::kQ8_0, 32, 256, 3));
  add("output_norm.weight", DType::kF32, Shape{256}, stored(DType::kF32, 1, 256, 4));
  const GgufFile file = parse();
  Result<WeightCheckReport> r = check_weights(file);
  ASSERT_TRUE(r.is_ok()) << r.status().to_string();
  EXPECT_TRUE(r->finite());
  EXPECT_EQ(r->first_nonfinite(), nullptr);
  EXPECT_EQ(r->nan + r->inf + r->subnormal, 0);
  EXPECT_EQ(r->nonfinite_tensors, 0);
  ASSERT_EQ(r->tensors.size(), 4u);
  std::uint64_t bytes = 0;
  for (const GgufTensorInfo& t : file.tensors()) bytes += static_cast<std::uint64_t>(t.size_bytes);
  EXPECT_EQ(r->bytes, bytes);
  // Values: every f16/f32 element, two scales per q4_k block, one per q8_0 block.
  EXPECT_EQ(r->values, 64 * 256 + 32 * 2 + 32 * 8 + 256);
}

TEST_F(WeightCheckTest, ReportsEachBadTensorExactly) {
  std::vector<std::byte> f32 = stored(DType::kF32, 4, 64, 10);
  put_f32(f32, 4 * 77, std::numeric_limits<float>::quiet_NaN());
  add("blk.0.attn_q.weight", DType::kF32, Shape{4, 64}, f32);

  std::vector<std::byte> f16 = stored(DType::kF16, 4, 64, 11);
  put_f16(f16, 2 * 200, 0xfc00);  // -inf
  put_f16(f16, 2 * 201, 0x0001);  // subnormal: counted, f16 so not a warning
  add("blk.0.attn_k.weight", DType::kF16, Shape{4, 64}, f16);

  const std::size_t q40 = sizeof(quant::BlockQ4_0);
  std::vector<std::byte> q4_0 = stored(DType::kQ4_0, 8, 64, 12);
  put_f16(q4_0, 9 * q40 + offsetof(quant::BlockQ4_0, d), 0x7e00);
  add("blk.0.attn_v.weight", DType::kQ4_0, Shape{8, 64}, q4_0);

  const std::size_t q80 = sizeof(quant::BlockQ8_0);
  std::vector<std::byte> q8_0 = stored(DType::kQ8_0, 8, 64, 13);
  put_f16(q8_0, 0 * q80 + offsetof(quant::BlockQ8_0, d), 0x7e00);
  put_f16(q8_0, 15 * q80 + offsetof(quant::BlockQ8_0, d), 0x7c00);
  add("blk.0.attn_output.weight", DType::kQ8_0, Shape{8, 64}, q8_0);

  const std::size_t q4k = sizeof(quant::BlockQ4_K);
  std::vector<std::byte> q4_k = stored(DType::kQ4_K, 4, 256, 14);
  put_f16(q4_k, 2 * q4k + offsetof(quant::BlockQ4_K, dmin), 0xfe00);
  add("blk.0.ffn_up.weight", DType::kQ4_K, Shape{4, 256}, q4_k);

  const std::size_t q6k = sizeof(quant::BlockQ6_K);
  std::vector<std::byte> q6_k = stored(DType::kQ6_K, 4, 256, 15);
  put_f16(q6_k, 3 * q6k + offsetof(quant::BlockQ6_K, d), 0x7e00);
  add("blk.0.ffn_down.weight", DType::kQ6_K, Shape{4, 256}, q6_k);

  std::vector<std::byte> sub = stored(DType::kF32, 2, 64, 16);
  put_f32(sub, 4 * 3, std::numeric_limits<float>::denorm_min());
  put_f32(sub, 4 * 100, -std::numeric_limits<float>::min() / 4);
  add("blk.0.ffn_norm.weight", DType::kF32, Shape{2, 64}, sub);

  add("blk.0.clean.weight", DType::kBF16, Shape{2, 64}, stored(DType::kBF16, 2, 64, 17));
  const std::vector<std::int32_t> ints(64, 0x7fc00000);
  std::vector<std::byte> int_bytes(ints.size() * 4);
  std::memcpy(int_bytes.data(), ints.data(), int_bytes.size());
  add("token_types", DType::kI32, Shape{64}, int_bytes);

  const GgufFile file = parse();
  ThreadPool pool(3);
  Result<WeightCheckReport> r = check_weights(file, {.runner = &pool});
  ASSERT_TRUE(r.is_ok()) << r.status().to_string();
  EXPECT_FALSE(r->finite());
  EXPECT_EQ(r->nan, 5);
  EXPECT_EQ(r->inf, 2);
  EXPECT_EQ(r->nonfinite_tensors, 6);
  ASSERT_NE(r->first_nonfinite(), nullptr);
  EXPECT_EQ(file.tensors()[r->first_nonfinite()->tensor].name, "blk.0.attn_q.weight");

  const struct {
    const char* name;
    std::int64_t nan, inf, first;
    const char* field;
  } expected[] = {
      {"blk.0.attn_q.weight", 1, 0, 77, ""},    {"blk.0.attn_k.weight", 0, 1, 200, ""},
      {"blk.0.attn_v.weight", 1, 0, 9, "d"},    {"blk.0.attn_output.weight", 1, 1, 0, "d"},
      {"blk.0.ffn_up.weight", 1, 0, 2, "dmin"}, {"blk.0.ffn_down.weight", 1, 0, 3, "d"},
  };
  for (const auto& e : expected) {
    SCOPED_TRACE(e.name);
    const ValueScan& s = find(file, *r, e.name).scan;
    EXPECT_EQ(s.nan, e.nan);
    EXPECT_EQ(s.inf, e.inf);
    EXPECT_EQ(s.first_nonfinite, e.first);
    EXPECT_EQ(s.first_nonfinite_field, e.field);
  }
  const TensorCheck& k = find(file, *r, "blk.0.attn_k.weight");
  EXPECT_EQ(k.scan.subnormal, 1);
  EXPECT_EQ(k.scan.first_subnormal, 201);
  EXPECT_EQ(describe(k, DType::kF16),
            "f16: 0 NaN, 1 Inf, 1 subnormal of 256 values; first non-finite at element 200; "
            "first subnormal at element 201");
  EXPECT_EQ(describe(find(file, *r, "blk.0.ffn_up.weight"), DType::kQ4_K),
            "q4_k: 1 NaN, 0 Inf, 0 subnormal of 8 scales; first non-finite at block 2 (dmin)");

  const TensorCheck& norm = find(file, *r, "blk.0.ffn_norm.weight");
  EXPECT_TRUE(norm.scan.finite());
  EXPECT_EQ(norm.scan.subnormal, 2);
  EXPECT_EQ(norm.scan.first_subnormal, 3);
  // Only the f32 subnormals stay subnormal in f32; the f16 one widens to a normal.
  EXPECT_EQ(r->subnormal_in_f32, 2);
  EXPECT_EQ(r->subnormal_in_f32_tensors, 1);

  const TensorCheck& clean = find(file, *r, "blk.0.clean.weight");
  EXPECT_TRUE(clean.checked);
  EXPECT_EQ(clean.scan.nan + clean.scan.inf + clean.scan.subnormal, 0);
  const TensorCheck& ints_check = find(file, *r, "token_types");
  EXPECT_FALSE(ints_check.checked);
  EXPECT_EQ(ints_check.scan, ValueScan{});
}

TEST_F(WeightCheckTest, LargeTensorsSplitIntoTasksGiveTheSameAnswerOnAnyThreadCount) {
  // 3 MiB of f32 (three 1 MiB tasks) and a q8_0 tensor over two tasks: findings in
  // later tasks only, so a merge out of order would report the wrong first index.
  constexpr std::int64_t kRows = 768, kCols = 1024;
  std::vector<std::byte> big = stored(DType::kF32, kRows, kCols, 20);
  put_f32(big, 4 * 700000, std::numeric_limits<float>::infinity());
  put_f32(big, 4 * 300000, std::numeric_limits<float>::quiet_NaN());
  put_f32(big, 4 * 786431, std::numeric_limits<float>::quiet_NaN());  // the last element
  put_f32(big, 4 * 500000, std::numeric_limits<float>::denorm_min());
  add("big.weight", DType::kF32, Shape{kRows, kCols}, big);
  const std::int64_t q_rows = 2048;  // 2048 * 1024 / 32 * 34 bytes: about 2.1 MiB
  std::vector<std::byte> q = stored(DType::kQ8_0, q_rows, kCols, 21);
  const std::int64_t bad_block = q_rows * kCols / 32 - 5;
  put_f16(q, static_cast<std::size_t>(bad_block) * sizeof(quant::BlockQ8_0), 0x7e00);
  add("q.weight", DType::kQ8_0, Shape{q_rows, kCols}, q);
  const GgufFile file = parse();

  Result<WeightCheckReport> serial = check_weights(file);
  ASSERT_TRUE(serial.is_ok());
  const ValueScan& s = serial->tensors[0].scan;
  EXPECT_EQ(s.nan, 2);
  EXPECT_EQ(s.inf, 1);
  EXPECT_EQ(s.subnormal, 1);
  EXPECT_EQ(s.first_nonfinite, 300000);
  EXPECT_EQ(s.first_subnormal, 500000);
  EXPECT_EQ(serial->tensors[1].scan.first_nonfinite, bad_block);
  for (int threads : {2, 3, 5}) {
    ThreadPool pool(threads);
    std::vector<std::pair<std::uint64_t, std::uint64_t>> calls;
    Result<WeightCheckReport> r = check_weights(
        file, {.runner = &pool, .progress = [&](std::uint64_t done, std::uint64_t total) {
                 calls.emplace_back(done, total);
               }});
    ASSERT_TRUE(r.is_ok());
    ASSERT_EQ(r->tensors.size(), 2u);
    EXPECT_EQ(r->tensors[0].scan, s) << threads;
    EXPECT_EQ(r->tensors[1].scan, serial->tensors[1].scan) << threads;
    ASSERT_GE(calls.size(), 2u);
    EXPECT_EQ(calls.front().first, 0u);
    EXPECT_EQ(calls.back().first, calls.back().second);
    EXPECT_EQ(calls.back().second, r->bytes);
    for (std::size_t i = 1; i < calls.size(); ++i) EXPECT_GE(calls[i].first, calls[i - 1].first);
  }
}

TEST_F(WeightCheckTest, ManySmallTensorsSpanSeveralBatches) {
  // More tensors than one batch holds: results must still land on their tensors.
  constexpr int kTensors = 5000;
  for (int i = 0; i < kTensors; ++i) {
    std::vector<std::byte> v = stored(DType::kF32, 1, 8, static_cast<unsigned>(i));
    if (i == 4500) put_f32(v, 4 * 6, -std::numeric_limits<float>::infinity());
    add("t" + std::to_string(i), DType::kF32, Shape{8}, std::move(v));
  }
  const GgufFile file = parse();
  ThreadPool pool(2);
  Result<WeightCheckReport> r = check_weights(file, {.runner = &pool});
  ASSERT_TRUE(r.is_ok());
  EXPECT_EQ(r->inf, 1);
  EXPECT_EQ(r->nonfinite_tensors, 1);
  ASSERT_NE(r->first_nonfinite(), nullptr);
  EXPECT_EQ(file.tensors()[r->first_nonfinite()->tensor].name, "t4500");
  EXPECT_EQ(r->first_nonfinite()->scan.first_nonfinite, 6);
  EXPECT_EQ(r->values, kTensors * 8);
}

TEST_F(WeightCheckTest, EmptyFile) {
  GgufFile empty = parse();
  Result<WeightCheckReport> r = check_weights(empty);
  ASSERT_TRUE(r.is_ok());
  EXPECT_TRUE(r->finite());
  EXPECT_EQ(r->bytes, 0u);
  EXPECT_TRUE(r->tensors.empty());
}

}  // namespace
}  // namespace switchyard
