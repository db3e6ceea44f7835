// GGUF writer: encodes metadata and tensor infos, packs tensor data at aligned
// offsets and writes the file through a temporary file and a rename.

#include <algorithm>
#include <array>
#include <cerrno>
#include <cstring>
#include <optional>

#include <fmt/format.h>

#include "formats/gguf/gguf_format.h"
#include "switchyard/file_io.h"
#include "switchyard/gguf.h"

namespace switchyard {
namespace {

class Encoder {
 public:
  template <typename T>
  void put(T value) {
    append(&value, sizeof(T));
  }
  void put_string(std::string_view s) {
    put<std::uint64_t>(s.size());
    append(s.data(), s.size());
  }
  void put_value(const GgufValue& v) {
    switch (v.type()) {
      case GgufType::kU8: put(*v.as_u8()); break;
      case GgufType::kI8: put(*v.as_i8()); break;
      case GgufType::kU16: put(*v.as_u16()); break;
      case GgufType::kI16: put(*v.as_i16()); break;
      case GgufType::kU32: put(*v.as_u32()); break;
      case GgufType::kI32: put(*v.as_i32()); break;
      case GgufType::kF32: put(*v.as_f32()); break;
      case GgufType::kBool: put<std::uint8_t>(*v.as_bool() ? 1 : 0); break;
      case GgufType::kString: put_string(*v.as_string()); break;
      case GgufType::kU64: put(*v.as_u64()); break;
      case GgufType::kI64: put(*v.as_i64()); break;
      case GgufType::kF64: put(*v.as_f64()); break;
      case GgufType::kArray: put_array(*v.as_array()); break;
    }
  }
  // The element type, the count and the elements. Scalar elements are stored as
  // their little-endian bytes already (bools as 0 and 1): one append each array.
  void put_array(const GgufArray& a) {
    put(static_cast<std::uint32_t>(a.element_type()));
    put<std::uint64_t>(a.size());
    switch (a.element_type()) {
      case GgufType::kU8: put_span(*a.as_u8s()); break;
      case GgufType::kI8: put_span(*a.as_i8s()); break;
      case GgufType::kU16: put_span(*a.as_u16s()); break;
      case GgufType::kI16: put_span(*a.as_i16s()); break;
      case GgufType::kU32: put_span(*a.as_u32s()); break;
      case GgufType::kI32: put_span(*a.as_i32s()); break;
      case GgufType::kF32: put_span(*a.as_f32s()); break;
      case GgufType::kBool: put_span(*a.as_bool_bytes()); break;
      case GgufType::kString: {
        const GgufStrings strings = *a.strings();
        for (std::string_view s : strings) put_string(s);
        break;
      }
      case GgufType::kArray: {
        const std::span<const GgufValue> inner = *a.arrays();
        for (const GgufValue& v : inner) put_array(*v.as_array());
        break;
      }
      case GgufType::kU64: put_span(*a.as_u64s()); break;
      case GgufType::kI64: put_span(*a.as_i64s()); break;
      case GgufType::kF64: put_span(*a.as_f64s()); break;
    }
  }
  template <typename T>
  void put_span(std::span<const T> values) {
    append(values.data(), values.size_bytes());
  }
  std::vector<std::byte>& bytes() { return bytes_; }

 private:
  // resize + memcpy rather than a range insert: GCC 12 at -O3 reports a false
  // stringop-overflow for small range inserts into a vector of bytes.
  void append(const void* data, std::size_t size) {
    if (size == 0) return;
    const std::size_t at = bytes_.size();
    bytes_.resize(at + size);
    std::memcpy(bytes_.data() + at, data, size);
  }

  std::vector<std::byte> bytes_;
};

std::uint64_t align_up(std::uint64_t n, std::uint64_t alignment) {
  return (n + alignment - 1) / alignment * alignment;
}

// The deepest array nesting in `v` (0 for a scalar).
int array_depth(const GgufValue& v) {
  if (!v.is_array()) return 0;
  int deepest = 0;
  if (v.element_type() == GgufType::kArray) {
    const std::span<const GgufValue> inner = *v.as_array()->arrays();
    for (const GgufValue& e : inner) deepest = std::max(deepest, array_depth(e));
  }
  return deepest + 1;
}

}  // namespace

Result<std::uint64_t> GgufWriter::check_tensor(const std::string& name, DType dtype,
                                               const Shape& shape,
                                               std::optional<std::size_t> data_size) const {
  if (name.empty()) return invalid_argument_error("a tensor name must not be empty");
  if (name.size() > kGgufMaxWrittenTensorNameBytes) {
    return invalid_argument_error(
        fmt::format("tensor name '{}' is {} bytes; at most {} are allowed", name, name.size(),
                    kGgufMaxWrittenTensorNameBytes));
  }
  if (tensor_names_.contains(name)) {
    return already_exists_error(fmt::format("tensor '{}' was already added", name));
  }
  if (info(dtype).gguf_type_id < 0) {
    return invalid_argument_error(
        fmt::format("tensor '{}': GGUF has no type for dtype {}", name, switchyard::name(dtype)));
  }
  if (shape.rank() < 1 || shape.rank() > kGgufMaxDims) {
    return invalid_argument_error(fmt::format("tensor '{}' has rank {}; GGUF tensors have 1 to {}",
                                              name, shape.rank(), kGgufMaxDims));
  }
  for (std::int64_t d : shape.dims()) {
    if (d < 1) {
      return invalid_argument_error(fmt::format(
          "tensor '{}' has shape {}; every dimension must be >= 1", name, shape.to_string()));
    }
  }
  SWITCHYARD_ASSIGN_OR_RETURN(Shape checked, make_shape(shape.dims()));
  Result<std::int64_t> row = row_bytes(dtype, checked.inner());
  if (!row.is_ok()) return row.status().with_context(fmt::format("tensor '{}'", name));
  std::int64_t size = 0;
  if (__builtin_mul_overflow(*row, checked.outer(), &size)) {
    return out_of_range_error(fmt::format("tensor '{}' has more bytes than fit in int64", name));
  }
  if (data_size && static_cast<std::uint64_t>(size) != *data_size) {
    return invalid_argument_error(
        fmt::format("tensor '{}' ({}{}) takes {} bytes, but {} bytes were given", name,
                    switchyard::name(dtype), shape.to_string(), size, *data_size));
  }
  return static_cast<std::uint64_t>(size);
}

Status GgufWriter::add_tensor(std::string name, DType dtype, Shape shape,
                              std::vector<std::byte> data) {
  SWITCHYARD_RETURN_IF_ERROR(check_tensor(name, dtype, shape, data.size()).status());
  auto t = std::make_unique<PendingTensor>();
  t->name = std::move(name);
  t->dtype = dtype;
  t->shape = shape;
  t->owned = std::move(data);
  t->data = t->owned;
  tensor_names_.emplace(t->name, tensors_.size());
  tensors_.push_back(std::move(t));
  return Status::ok();
}

Status GgufWriter::add_tensor_ref(std::string name, DType dtype, Shape shape,
                                  std::span<const std::byte> data) {
  SWITCHYARD_RETURN_IF_ERROR(check_tensor(name, dtype, shape, data.size()).status());
  auto t = std::make_unique<PendingTensor>();
  t->name = std::move(name);
  t->dtype = dtype;
  t->shape = shape;
  t->data = data;
  tensor_names_.emplace(t->name, tensors_.size());
  tensors_.push_back(std::move(t));
  return Status::ok();
}

void GgufWriter::set_source_chunk_bytes(std::size_t bytes) {
  source_chunk_bytes_ = std::max<std::size_t>(1, bytes);
}

Status GgufWriter::add_tensor_source(std::string name, DType dtype, Shape shape,
                                     TensorSource source) {
  if (!source) return invalid_argument_error(fmt::format("tensor '{}' has no source", name));
  // No size to check: the writer hands the source buffers of exactly the tensor's rows.
  SWITCHYARD_ASSIGN_OR_RETURN(std::uint64_t size, check_tensor(name, dtype, shape, std::nullopt));
  auto t = std::make_unique<PendingTensor>();
  t->name = std::move(name);
  t->dtype = dtype;
  t->shape = shape;
  t->source = std::move(source);
  t->size = size;
  tensor_names_.emplace(t->name, tensors_.size());
  tensors_.push_back(std::move(t));
  return Status::ok();
}

Status GgufWriter::emit(const std::function<Status(std::span<const std::byte>)>& sink) const {
  std::uint32_t alignment = kGgufDefaultAlignment;
  if (const GgufValue* a = metadata_.find("general.alignment")) {
    Result<std::uint32_t> value = a->as_u32();
    if (!value.is_ok()) return value.status().with_context("metadata key 'general.alignment'");
    if (*value < 8 || !std::has_single_bit(*value)) {
      return invalid_argument_error(
          fmt::format("general.alignment is {}; it must be a power of two and at least 8", *value));
    }
    alignment = *value;
  }
  for (const GgufMetadata::Entry& e : metadata_.entries()) {
    if (array_depth(e.value) > kGgufMaxArrayDepth) {
      return invalid_argument_error(
          fmt::format("metadata key '{}' nests arrays more than {} deep, which readers refuse",
                      e.key, kGgufMaxArrayDepth));
    }
  }

  Encoder header;
  header.put(detail::kGgufMagic);
  header.put(kGgufVersion);
  header.put<std::uint64_t>(tensors_.size());
  header.put<std::uint64_t>(metadata_.size());
  for (const GgufMetadata::Entry& e : metadata_.entries()) {
    header.put_string(e.key);
    header.put(static_cast<std::uint32_t>(e.value.type()));
    header.put_value(e.value);
  }
  std::uint64_t offset = 0;
  for (const auto& t : tensors_) {
    header.put_string(t->name);
    const std::vector<std::int64_t> ne = gguf_dims(t->shape);
    header.put<std::uint32_t>(static_cast<std::uint32_t>(ne.size()));
    for (std::int64_t d : ne) header.put<std::uint64_t>(static_cast<std::uint64_t>(d));
    header.put(static_cast<std::uint32_t>(info(t->dtype).gguf_type_id));
    header.put<std::uint64_t>(offset);
    offset = align_up(offset + t->byte_size(), alignment);
  }
  std::vector<std::byte>& bytes = header.bytes();
  bytes.resize(align_up(bytes.size(), alignment), std::byte{0});
  SWITCHYARD_RETURN_IF_ERROR(sink(bytes));

  static constexpr std::byte kZeros[4096] = {};
  std::vector<std::byte> chunk;  // reused by every sourced tensor
  for (const auto& t : tensors_) {
    if (t->source) {
      SWITCHYARD_RETURN_IF_ERROR(emit_source(*t, chunk, sink));
    } else {
      SWITCHYARD_RETURN_IF_ERROR(sink(t->data));
    }
    const std::uint64_t size = t->byte_size();
    std::uint64_t padding = align_up(size, alignment) - size;
    while (padding > 0) {
      const std::uint64_t n = std::min<std::uint64_t>(padding, sizeof(kZeros));
      SWITCHYARD_RETURN_IF_ERROR(sink(std::span<const std::byte>(kZeros, n)));
      padding -= n;
    }
  }
  return Status::ok();
}

Status GgufWriter::emit_source(
    const PendingTensor& t, std::vector<std::byte>& chunk,
    const std::function<Status(std::span<const std::byte>)>& sink) const {
  const std::int64_t rows = t.shape.outer();
  const auto row = static_cast<std::uint64_t>(t.size / static_cast<std::uint64_t>(rows));
  const std::int64_t per_chunk =
      static_cast<std::int64_t>(std::max<std::uint64_t>(1, source_chunk_bytes_ / row));
  for (std::int64_t first = 0; first < rows; first += per_chunk) {
    const std::int64_t n = std::min(per_chunk, rows - first);
    chunk.resize(static_cast<std::size_t>(row * static_cast<std::uint64_t>(n)));
    Status produced = t.source(first, n, chunk);
    if (!produced.is_ok()) return produced.with_context(fmt::format("tensor '{}'", t.name));
    SWITCHYARD_RETURN_IF_ERROR(sink(chunk));
  }
  return Status::ok();
}

Result<std::vector<std::byte>> GgufWriter::serialize() const {
  std::vector<std::byte> out;
  SWITCHYARD_RETURN_IF_ERROR(emit([&](std::span<const std::byte> chunk) {
    out.insert(out.end(), chunk.begin(), chunk.end());
    return Status::ok();
  }));
  return out;
}

Status GgufWriter::write(const std::filesystem::path& path) const {
  return write_file_atomically(path.string(), [&](const ByteSink& sink) { return emit(sink); });
}

}  // namespace switchyard
