// Randomized mutation of a valid file: whatever bytes the reader is given, it must
// return a file or an error, never crash or read outside the buffer. Run under the
// asan preset to make "outside the buffer" loud.
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "switchyard/gguf.h"

namespace switchyard {
namespace {

// A fixed-seed generator, so a failure reproduces from the iteration number.
class SplitMix64 {
 public:
  explicit SplitMix64(std::uint64_t seed) : state_(seed) {}
  std::uint64_t next() {
    std::uint64_t z = (state_ += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
  }
  std::size_t below(std::size_t n) { return static_cast<std::size_t>(next() % n); }

 private:
  std::uint64_t state_;
};

std::vector<std::byte> seed_file() {
  GgufWriter writer;
  GgufMetadata& m = writer.metadata();
  m.set("general.architecture", GgufValue::string("llama"));
  m.set("llama.block_count", GgufValue::u32(2));
  m.set("flag", GgufValue::boolean(true));
  m.set("eps", GgufValue::f32(1e-5f));
  m.set("big", GgufValue::u64(1ull << 40));
  m.set("tokens", GgufValue::string_array(std::vector<std::string>{"<s>", "a", "bc", "</s>"}));
  m.set("nested", GgufValue::array(GgufType::kArray,
                                   {GgufValue::array(GgufType::kI16, {GgufValue::i16(-1)}),
                                    GgufValue::array(GgufType::kF64, {GgufValue::f64(2.5)})}));
  std::vector<std::byte> data(4 * 64, std::byte{0x3c});
  EXPECT_TRUE(writer.add_tensor("token_embd.weight", DType::kF32, Shape{4, 16}, data).is_ok());
  EXPECT_TRUE(writer
                  .add_tensor("blk.0.attn_q.weight", DType::kQ8_0, Shape{2, 32},
                              std::vector<std::byte>(68, std::byte{1}))
                  .is_ok());
  EXPECT_TRUE(writer
                  .add_tensor("output_norm.weight", DType::kF16, Shape{16},
                              std::vector<std::byte>(32, std::byte{2}))
                  .is_ok());
  return *writer.serialize();
}

// Touches every byte of every tensor the reader accepted, so a bad range would be
// read (and reported by the sanitizer), not just computed.
std::uint64_t touch_all(const GgufFile& file) {
  std::uint64_t sum = 0;
  for (const GgufTensorInfo& t : file.tensors()) {
    for (std::byte b : file.tensor_bytes(t)) sum += static_cast<std::uint8_t>(b);
    EXPECT_LE(file.data_offset() + t.offset + static_cast<std::uint64_t>(t.size_bytes),
              file.file_size());
  }
  for (const GgufMetadata::Entry& e : file.metadata().entries()) sum += e.value.to_string().size();
  return sum;
}

TEST(GgufMutationTest, MutatedFilesParseOrFailCleanly) {
  const std::vector<std::byte> original = seed_file();
  Result<GgufFile> baseline = GgufFile::parse(original);
  ASSERT_TRUE(baseline.is_ok()) << baseline.status().to_string();
  // Most mutations go to the header, where every byte is structure.
  const std::size_t header = baseline->data_offset();

  SplitMix64 rng(20240611);
  int accepted = 0, refused = 0;
  for (int iteration = 0; iteration < 4000; ++iteration) {
    std::vector<std::byte> bytes = original;
    const int mutations = 1 + static_cast<int>(rng.below(4));
    for (int m = 0; m < mutations; ++m) {
      const std::size_t limit = rng.below(8) == 0 ? bytes.size() : std::min(header, bytes.size());
      if (limit == 0) break;
      const std::size_t at = rng.below(limit);
      switch (rng.below(5)) {
        case 0: bytes[at] ^= static_cast<std::byte>(1u << rng.below(8)); break;
        case 1: bytes[at] = static_cast<std::byte>(rng.next()); break;
        case 2: {  // a wild 64-bit field: counts, lengths, dims, offsets
          const std::uint64_t values[] = {~0ull,      1ull << 63, 1ull << 32,
                                          rng.next(), 0,          rng.below(100)};
          const std::uint64_t v = values[rng.below(6)];
          const std::size_t n = std::min<std::size_t>(8, bytes.size() - at);
          std::memcpy(bytes.data() + at, &v, n);
          break;
        }
        case 3: bytes.resize(rng.below(bytes.size() + 1)); break;
        default: {  // a wild 32-bit field: types, dimension counts
          const std::uint32_t v = static_cast<std::uint32_t>(rng.below(40));
          const std::size_t n = std::min<std::size_t>(4, bytes.size() - at);
          std::memcpy(bytes.data() + at, &v, n);
          break;
        }
      }
    }
    // An exact-size heap copy: any read past its end is a sanitizer report.
    const std::vector<std::byte> exact(bytes.begin(), bytes.end());
    Result<GgufFile> file = GgufFile::parse(exact);
    if (file.is_ok()) {
      ++accepted;
      (void)touch_all(*file);
    } else {
      ++refused;
      EXPECT_FALSE(file.status().message().empty()) << "iteration " << iteration;
    }
  }
  // Both outcomes occur, so the mutations reach past the magic and version checks.
  EXPECT_GT(accepted, 0);
  EXPECT_GT(refused, 0);
}

}  // namespace
}  // namespace switchyard
