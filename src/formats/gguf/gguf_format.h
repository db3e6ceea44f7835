// Internal facts of the GGUF encoding that the reader and the writer share.
//
// Everything is little-endian. A file is:
//   u32 magic ("GGUF" as bytes), u32 version, u64 tensor_count, u64 kv_count,
//   kv_count x { string key, u32 value type, value },
//   tensor_count x { string name, u32 n_dims, n_dims x u64 ne (innermost first),
//                    u32 ggml type id, u64 offset from the data section },
//   zero padding to the alignment, the data section.
// A string is a u64 byte length and the bytes (no terminator). An array value is a
// u32 element type, a u64 count and the elements, each encoded as a value of that
// type without a type tag of its own (an inner array carries its own element type
// and count).
#pragma once

#include <bit>
#include <cstdint>
#include <vector>

#include "switchyard/gguf.h"

namespace switchyard::detail {

static_assert(std::endian::native == std::endian::little,
              "the GGUF reader and writer copy little-endian fields as they are");

// "GGUF" read as a little-endian u32.
inline constexpr std::uint32_t kGgufMagic = 0x46554747u;

// Fewest bytes one encoded element of `t` can take, used to refuse a count that the
// rest of the file cannot possibly hold before anything is allocated for it.
constexpr std::uint64_t gguf_min_encoded_bytes(GgufType t) {
  switch (t) {
    case GgufType::kU8:
    case GgufType::kI8:
    case GgufType::kBool: return 1;
    case GgufType::kU16:
    case GgufType::kI16: return 2;
    case GgufType::kU32:
    case GgufType::kI32:
    case GgufType::kF32: return 4;
    case GgufType::kU64:
    case GgufType::kI64:
    case GgufType::kF64:
    case GgufType::kString: return 8;     // the length, for an empty string
    case GgufType::kArray: return 4 + 8;  // element type and count, for an empty array
  }
  return 1;
}

// The reader's and the value code's way into GgufValue's storage for string arrays
// (see GgufValue::StringList): the words are laid out by the caller, in place.
struct GgufValueAccess {
  // Zeroed words for `count` strings of `total_chars` bytes in all, with the count
  // set: the caller fills the end offsets (words[1 + i]) and the characters.
  static std::vector<std::uint64_t> string_words(std::uint64_t count, std::uint64_t total_chars) {
    if (count == 0) return {};
    std::vector<std::uint64_t> words(
        static_cast<std::size_t>(string_words_size(count, total_chars)), 0);
    words[0] = count;
    return words;
  }
  static constexpr std::uint64_t string_words_size(std::uint64_t count, std::uint64_t total_chars) {
    return count == 0 ? 0 : 1 + count + (total_chars + 7) / 8;
  }
  // Where the characters go; the words must hold at least one string.
  static char* string_chars(std::vector<std::uint64_t>& words) {
    return reinterpret_cast<char*>(words.data() + 1 + words[0]);
  }
  // The array; the words must be laid out as GgufValue::StringList says.
  static GgufValue string_array(std::vector<std::uint64_t> words) {
    return GgufValue::packed<8>(GgufValue::StringList{std::move(words)});
  }
};

// A key/value takes at least a key length, a type and a one-byte value.
inline constexpr std::uint64_t kGgufMinKvBytes = 8 + 4 + 1;
// A tensor info takes at least a name length, n_dims, a type and an offset.
inline constexpr std::uint64_t kGgufMinTensorInfoBytes = 8 + 4 + 4 + 8;

}  // namespace switchyard::detail
