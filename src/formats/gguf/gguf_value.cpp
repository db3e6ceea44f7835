// GGUF metadata values and the key/value collection.
#include <bit>
#include <limits>

#include <fmt/format.h>

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

GgufValue GgufValue::array(GgufType element_type, std::vector<GgufValue> elements) {
  for (const GgufValue& e : elements) {
    SWITCHYARD_CHECK_MSG(e.type() == element_type, "array element of another type");
  }
  return GgufValue(std::in_place_index<9>, ArrayRep{element_type, std::move(elements)});
}

GgufValue GgufValue::string_array(std::span<const std::string> strings) {
  std::vector<GgufValue> elements;
  elements.reserve(strings.size());
  for (const std::string& s : strings) elements.push_back(string(s));
  return array(GgufType::kString, std::move(elements));
}

GgufType GgufValue::element_type() const {
  SWITCHYARD_CHECK_MSG(is_array(), "element_type() of a non-array value");
  return std::get<ArrayRep>(rep_).element_type;
}

std::span<const GgufValue> GgufValue::elements() const {
  SWITCHYARD_CHECK_MSG(is_array(), "elements() of a non-array value");
  return std::get<ArrayRep>(rep_).elements;
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
      const ArrayRep& a = std::get<ArrayRep>(rep_);
      std::string text = fmt::format("[{} x {}", name(a.element_type), a.elements.size());
      for (std::size_t i = 0; i < a.elements.size() && i < max_elements; ++i) {
        text += i == 0 ? ": " : ", ";
        text += a.elements[i].to_string(max_elements);
      }
      if (a.elements.size() > max_elements) text += ", ...";
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

Result<std::span<const GgufValue>> GgufMetadata::get_array(std::string_view key,
                                                           GgufType element_type) const {
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
  return v->elements();
}

std::vector<std::int64_t> gguf_dims(const Shape& shape) {
  const auto dims = shape.dims();
  return std::vector<std::int64_t>(dims.rbegin(), dims.rend());
}

}  // namespace switchyard
