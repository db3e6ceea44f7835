// GGUF metadata values and the key/value collection.
#include <algorithm>
#include <bit>
#include <cstring>
#include <limits>
#include <type_traits>

#include <fmt/format.h>

#include "formats/gguf/gguf_format.h"
#include "switchyard/gguf.h"

namespace switchyard {

std::string_view name(GgufType t) {
  switch (t) {
    case GgufType::kU8: return "u8";
    case GgufType::kI8: return "i8";
    case GgufType::kU16: return "u16";
    case GgufType::kI16: return "i16";
    case GgufType::kU32: return "u32";
    case GgufType::kI32: return "i32";
    case GgufType::kF32: return "f32";
    case GgufType::kBool: return "bool";
    case GgufType::kString: return "string";
    case GgufType::kArray: return "array";
    case GgufType::kU64: return "u64";
    case GgufType::kI64: return "i64";
    case GgufType::kF64: return "f64";
  }
  return "unknown";
}

namespace {

// Scalar arrays compare their bytes, so float elements compare by bits as scalar
// floats do (a vector's operator== would use IEEE equality).
template <typename T>
bool same_bytes(const std::vector<T>& a, const std::vector<T>& b) {
  return a.size() == b.size() &&
         (a.empty() || std::memcmp(a.data(), b.data(), a.size() * sizeof(T)) == 0);
}

// The heap block a vector or string holds, from its capacity.
template <typename T>
std::size_t block_bytes(const std::vector<T>& v) {
  return detail::heap_block_bytes(v.capacity() * sizeof(T));
}
std::size_t block_bytes(const std::string& s) {
  // A short string lives inside the object (the small-string optimisation): no block.
  const char* inside = reinterpret_cast<const char*>(&s);
  if (s.data() >= inside && s.data() < inside + sizeof(std::string)) return 0;
  return detail::heap_block_bytes(s.capacity() + 1);
}

}  // namespace

bool operator==(const GgufValue& a, const GgufValue& b) {
  // Floats compare by bits, so a NaN read back equals the NaN written and -0 differs
  // from +0: round-trip tests want "the same bytes", not IEEE equality.
  if (a.type() != b.type()) return false;
  if (a.type() == GgufType::kF32) {
    return std::bit_cast<std::uint32_t>(std::get<float>(a.rep_)) ==
           std::bit_cast<std::uint32_t>(std::get<float>(b.rep_));
  }
  if (a.type() == GgufType::kF64) {
    return std::bit_cast<std::uint64_t>(std::get<double>(a.rep_)) ==
           std::bit_cast<std::uint64_t>(std::get<double>(b.rep_));
  }
  return a.rep_ == b.rep_;
}

bool GgufValue::ArrayRep::equals(const ArrayRep& other) const {
  // The element type is the index; u8 and bool share a representation, so the
  // indices must be compared before the contents.
  if (storage.index() != other.storage.index()) return false;
  return std::visit(
      [](const auto& xs, const auto& ys) {
        using X = std::decay_t<decltype(xs)>;
        using Y = std::decay_t<decltype(ys)>;
        if constexpr (!std::is_same_v<X, Y>) {
          return false;
        } else if constexpr (std::is_same_v<X, StringList> ||
                             std::is_same_v<X, std::vector<GgufValue>>) {
          return xs == ys;
        } else {
          return same_bytes(xs, ys);
        }
      },
      storage, other.storage);
}

GgufValue GgufValue::u8_array(std::vector<std::uint8_t> values) {
  return packed<0>(std::move(values));
}
GgufValue GgufValue::i8_array(std::vector<std::int8_t> values) {
  return packed<1>(std::move(values));
}
GgufValue GgufValue::u16_array(std::vector<std::uint16_t> values) {
  return packed<2>(std::move(values));
}
GgufValue GgufValue::i16_array(std::vector<std::int16_t> values) {
  return packed<3>(std::move(values));
}
GgufValue GgufValue::u32_array(std::vector<std::uint32_t> values) {
  return packed<4>(std::move(values));
}
GgufValue GgufValue::i32_array(std::vector<std::int32_t> values) {
  return packed<5>(std::move(values));
}
GgufValue GgufValue::f32_array(std::vector<float> values) { return packed<6>(std::move(values)); }
GgufValue GgufValue::bool_array(std::span<const bool> values) {
  std::vector<std::uint8_t> bytes(values.size());
  for (std::size_t i = 0; i < values.size(); ++i) bytes[i] = values[i] ? 1 : 0;
  return bool_array_from_bytes(std::move(bytes));
}
GgufValue GgufValue::bool_array_from_bytes(std::vector<std::uint8_t> bytes) {
  SWITCHYARD_CHECK_MSG(
      std::all_of(bytes.begin(), bytes.end(), [](std::uint8_t b) { return b <= 1; }),
      "bool array byte other than 0 or 1");
  return packed<7>(std::move(bytes));
}
GgufValue GgufValue::u64_array(std::vector<std::uint64_t> values) {
  return packed<10>(std::move(values));
}
GgufValue GgufValue::i64_array(std::vector<std::int64_t> values) {
  return packed<11>(std::move(values));
}
GgufValue GgufValue::f64_array(std::vector<double> values) { return packed<12>(std::move(values)); }

namespace {
template <typename S>
GgufValue pack_strings(std::span<const S> strings) {
  std::uint64_t total = 0;
  for (const S& s : strings) total += s.size();
  std::vector<std::uint64_t> words = detail::GgufValueAccess::string_words(strings.size(), total);
  if (strings.empty()) return detail::GgufValueAccess::string_array(std::move(words));
  std::uint64_t end = 0;
  char* chars = detail::GgufValueAccess::string_chars(words);
  for (std::size_t i = 0; i < strings.size(); ++i) {
    std::copy_n(strings[i].data(), strings[i].size(), chars + end);
    end += strings[i].size();
    words[1 + i] = end;
  }
  return detail::GgufValueAccess::string_array(std::move(words));
}
}  // namespace

GgufValue GgufValue::string_array(std::span<const std::string> strings) {
  return pack_strings(strings);
}
GgufValue GgufValue::string_array(std::span<const std::string_view> strings) {
  return pack_strings(strings);
}

GgufValue GgufValue::array(GgufType element_type, std::vector<GgufValue> elements) {
  for (const GgufValue& e : elements) {
    SWITCHYARD_CHECK_MSG(e.type() == element_type, "array element of another type");
  }
  // Unpacks every element as `T`, which the check above makes exact.
  auto unpack = [&elements]<typename T>(Result<T> (GgufValue::*as)() const) {
    std::vector<T> values;
    values.reserve(elements.size());
    for (const GgufValue& e : elements) values.push_back(*(e.*as)());
    return values;
  };
  switch (element_type) {
    case GgufType::kU8: return u8_array(unpack(&GgufValue::as_u8));
    case GgufType::kI8: return i8_array(unpack(&GgufValue::as_i8));
    case GgufType::kU16: return u16_array(unpack(&GgufValue::as_u16));
    case GgufType::kI16: return i16_array(unpack(&GgufValue::as_i16));
    case GgufType::kU32: return u32_array(unpack(&GgufValue::as_u32));
    case GgufType::kI32: return i32_array(unpack(&GgufValue::as_i32));
    case GgufType::kF32: return f32_array(unpack(&GgufValue::as_f32));
    case GgufType::kBool: {
      std::vector<std::uint8_t> bytes;
      bytes.reserve(elements.size());
      for (const GgufValue& e : elements) bytes.push_back(*e.as_bool() ? 1 : 0);
      return bool_array_from_bytes(std::move(bytes));
    }
    case GgufType::kString: {
      std::vector<std::string_view> views;
      views.reserve(elements.size());
      for (const GgufValue& e : elements) views.push_back(*e.as_string());
      return pack_strings(std::span<const std::string_view>(views));
    }
    case GgufType::kArray: return packed<9>(std::move(elements));
    case GgufType::kU64: return u64_array(unpack(&GgufValue::as_u64));
    case GgufType::kI64: return i64_array(unpack(&GgufValue::as_i64));
    case GgufType::kF64: return f64_array(unpack(&GgufValue::as_f64));
  }
  SWITCHYARD_CHECK_MSG(false, "array of an unknown element type");
  return GgufValue::u8(0);
}

GgufType GgufValue::element_type() const {
  SWITCHYARD_CHECK_MSG(is_array(), "element_type() of a non-array value");
  return static_cast<GgufType>(std::get<ArrayRep>(rep_).storage.index());
}

Result<GgufArray> GgufValue::as_array() const {
  if (!is_array()) {
    return invalid_argument_error(fmt::format("value is {}, not array", name(type())));
  }
  return GgufArray(std::get<ArrayRep>(rep_).storage);
}

std::size_t GgufValue::heap_bytes() const {
  if (type() == GgufType::kString) return block_bytes(std::get<std::string>(rep_));
  if (type() != GgufType::kArray) return 0;
  return std::visit(
      [](const auto& items) -> std::size_t {
        using S = std::decay_t<decltype(items)>;
        if constexpr (std::is_same_v<S, StringList>) {
          return block_bytes(items.words);
        } else if constexpr (std::is_same_v<S, std::vector<GgufValue>>) {
          std::size_t bytes = block_bytes(items);
          for (const GgufValue& inner : items) bytes += inner.heap_bytes();
          return bytes;
        } else {
          return block_bytes(items);
        }
      },
      std::get<ArrayRep>(rep_).storage);
}

// --- GgufArray

std::size_t GgufArray::size() const {
  return std::visit(
      [](const auto& items) -> std::size_t {
        if constexpr (std::is_same_v<std::decay_t<decltype(items)>, GgufValue::StringList>) {
          return items.words.empty() ? 0 : static_cast<std::size_t>(items.words[0]);
        } else {
          return items.size();
        }
      },
      *storage_);
}

template <typename T, GgufType kType>
Result<std::span<const T>> GgufArray::typed() const {
  if (element_type() != kType) {
    return invalid_argument_error(
        fmt::format("value is array of {}, not array of {}", name(element_type()), name(kType)));
  }
  return std::span<const T>(std::get<static_cast<std::size_t>(kType)>(*storage_));
}

Result<std::span<const std::uint8_t>> GgufArray::as_u8s() const {
  return typed<std::uint8_t, GgufType::kU8>();
}
Result<std::span<const std::int8_t>> GgufArray::as_i8s() const {
  return typed<std::int8_t, GgufType::kI8>();
}
Result<std::span<const std::uint16_t>> GgufArray::as_u16s() const {
  return typed<std::uint16_t, GgufType::kU16>();
}
Result<std::span<const std::int16_t>> GgufArray::as_i16s() const {
  return typed<std::int16_t, GgufType::kI16>();
}
Result<std::span<const std::uint32_t>> GgufArray::as_u32s() const {
  return typed<std::uint32_t, GgufType::kU32>();
}
Result<std::span<const std::int32_t>> GgufArray::as_i32s() const {
  return typed<std::int32_t, GgufType::kI32>();
}
Result<std::span<const float>> GgufArray::as_f32s() const { return typed<float, GgufType::kF32>(); }
Result<std::span<const std::uint8_t>> GgufArray::as_bool_bytes() const {
  return typed<std::uint8_t, GgufType::kBool>();
}
Result<std::span<const std::uint64_t>> GgufArray::as_u64s() const {
  return typed<std::uint64_t, GgufType::kU64>();
}
Result<std::span<const std::int64_t>> GgufArray::as_i64s() const {
  return typed<std::int64_t, GgufType::kI64>();
}
Result<std::span<const double>> GgufArray::as_f64s() const {
  return typed<double, GgufType::kF64>();
}
Result<std::span<const GgufValue>> GgufArray::arrays() const {
  return typed<GgufValue, GgufType::kArray>();
}

Result<GgufStrings> GgufArray::strings() const {
  if (element_type() != GgufType::kString) {
    return invalid_argument_error(
        fmt::format("value is array of {}, not array of string", name(element_type())));
  }
  const std::vector<std::uint64_t>& words = std::get<8>(*storage_).words;
  if (words.empty()) return GgufStrings();
  const auto count = static_cast<std::size_t>(words[0]);
  const std::span<const std::uint64_t> ends(words.data() + 1, count);
  const auto* chars = reinterpret_cast<const char*>(words.data() + 1 + count);
  return GgufStrings(std::string_view(chars, count == 0 ? 0 : ends.back()), ends);
}

GgufValue GgufArray::at(std::size_t i) const {
  SWITCHYARD_CHECK_MSG(i < size(), "array index out of range");
  switch (element_type()) {
    case GgufType::kU8: return GgufValue::u8(std::get<0>(*storage_)[i]);
    case GgufType::kI8: return GgufValue::i8(std::get<1>(*storage_)[i]);
    case GgufType::kU16: return GgufValue::u16(std::get<2>(*storage_)[i]);
    case GgufType::kI16: return GgufValue::i16(std::get<3>(*storage_)[i]);
    case GgufType::kU32: return GgufValue::u32(std::get<4>(*storage_)[i]);
    case GgufType::kI32: return GgufValue::i32(std::get<5>(*storage_)[i]);
    case GgufType::kF32: return GgufValue::f32(std::get<6>(*storage_)[i]);
    case GgufType::kBool: return GgufValue::boolean(std::get<7>(*storage_)[i] != 0);
    case GgufType::kString: return GgufValue::string(std::string((*strings())[i]));
    case GgufType::kArray: return std::get<9>(*storage_)[i];
    case GgufType::kU64: return GgufValue::u64(std::get<10>(*storage_)[i]);
    case GgufType::kI64: return GgufValue::i64(std::get<11>(*storage_)[i]);
    case GgufType::kF64: return GgufValue::f64(std::get<12>(*storage_)[i]);
  }
  SWITCHYARD_CHECK_MSG(false, "array of an unknown element type");
  return GgufValue::u8(0);
}

template <typename T, GgufType kType>
Result<T> GgufValue::as() const {
  if (type() != kType) {
    return invalid_argument_error(fmt::format("value is {}, not {}", name(type()), name(kType)));
  }
  return std::get<static_cast<std::size_t>(kType)>(rep_);
}

Result<std::uint8_t> GgufValue::as_u8() const { return as<std::uint8_t, GgufType::kU8>(); }
Result<std::int8_t> GgufValue::as_i8() const { return as<std::int8_t, GgufType::kI8>(); }
Result<std::uint16_t> GgufValue::as_u16() const { return as<std::uint16_t, GgufType::kU16>(); }
Result<std::int16_t> GgufValue::as_i16() const { return as<std::int16_t, GgufType::kI16>(); }
Result<std::uint32_t> GgufValue::as_u32() const { return as<std::uint32_t, GgufType::kU32>(); }
Result<std::int32_t> GgufValue::as_i32() const { return as<std::int32_t, GgufType::kI32>(); }
Result<float> GgufValue::as_f32() const { return as<float, GgufType::kF32>(); }
Result<bool> GgufValue::as_bool() const { return as<bool, GgufType::kBool>(); }
Result<std::uint64_t> GgufValue::as_u64() const { return as<std::uint64_t, GgufType::kU64>(); }
Result<std::int64_t> GgufValue::as_i64() const { return as<std::int64_t, GgufType::kI64>(); }
Result<double> GgufValue::as_f64() const { return as<double, GgufType::kF64>(); }

Result<std::string_view> GgufValue::as_string() const {
  if (type() != GgufType::kString) {
    return invalid_argument_error(fmt::format("value is {}, not string", name(type())));
  }
  return std::string_view(std::get<std::string>(rep_));
}

Result<std::int64_t> GgufValue::as_integer() const {
  switch (type()) {
    case GgufType::kU8: return std::get<std::uint8_t>(rep_);
    case GgufType::kI8: return std::get<std::int8_t>(rep_);
    case GgufType::kU16: return std::get<std::uint16_t>(rep_);
    case GgufType::kI16: return std::get<std::int16_t>(rep_);
    case GgufType::kU32: return std::get<std::uint32_t>(rep_);
    case GgufType::kI32: return std::get<std::int32_t>(rep_);
    case GgufType::kI64: return std::get<std::int64_t>(rep_);
    case GgufType::kU64: {
      const std::uint64_t v = std::get<std::uint64_t>(rep_);
      if (v > static_cast<std::uint64_t>(std::numeric_limits<std::int64_t>::max())) {
        return out_of_range_error(fmt::format("u64 value {} does not fit in int64", v));
      }
      return static_cast<std::int64_t>(v);
    }
    default:
      return invalid_argument_error(fmt::format("value is {}, not an integer", name(type())));
  }
}

Result<double> GgufValue::as_float() const {
  if (type() == GgufType::kF32) return static_cast<double>(std::get<float>(rep_));
  if (type() == GgufType::kF64) return std::get<double>(rep_);
  return invalid_argument_error(fmt::format("value is {}, not f32 or f64", name(type())));
}

std::string GgufValue::to_string(std::size_t max_elements) const {
  switch (type()) {
    case GgufType::kU8: return fmt::format("{}", std::get<std::uint8_t>(rep_));
    case GgufType::kI8: return fmt::format("{}", std::get<std::int8_t>(rep_));
    case GgufType::kU16: return fmt::format("{}", std::get<std::uint16_t>(rep_));
    case GgufType::kI16: return fmt::format("{}", std::get<std::int16_t>(rep_));
    case GgufType::kU32: return fmt::format("{}", std::get<std::uint32_t>(rep_));
    case GgufType::kI32: return fmt::format("{}", std::get<std::int32_t>(rep_));
    case GgufType::kF32: return fmt::format("{}", std::get<float>(rep_));
    case GgufType::kBool: return std::get<bool>(rep_) ? "true" : "false";
    // Quoted with escapes, so control bytes in a hostile file cannot reach a terminal.
    case GgufType::kString: return fmt::format("{:?}", std::get<std::string>(rep_));
    case GgufType::kU64: return fmt::format("{}", std::get<std::uint64_t>(rep_));
    case GgufType::kI64: return fmt::format("{}", std::get<std::int64_t>(rep_));
    case GgufType::kF64: return fmt::format("{}", std::get<double>(rep_));
    case GgufType::kArray: {
      const GgufArray a = *as_array();
      std::string text = fmt::format("[{} x {}", name(a.element_type()), a.size());
      for (std::size_t i = 0; i < a.size() && i < max_elements; ++i) {
        text += i == 0 ? ": " : ", ";
        // Strings and inner arrays are rendered in place, not copied out first.
        if (a.element_type() == GgufType::kString) {
          text += fmt::format("{:?}", (*a.strings())[i]);
        } else if (a.element_type() == GgufType::kArray) {
          text += (*a.arrays())[i].to_string(max_elements);
        } else {
          text += a.at(i).to_string(max_elements);
        }
      }
      if (a.size() > max_elements) text += ", ...";
      return text + "]";
    }
  }
  return "?";
}

Status GgufMetadata::add(std::string key, GgufValue value) {
  if (index_.contains(key)) {
    return already_exists_error(fmt::format("metadata key '{}' is already present", key));
  }
  index_.emplace(key, entries_.size());
  entries_.push_back(Entry{std::move(key), std::move(value)});
  return Status::ok();
}

void GgufMetadata::set(std::string key, GgufValue value) {
  if (auto it = index_.find(key); it != index_.end()) {
    entries_[it->second].value = std::move(value);
    return;
  }
  index_.emplace(key, entries_.size());
  entries_.push_back(Entry{std::move(key), std::move(value)});
}

const GgufValue* GgufMetadata::find(std::string_view key) const {
  auto it = index_.find(key);
  return it == index_.end() ? nullptr : &entries_[it->second].value;
}

Result<const GgufValue*> GgufMetadata::get(std::string_view key) const {
  const GgufValue* v = find(key);
  if (v == nullptr) return not_found_error(fmt::format("metadata key '{}' is missing", key));
  return v;
}

namespace {

// Looks `key` up and applies a GgufValue accessor, naming the key in any error.
template <typename T>
Result<T> typed_get(const GgufMetadata& m, std::string_view key,
                    Result<T> (GgufValue::*accessor)() const) {
  SWITCHYARD_ASSIGN_OR_RETURN(const GgufValue* v, m.get(key));
  Result<T> r = (v->*accessor)();
  if (!r.is_ok()) return r.status().with_context(fmt::format("metadata key '{}'", key));
  return r;
}

}  // namespace

Result<std::uint8_t> GgufMetadata::get_u8(std::string_view key) const {
  return typed_get(*this, key, &GgufValue::as_u8);
}
Result<std::int8_t> GgufMetadata::get_i8(std::string_view key) const {
  return typed_get(*this, key, &GgufValue::as_i8);
}
Result<std::uint16_t> GgufMetadata::get_u16(std::string_view key) const {
  return typed_get(*this, key, &GgufValue::as_u16);
}
Result<std::int16_t> GgufMetadata::get_i16(std::string_view key) const {
  return typed_get(*this, key, &GgufValue::as_i16);
}
Result<std::uint32_t> GgufMetadata::get_u32(std::string_view key) const {
  return typed_get(*this, key, &GgufValue::as_u32);
}
Result<std::int32_t> GgufMetadata::get_i32(std::string_view key) const {
  return typed_get(*this, key, &GgufValue::as_i32);
}
Result<float> GgufMetadata::get_f32(std::string_view key) const {
  return typed_get(*this, key, &GgufValue::as_f32);
}
Result<bool> GgufMetadata::get_bool(std::string_view key) const {
  return typed_get(*this, key, &GgufValue::as_bool);
}
Result<std::string_view> GgufMetadata::get_string(std::string_view key) const {
  return typed_get(*this, key, &GgufValue::as_string);
}
Result<std::uint64_t> GgufMetadata::get_u64(std::string_view key) const {
  return typed_get(*this, key, &GgufValue::as_u64);
}
Result<std::int64_t> GgufMetadata::get_i64(std::string_view key) const {
  return typed_get(*this, key, &GgufValue::as_i64);
}
Result<double> GgufMetadata::get_f64(std::string_view key) const {
  return typed_get(*this, key, &GgufValue::as_f64);
}
Result<std::int64_t> GgufMetadata::get_integer(std::string_view key) const {
  return typed_get(*this, key, &GgufValue::as_integer);
}
Result<double> GgufMetadata::get_float(std::string_view key) const {
  return typed_get(*this, key, &GgufValue::as_float);
}

Result<GgufArray> GgufMetadata::get_array(std::string_view key) const {
  SWITCHYARD_ASSIGN_OR_RETURN(const GgufValue* v, get(key));
  Result<GgufArray> array = v->as_array();
  if (!array.is_ok()) return array.status().with_context(fmt::format("metadata key '{}'", key));
  return array;
}

Result<GgufArray> GgufMetadata::get_array(std::string_view key, GgufType element_type) const {
  SWITCHYARD_ASSIGN_OR_RETURN(const GgufValue* v, get(key));
  if (!v->is_array()) {
    return invalid_argument_error(fmt::format("metadata key '{}': value is {}, not array of {}",
                                              key, name(v->type()), name(element_type)));
  }
  if (v->element_type() != element_type) {
    return invalid_argument_error(
        fmt::format("metadata key '{}': value is array of {}, not array of {}", key,
                    name(v->element_type()), name(element_type)));
  }
  return *v->as_array();
}

Result<GgufStrings> GgufMetadata::get_strings(std::string_view key) const {
  SWITCHYARD_ASSIGN_OR_RETURN(GgufArray array, get_array(key, GgufType::kString));
  return array.strings();
}

void GgufMetadata::reserve(std::size_t entries) {
  entries_.reserve(entries);
  index_.reserve(entries);
}

std::size_t GgufMetadata::memory_bytes() const {
  std::size_t bytes = sizeof(GgufMetadata) + block_bytes(entries_);
  for (const Entry& e : entries_) bytes += block_bytes(e.key) + e.value.heap_bytes();
  // The index: its bucket array, one node per key, and the node's copy of the key.
  // (One bucket is the table's built-in single bucket, not a block.)
  if (index_.bucket_count() > 1)
    bytes += detail::heap_block_bytes(index_.bucket_count() * sizeof(void*));
  for (const auto& [key, at] : index_) bytes += detail::kGgufIndexNodeBytes + block_bytes(key);
  return bytes;
}

std::vector<std::int64_t> gguf_dims(const Shape& shape) {
  const auto dims = shape.dims();
  return std::vector<std::int64_t>(dims.rbegin(), dims.rend());
}

}  // namespace switchyard
