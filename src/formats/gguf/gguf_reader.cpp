// GGUF reader: maps the file and parses the header, metadata and tensor infos,
// checking every number the file claims against the bytes that are really there.
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <limits>
#include <numeric>

#include <fmt/format.h>

#include "formats/gguf/gguf_format.h"
#include "switchyard/gguf.h"

namespace switchyard {

struct GgufFile::Mapping {
  void* address = nullptr;
  std::size_t size = 0;
  Mapping() = default;
  Mapping(const Mapping&) = delete;
  Mapping& operator=(const Mapping&) = delete;
  ~Mapping() {
    if (address != nullptr) munmap(address, size);
  }
};

namespace {

// Counts are checked against the bytes left before they are trusted, but in a
// multi-gigabyte model that still allows billions; reservations are capped so a
// forged count cannot demand memory the parsed entries would never use. Real
// entries beyond the cap grow the containers as they are parsed.
constexpr std::uint64_t kMaxReserve = 1u << 16;

constexpr std::uint64_t kMaxInt64 =
    static_cast<std::uint64_t>(std::numeric_limits<std::int64_t>::max());

// Reads little-endian fields from the file, refusing to step past its end.
class Cursor {
 public:
  explicit Cursor(std::span<const std::byte> bytes) : bytes_(bytes) {}

  [[nodiscard]] std::uint64_t position() const { return position_; }
  [[nodiscard]] std::uint64_t remaining() const { return bytes_.size() - position_; }

  template <typename T>
  Result<T> read(std::string_view what) {
    SWITCHYARD_RETURN_IF_ERROR(need(sizeof(T), what));
    T value;
    std::memcpy(&value, bytes_.data() + position_, sizeof(T));
    position_ += sizeof(T);
    return value;
  }

  // A u64 length and that many bytes, as a view of the file.
  Result<std::string_view> read_string_view(std::string_view what) {
    const std::uint64_t at = position_;
    SWITCHYARD_ASSIGN_OR_RETURN(std::uint64_t length, read<std::uint64_t>(what));
    if (length > remaining()) {
      return data_loss_error(
          fmt::format("{} at offset {} claims {} bytes, but only {} bytes of the file are left",
                      what, at, length, remaining()));
    }
    std::string_view text(reinterpret_cast<const char*>(bytes_.data() + position_), length);
    position_ += length;
    return text;
  }
  // `count` bytes as a view of the file.
  Result<std::span<const std::byte>> read_bytes(std::uint64_t count, std::string_view what) {
    SWITCHYARD_RETURN_IF_ERROR(need(count, what));
    std::span<const std::byte> bytes = bytes_.subspan(position_, count);
    position_ += count;
    return bytes;
  }
  // The u64 at file offset `at`, already checked to lie in the file.
  [[nodiscard]] std::uint64_t u64_at(std::uint64_t at) const {
    std::uint64_t value;
    std::memcpy(&value, bytes_.data() + at, sizeof(value));
    return value;
  }
  // `length` bytes at file offset `at`, already checked to lie in the file.
  [[nodiscard]] std::string_view text_at(std::uint64_t at, std::uint64_t length) const {
    return {reinterpret_cast<const char*>(bytes_.data() + at), length};
  }
  Result<std::string> read_string(std::string_view what) {
    SWITCHYARD_ASSIGN_OR_RETURN(std::string_view text, read_string_view(what));
    return std::string(text);
  }

  Status need(std::uint64_t count, std::string_view what) const {
    if (count > remaining()) {
      return data_loss_error(
          fmt::format("truncated file: {} at offset {} needs {} bytes, only {} are left", what,
                      position_, count, remaining()));
    }
    return Status::ok();
  }

 private:
  std::span<const std::byte> bytes_;
  std::uint64_t position_ = 0;
};

Result<GgufType> read_type(Cursor& cursor, std::string_view what) {
  const std::uint64_t at = cursor.position();
  SWITCHYARD_ASSIGN_OR_RETURN(std::uint32_t id, cursor.read<std::uint32_t>(what));
  if (id >= kGgufTypeCount) {
    return invalid_argument_error(
        fmt::format("{} at offset {} is {}, which is not a GGUF value type (0..{})", what, at, id,
                    kGgufTypeCount - 1));
  }
  return static_cast<GgufType>(id);
}

// Note [Metadata memory]
// Parsed metadata must not cost much more memory than the file spends on it: a
// hostile file could otherwise make a small header demand gigabytes (each element
// of a u8 array once took a 40-byte GgufValue, so a 1 GB file could ask for 40 GB).
// Two things keep it bounded.
//
// The storage is compact (see GgufValue): a scalar array is one buffer of its
// element type, exactly as many bytes as the file holds; a string array is one
// block holding an 8-byte end offset per string and the characters, which the file
// matches with each string's 8-byte length and its characters. Those cost about
// their bytes in the file. What can cost more is bookkeeping: each metadata entry
// (its slot, its key held twice, its index node: 150 bytes and more) for as little
// as 13 bytes of file, and each inner array of an array of arrays (a 40-byte
// GgufValue and its own block) for as little as 12.
//
// So every allocation the reader makes for metadata is charged, before it is made,
// to a MetadataBudget: the memory held may not exceed kGgufMetadataMemoryFactor (2)
// times the file bytes that the metadata read so far provably reaches, plus
// kGgufMetadataMemorySlack (16 MiB). "Provably reaches" is the end of what is being
// read, once the counts have been checked against the bytes left, so a forged
// count is refused by the byte check (kDataLoss) and an honest but costly one by the
// budget (kInvalidArgument naming the key), never by std::bad_alloc. The charges
// use the same accounting as GgufMetadata::memory_bytes(), rounded up, so a parsed
// file's memory_bytes() is within the limit for its header_bytes(); the tests in
// tests/formats/gguf_metadata_memory_test.cpp measure it and check it against
// glibc's own count. Every real file is far inside the slack for its bookkeeping:
// a llama vocabulary of 128k tokens costs about its bytes, and 16 MiB covers some
// hundred thousand entries. Reservations are exact (a container sized by doubling
// could hold twice what was charged).
class MetadataBudget {
 public:
  // The most memory metadata reaching file offset `file_end` may hold.
  static std::uint64_t limit(std::uint64_t file_end) {
    std::uint64_t scaled = 0;
    if (__builtin_mul_overflow(file_end, kGgufMetadataMemoryFactor, &scaled) ||
        __builtin_add_overflow(scaled, kGgufMetadataMemorySlack, &scaled)) {
      return std::numeric_limits<std::uint64_t>::max();
    }
    return scaled;
  }
  // Charges `bytes` more for what `describe()` names, whose file bytes reach
  // `file_end`; refuses when the total would pass the limit there. `describe` is
  // called only for the message.
  template <typename Describe>
  Status charge(std::uint64_t bytes, std::uint64_t file_end, Describe&& describe) {
    std::uint64_t total = 0;
    if (__builtin_add_overflow(used_, bytes, &total) || total > limit(file_end)) {
      return invalid_argument_error(fmt::format(
          "{} would take {} bytes of memory, on top of {} already held; the metadata's limit "
          "is {} bytes ({} x the {} bytes of header and metadata up to its end at offset {}, "
          "plus {} MiB)",
          describe(), bytes, used_, limit(file_end), kGgufMetadataMemoryFactor, file_end, file_end,
          kGgufMetadataMemorySlack >> 20));
    }
    used_ = total;
    return Status::ok();
  }

 private:
  std::uint64_t used_ = 0;
};

// The memory a heap block for `bytes` bytes is charged (detail::heap_block_bytes,
// which GgufMetadata::memory_bytes counts too); nothing for an empty one.
constexpr std::uint64_t block_charge(std::uint64_t bytes) {
  return detail::heap_block_bytes(bytes);
}
// The most a std::string of `length` bytes holds on the heap (short ones hold
// nothing, but the charge does not depend on the library's inline size).
constexpr std::uint64_t string_charge(std::uint64_t length) {
  return length == 0 ? 0 : block_charge(length + 1);
}
// Charged per metadata entry when the entry count is read: its slot in the entry
// array and, allowing twice the buckets the index reserves, in the index's bucket
// array. Its index node and key are charged as the key is read.
constexpr std::uint64_t kEntrySlotCharge = sizeof(GgufMetadata::Entry) + 2 * sizeof(void*);

// A scalar array: `count` elements of T, copied out of the file in one go.
template <typename T>
Result<std::vector<T>> read_scalars(Cursor& cursor, std::uint64_t count, MetadataBudget& budget,
                                    std::string_view type_name) {
  const std::uint64_t bytes = count * sizeof(T);  // count <= remaining / sizeof(T)
  SWITCHYARD_RETURN_IF_ERROR(budget.charge(block_charge(bytes), cursor.position() + bytes, [&] {
    return fmt::format("an array of {} {} elements", count, type_name);
  }));
  std::vector<T> values(static_cast<std::size_t>(count));
  SWITCHYARD_ASSIGN_OR_RETURN(std::span<const std::byte> raw, cursor.read_bytes(bytes, "array"));
  if (bytes != 0) std::memcpy(values.data(), raw.data(), bytes);
  return values;
}

// A string array, in two passes over the file: the lengths first (each checked
// against the bytes left, and summed), then, into one block whose size is now known
// and charged before it is allocated, the end offsets and the characters.
Result<GgufValue> read_strings(Cursor& cursor, std::uint64_t count, MetadataBudget& budget) {
  const std::uint64_t first = cursor.position();
  std::uint64_t total = 0;
  for (std::uint64_t i = 0; i < count; ++i) {
    Result<std::string_view> text = cursor.read_string_view("string value");
    if (!text.is_ok()) return text.status().with_context(fmt::format("array element {}", i));
    total += text->size();  // cannot overflow: every byte counted is in the file
  }
  const std::uint64_t words_size = detail::GgufValueAccess::string_words_size(count, total);
  SWITCHYARD_RETURN_IF_ERROR(
      budget.charge(block_charge(words_size * sizeof(std::uint64_t)), cursor.position(), [&] {
        return fmt::format("an array of {} strings ({} bytes of characters)", count, total);
      }));
  std::vector<std::uint64_t> words = detail::GgufValueAccess::string_words(count, total);
  if (count == 0) return detail::GgufValueAccess::string_array(std::move(words));
  char* chars = detail::GgufValueAccess::string_chars(words);
  std::uint64_t at = first, end = 0;
  for (std::uint64_t i = 0; i < count; ++i) {
    const std::uint64_t length = cursor.u64_at(at);  // checked by the first pass
    std::memcpy(chars + end, cursor.text_at(at + 8, length).data(), length);
    at += 8 + length;
    end += length;
    words[1 + i] = end;
  }
  return detail::GgufValueAccess::string_array(std::move(words));
}

Result<GgufValue> read_value(Cursor& cursor, GgufType type, int depth, MetadataBudget& budget) {
  switch (type) {
    case GgufType::kU8: {
      SWITCHYARD_ASSIGN_OR_RETURN(auto v, cursor.read<std::uint8_t>("u8 value"));
      return GgufValue::u8(v);
    }
    case GgufType::kI8: {
      SWITCHYARD_ASSIGN_OR_RETURN(auto v, cursor.read<std::int8_t>("i8 value"));
      return GgufValue::i8(v);
    }
    case GgufType::kU16: {
      SWITCHYARD_ASSIGN_OR_RETURN(auto v, cursor.read<std::uint16_t>("u16 value"));
      return GgufValue::u16(v);
    }
    case GgufType::kI16: {
      SWITCHYARD_ASSIGN_OR_RETURN(auto v, cursor.read<std::int16_t>("i16 value"));
      return GgufValue::i16(v);
    }
    case GgufType::kU32: {
      SWITCHYARD_ASSIGN_OR_RETURN(auto v, cursor.read<std::uint32_t>("u32 value"));
      return GgufValue::u32(v);
    }
    case GgufType::kI32: {
      SWITCHYARD_ASSIGN_OR_RETURN(auto v, cursor.read<std::int32_t>("i32 value"));
      return GgufValue::i32(v);
    }
    case GgufType::kF32: {
      SWITCHYARD_ASSIGN_OR_RETURN(auto v, cursor.read<float>("f32 value"));
      return GgufValue::f32(v);
    }
    case GgufType::kBool: {
      const std::uint64_t at = cursor.position();
      SWITCHYARD_ASSIGN_OR_RETURN(auto v, cursor.read<std::uint8_t>("bool value"));
      if (v > 1) {
        return invalid_argument_error(
            fmt::format("bool value at offset {} is {}; GGUF allows only 0 and 1", at, v));
      }
      return GgufValue::boolean(v == 1);
    }
    case GgufType::kString: {
      SWITCHYARD_ASSIGN_OR_RETURN(std::string_view v, cursor.read_string_view("string value"));
      SWITCHYARD_RETURN_IF_ERROR(budget.charge(string_charge(v.size()), cursor.position(), [&] {
        return fmt::format("a {}-byte string", v.size());
      }));
      return GgufValue::string(std::string(v));
    }
    case GgufType::kU64: {
      SWITCHYARD_ASSIGN_OR_RETURN(auto v, cursor.read<std::uint64_t>("u64 value"));
      return GgufValue::u64(v);
    }
    case GgufType::kI64: {
      SWITCHYARD_ASSIGN_OR_RETURN(auto v, cursor.read<std::int64_t>("i64 value"));
      return GgufValue::i64(v);
    }
    case GgufType::kF64: {
      SWITCHYARD_ASSIGN_OR_RETURN(auto v, cursor.read<double>("f64 value"));
      return GgufValue::f64(v);
    }
    case GgufType::kArray: {
      if (depth >= kGgufMaxArrayDepth) {
        return invalid_argument_error(fmt::format("arrays nested more than {} deep at offset {}",
                                                  kGgufMaxArrayDepth, cursor.position()));
      }
      SWITCHYARD_ASSIGN_OR_RETURN(GgufType element_type, read_type(cursor, "array element type"));
      const std::uint64_t at = cursor.position();
      SWITCHYARD_ASSIGN_OR_RETURN(std::uint64_t count, cursor.read<std::uint64_t>("array length"));
      // Checked before anything is charged or reserved, so a forged count can size
      // neither; the budget then bounds what an honest count costs.
      const std::uint64_t min_bytes = detail::gguf_min_encoded_bytes(element_type);
      if (count > cursor.remaining() / min_bytes) {
        return data_loss_error(fmt::format(
            "array length at offset {} claims {} {} elements, more than the {} bytes left in the "
            "file can hold",
            at, count, name(element_type), cursor.remaining()));
      }
      switch (element_type) {
        case GgufType::kU8: {
          SWITCHYARD_ASSIGN_OR_RETURN(auto v,
                                      read_scalars<std::uint8_t>(cursor, count, budget, "u8"));
          return GgufValue::u8_array(std::move(v));
        }
        case GgufType::kI8: {
          SWITCHYARD_ASSIGN_OR_RETURN(auto v,
                                      read_scalars<std::int8_t>(cursor, count, budget, "i8"));
          return GgufValue::i8_array(std::move(v));
        }
        case GgufType::kU16: {
          SWITCHYARD_ASSIGN_OR_RETURN(auto v,
                                      read_scalars<std::uint16_t>(cursor, count, budget, "u16"));
          return GgufValue::u16_array(std::move(v));
        }
        case GgufType::kI16: {
          SWITCHYARD_ASSIGN_OR_RETURN(auto v,
                                      read_scalars<std::int16_t>(cursor, count, budget, "i16"));
          return GgufValue::i16_array(std::move(v));
        }
        case GgufType::kU32: {
          SWITCHYARD_ASSIGN_OR_RETURN(auto v,
                                      read_scalars<std::uint32_t>(cursor, count, budget, "u32"));
          return GgufValue::u32_array(std::move(v));
        }
        case GgufType::kI32: {
          SWITCHYARD_ASSIGN_OR_RETURN(auto v,
                                      read_scalars<std::int32_t>(cursor, count, budget, "i32"));
          return GgufValue::i32_array(std::move(v));
        }
        case GgufType::kF32: {
          SWITCHYARD_ASSIGN_OR_RETURN(auto v, read_scalars<float>(cursor, count, budget, "f32"));
          return GgufValue::f32_array(std::move(v));
        }
        case GgufType::kBool: {
          const std::uint64_t first = cursor.position();
          SWITCHYARD_ASSIGN_OR_RETURN(auto v,
                                      read_scalars<std::uint8_t>(cursor, count, budget, "bool"));
          const auto bad = std::find_if(v.begin(), v.end(), [](std::uint8_t b) { return b > 1; });
          if (bad != v.end()) {
            const auto i = static_cast<std::uint64_t>(bad - v.begin());
            return invalid_argument_error(
                fmt::format("array element {}: bool value at offset {} is {}; GGUF allows only 0 "
                            "and 1",
                            i, first + i, *bad));
          }
          return GgufValue::bool_array_from_bytes(std::move(v));
        }
        case GgufType::kString: return read_strings(cursor, count, budget);
        case GgufType::kArray: {
          SWITCHYARD_RETURN_IF_ERROR(budget.charge(
              block_charge(count * sizeof(GgufValue)), cursor.position() + count * min_bytes,
              [&] { return fmt::format("an array of {} arrays", count); }));
          std::vector<GgufValue> inner;
          inner.reserve(static_cast<std::size_t>(count));
          for (std::uint64_t i = 0; i < count; ++i) {
            Result<GgufValue> element = read_value(cursor, GgufType::kArray, depth + 1, budget);
            if (!element.is_ok()) {
              return element.status().with_context(fmt::format("array element {}", i));
            }
            inner.push_back(std::move(element).value());
          }
          return GgufValue::array(GgufType::kArray, std::move(inner));
        }
        case GgufType::kU64: {
          SWITCHYARD_ASSIGN_OR_RETURN(auto v,
                                      read_scalars<std::uint64_t>(cursor, count, budget, "u64"));
          return GgufValue::u64_array(std::move(v));
        }
        case GgufType::kI64: {
          SWITCHYARD_ASSIGN_OR_RETURN(auto v,
                                      read_scalars<std::int64_t>(cursor, count, budget, "i64"));
          return GgufValue::i64_array(std::move(v));
        }
        case GgufType::kF64: {
          SWITCHYARD_ASSIGN_OR_RETURN(auto v, read_scalars<double>(cursor, count, budget, "f64"));
          return GgufValue::f64_array(std::move(v));
        }
      }
      return internal_error("unreachable GGUF element type");
    }
  }
  return internal_error("unreachable GGUF value type");
}

bool add_overflows(std::uint64_t a, std::uint64_t b, std::uint64_t* sum) {
  return __builtin_add_overflow(a, b, sum);
}

}  // namespace

Result<GgufFile> GgufFile::open(const std::filesystem::path& path) {
  const std::string shown = printable(path.string(), 200);
  // O_NONBLOCK: opening a FIFO for reading would otherwise wait for a writer
  // before fstat could refuse it. It changes nothing for the mapping below.
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);
  if (fd < 0) {
    const int error = errno;
    std::string message = fmt::format("cannot open '{}': {}", shown, std::strerror(error));
    switch (error) {
      case ENOENT: return not_found_error(std::move(message));
      case EACCES:
      case EISDIR:
      case ELOOP:
      case ENOTDIR:
      case ENAMETOOLONG:
      case ENXIO: return invalid_argument_error(std::move(message));
      default: return unavailable_error(std::move(message));
    }
  }
  struct stat st {};
  if (fstat(fd, &st) != 0) {
    const int error = errno;
    ::close(fd);
    return unavailable_error(fmt::format("cannot stat '{}': {}", shown, std::strerror(error)));
  }
  if (!S_ISREG(st.st_mode)) {
    ::close(fd);
    const char* kind = S_ISDIR(st.st_mode)                          ? "a directory"
                       : S_ISFIFO(st.st_mode)                       ? "a FIFO"
                       : S_ISSOCK(st.st_mode)                       ? "a socket"
                       : S_ISCHR(st.st_mode) || S_ISBLK(st.st_mode) ? "a device"
                                                                    : "not a regular file";
    return invalid_argument_error(
        fmt::format("'{}' is {}; only a regular file can be read as GGUF", shown, kind));
  }
  auto mapping = std::make_shared<Mapping>();
  mapping->size = static_cast<std::size_t>(st.st_size);
  if (mapping->size > 0) {
    void* address = mmap(nullptr, mapping->size, PROT_READ, MAP_PRIVATE, fd, 0);
    if (address == MAP_FAILED) {
      const int error = errno;
      ::close(fd);
      return unavailable_error(fmt::format("cannot map '{}': {}", shown, std::strerror(error)));
    }
    mapping->address = address;
  }
  // The mapping keeps the file's pages reachable; the descriptor is not needed.
  ::close(fd);

  GgufFile file;
  file.bytes_ =
      std::span<const std::byte>(static_cast<const std::byte*>(mapping->address), mapping->size);
  file.mapping_ = std::move(mapping);
  Result<GgufFile> parsed = parse_into(std::move(file));
  if (!parsed.is_ok()) return parsed.status().with_context(shown);
  return parsed;
}

Result<GgufFile> GgufFile::parse(std::span<const std::byte> bytes) {
  GgufFile file;
  file.bytes_ = bytes;
  return parse_into(std::move(file));
}

Result<GgufFile> GgufFile::parse_into(GgufFile file) {
  Cursor cursor(file.bytes_);

  // Header.
  if (file.bytes_.size() < 4) {
    return data_loss_error(fmt::format(
        "truncated file: {} bytes is too short to hold the GGUF magic", file.bytes_.size()));
  }
  SWITCHYARD_ASSIGN_OR_RETURN(std::uint32_t magic, cursor.read<std::uint32_t>("magic"));
  if (magic != detail::kGgufMagic) {
    std::string shown;
    for (int i = 0; i < 4; ++i) {
      const auto c = static_cast<unsigned char>(file.bytes_[i]);
      shown += (c >= 0x20 && c < 0x7f) ? fmt::format("{}", static_cast<char>(c))
                                       : fmt::format("\\x{:02x}", c);
    }
    return invalid_argument_error(
        fmt::format("not a GGUF file: it starts with \"{}\", not \"GGUF\"", shown));
  }
  SWITCHYARD_ASSIGN_OR_RETURN(file.version_, cursor.read<std::uint32_t>("version"));
  if (file.version_ != 3 && file.version_ != 2) {
    if ((file.version_ & 0xffffu) == 0 && file.version_ != 0) {
      return unimplemented_error(fmt::format(
          "GGUF version field is 0x{:08x}: a big-endian file, which this build does not read",
          file.version_));
    }
    if (file.version_ == 1) {
      return unimplemented_error(
          "GGUF version 1 (32-bit counts) is not supported; this build reads versions 2 and 3");
    }
    return unimplemented_error(fmt::format(
        "unsupported GGUF version {}; this build reads versions 2 and 3", file.version_));
  }
  SWITCHYARD_ASSIGN_OR_RETURN(std::uint64_t tensor_count,
                              cursor.read<std::uint64_t>("tensor count"));
  SWITCHYARD_ASSIGN_OR_RETURN(std::uint64_t kv_count, cursor.read<std::uint64_t>("metadata count"));
  if (kv_count > cursor.remaining() / detail::kGgufMinKvBytes) {
    return data_loss_error(
        fmt::format("metadata count {} is more than the {} bytes left in the file can hold",
                    kv_count, cursor.remaining()));
  }
  if (tensor_count > cursor.remaining() / detail::kGgufMinTensorInfoBytes) {
    return data_loss_error(
        fmt::format("tensor count {} is more than the {} bytes left in the file can hold",
                    tensor_count, cursor.remaining()));
  }

  // Metadata, within its memory budget (Note [Metadata memory]): the entries'
  // slots first, for the count just checked, then each key and value as it is read.
  MetadataBudget budget;
  // kv_count is below 2^60 (checked above against the file): no overflow here.
  const std::uint64_t slots = sizeof(GgufMetadata) + kv_count * kEntrySlotCharge + 64;
  const std::uint64_t entries_end = cursor.position() + kv_count * detail::kGgufMinKvBytes;
  auto bookkeeping = [&] {
    return fmt::format("the bookkeeping of {} metadata entries", kv_count);
  };
  SWITCHYARD_RETURN_IF_ERROR(budget.charge(slots, entries_end, bookkeeping));
  file.metadata_.reserve(static_cast<std::size_t>(kv_count));
  // The estimate allowed for the index's rounding up; the real figure replaces it.
  if (const std::uint64_t reserved = file.metadata_.memory_bytes(); reserved > slots) {
    SWITCHYARD_RETURN_IF_ERROR(budget.charge(reserved - slots, entries_end, bookkeeping));
  }
  for (std::uint64_t i = 0; i < kv_count; ++i) {
    const std::uint64_t at = cursor.position();
    Result<std::string_view> key = cursor.read_string_view("metadata key");
    if (!key.is_ok()) return key.status().with_context(fmt::format("metadata entry {}", i));
    auto in_key = [&](const Status& s) {
      return s.with_context(fmt::format("metadata key '{}'", printable(*key)));
    };
    // The key is held twice: in its entry and in the lookup index's node.
    if (Status s = budget.charge(2 * string_charge(key->size()) + detail::kGgufIndexNodeBytes,
                                 cursor.position(), [] { return "its key and index entry"; });
        !s.is_ok()) {
      return in_key(s);
    }
    Result<GgufType> type = read_type(cursor, "value type");
    if (!type.is_ok()) return in_key(type.status());
    Result<GgufValue> value = read_value(cursor, *type, 0, budget);
    if (!value.is_ok()) return in_key(value.status());
    if (file.metadata_.contains(*key)) {
      return invalid_argument_error(fmt::format(
          "duplicate metadata key '{}' (second one at offset {})", printable(*key), at));
    }
    SWITCHYARD_RETURN_IF_ERROR(file.metadata_.add(std::string(*key), std::move(value).value()));
  }
  if (const GgufValue* alignment = file.metadata_.find("general.alignment")) {
    Result<std::uint32_t> a = alignment->as_u32();
    if (!a.is_ok()) return a.status().with_context("metadata key 'general.alignment'");
    if (*a == 0 || !std::has_single_bit(*a)) {
      return invalid_argument_error(
          fmt::format("general.alignment is {}; it must be a power of two", *a));
    }
    file.alignment_ = *a;
  }

  // Tensor infos.
  file.tensors_.reserve(std::min(tensor_count, kMaxReserve));
  file.tensor_index_.reserve(std::min(tensor_count, kMaxReserve));
  for (std::uint64_t i = 0; i < tensor_count; ++i) {
    const std::uint64_t at = cursor.position();
    Result<std::string> name_or = cursor.read_string("tensor name");
    if (!name_or.is_ok()) return name_or.status().with_context(fmt::format("tensor info {}", i));
    std::string tensor_name = std::move(name_or).value();
    // The name as messages show it: escaped and cut, so an error stays one line.
    const std::string shown = printable(tensor_name);
    auto in_tensor = [&](const Status& s) {
      return s.with_context(fmt::format("tensor '{}'", shown));
    };
    if (tensor_name.size() > kGgufMaxTensorNameBytes) {
      return invalid_argument_error(
          fmt::format("tensor name at offset {} is {} bytes; GGUF allows "
                      "at most {}",
                      at, tensor_name.size(), kGgufMaxTensorNameBytes));
    }
    if (file.tensor_index_.contains(tensor_name)) {
      return invalid_argument_error(
          fmt::format("duplicate tensor name '{}' (second one at offset {})", shown, at));
    }
    Result<std::uint32_t> n_dims = cursor.read<std::uint32_t>("dimension count");
    if (!n_dims.is_ok()) return in_tensor(n_dims.status());
    if (*n_dims == 0 || *n_dims > static_cast<std::uint32_t>(kGgufMaxDims)) {
      return invalid_argument_error(
          fmt::format("tensor '{}' has {} dimensions; GGUF tensors have 1 to {}", shown, *n_dims,
                      kGgufMaxDims));
    }
    std::array<std::int64_t, kGgufMaxDims> ne{};
    std::int64_t numel = 1;
    for (std::uint32_t d = 0; d < *n_dims; ++d) {
      Result<std::uint64_t> dim = cursor.read<std::uint64_t>("dimension");
      if (!dim.is_ok()) return in_tensor(dim.status());
      if (*dim == 0 || *dim > kMaxInt64) {
        return invalid_argument_error(
            fmt::format("tensor '{}' has dimension ne[{}] = {} ({}); dimensions must be 1 to "
                        "INT64_MAX",
                        shown, d, *dim, static_cast<std::int64_t>(*dim)));
      }
      ne[d] = static_cast<std::int64_t>(*dim);
      if (__builtin_mul_overflow(numel, ne[d], &numel)) {
        return out_of_range_error(fmt::format(
            "tensor '{}' has more elements than fit in int64 (dimension product overflows)",
            shown));
      }
    }
    const std::uint64_t type_at = cursor.position();
    Result<std::uint32_t> type_id = cursor.read<std::uint32_t>("ggml type id");
    if (!type_id.is_ok()) return in_tensor(type_id.status());
    std::optional<DType> dtype =
        *type_id > static_cast<std::uint32_t>(std::numeric_limits<int>::max())
            ? std::nullopt
            : dtype_from_gguf(static_cast<int>(*type_id));
    if (!dtype) {
      return invalid_argument_error(
          fmt::format("tensor '{}' has ggml type id {} (offset {}), which Switchyard does not know",
                      shown, *type_id, type_at));
    }
    Result<std::uint64_t> offset = cursor.read<std::uint64_t>("data offset");
    if (!offset.is_ok()) return in_tensor(offset.status());

    // Size: whole blocks per row, rows multiply without overflow.
    Result<std::int64_t> row = row_bytes(*dtype, ne[0]);
    if (!row.is_ok()) return in_tensor(row.status());
    const std::int64_t rows = numel / ne[0];
    std::int64_t size_bytes = 0;
    if (__builtin_mul_overflow(*row, rows, &size_bytes)) {
      return out_of_range_error(fmt::format("tensor '{}' has more bytes than fit in int64", shown));
    }

    GgufTensorInfo info;
    info.name = std::move(tensor_name);
    std::array<std::int64_t, kGgufMaxDims> outer_first{};
    for (std::uint32_t d = 0; d < *n_dims; ++d) outer_first[d] = ne[*n_dims - 1 - d];
    info.shape = Shape(std::span<const std::int64_t>(outer_first.data(), *n_dims));
    info.dtype = *dtype;
    info.offset = *offset;
    info.size_bytes = size_bytes;
    file.tensor_index_.emplace(info.name, file.tensors_.size());
    file.tensors_.push_back(std::move(info));
  }

  // Data section.
  file.header_bytes_ = cursor.position();
  const std::uint64_t align = file.alignment_;
  std::uint64_t padded = 0;
  if (add_overflows(file.header_bytes_, align - 1, &padded)) {
    return internal_error("header size overflows");  // cannot happen for a mapped file
  }
  file.data_offset_ = padded / align * align;

  for (const GgufTensorInfo& t : file.tensors_) {
    if (t.offset % align != 0) {
      return invalid_argument_error(
          fmt::format("tensor '{}' data offset {} is not a multiple of the alignment {}",
                      printable(t.name), t.offset, align));
    }
    std::uint64_t start = 0, end = 0;
    if (add_overflows(file.data_offset_, t.offset, &start) ||
        add_overflows(start, static_cast<std::uint64_t>(t.size_bytes), &end) ||
        end > file.bytes_.size()) {
      return data_loss_error(fmt::format(
          "tensor '{}' data ({} bytes at data offset {}) runs past the end of the {}-byte file",
          printable(t.name), t.size_bytes, t.offset, file.bytes_.size()));
    }
  }
  // Overlap: sorted by offset, each tensor must end before the next begins.
  std::vector<std::size_t> order(file.tensors_.size());
  std::iota(order.begin(), order.end(), std::size_t{0});
  std::sort(order.begin(), order.end(), [&](std::size_t a, std::size_t b) {
    return file.tensors_[a].offset < file.tensors_[b].offset;
  });
  for (std::size_t i = 1; i < order.size(); ++i) {
    const GgufTensorInfo& prev = file.tensors_[order[i - 1]];
    const GgufTensorInfo& next = file.tensors_[order[i]];
    if (prev.offset + static_cast<std::uint64_t>(prev.size_bytes) > next.offset) {
      return invalid_argument_error(fmt::format(
          "tensor '{}' (data offset {}, {} bytes) overlaps tensor '{}' (data offset {})",
          printable(prev.name), prev.offset, prev.size_bytes, printable(next.name), next.offset));
    }
  }
  return file;
}

const GgufTensorInfo* GgufFile::find_tensor(std::string_view name) const {
  auto it = tensor_index_.find(name);
  return it == tensor_index_.end() ? nullptr : &tensors_[it->second];
}

Result<TensorView> GgufFile::tensor(std::string_view name) const {
  const GgufTensorInfo* info = find_tensor(name);
  if (info == nullptr) {
    return not_found_error(fmt::format("the file has no tensor named '{}'", printable(name)));
  }
  return view(*info);
}

std::span<const std::byte> GgufFile::tensor_bytes(const GgufTensorInfo& info) const {
  SWITCHYARD_CHECK_MSG(&info >= tensors_.data() && &info < tensors_.data() + tensors_.size(),
                       "tensor info of another file");
  return bytes_.subspan(data_offset_ + info.offset, static_cast<std::size_t>(info.size_bytes));
}

TensorView GgufFile::view(const GgufTensorInfo& info) const {
  // TensorView has no const flavour; the mapping is read-only (see tensor()).
  auto* data = const_cast<std::byte*>(tensor_bytes(info).data());
  return TensorView::contiguous(data, info.dtype, info.shape);
}

}  // namespace switchyard
