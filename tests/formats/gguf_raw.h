// Byte-level GGUF construction for tests: builds files field by field, independently
// of the writer under test, so that reader tests do not trust the writer and
// malformed files can be made by changing one field.
#pragma once

#include <cstdint>
#include <cstring>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

namespace switchyard::testing {

class RawGguf {
 public:
  template <typename T>
  RawGguf& put(T v) {
    const auto* p = reinterpret_cast<const std::byte*>(&v);
    bytes_.insert(bytes_.end(), p, p + sizeof(T));
    return *this;
  }
  RawGguf& u8(std::uint8_t v) { return put(v); }
  RawGguf& u32(std::uint32_t v) { return put(v); }
  RawGguf& u64(std::uint64_t v) { return put(v); }
  RawGguf& str(std::string_view s) {
    u64(s.size());
    const auto* p = reinterpret_cast<const std::byte*>(s.data());
    bytes_.insert(bytes_.end(), p, p + s.size());
    return *this;
  }
  RawGguf& zeros(std::size_t n) {
    bytes_.insert(bytes_.end(), n, std::byte{0});
    return *this;
  }
  RawGguf& pad_to(std::size_t alignment) {
    return zeros((alignment - bytes_.size() % alignment) % alignment);
  }
  [[nodiscard]] std::size_t size() const { return bytes_.size(); }
  [[nodiscard]] std::vector<std::byte>& bytes() { return bytes_; }

 private:
  std::vector<std::byte> bytes_;
};

// One tensor info as raw fields.
struct RawTensor {
  std::string name;
  std::vector<std::uint64_t> ne;  // innermost first, as in the file
  std::uint32_t type = 0;         // ggml type id
  std::uint64_t offset = 0;
};

// A whole file described by fields that a test can break one at a time. The
// defaults describe a valid file: two metadata entries and two f32/f16 tensors.
struct RawSpec {
  std::uint32_t magic = 0x46554747u;
  std::uint32_t version = 3;
  // Each entry appends one complete key/value (key, type, value).
  std::vector<std::function<void(RawGguf&)>> kvs = {
      [](RawGguf& g) { g.str("general.architecture").u32(8).str("llama"); },
      [](RawGguf& g) { g.str("general.alignment").u32(4).u32(32); },
  };
  std::vector<RawTensor> tensors = {
      {"a", {4, 2}, 0, 0},  // f32, Shape [2, 4]: 32 bytes
      {"b", {8}, 1, 32},    // f16, Shape [8]: 16 bytes
  };
  std::size_t alignment = 32;
  std::size_t data_bytes = 64;  // the data section, padded
  // Overrides of the counts in the header (for counts that lie).
  std::optional<std::uint64_t> tensor_count;
  std::optional<std::uint64_t> kv_count;

  [[nodiscard]] std::vector<std::byte> build() const {
    RawGguf g;
    g.u32(magic).u32(version);
    g.u64(tensor_count.value_or(tensors.size()));
    g.u64(kv_count.value_or(kvs.size()));
    for (const auto& kv : kvs) kv(g);
    for (const RawTensor& t : tensors) {
      g.str(t.name).u32(static_cast<std::uint32_t>(t.ne.size()));
      for (std::uint64_t d : t.ne) g.u64(d);
      g.u32(t.type).u64(t.offset);
    }
    g.pad_to(alignment);
    // Data bytes count up so that views can be checked against their offsets.
    for (std::size_t i = 0; i < data_bytes; ++i) g.u8(static_cast<std::uint8_t>(i));
    return std::move(g.bytes());
  }
};

}  // namespace switchyard::testing
