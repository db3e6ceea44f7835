// GGUF files: a memory-mapped, zero-copy reader and an atomic writer.
//
// Overview
//   A GGUF file is a little-endian header (magic "GGUF", version, tensor count,
//   metadata count), typed metadata key/values, one info record per tensor (name,
//   dimensions, ggml type id, data offset), padding to the file's alignment
//   (`general.alignment`, default 32) and then the tensor data section. Version 3 is
//   read and written; version 2 has the same layout and is read too.
//
//   `GgufFile::open` maps the file read-only and parses the header only: tensor data
//   is never copied or touched, and every `TensorView` it hands out points straight
//   into the mapping. Opening costs the header's size, not the model's.
//
//   Every count, length, offset and size read from a file is checked against the
//   file before it is used: a malformed file gets a Status naming what is wrong and
//   where (kDataLoss for truncated or corrupt bytes, kUnimplemented for a version
//   this build does not read, kInvalidArgument for values the format forbids), never
//   a crash, an out-of-bounds read or an allocation sized by the file's claims.
//
// Metadata memory
//   Metadata values are copied out of the file into compact storage: an array of
//   numbers is one buffer of its element type, an array of strings one block of
//   offsets and characters (GgufArray gives zero-copy spans and string views of
//   them). Parsed metadata holds at most kGgufMetadataMemoryFactor (2) times the
//   file's header and metadata bytes plus kGgufMetadataMemorySlack (16 MiB), as
//   GgufMetadata::memory_bytes() counts it; a file that would need more (only one
//   made of hundreds of thousands of tiny entries or inner arrays can) is refused
//   with kInvalidArgument naming the key, before the memory is allocated. Arrays of
//   numbers and strings cost about their bytes in the file (measured in
//   docs/benchmarks.md, section 10).
//
// Dimension order (read this before touching shapes)
//   GGUF stores a tensor's dimensions innermost first: ne[0] is the row length, the
//   unit-stride dimension. Switchyard's `Shape` lists dimensions outermost first. The
//   two are exact reverses of each other: a Switchyard matrix of shape [rows, cols]
//   is stored in GGUF as ne = [cols, rows], and a llama `attn_k` weight of Shape
//   [n_kv_heads * head_dim, n_embd] is ne = [n_embd, n_kv_heads * head_dim]. Reader
//   and writer both convert; `GgufTensorInfo::shape` is always outermost first, and
//   `gguf_dims` gives the file's order where it is needed (printing, other tools).
//
// Example
//   SWITCHYARD_ASSIGN_OR_RETURN(GgufFile file, GgufFile::open("model.gguf"));
//   SWITCHYARD_ASSIGN_OR_RETURN(std::uint32_t blocks,
//   file.metadata().get_u32("llama.block_count")); SWITCHYARD_ASSIGN_OR_RETURN(TensorView w,
//   file.tensor("blk.0.attn_q.weight"));
//   SWITCHYARD_ASSIGN_OR_RETURN(GgufStrings tokens,
//                               file.metadata().get_strings("tokenizer.ggml.tokens"));
//   for (std::string_view token : tokens) ...  // views into the metadata, no copies
//
//   GgufWriter writer;
//   writer.metadata().set("general.architecture", GgufValue::string("llama"));
//   SWITCHYARD_RETURN_IF_ERROR(writer.add_tensor("w", DType::kF32, Shape{2, 3}, bytes));
//   SWITCHYARD_RETURN_IF_ERROR(writer.write("out.gguf"));
#pragma once

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <iterator>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>
#include <variant>
#include <vector>

#include "switchyard/dtype.h"
#include "switchyard/status.h"
#include "switchyard/tensor.h"

namespace switchyard {

// The version the writer produces.
inline constexpr std::uint32_t kGgufVersion = 3;
// Alignment of tensor data when `general.alignment` is absent.
inline constexpr std::uint32_t kGgufDefaultAlignment = 32;
// GGUF tensors have at most four dimensions (ggml's limit).
inline constexpr int kGgufMaxDims = 4;
// The longest tensor name the reader accepts (the specification's limit).
inline constexpr std::size_t kGgufMaxTensorNameBytes = 64;
// The longest tensor name the writer produces: ggml keeps names in a 64-byte buffer
// with a terminating NUL, so a 64-byte name is refused by ggml-based readers.
inline constexpr std::size_t kGgufMaxWrittenTensorNameBytes = 63;
// Arrays nested deeper than this are refused, so a hostile file cannot exhaust the
// stack through recursion.
inline constexpr int kGgufMaxArrayDepth = 16;

// The reader refuses a file whose parsed metadata would hold more memory
// (GgufMetadata::memory_bytes) than this many times the file's header and metadata
// bytes plus kGgufMetadataMemorySlack, before allocating it. Arrays of numbers and
// strings take at most about their bytes in the file, so only a file made mostly of
// per-entry bookkeeping (hundreds of thousands of tiny keys or inner arrays) meets
// the limit. Note [Metadata memory] in gguf_reader.cpp.
inline constexpr std::uint64_t kGgufMetadataMemoryFactor = 2;
inline constexpr std::uint64_t kGgufMetadataMemorySlack = std::uint64_t{16} << 20;

namespace detail {
// What the memory estimates (GgufMetadata::memory_bytes) count for one heap block
// of `request` bytes: the request with the allocator's header and rounding, as
// glibc's malloc does it (an 8-byte header, 16-byte granules, 32 bytes at least);
// nothing for no block.
constexpr std::size_t heap_block_bytes(std::size_t request) {
  if (request == 0) return 0;
  const std::size_t rounded = (request + 8 + 15) / 16 * 16;
  return rounded < 32 ? 32 : rounded;
}

// What GgufMetadata::memory_bytes counts for one node of the metadata's lookup
// index: the link, the key object, the position and the cached hash (the key's own
// heap block is counted apart).
inline constexpr std::size_t kGgufIndexNodeBytes =
    heap_block_bytes(sizeof(void*) + sizeof(std::string) + 2 * sizeof(std::size_t));

// Lets the lookup maps below find a std::string key from a std::string_view.
struct StringHash {
  using is_transparent = void;
  std::size_t operator()(std::string_view s) const { return std::hash<std::string_view>{}(s); }
};
}  // namespace detail

// The metadata value types. The numbers are GGUF's own type ids.
enum class GgufType : std::uint32_t {
  kU8 = 0,
  kI8 = 1,
  kU16 = 2,
  kI16 = 3,
  kU32 = 4,
  kI32 = 5,
  kF32 = 6,
  kBool = 7,
  kString = 8,
  kArray = 9,
  kU64 = 10,
  kI64 = 11,
  kF64 = 12,
};
inline constexpr std::uint32_t kGgufTypeCount = 13;

// "u8", "i32", "f32", "bool", "string", "array", ...; "unknown" outside the enum.
[[nodiscard]] std::string_view name(GgufType t);

class GgufArray;
class GgufValue;
namespace detail {
struct GgufValueAccess;  // the reader's way in (src/formats/gguf/gguf_format.h)
}  // namespace detail

// One metadata value: a scalar, a string or an array. An array has one element type
// for all its elements; arrays of arrays are allowed, each inner array with its own
// element type and length. Values are plain data: copyable, comparable.
//
// Arrays are stored compactly, never as one GgufValue per element: an array of a
// scalar type is one contiguous buffer of that type (a u8 array costs one byte per
// element), an array of strings is one buffer of characters and one end offset per
// string, and only an array of arrays holds GgufValues (one per inner array). Read
// them through as_array() (see GgufArray).
class GgufValue {
 public:
  static GgufValue u8(std::uint8_t v) { return GgufValue(std::in_place_index<0>, v); }
  static GgufValue i8(std::int8_t v) { return GgufValue(std::in_place_index<1>, v); }
  static GgufValue u16(std::uint16_t v) { return GgufValue(std::in_place_index<2>, v); }
  static GgufValue i16(std::int16_t v) { return GgufValue(std::in_place_index<3>, v); }
  static GgufValue u32(std::uint32_t v) { return GgufValue(std::in_place_index<4>, v); }
  static GgufValue i32(std::int32_t v) { return GgufValue(std::in_place_index<5>, v); }
  static GgufValue f32(float v) { return GgufValue(std::in_place_index<6>, v); }
  static GgufValue boolean(bool v) { return GgufValue(std::in_place_index<7>, v); }
  static GgufValue string(std::string v) { return GgufValue(std::in_place_index<8>, std::move(v)); }
  static GgufValue u64(std::uint64_t v) { return GgufValue(std::in_place_index<10>, v); }
  static GgufValue i64(std::int64_t v) { return GgufValue(std::in_place_index<11>, v); }
  static GgufValue f64(double v) { return GgufValue(std::in_place_index<12>, v); }

  // Arrays of one scalar type, taking the buffer over.
  static GgufValue u8_array(std::vector<std::uint8_t> values);
  static GgufValue i8_array(std::vector<std::int8_t> values);
  static GgufValue u16_array(std::vector<std::uint16_t> values);
  static GgufValue i16_array(std::vector<std::int16_t> values);
  static GgufValue u32_array(std::vector<std::uint32_t> values);
  static GgufValue i32_array(std::vector<std::int32_t> values);
  static GgufValue f32_array(std::vector<float> values);
  static GgufValue bool_array(std::span<const bool> values);
  // A bool array from bytes that are each 0 (false) or 1 (true), GGUF's encoding;
  // aborts on any other byte.
  static GgufValue bool_array_from_bytes(std::vector<std::uint8_t> bytes);
  static GgufValue u64_array(std::vector<std::uint64_t> values);
  static GgufValue i64_array(std::vector<std::int64_t> values);
  static GgufValue f64_array(std::vector<double> values);
  // An array of strings, the common large case (token lists, merges).
  static GgufValue string_array(std::span<const std::string> strings);
  static GgufValue string_array(std::span<const std::string_view> strings);
  // An array of `element_type` from one value per element, for any element type
  // (the only way to build an array of arrays). Every element must have that type
  // (aborts otherwise: mixing types is a programmer error the format cannot
  // represent). Scalar and string elements are packed into the compact storage.
  static GgufValue array(GgufType element_type, std::vector<GgufValue> elements);

  [[nodiscard]] GgufType type() const { return static_cast<GgufType>(rep_.index()); }
  [[nodiscard]] bool is_array() const { return type() == GgufType::kArray; }
  // The element type of an array; aborts for a non-array.
  [[nodiscard]] GgufType element_type() const;
  // A view of an array, valid while this value lives unchanged; kInvalidArgument
  // naming the type for a non-array.
  [[nodiscard]] Result<GgufArray> as_array() const;

  // The value as exactly this type; kInvalidArgument naming both types otherwise.
  [[nodiscard]] Result<std::uint8_t> as_u8() const;
  [[nodiscard]] Result<std::int8_t> as_i8() const;
  [[nodiscard]] Result<std::uint16_t> as_u16() const;
  [[nodiscard]] Result<std::int16_t> as_i16() const;
  [[nodiscard]] Result<std::uint32_t> as_u32() const;
  [[nodiscard]] Result<std::int32_t> as_i32() const;
  [[nodiscard]] Result<float> as_f32() const;
  [[nodiscard]] Result<bool> as_bool() const;
  // A view of the stored string, valid while this value lives.
  [[nodiscard]] Result<std::string_view> as_string() const;
  [[nodiscard]] Result<std::uint64_t> as_u64() const;
  [[nodiscard]] Result<std::int64_t> as_i64() const;
  [[nodiscard]] Result<double> as_f64() const;
  // Any of the eight integer types whose value fits in int64 (files disagree on the
  // width of counts such as llama.context_length); kInvalidArgument for other types,
  // kOutOfRange for a u64 above INT64_MAX.
  [[nodiscard]] Result<std::int64_t> as_integer() const;
  // f32 or f64, widened to double; kInvalidArgument for other types.
  [[nodiscard]] Result<double> as_float() const;

  // A short human-readable rendering: `42`, `"llama"`, `[u32 x 3: 1, 2, 3]`. Arrays
  // longer than `max_elements` show their first `max_elements` elements and "...".
  [[nodiscard]] std::string to_string(std::size_t max_elements = 8) const;

  // Bytes this value owns on the heap (strings longer than the inline buffer, array
  // storage, inner arrays), from the capacities it holds, each block counted as
  // detail::heap_block_bytes does. The value's own
  // sizeof(GgufValue) is not included.
  [[nodiscard]] std::size_t heap_bytes() const;

  // Floats (scalars and array elements) compare by bits: a NaN read back equals the
  // NaN written and -0 differs from +0.
  friend bool operator==(const GgufValue& a, const GgufValue& b);

 private:
  friend class GgufArray;
  friend struct detail::GgufValueAccess;

  // An array of strings, in one block of 64-bit words: the count n, the end offset
  // of each string in the characters (string i is [ends[i-1], ends[i]), the first
  // starting at 0), then the characters of every string back to back, zero-padded
  // to a whole word. One block whatever the count, and a GgufValue no larger than
  // a std::string; no words at all for no strings.
  struct StringList {
    std::vector<std::uint64_t> words;
    friend bool operator==(const StringList& a, const StringList& b) = default;
  };
  // One alternative per element type, at the index of its GGUF type id, so
  // index() is the element type. bool elements are bytes holding 0 or 1.
  using Storage =
      std::variant<std::vector<std::uint8_t>, std::vector<std::int8_t>, std::vector<std::uint16_t>,
                   std::vector<std::int16_t>, std::vector<std::uint32_t>, std::vector<std::int32_t>,
                   std::vector<float>, std::vector<std::uint8_t>, StringList,
                   std::vector<GgufValue>, std::vector<std::uint64_t>, std::vector<std::int64_t>,
                   std::vector<double>>;
  struct ArrayRep {
    Storage storage;
    // Element types equal, and elements equal (floats by bits).
    [[nodiscard]] bool equals(const ArrayRep& other) const;
    friend bool operator==(const ArrayRep& a, const ArrayRep& b) { return a.equals(b); }
  };
  // The alternative index is the GGUF type id, so type() is the index.
  using Rep = std::variant<std::uint8_t, std::int8_t, std::uint16_t, std::int16_t, std::uint32_t,
                           std::int32_t, float, bool, std::string, ArrayRep, std::uint64_t,
                           std::int64_t, double>;
  // Constructs the alternative in place: a reader building a vocabulary's worth of
  // strings pays one move per string here instead of several.
  template <std::size_t kIndex, typename V>
  GgufValue(std::in_place_index_t<kIndex> index, V&& v) : rep_(index, std::forward<V>(v)) {}
  // An array value whose storage holds `items` as element type id kElement.
  template <std::size_t kElement, typename Items>
  static GgufValue packed(Items items) {
    return GgufValue(std::in_place_index<9>,
                     ArrayRep{Storage(std::in_place_index<kElement>, std::move(items))});
  }
  template <typename T, GgufType kType>
  Result<T> as() const;

  Rep rep_;
};
// Arrays are kept no larger than a string, so an inner array costs what a string
// does (Note [Metadata memory] in gguf_reader.cpp counts on it).
static_assert(sizeof(GgufValue) <= sizeof(std::string) + sizeof(std::size_t));

// The strings of a string array: a zero-copy view of its storage, valid while the
// value it came from lives unchanged. Indexing and iteration give string_views.
class GgufStrings {
 public:
  class Iterator {
   public:
    using iterator_category = std::forward_iterator_tag;
    using value_type = std::string_view;
    using difference_type = std::ptrdiff_t;
    using pointer = void;
    using reference = std::string_view;
    Iterator() = default;
    std::string_view operator*() const { return (*strings_)[index_]; }
    Iterator& operator++() {
      ++index_;
      return *this;
    }
    Iterator operator++(int) {
      Iterator old = *this;
      ++index_;
      return old;
    }
    friend bool operator==(const Iterator& a, const Iterator& b) { return a.index_ == b.index_; }

   private:
    friend class GgufStrings;
    Iterator(const GgufStrings* strings, std::size_t index) : strings_(strings), index_(index) {}
    const GgufStrings* strings_ = nullptr;
    std::size_t index_ = 0;
  };

  GgufStrings() = default;
  [[nodiscard]] std::size_t size() const { return ends_.size(); }
  [[nodiscard]] bool empty() const { return ends_.empty(); }
  // String `i`; `i` must be below size() (unchecked, as for a span).
  [[nodiscard]] std::string_view operator[](std::size_t i) const {
    const std::uint64_t begin = i == 0 ? 0 : ends_[i - 1];
    return {chars_.data() + begin, static_cast<std::size_t>(ends_[i] - begin)};
  }
  // Every string's bytes, back to back: the storage the views point into.
  [[nodiscard]] std::string_view chars() const { return chars_; }
  [[nodiscard]] Iterator begin() const { return Iterator(this, 0); }
  [[nodiscard]] Iterator end() const { return Iterator(this, size()); }

 private:
  friend class GgufArray;
  GgufStrings(std::string_view chars, std::span<const std::uint64_t> ends)
      : chars_(chars), ends_(ends) {}
  std::string_view chars_;
  std::span<const std::uint64_t> ends_;
};

// A read-only view of an array value, valid while the value lives unchanged; cheap
// to copy. The typed accessors are zero-copy views of the value's storage; each
// returns kInvalidArgument naming both element types when the array holds another.
//
//   SWITCHYARD_ASSIGN_OR_RETURN(GgufArray a, md.get_array("tokenizer.ggml.scores",
//                                                           GgufType::kF32));
//   std::span<const float> scores = *a.as_f32s();  // cannot fail: the type was checked
//
// Keep a view in a variable before iterating it: in `for (x : *a.strings())` the
// loop would outlive the temporary Result that holds the view.
class GgufArray {
 public:
  [[nodiscard]] GgufType element_type() const { return static_cast<GgufType>(storage_->index()); }
  [[nodiscard]] std::size_t size() const;
  [[nodiscard]] bool empty() const { return size() == 0; }
  // Element `i` as a value of its own (a copy: for a string, of its bytes; for an
  // inner array, of the whole array, so prefer arrays() there). Aborts when `i` is
  // not below size().
  [[nodiscard]] GgufValue at(std::size_t i) const;

  [[nodiscard]] Result<std::span<const std::uint8_t>> as_u8s() const;
  [[nodiscard]] Result<std::span<const std::int8_t>> as_i8s() const;
  [[nodiscard]] Result<std::span<const std::uint16_t>> as_u16s() const;
  [[nodiscard]] Result<std::span<const std::int16_t>> as_i16s() const;
  [[nodiscard]] Result<std::span<const std::uint32_t>> as_u32s() const;
  [[nodiscard]] Result<std::span<const std::int32_t>> as_i32s() const;
  [[nodiscard]] Result<std::span<const float>> as_f32s() const;
  // A bool array's elements as bytes, each 0 (false) or 1 (true).
  [[nodiscard]] Result<std::span<const std::uint8_t>> as_bool_bytes() const;
  [[nodiscard]] Result<std::span<const std::uint64_t>> as_u64s() const;
  [[nodiscard]] Result<std::span<const std::int64_t>> as_i64s() const;
  [[nodiscard]] Result<std::span<const double>> as_f64s() const;
  [[nodiscard]] Result<GgufStrings> strings() const;
  // The inner arrays of an array of arrays, each a GgufValue of type kArray.
  [[nodiscard]] Result<std::span<const GgufValue>> arrays() const;

 private:
  friend class GgufValue;
  explicit GgufArray(const GgufValue::Storage& storage) : storage_(&storage) {}
  template <typename T, GgufType kType>
  Result<std::span<const T>> typed() const;
  const GgufValue::Storage* storage_;
};

// Metadata key/values in file order, with lookup by key. Keys are unique.
class GgufMetadata {
 public:
  struct Entry {
    std::string key;
    GgufValue value;
  };

  // Appends a key; kAlreadyExists when the key is present (the entry is unchanged).
  [[nodiscard]] Status add(std::string key, GgufValue value);
  // Replaces the value of an existing key in place, or appends a new key.
  void set(std::string key, GgufValue value);

  [[nodiscard]] bool contains(std::string_view key) const { return find(key) != nullptr; }
  // The value of `key`, or null when absent.
  [[nodiscard]] const GgufValue* find(std::string_view key) const;
  // The value of `key`; kNotFound naming the key when absent.
  [[nodiscard]] Result<const GgufValue*> get(std::string_view key) const;

  // Typed getters: kNotFound when the key is absent, kInvalidArgument naming the key,
  // the stored type and the requested one when the type differs. No conversions,
  // except get_integer and get_float which accept any integer / float width.
  [[nodiscard]] Result<std::uint8_t> get_u8(std::string_view key) const;
  [[nodiscard]] Result<std::int8_t> get_i8(std::string_view key) const;
  [[nodiscard]] Result<std::uint16_t> get_u16(std::string_view key) const;
  [[nodiscard]] Result<std::int16_t> get_i16(std::string_view key) const;
  [[nodiscard]] Result<std::uint32_t> get_u32(std::string_view key) const;
  [[nodiscard]] Result<std::int32_t> get_i32(std::string_view key) const;
  [[nodiscard]] Result<float> get_f32(std::string_view key) const;
  [[nodiscard]] Result<bool> get_bool(std::string_view key) const;
  [[nodiscard]] Result<std::string_view> get_string(std::string_view key) const;
  [[nodiscard]] Result<std::uint64_t> get_u64(std::string_view key) const;
  [[nodiscard]] Result<std::int64_t> get_i64(std::string_view key) const;
  [[nodiscard]] Result<double> get_f64(std::string_view key) const;
  [[nodiscard]] Result<std::int64_t> get_integer(std::string_view key) const;
  [[nodiscard]] Result<double> get_float(std::string_view key) const;
  // The array value of `key`; errors as above when the key is absent or not an array.
  [[nodiscard]] Result<GgufArray> get_array(std::string_view key) const;
  // As get_array(key), and kInvalidArgument naming the key and both element types
  // when the array's element type is not `element_type`.
  [[nodiscard]] Result<GgufArray> get_array(std::string_view key, GgufType element_type) const;
  // The strings of a string array (a tokenizer's vocabulary), as zero-copy views
  // valid while this metadata lives unchanged; errors as get_array(key, kString).
  [[nodiscard]] Result<GgufStrings> get_strings(std::string_view key) const;

  [[nodiscard]] std::span<const Entry> entries() const { return entries_; }
  [[nodiscard]] std::size_t size() const { return entries_.size(); }
  [[nodiscard]] bool empty() const { return entries_.empty(); }
  // Makes room for `entries` entries in all, so adding that many allocates no more
  // bookkeeping (and none beyond them: the entry array is sized exactly).
  void reserve(std::size_t entries);

  // An estimate of the memory these entries hold, from capacities: this object, the
  // entry array, every key and value (GgufValue::heap_bytes) and the lookup index,
  // each heap block counted as detail::heap_block_bytes does. A file's parsed
  // metadata stays within kGgufMetadataMemoryFactor times its header and metadata
  // bytes plus kGgufMetadataMemorySlack (Note [Metadata memory] in gguf_reader.cpp).
  [[nodiscard]] std::size_t memory_bytes() const;

  friend bool operator==(const GgufMetadata& a, const GgufMetadata& b) {
    return a.entries_.size() == b.entries_.size() && [&] {
      for (std::size_t i = 0; i < a.entries_.size(); ++i) {
        if (a.entries_[i].key != b.entries_[i].key || !(a.entries_[i].value == b.entries_[i].value))
          return false;
      }
      return true;
    }();
  }

 private:
  std::vector<Entry> entries_;
  std::unordered_map<std::string, std::size_t, detail::StringHash, std::equal_to<>> index_;
};

// GGUF's dimension order (innermost first, ne[0] = row length) for a Switchyard
// shape (outermost first): the reverse. See "Dimension order" above.
[[nodiscard]] std::vector<std::int64_t> gguf_dims(const Shape& shape);

// One tensor of a file, as its info record describes it (validated).
struct GgufTensorInfo {
  std::string name;
  // Outermost first (the reverse of the file's ne order); rank 1 to kGgufMaxDims,
  // every dimension >= 1.
  Shape shape;
  DType dtype = DType::kF32;
  // Bytes from the start of the data section; a multiple of the file's alignment.
  std::uint64_t offset = 0;
  // Bytes of data: row_bytes(dtype, innermost dim) * number of rows.
  std::int64_t size_bytes = 0;
};

// A parsed GGUF file. Parsing reads the header, metadata and tensor infos and checks
// every tensor's data range; tensor bytes stay in the mapping (or the caller's
// buffer) and are only referenced. Cheap to copy: copies share the mapping, which
// lives until the last copy (and so every view taken from it) is gone.
class GgufFile {
 public:
  // Maps `path` read-only and parses it. kNotFound when the file does not exist;
  // kInvalidArgument when it is not a regular file (a directory, FIFO, device or
  // socket is refused without a blocking read) or may not be read; kUnavailable
  // when the system fails to open or map it; parse errors as for parse(). The
  // file must not be truncated while mapped: the kernel would fault the reader
  // (SIGBUS) and no portable way exists to detect it beforehand; a writer that
  // replaces a model file should do so by rename, as write() does.
  [[nodiscard]] static Result<GgufFile> open(const std::filesystem::path& path);
  // Parses a file held in memory. The bytes are borrowed: they must outlive the
  // result and every view taken from it. Tensor views are aligned only as far as
  // `bytes.data()` is; open() gives page-aligned mappings.
  [[nodiscard]] static Result<GgufFile> parse(std::span<const std::byte> bytes);

  [[nodiscard]] std::uint32_t version() const { return version_; }
  [[nodiscard]] std::uint32_t alignment() const { return alignment_; }
  // File offset of the data section (the end of the tensor infos, aligned up).
  [[nodiscard]] std::uint64_t data_offset() const { return data_offset_; }
  // Bytes of the header, metadata and tensor infos (before the alignment padding).
  [[nodiscard]] std::uint64_t header_bytes() const { return header_bytes_; }
  [[nodiscard]] std::uint64_t file_size() const { return bytes_.size(); }
  [[nodiscard]] const GgufMetadata& metadata() const { return metadata_; }
  // Tensors in file order.
  [[nodiscard]] std::span<const GgufTensorInfo> tensors() const { return tensors_; }

  // The tensor named `name`, or null.
  [[nodiscard]] const GgufTensorInfo* find_tensor(std::string_view name) const;
  // A contiguous CPU view of the named tensor's bytes in the file; kNotFound naming
  // the tensor when absent. The memory is read-only: a kernel must not write to it.
  [[nodiscard]] Result<TensorView> tensor(std::string_view name) const;
  // The view of a tensor of this file (one from tensors()).
  [[nodiscard]] TensorView view(const GgufTensorInfo& info) const;
  // The raw bytes of a tensor of this file.
  [[nodiscard]] std::span<const std::byte> tensor_bytes(const GgufTensorInfo& info) const;

 private:
  struct Mapping;
  GgufFile() = default;
  static Result<GgufFile> parse_into(GgufFile file);

  std::shared_ptr<const Mapping> mapping_;  // null for parse()
  std::span<const std::byte> bytes_;
  std::uint32_t version_ = 0;
  std::uint32_t alignment_ = kGgufDefaultAlignment;
  std::uint64_t header_bytes_ = 0;
  std::uint64_t data_offset_ = 0;
  GgufMetadata metadata_;
  std::vector<GgufTensorInfo> tensors_;
  std::unordered_map<std::string, std::size_t, detail::StringHash, std::equal_to<>> tensor_index_;
};

// Builds a GGUF v3 file from metadata and tensors. Tensors are written in the order
// added, each at the next offset that is a multiple of the alignment, with zero
// padding between them and after the last, so ggml-based readers (which insist on
// that packing) read the result. The alignment is `general.alignment` from the
// metadata when set there (a u32 power of two, at least 8), else 32.
class GgufWriter {
 public:
  [[nodiscard]] GgufMetadata& metadata() { return metadata_; }
  [[nodiscard]] const GgufMetadata& metadata() const { return metadata_; }

  // Adds a tensor that owns its bytes. Refuses (kInvalidArgument) a name that is
  // empty or longer than kGgufMaxWrittenTensorNameBytes, a dtype GGUF has no id for,
  // a rank outside 1..kGgufMaxDims, a dimension < 1, a row that is not a whole
  // number of blocks, and `data` whose size is not the tensor's size; kAlreadyExists
  // for a duplicate name.
  [[nodiscard]] Status add_tensor(std::string name, DType dtype, Shape shape,
                                  std::vector<std::byte> data);
  // As add_tensor, but borrows `data`, which must stay valid until the last write()
  // or serialize() (for copying tensors out of a mapped file without a copy).
  [[nodiscard]] Status add_tensor_ref(std::string name, DType dtype, Shape shape,
                                      std::span<const std::byte> data);

  // Produces the bytes of rows [first_row, first_row + rows) of a tensor into `out`,
  // which holds exactly that many rows (rows are the tensor's innermost dimension;
  // a tensor has shape.outer() of them). A failure stops the write with its status.
  using TensorSource =
      std::function<Status(std::int64_t first_row, std::int64_t rows, std::span<std::byte> out)>;
  // The most bytes one call of a TensorSource is asked for by default (at least one
  // row is always asked for, however long).
  static constexpr std::size_t kSourceChunkBytes = std::size_t{64} << 20;
  // Changes that limit (at least 1): smaller chunks bound memory more tightly.
  void set_source_chunk_bytes(std::size_t bytes);

  // As add_tensor, but the bytes are produced while the file is written: `source` is
  // called in order over the tensor's rows, in chunks of at most the source chunk
  // size (kSourceChunkBytes unless set_source_chunk_bytes changed it),
  // into one reused buffer. A file much larger than memory can be written this way
  // (a quantizer converting one tensor at a time), holding one chunk at a time.
  // `source` must stay callable until the last write() or serialize(), and is
  // called once per write() or serialize().
  [[nodiscard]] Status add_tensor_source(std::string name, DType dtype, Shape shape,
                                         TensorSource source);

  [[nodiscard]] std::size_t tensor_count() const { return tensors_.size(); }

  // The whole file in memory.
  [[nodiscard]] Result<std::vector<std::byte>> serialize() const;
  // Writes the file to `path` atomically: the bytes go to a temporary file in the
  // same directory, which is flushed to disk and then renamed over `path`, so a
  // reader sees the old file or the complete new one, never a partial one. A path
  // that exists and is not a regular file (a directory, link, FIFO, device) is
  // refused with kInvalidArgument, never replaced. On an I/O failure (a full disk,
  // a file-size limit) returns kUnavailable (kNotFound for a missing directory,
  // kInvalidArgument for a directory that may not be written) naming the path and
  // the system's reason, removes the temporary file and leaves an existing file at
  // `path` untouched; SIGINT, SIGTERM and SIGHUP during the write remove it too
  // (Note [Temporary files and signals] in gguf_writer.cpp).
  [[nodiscard]] Status write(const std::filesystem::path& path) const;

 private:
  struct PendingTensor {
    std::string name;
    DType dtype;
    Shape shape;
    std::vector<std::byte> owned;
    std::span<const std::byte> data;
    // Set for add_tensor_source: `data` is empty and `size` is the byte count.
    TensorSource source;
    std::uint64_t size = 0;
    [[nodiscard]] std::uint64_t byte_size() const { return source ? size : data.size(); }
  };
  Status emit_source(const PendingTensor& t, std::vector<std::byte>& chunk,
                     const std::function<Status(std::span<const std::byte>)>& sink) const;
  // The tensor's byte count, after checking name, dtype, shape and (when given) the
  // size of the data offered for it.
  Result<std::uint64_t> check_tensor(const std::string& name, DType dtype, const Shape& shape,
                                     std::optional<std::size_t> data_size) const;
  Status emit(const std::function<Status(std::span<const std::byte>)>& sink) const;

  GgufMetadata metadata_;
  std::size_t source_chunk_bytes_ = kSourceChunkBytes;
  std::vector<std::unique_ptr<PendingTensor>> tensors_;
  std::unordered_map<std::string, std::size_t, detail::StringHash, std::equal_to<>> tensor_names_;
};

}  // namespace switchyard
