// switchyard._switchyard: the binding table, block quantization and the llama
// model runner, for Python (the `switchyard` package wraps it; python/switchyard).
//
// Conventions
//   Ops, dtypes and backends are named as the tool names them ("matmul", "q4_k",
//   "cpu"). A failed Status raises switchyard.Error, whose `code` is the status
//   code's name ("not_found", "invalid_argument", ...) and whose message is the
//   Status's, so a lookup miss carries the table's own diagnostic. Model work
//   (loading, evaluation, generation steps) releases the GIL, so Python threads
//   run models in parallel.
#include <nanobind/nanobind.h>
#include <nanobind/ndarray.h>
#include <nanobind/stl/optional.h>
#include <nanobind/stl/pair.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/string_view.h>
#include <nanobind/stl/tuple.h>
#include <nanobind/stl/unique_ptr.h>
#include <nanobind/stl/vector.h>
// NumPy's C API reads arrays and makes results without the buffer protocol's
// bookkeeping (a 1-element call is a fraction of a microsecond; see call()).
#define NPY_NO_DEPRECATED_API NPY_1_7_API_VERSION
#include <numpy/arrayobject.h>

#include <array>
#include <cstring>
#include <memory>
#include <mutex>
#include <new>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "switchyard/backends.h"
#include "switchyard/dispatch.h"
#include "switchyard/gguf.h"
#include "switchyard/graph.h"
#include "switchyard/half.h"
#include "switchyard/kernel.h"
#include "switchyard/kernel_mask.h"
#include "switchyard/llama.h"
#include "switchyard/plan.h"
#include "switchyard/quant.h"
#include "switchyard/registry.h"
#include "switchyard/sampling.h"
#include "switchyard/thread_pool.h"
#include "switchyard/tokenizer.h"

namespace nb = nanobind;

namespace switchyard::python {
namespace {

// A failed Status on its way to Python (translated in NB_MODULE below).
struct StatusError {
  Status status;
};

[[noreturn]] void raise(Status status) { throw StatusError{std::move(status)}; }

void check(const Status& status) {
  if (!status.is_ok()) raise(status);
}

template <typename T>
T value(Result<T> result) {
  if (!result.is_ok()) raise(result.status());
  return std::move(result).value();
}

// The built-in table, published on first use.
TableSnapshot table() {
  static const bool installed = [] {
    check(install_builtin_table().status());
    return true;
  }();
  (void)installed;
  return current_table();
}

DTypeList dtype_list(const std::vector<std::string>& names) {
  std::vector<DType> dtypes;
  for (const std::string& n : names) dtypes.push_back(value(parse_dtype(n)));
  DTypeList list(dtypes);
  if (list.overflowed()) raise(invalid_argument_error("switchyard: too many dtypes in a key"));
  return list;
}

std::vector<std::string> dtype_names(const DTypeList& dtypes) {
  std::vector<std::string> out;
  for (DType t : dtypes.span()) out.emplace_back(name(t));
  return out;
}

std::string key_name(BindingKey key) {
  if (std::optional<OpKind> op = key.static_op()) return std::string(name(*op));
  return fmt::format("fused#{}", key.raw());
}

nb::dict precision_dict(const PrecisionGuarantee& p) {
  nb::dict d;
  d["bit_stable"] = p.bit_stable;
  d["deterministic_across_threads"] = p.deterministic_across_threads;
  d["max_ulp"] = p.max_ulp ? nb::cast(*p.max_ulp) : nb::none();
  d["max_rel"] = p.max_rel ? nb::cast(*p.max_rel) : nb::none();
  d["max_abs"] = p.max_abs ? nb::cast(*p.max_abs) : nb::none();
  return d;
}

nb::dict entry_dict(const BindingEntry& e) {
  nb::dict d;
  d["name"] = e.name;
  d["source"] = e.source;
  d["revision_hash"] = e.revision_hash;
  d["site"] = describe_site(e);
  nb::dict caps;
  caps["strided_input"] = e.caps.strided_input;
  caps["broadcast_input"] = e.caps.broadcast_input;
  caps["requires_broadcast"] = e.caps.requires_broadcast;
  caps["in_place"] = e.caps.in_place;
  caps["trades_precision"] = e.caps.trades_precision;
  d["caps"] = caps;
  d["precision"] = precision_dict(e.precision);
  d["known_cost"] = e.has_known_cost();
  return d;
}

// A lookup miss's payload as plain Python objects: the key, the backends that
// have the op, what exists for it and why each sibling at the key was refused.
nb::dict miss_dict(const NoBackendForOp& miss) {
  nb::dict d;
  d["op"] = key_name(miss.key);
  d["dtypes"] = dtype_names(miss.dtypes);
  d["backend"] = std::string(name(miss.backend));
  nb::list backends;
  for (BackendId b : miss.backends_for_op) backends.append(std::string(name(b)));
  d["backends_for_op"] = backends;
  nb::list available;
  for (const CoverageBinding& c : miss.available) {
    nb::dict a;
    a["op"] = key_name(c.key);
    a["dtypes"] = dtype_names(c.dtypes);
    a["backend"] = std::string(name(c.backend));
    a["kernel"] = c.kernel_name;
    a["site"] = describe_site(c);
    available.append(a);
  }
  d["available"] = available;
  d["rejected"] = miss.rejected;
  return d;
}

nb::list coverage() {
  const TableSnapshot t = table();
  nb::list out;
  for (const KernelBindingTable::Slot& slot : t->slots()) {
    nb::dict d;
    d["op"] = key_name(slot.key);
    d["dtypes"] = dtype_names(slot.dtypes);
    d["backend"] = std::string(name(slot.backend));
    nb::list alternatives;
    for (const BindingEntry& e : slot.alternatives) alternatives.append(entry_dict(e));
    d["alternatives"] = alternatives;
    out.append(d);
  }
  return out;
}

nb::list alternatives(std::string_view op, const std::vector<std::string>& dtypes,
                      std::string_view backend) {
  const TableSnapshot t = table();
  nb::list out;
  for (const BindingEntry& e : t->lookup_alternatives(value(parse_op(op)), dtype_list(dtypes),
                                                      value(parse_backend(backend)))) {
    out.append(entry_dict(e));
  }
  return out;
}

nb::dict lookup(std::string_view op, const std::vector<std::string>& dtypes,
                std::string_view backend) {
  const TableSnapshot t = table();
  return entry_dict(
      *value(t->lookup(value(parse_op(op)), dtype_list(dtypes), value(parse_backend(backend)))));
}

bool backend_supports(std::string_view op, const std::vector<std::string>& dtypes,
                      std::string_view backend) {
  return table()->backend_supports(value(parse_op(op)), dtype_list(dtypes),
                                   value(parse_backend(backend)));
}

using F32Array = nb::ndarray<const float, nb::ndim<1>, nb::c_contig, nb::device::cpu>;
using ByteArray = nb::ndarray<const std::uint8_t, nb::ndim<1>, nb::c_contig, nb::device::cpu>;

// A new NumPy array owning `data`.
template <typename T>
nb::ndarray<nb::numpy, T> numpy_array(std::vector<T> data, std::vector<std::size_t> shape) {
  auto* owned = new std::vector<T>(std::move(data));
  nb::capsule owner(owned, [](void* p) noexcept { delete static_cast<std::vector<T>*>(p); });
  return nb::ndarray<nb::numpy, T>(owned->data(), shape.size(), shape.data(), owner);
}

nb::ndarray<nb::numpy, std::uint8_t> quantize(F32Array x, std::string_view type) {
  const DType t = value(parse_dtype(type));
  const auto n = static_cast<std::int64_t>(x.shape(0));
  std::vector<std::uint8_t> out(static_cast<std::size_t>(value(row_bytes(t, n))));
  check(switchyard::quantize(
      t, std::span<const float>(x.data(), x.shape(0)),
      std::span<std::byte>(reinterpret_cast<std::byte*>(out.data()), out.size())));
  const std::size_t size = out.size();
  return numpy_array(std::move(out), {size});
}

nb::ndarray<nb::numpy, float> dequantize(ByteArray data, std::string_view type,
                                         std::int64_t count) {
  const DType t = value(parse_dtype(type));
  if (count < 0) raise(invalid_argument_error("dequantize: count must be >= 0"));
  const std::int64_t bytes = value(row_bytes(t, count));
  if (static_cast<std::int64_t>(data.shape(0)) != bytes) {
    raise(invalid_argument_error(fmt::format("dequantize: {} values of {} take {} bytes, got {}",
                                             count, name(t), bytes, data.shape(0))));
  }
  std::vector<float> out(static_cast<std::size_t>(count));
  check(switchyard::dequantize(
      t, std::span<const std::byte>(reinterpret_cast<const std::byte*>(data.data()), data.shape(0)),
      out));
  return numpy_array(std::move(out), {static_cast<std::size_t>(count)});
}

// --- kernels on arrays ---------------------------------------------------------------

using AnyArray = nb::ndarray<nb::ro, nb::device::cpu>;

// The dtype of a DLPack element type.
std::optional<DType> dtype_of(const nb::dlpack::dtype& t) {
  if (t.lanes != 1) return std::nullopt;
  const auto code = static_cast<nb::dlpack::dtype_code>(t.code);
  if (code == nb::dlpack::dtype_code::Float && t.bits == 32) return DType::kF32;
  if (code == nb::dlpack::dtype_code::Float && t.bits == 16) return DType::kF16;
  if (code == nb::dlpack::dtype_code::Bfloat && t.bits == 16) return DType::kBF16;
  if (code == nb::dlpack::dtype_code::Int && t.bits == 32) return DType::kI32;
  return std::nullopt;
}

// Up to N values built in place, the unused slots never constructed: a call's
// per-operand arrays would otherwise zero kilobytes of stack on every call.
template <typename T, std::size_t N>
class InlineVector {
 public:
  InlineVector() = default;
  InlineVector(const InlineVector&) = delete;
  InlineVector& operator=(const InlineVector&) = delete;
  ~InlineVector() {
    for (std::size_t i = size_; i-- > 0;) std::destroy_at(data() + i);
  }
  template <typename... Args>
  T& emplace_back(Args&&... args) {
    SWITCHYARD_CHECK(size_ < N);
    T* p = std::construct_at(data() + size_, std::forward<Args>(args)...);
    ++size_;
    return *p;
  }
  T* data() { return std::launder(reinterpret_cast<T*>(storage_)); }
  const T* data() const { return std::launder(reinterpret_cast<const T*>(storage_)); }
  T& operator[](std::size_t i) { return data()[i]; }
  std::span<const T> span() const { return {data(), size_}; }

 private:
  alignas(T) std::byte storage_[N * sizeof(T)];
  std::size_t size_ = 0;
};

// The element type of a NumPy array in native byte order, if the kernels take it.
std::optional<DType> ndarray_dtype(PyArrayObject* array) {
  if (!PyArray_ISNOTSWAPPED(array)) return std::nullopt;
  switch (PyArray_TYPE(array)) {
    case NPY_FLOAT32: return DType::kF32;
    case NPY_FLOAT16: return DType::kF16;
    case NPY_INT32: return DType::kI32;
    default: return std::nullopt;
  }
}

// The view of a C-contiguous NumPy array of a type the kernels take, read from
// the array object alone; nullopt for every other operand (HostOperand reads
// those, with the messages for what it cannot).
std::optional<TensorView> ndarray_view(nb::handle item) {
  if (!PyArray_Check(item.ptr())) return std::nullopt;
  auto* array = reinterpret_cast<PyArrayObject*>(item.ptr());
  const std::optional<DType> dtype = ndarray_dtype(array);
  const int rank = PyArray_NDIM(array);
  if (!dtype || !PyArray_IS_C_CONTIGUOUS(array) || rank > kMaxRank) return std::nullopt;
  std::array<std::int64_t, kMaxRank> dims{};
  for (int d = 0; d < rank; ++d) dims[d] = PyArray_DIM(array, d);
  return TensorView::contiguous(PyArray_DATA(array), *dtype,
                                Shape(std::span(dims.data(), static_cast<std::size_t>(rank))));
}

// One operand of call() that ndarray_view() does not read: its view on the
// host. Strided NumPy arrays and anything else with the buffer protocol are
// read through it, which costs far less than a DLPack exchange; other DLPack
// producers (a PyTorch tensor) through nanobind. A strided array is gathered
// into a contiguous copy that the view points into.
class HostOperand {
 public:
  HostOperand() = default;
  HostOperand(const HostOperand&) = delete;
  HostOperand& operator=(const HostOperand&) = delete;
  ~HostOperand() {
    if (buffer_.obj != nullptr) PyBuffer_Release(&buffer_);
  }
  // Reads operand `index` of a call; its view.
  const TensorView& read(nb::handle item, std::size_t index);

 private:
  void read_buffer(nb::handle item, std::size_t index);
  void read_dlpack(nb::handle item, std::size_t index);
  void read_quantized(const nb::tuple& triple, std::size_t index);
  // The view over data with these dims and element strides (gathered when not
  // row-major).
  void finish(std::size_t index, DType dtype, const void* data, std::span<const std::int64_t> dims,
              std::span<const std::int64_t> strides);

  Py_buffer buffer_{};
  AnyArray array_;
  TensorView view_;
  std::vector<std::byte> gathered_;
};

// The dtype of a buffer's struct-module format ("f", "<e", "=i", ...).
std::optional<DType> dtype_of_format(const char* format, Py_ssize_t itemsize) {
  std::string_view f = format == nullptr ? "B" : format;
  if (!f.empty() && (f[0] == '<' || f[0] == '=' || f[0] == '@')) f.remove_prefix(1);
  if (f == "f" && itemsize == 4) return DType::kF32;
  if (f == "e" && itemsize == 2) return DType::kF16;
  if ((f == "i" || f == "l") && itemsize == 4) return DType::kI32;
  return std::nullopt;
}

const TensorView& HostOperand::read(nb::handle item, std::size_t index) {
  if (nb::isinstance<nb::tuple>(item)) {
    read_quantized(nb::borrow<nb::tuple>(item), index);
  } else if (PyObject_CheckBuffer(item.ptr()) != 0) {
    read_buffer(item, index);
  } else {
    read_dlpack(item, index);
  }
  return view_;
}

void HostOperand::read_buffer(nb::handle item, std::size_t index) {
  if (PyObject_GetBuffer(item.ptr(), &buffer_, PyBUF_RECORDS_RO) != 0) {
    PyErr_Clear();
    buffer_ = {};
    return read_dlpack(item, index);
  }
  const std::optional<DType> dtype = dtype_of_format(buffer_.format, buffer_.itemsize);
  if (!dtype) {
    raise(invalid_argument_error(fmt::format(
        "operand {}: element type '{}' is not supported (float32, float16, bfloat16, int32)", index,
        buffer_.format == nullptr ? "B" : buffer_.format)));
  }
  std::vector<std::int64_t> dims, strides;
  for (int d = 0; d < buffer_.ndim; ++d) {
    dims.push_back(buffer_.shape[d]);
    if (buffer_.strides[d] % buffer_.itemsize != 0) {
      raise(
          invalid_argument_error(fmt::format("operand {}: strides are not whole elements", index)));
    }
    strides.push_back(buffer_.strides[d] / buffer_.itemsize);
  }
  finish(index, *dtype, buffer_.buf, dims, strides);
}

void HostOperand::read_dlpack(nb::handle item, std::size_t index) {
  if (!nb::try_cast(item, array_)) {
    raise(invalid_argument_error(
        fmt::format("operand {}: not an array on the CPU (NumPy, or any DLPack producer)", index)));
  }
  const std::optional<DType> dtype = dtype_of(array_.dtype());
  if (!dtype) {
    raise(invalid_argument_error(fmt::format(
        "operand {}: element type not supported (float32, float16, bfloat16, int32)", index)));
  }
  std::vector<std::int64_t> dims, strides;
  for (std::size_t d = 0; d < array_.ndim(); ++d) {
    dims.push_back(static_cast<std::int64_t>(array_.shape(d)));
    strides.push_back(array_.stride(d));
  }
  finish(index, *dtype, array_.data(), dims, strides);
}

void HostOperand::read_quantized(const nb::tuple& triple, std::size_t index) {
  if (triple.size() != 3) {
    raise(invalid_argument_error(
        fmt::format("operand {}: a quantized operand is (data, type, shape)", index)));
  }
  const DType dtype = value(parse_dtype(nb::cast<std::string>(triple[1])));
  std::vector<std::int64_t> dims = nb::cast<std::vector<std::int64_t>>(triple[2]);
  if (!is_quantized(dtype)) {
    raise(invalid_argument_error(
        fmt::format("operand {}: a (data, type, shape) triple is for block types, not {}", index,
                    name(dtype))));
  }
  if (dims.empty()) raise(invalid_argument_error(fmt::format("operand {}: no shape", index)));
  const Shape shape = value(make_shape(dims));
  const std::int64_t row = value(row_bytes(dtype, dims.back()));
  const std::int64_t rows = dims.back() == 0 ? 0 : shape.numel() / dims.back();
  if (PyObject_GetBuffer(triple[0].ptr(), &buffer_, PyBUF_C_CONTIGUOUS | PyBUF_FORMAT) != 0) {
    PyErr_Clear();
    buffer_ = {};
    raise(invalid_argument_error(fmt::format(
        "operand {}: the bytes of a quantized tensor must be a contiguous uint8 array", index)));
  }
  if (buffer_.itemsize != 1 || buffer_.len != rows * row) {
    raise(invalid_argument_error(fmt::format("operand {}: {} [{}] takes {} bytes, got {}", index,
                                             name(dtype), fmt::join(dims, ", "), rows * row,
                                             buffer_.len)));
  }
  view_ = TensorView::contiguous(buffer_.buf, dtype, shape);
}

void HostOperand::finish(std::size_t index, DType dtype, const void* data,
                         std::span<const std::int64_t> dims,
                         std::span<const std::int64_t> strides) {
  if (dims.size() > static_cast<std::size_t>(kMaxRank)) {
    raise(invalid_argument_error(
        fmt::format("operand {}: rank {} is above {}", index, dims.size(), kMaxRank)));
  }
  const Shape shape = value(make_shape(dims));
  bool row_major = true;
  std::int64_t expected = 1;
  for (std::size_t d = dims.size(); d-- > 0;) {
    if (dims[d] != 1 && strides[d] != expected) row_major = false;
    expected *= dims[d];
  }
  if (!row_major) {
    // Element by element, row-major: the index as a mixed-radix counter.
    const auto elem = static_cast<std::size_t>(dense_bytes(dtype));
    gathered_.resize(static_cast<std::size_t>(shape.numel()) * elem);
    std::vector<std::int64_t> at(dims.size(), 0);
    const auto* base = static_cast<const std::byte*>(data);
    for (std::int64_t i = 0; i < shape.numel(); ++i) {
      std::int64_t offset = 0;
      for (std::size_t d = 0; d < dims.size(); ++d) offset += at[d] * strides[d];
      std::memcpy(gathered_.data() + static_cast<std::size_t>(i) * elem,
                  base + offset * static_cast<std::int64_t>(elem), elem);
      for (std::size_t d = dims.size(); d-- > 0;) {
        if (++at[d] < dims[d]) break;
        at[d] = 0;
      }
    }
    data = gathered_.data();
  }
  view_ = TensorView::contiguous(const_cast<void*>(data), dtype, shape);
}

void read_params(const nb::dict& params, OpParams& p) {
  for (auto [key, item] : params) {
    const std::string k = nb::cast<std::string>(key);
    if (k == "scale") {
      p.scale = nb::cast<float>(item);
    } else if (k == "eps") {
      p.eps = nb::cast<float>(item);
    } else if (k == "axis") {
      p.axis = nb::cast<int>(item);
    } else if (k == "causal") {
      p.causal = nb::cast<bool>(item);
    } else if (k == "rope_mode") {
      const std::string mode = nb::cast<std::string>(item);
      if (mode == "normal") {
        p.rope_mode = RopeMode::kNormal;
      } else if (mode == "neox") {
        p.rope_mode = RopeMode::kNeox;
      } else {
        raise(
            invalid_argument_error(fmt::format("rope_mode is 'normal' or 'neox', not '{}'", mode)));
      }
    } else if (k == "rope_base") {
      p.rope_base = nb::cast<float>(item);
    } else if (k == "rope_dims") {
      p.rope_dims = nb::cast<int>(item);
    } else if (k == "query_offset") {
      p.query_offset = nb::cast<std::int64_t>(item);
    } else {
      raise(invalid_argument_error(fmt::format(
          "unknown parameter '{}' (scale, eps, axis, causal, rope_mode, rope_base, rope_dims, "
          "query_offset)",
          k)));
    }
  }
}

// The sibling a call runs: the one named `kernel` (its full name, or the part
// after "__" with or without the backend: "cpu_avx2", "avx2"), or the first that
// takes dense operands of these shapes, as dispatch picks.
const BindingEntry& pick_entry(const KernelBindingTable& t, OpKind op, const DTypeList& dtypes,
                               BackendId backend, std::span<const Shape> shapes,
                               const std::optional<std::string>& kernel) {
  const std::span<const BindingEntry> siblings = t.lookup_alternatives(op, dtypes, backend);
  if (siblings.empty()) raise(t.lookup(op, dtypes, backend).status());
  for (const BindingEntry& e : siblings) {
    if (kernel) {
      // "matmul_f32__cpu_avx512": the full name, "cpu_avx512" or "avx512".
      const std::string_view n = e.name;
      const std::size_t cut = n.rfind("__");
      const std::string_view tail = cut == std::string_view::npos ? n : n.substr(cut + 2);
      const std::string prefix = fmt::format("{}_", name(backend));
      const std::string_view variant = tail.starts_with(prefix) ? tail.substr(prefix.size()) : tail;
      if (n == *kernel || tail == *kernel || variant == *kernel) return e;
      continue;
    }
    if (e.caps.requires_broadcast) continue;
    if (e.admits != nullptr && !e.admits(shapes)) continue;
    return e;
  }
  std::vector<std::string> names;
  for (const BindingEntry& e : siblings) names.push_back(e.name);
  raise(not_found_error(kernel ? fmt::format("no sibling named '{}' at {}; the siblings: {}",
                                             *kernel, fmt::join(dtype_names(dtypes), ","),
                                             fmt::join(names, ", "))
                               : fmt::format("no sibling takes these shapes; the siblings: {}",
                                             fmt::join(names, ", "))));
}

// Device buffers of one call, freed together.
class DeviceBuffers {
 public:
  explicit DeviceBuffers(BackendMemory& memory) : memory_(memory) {}
  ~DeviceBuffers() {
    for (void* p : owned_) memory_.deallocate(p);
  }
  DeviceBuffers(const DeviceBuffers&) = delete;
  DeviceBuffers& operator=(const DeviceBuffers&) = delete;
  TensorView like(const TensorView& host, BackendId backend) {
    // Rows of the last dimension (a scalar is one row of one), without dividing
    // by a dimension that may be zero.
    std::int64_t rows = 1;
    for (int d = 0; d + 1 < host.rank(); ++d) rows *= host.dim(d);
    const std::int64_t bytes =
        rows * value(row_bytes(host.dtype(), host.rank() == 0 ? 1 : host.dim(host.rank() - 1)));
    void* p = value(memory_.allocate(bytes < 1 ? 1 : bytes));
    owned_.push_back(p);
    return TensorView::contiguous(p, host.dtype(), host.shape(), backend);
  }

 private:
  BackendMemory& memory_;
  std::vector<void*> owned_;
};

// Runs `entry` on host operands: in place on the CPU, through device copies on
// a backend whose memory the host cannot address. A sibling that reads its
// weight packed at load gets it packed first (Note [Prepacked weights]).
void run_entry(const KernelBindingTable& t, const BindingEntry& entry, BackendId backend,
               std::span<const TensorView> inputs, const TensorView& out, const OpParams& params) {
  BackendMemory* memory = t.backend_memory(backend);
  if (memory == nullptr || memory->host_addressable()) {
    ExecContext ctx{.runner = &default_thread_pool()};
    std::vector<TensorView> packed_inputs(inputs.begin(), inputs.end());
    std::shared_ptr<void> packed;
    if (entry.packing != nullptr) {
      packed = value(pack_operand(
          *entry.packing, packed_inputs[static_cast<std::size_t>(entry.packing->operand)], ctx));
    }
    check(entry.fn({.inputs = packed_inputs,
                    .outputs = std::span<const TensorView>(&out, 1),
                    .params = params,
                    .ctx = ctx,
                    .name = entry.name,
                    .data = entry.data.get()}));
    return;
  }
  check(memory->ready());
  void* stream = value(memory->create_stream());
  struct StreamGuard {
    BackendMemory* memory;
    void* stream;
    ~StreamGuard() { memory->destroy_stream(stream); }
  } guard{memory, stream};
  DeviceBuffers buffers(*memory);
  std::vector<TensorView> device_inputs;
  for (const TensorView& in : inputs) {
    device_inputs.push_back(buffers.like(in, backend));
    check(memory->copy(in, device_inputs.back(), stream));
  }
  const TensorView device_out = buffers.like(out, backend);
  ExecContext ctx{.stream = stream};
  check(entry.fn({.inputs = device_inputs,
                  .outputs = std::span<const TensorView>(&device_out, 1),
                  .params = params,
                  .ctx = ctx,
                  .name = entry.name,
                  .data = entry.data.get()}));
  check(memory->copy(device_out, out, stream));
  check(memory->synchronize(stream));
}

// A new C-contiguous NumPy array of this shape, for a result of this dtype
// (bf16 results come back as float32).
nb::object new_array(const Shape& shape, DType dtype) {
  std::array<npy_intp, kMaxRank> dims{};
  for (int d = 0; d < shape.rank(); ++d) dims[d] = shape[d];
  const int type = dtype == DType::kF16   ? NPY_FLOAT16
                   : dtype == DType::kI32 ? NPY_INT32
                                          : NPY_FLOAT32;
  PyObject* array = PyArray_SimpleNew(shape.rank(), dims.data(), type);
  if (array == nullptr) throw nb::python_error();
  return nb::steal(array);
}

// op(inputs) through the table on one backend, the inputs on the host; the
// result as a new NumPy array (bf16 results widened to float32, exactly).
nb::object run_views(OpKind op, BackendId backend, std::span<const TensorView> inputs,
                     const std::optional<std::string>& kernel, std::optional<DType> out_dtype,
                     const OpParams& params) {
  const std::size_t n = inputs.size();
  InlineVector<OperandInfo, kMaxOperands> infos;
  InlineVector<Shape, kMaxOperands> shapes;
  std::array<DType, kMaxOperands> key_dtypes;
  for (std::size_t i = 0; i < n; ++i) {
    infos.emplace_back(OperandInfo{inputs[i].dtype(), inputs[i].shape()});
    shapes.emplace_back(inputs[i].shape());
    key_dtypes[i] = inputs[i].dtype();
  }
  const OperandInfo result = value(infer_output(op, infos.span(), params, out_dtype));
  key_dtypes[n] = result.dtype;
  shapes.emplace_back(result.shape);
  const DTypeList dtypes(std::span<const DType>(key_dtypes.data(), n + 1));
  if (is_quantized(result.dtype)) {
    raise(unimplemented_error("ops: a quantized result is quantize()'s job, not a kernel call's"));
  }
  const TableSnapshot t = table();
  const BindingEntry& entry = pick_entry(*t, op, dtypes, backend, shapes.span(), kernel);

  // The result is NumPy's own array (bf16: float32, widened after the call).
  nb::object array = new_array(result.shape, result.dtype);
  void* const data = PyArray_DATA(reinterpret_cast<PyArrayObject*>(array.ptr()));
  const auto count = static_cast<std::size_t>(result.shape.numel());
  std::vector<std::uint16_t> bf16;
  if (result.dtype == DType::kBF16) bf16.resize(count);
  const TensorView out =
      TensorView::contiguous(result.dtype == DType::kBF16 ? static_cast<void*>(bf16.data()) : data,
                             result.dtype, result.shape);
  // Small calls keep the GIL: handing it over costs more than they take.
  constexpr std::int64_t kReleaseAbove = 1 << 14;
  if (result.shape.numel() >= kReleaseAbove || backend != BackendId::kCpu) {
    nb::gil_scoped_release released;
    run_entry(*t, entry, backend, inputs, out, params);
  } else {
    run_entry(*t, entry, backend, inputs, out, params);
  }
  auto* widened = static_cast<float*>(data);
  for (std::size_t i = 0; i < bf16.size(); ++i) widened[i] = bf16_to_f32(bf16[i]);
  return array;
}

// op(operands) as run_views() runs it, the operands Python objects: contiguous
// NumPy arrays read from the array object, anything else through a HostOperand.
// Inline arrays (a key holds at most kMaxOperands dtypes): a call is a fraction
// of a microsecond, and heap traffic would be a good part of it.
nb::object run_op(OpKind op, BackendId backend, std::span<const nb::handle> operands,
                  const std::optional<std::string>& kernel, std::optional<DType> out_dtype,
                  const OpParams& params) {
  const std::size_t n = operands.size();
  if (n + 1 > kMaxOperands) raise(invalid_argument_error("ops: too many operands"));
  InlineVector<HostOperand, kMaxOperands> host;
  InlineVector<TensorView, kMaxOperands> inputs;
  for (std::size_t i = 0; i < n; ++i) {
    if (std::optional<TensorView> view = ndarray_view(operands[i])) {
      inputs.emplace_back(*view);
    } else {
      inputs.emplace_back(host.emplace_back().read(operands[i], i));
    }
  }
  return run_views(op, backend, inputs.span(), kernel, out_dtype, params);
}

// The backend a call names; "cpu" without a search.
BackendId call_backend(std::string_view backend_name) {
  if (backend_name == "cpu") return BackendId::kCpu;
  return value(parse_compiled_backend(backend_name));
}

nb::object call(std::string_view op_name, const nb::list& operands, std::string_view backend_name,
                const std::optional<std::string>& kernel,
                const std::optional<std::string>& out_name, const nb::dict& param_dict) {
  const OpKind op = value(parse_op(op_name));
  const BackendId backend = call_backend(backend_name);
  OpParams params;
  read_params(param_dict, params);
  std::optional<DType> out_dtype;
  if (out_name) out_dtype = value(parse_dtype(*out_name));
  const std::size_t n = operands.size();
  if (n + 1 > kMaxOperands) raise(invalid_argument_error("ops: too many operands"));
  std::array<nb::handle, kMaxOperands> items;
  for (std::size_t i = 0; i < n; ++i) items[i] = operands[i];
  return run_op(op, backend, std::span<const nb::handle>(items.data(), n), kernel, out_dtype,
                params);
}

// switchyard.ops' add, sub, mul and div: a function of (a, b, *, backend,
// kernel) that runs two NumPy arrays of one shape straight through run_op(), the
// fixed cost of a call, and hands every other pair (broadcasting, conversions) to
// `general`, called as general(op, a, b, backend, kernel).
nb::object binary_op(std::string_view op_name, nb::object general) {
  const OpKind op = value(parse_op(op_name));
  if (op_family(op) != OpFamily::kBinary) {
    raise(invalid_argument_error(fmt::format("'{}' is not an elementwise binary op", op_name)));
  }
  return nb::cpp_function(
      [op, general = std::move(general)](nb::handle a, nb::handle b, std::string_view backend,
                                         const std::optional<std::string>& kernel) -> nb::object {
        if (PyArray_CheckExact(a.ptr()) && PyArray_CheckExact(b.ptr())) {
          auto* x = reinterpret_cast<PyArrayObject*>(a.ptr());
          auto* y = reinterpret_cast<PyArrayObject*>(b.ptr());
          if (PyArray_NDIM(x) == PyArray_NDIM(y) &&
              PyArray_CompareLists(PyArray_DIMS(x), PyArray_DIMS(y), PyArray_NDIM(x))) {
            const std::array<nb::handle, 2> items{a, b};
            return run_op(op, call_backend(backend), items, kernel, std::nullopt, OpParams{});
          }
        }
        return general(name(op), a, b, backend, kernel);
      },
      nb::name(name(op).data()),  // op.def's literals: null-terminated, static
      nb::arg("a"), nb::arg("b"), nb::kw_only(), nb::arg("backend") = "cpu",
      nb::arg("kernel") = nb::none(),
      "The elementwise op on a and b, broadcast as NumPy broadcasts them, through the binding "
      "table on `backend` (the sibling `kernel` names, or the first that takes the shapes).");
}

// --- the registry -------------------------------------------------------------------

std::optional<nb::dict> registry_probe(std::string_view op, const std::vector<std::string>& dtypes,
                                       std::string_view backend, const std::string& role,
                                       const std::string& fallback) {
  const TableSnapshot t = table();
  const DTypeList list = dtype_list(dtypes);
  Result<const BindingEntry*> found =
      probe_kernel(*t, {.key = value(parse_op(op)),
                        .dtypes = list,
                        .backend = value(parse_backend(backend)),
                        .role = role.empty() ? kDispatchRole : std::string_view(role),
                        .fallback = fallback.empty() ? std::string_view("no kernel") : fallback});
  if (!found.is_ok()) {
    if (found.status().code() == StatusCode::kNotFound) return std::nullopt;
    raise(found.status());
  }
  return entry_dict(**found);
}

// The report as JSON (the package parses it); with `check`, a strict violation
// raises instead, carrying the rendered report.
std::string registry_seal(bool check) {
  (void)table();
  if (!check) return switchyard::seal().to_json();
  return value(seal_or_error()).to_json();
}

void registry_reset() { global_registry().reset(); }

std::string set_mask(std::string_view spec) {
  (void)table();
  const std::string before = current_kernel_mask().to_string();
  value(set_kernel_mask(value(KernelMask::parse(spec))));
  return before;
}

std::string kernel_mask() {
  (void)table();
  return current_kernel_mask().to_string();
}

// --- planning ---------------------------------------------------------------------

// A graph under construction; values are integer ids.
class PyGraph {
 public:
  std::int32_t input(std::string name, std::string_view dtype,
                     const std::vector<std::int64_t>& shape) {
    return checked(
        builder_.input(std::move(name), value(parse_dtype(dtype)), value(make_shape(shape))));
  }
  std::int32_t constant(std::string name,
                        nb::ndarray<const float, nb::c_contig, nb::device::cpu> data) {
    std::vector<std::int64_t> dims;
    for (std::size_t d = 0; d < data.ndim(); ++d)
      dims.push_back(static_cast<std::int64_t>(data.shape(d)));
    return checked(builder_.constant_f32(std::move(name), value(make_shape(dims)),
                                         std::span<const float>(data.data(), data.size())));
  }
  std::int32_t op(std::string_view op, const std::vector<std::int32_t>& inputs, std::string name,
                  const nb::dict& param_dict, std::string role,
                  const std::optional<std::string>& out_dtype) {
    OpParams params;
    read_params(param_dict, params);
    std::vector<ValueId> ids;
    for (std::int32_t i : inputs) ids.push_back(ValueId{i});
    std::optional<DType> out;
    if (out_dtype) out = value(parse_dtype(*out_dtype));
    return checked(
        builder_.op(value(parse_op(op)), ids, std::move(name), params, std::move(role), out));
  }
  std::int32_t reshape(std::int32_t x, const std::vector<std::int64_t>& shape, std::string name) {
    return checked(builder_.reshape(ValueId{x}, value(make_shape(shape)), std::move(name)));
  }
  void output(std::int32_t v) {
    builder_.output(ValueId{v});
    check(builder_.status());
  }
  const Graph& graph() {
    check(builder_.status());
    return builder_.graph();
  }

 private:
  std::int32_t checked(ValueId v) {
    check(builder_.status());
    return v.index;
  }
  GraphBuilder builder_;
};

// Plans the graph; (whether it planned, the report as JSON, the explanation,
// the error when it did not). A graph that cannot be planned still has a report.
std::tuple<bool, std::string, std::string, std::string> plan(
    PyGraph& graph, const std::vector<std::string>& prefer,
    const std::vector<std::string>& fallback, bool fusion, bool casts, bool record,
    bool admit_precision_trades) {
  const Graph& g = graph.graph();
  PlanOptions options;
  if (!prefer.empty()) {
    options.policy.preferred.clear();
    for (const std::string& b : prefer) options.policy.preferred.push_back(value(parse_backend(b)));
  }
  for (const std::string& b : fallback) options.policy.fallbacks.push_back(value(parse_backend(b)));
  options.enable_fusion = fusion;
  options.enable_casts = casts;
  options.record_in_registry = record;
  options.admit_precision_trades = admit_precision_trades;
  const TableSnapshot t = table();
  Result<ExecutionPlan> planned = [&] {
    nb::gil_scoped_release released;
    return plan_graph(g, t, options);
  }();
  if (planned.is_ok()) {
    return {true, explain_json(planned->report()), explain_text(planned->report()), ""};
  }
  const PlanFailure* failure = planned.status().payload<PlanFailure>();
  if (failure == nullptr) raise(planned.status());
  return {false, explain_json(failure->report), explain_text(failure->report),
          planned.status().to_string()};
}

// A loaded model with its tokenizer (when the file has one) and its own pool.
// Its cache is state: calls that run the model take its lock (after letting go of
// the GIL), so two Python threads sharing one Model take turns instead of racing.
class Model {
 public:
  static std::unique_ptr<Model> load(const std::string& path, std::string_view backend,
                                     std::int64_t max_context, std::string_view cache_type,
                                     int threads, bool admit_precision_trades, int devices,
                                     bool pack_weights) {
    (void)table();
    auto m = std::unique_ptr<Model>(new Model());
    {
      nb::gil_scoped_release released;
      GgufFile file = value(GgufFile::open(path));
      Result<Tokenizer> tokenizer = Tokenizer::from_metadata(file.metadata());
      if (tokenizer.is_ok()) {
        m->tokenizer_.emplace(std::move(*tokenizer));
      } else if (tokenizer.status().code() != StatusCode::kNotFound) {
        raise(tokenizer.status());
      }
      if (threads < 0) raise(invalid_argument_error("Model.load: threads must be >= 0"));
      if (threads > 0) m->pool_ = std::make_unique<ThreadPool>(threads);
      LlamaLoadOptions o;
      o.backend = value(parse_compiled_backend(backend));
      o.max_context = max_context;
      o.runner = m->pool_ ? static_cast<ParallelRunner*>(m->pool_.get()) : &default_thread_pool();
      o.admit_precision_trades = admit_precision_trades;
      o.devices = devices;
      o.pack_weights = pack_weights;
      if (cache_type == "f32") {
        o.cache_dtype = DType::kF32;
      } else if (cache_type == "q8_0") {
        o.cache_dtype = DType::kQ8_0;
      } else if (cache_type != "f16") {
        raise(invalid_argument_error(fmt::format(
            "Model.load: cache_type must be 'f16', 'f32' or 'q8_0', not '{}'", cache_type)));
      }
      m->model_.emplace(value(LlamaModel::load(std::move(file), o)));
    }
    return m;
  }

  nb::dict config() const {
    const LlamaConfig& c = model_->config();
    nb::dict d;
    d["architecture"] = c.architecture;
    d["vocab_size"] = c.vocab_size;
    d["embedding_length"] = c.embedding_length;
    d["block_count"] = c.block_count;
    d["head_count"] = c.head_count;
    d["head_count_kv"] = c.head_count_kv;
    d["head_dim"] = c.head_dim();
    d["feed_forward_length"] = c.feed_forward_length;
    d["context_length"] = c.context_length;
    d["max_context"] = model_->max_context();
    d["devices"] = model_->devices();
    d["end_tokens"] = c.end_tokens;
    return d;
  }

  std::string kernel_report() const { return model_->kernel_report().render(); }
  std::int64_t position() {
    std::lock_guard lock(mutex_);
    return model_->position();
  }
  void reset() {
    nb::gil_scoped_release released;
    std::lock_guard lock(mutex_);
    model_->reset();
  }

  const Tokenizer& tokenizer() const {
    if (!tokenizer_) raise(failed_precondition_error("the model file has no tokenizer"));
    return *tokenizer_;
  }

  std::vector<std::int32_t> tokenize(std::string_view text, bool add_special,
                                     bool parse_special) const {
    return tokenizer().encode(text, {.add_special = add_special, .parse_special = parse_special});
  }

  nb::bytes detokenize(const std::vector<std::int32_t>& ids, bool render_special) const {
    const std::string text = value(tokenizer().decode(ids, {.render_special = render_special}));
    return nb::bytes(text.data(), text.size());
  }

  // Appends `tokens` to the cache (emptied first when `from_start`), in chunks of
  // the largest batch, and returns their logits, [n, vocab]. One turn on the lock.
  nb::ndarray<nb::numpy, float> eval(const std::vector<std::int32_t>& tokens, bool from_start) {
    const std::int64_t vocab = model_->config().vocab_size;
    std::vector<float> logits(tokens.size() * static_cast<std::size_t>(vocab));
    {
      nb::gil_scoped_release released;
      std::lock_guard lock(mutex_);
      if (from_start) model_->reset();
      for (std::size_t at = 0; at < tokens.size();) {
        const std::size_t n = std::min<std::size_t>(static_cast<std::size_t>(model_->max_batch()),
                                                    tokens.size() - at);
        check(model_->eval(std::span(tokens).subspan(at, n),
                           std::span(logits).subspan(at * static_cast<std::size_t>(vocab),
                                                     n * static_cast<std::size_t>(vocab))));
        at += n;
      }
    }
    return numpy_array(std::move(logits), {tokens.size(), static_cast<std::size_t>(vocab)});
  }

 private:
  Model() = default;
  std::unique_ptr<ThreadPool> pool_;
  std::mutex mutex_;
  std::optional<LlamaModel> model_;
  std::optional<Tokenizer> tokenizer_;

  friend class Generation;
};

// One generation: the prompt evaluated, then each next() samples a token, feeds
// it back and returns its text (what is complete so far), or nullopt at the end.
class Generation {
 public:
  Generation(Model& model, std::vector<std::int32_t> prompt, std::int64_t max_tokens,
             const SamplingOptions& sampling, bool stop_at_eos)
      : model_(&model),
        sampler_(value(Sampler::create(sampling))),
        stream_(model.tokenizer(), {.at_start = false}),
        history_(std::move(prompt)),
        left_(max_tokens) {
    if (history_.empty()) raise(invalid_argument_error("generate: the prompt is empty"));
    if (max_tokens < 0) raise(invalid_argument_error("generate: max_tokens must be >= 0"));
    if (stop_at_eos) stops_ = model.model_->config().end_tokens;
    const std::int64_t vocab = model.model_->config().vocab_size;
    last_.resize(static_cast<std::size_t>(vocab));
    nb::gil_scoped_release released;
    std::lock_guard lock(model.mutex_);
    model.model_->reset();
    for (std::size_t at = 0; at < history_.size();) {
      const std::size_t n = std::min<std::size_t>(
          static_cast<std::size_t>(model.model_->max_batch()), history_.size() - at);
      check(model.model_->eval(std::span(history_).subspan(at, n), last_));
      at += n;
    }
  }

  std::optional<nb::bytes> next() {
    if (done_) return std::nullopt;
    std::string text;
    {
      nb::gil_scoped_release released;
      std::lock_guard lock(model_->mutex_);
      // Another generation or eval on the same model may have run in between:
      // this one's cache state is gone, and it says so.
      if (left_ > 0 && model_->model_->position() != static_cast<std::int64_t>(history_.size())) {
        raise(failed_precondition_error(
            "generate: the model ran something else since this generation's last step; "
            "give each generation its own Model"));
      }
      while (text.empty() && left_ > 0) {
        const std::int32_t token = value(sampler_.sample(last_, history_));
        history_.push_back(token);
        tokens_.push_back(token);
        --left_;
        if (std::find(stops_.begin(), stops_.end(), token) != stops_.end()) {
          left_ = 0;
          break;
        }
        text = value(stream_.push(token));
        if (left_ > 0) check(model_->model_->eval(std::span(&token, 1), last_));
      }
    }
    if (left_ == 0 && text.empty()) {
      done_ = true;
      text = stream_.finish();
      if (text.empty()) return std::nullopt;
    }
    return nb::bytes(text.data(), text.size());
  }

  const std::vector<std::int32_t>& tokens() const { return tokens_; }

 private:
  Model* model_;
  Sampler sampler_;
  TextStream stream_;
  std::vector<std::int32_t> history_;
  std::vector<std::int32_t> tokens_;
  std::vector<std::int32_t> stops_;
  std::vector<float> last_;
  std::int64_t left_;
  bool done_ = false;
};

}  // namespace
}  // namespace switchyard::python

NB_MODULE(_switchyard, m) {
  using namespace switchyard::python;
  namespace sy = switchyard;
  m.doc() =
      "Switchyard's binding table, quantization and model runner (see the switchyard package)";
  // NumPy's C API (its function table, imported from numpy's own module).
  if (_import_array() < 0) throw nb::python_error();

  // The exception type lives as long as the process (never freed, so no
  // destructor runs after the interpreter is gone).
  static PyObject* const error_type =
      PyErr_NewException("switchyard.Error", PyExc_RuntimeError, nullptr);
  m.attr("Error") = nb::handle(error_type);
  nb::register_exception_translator([](const std::exception_ptr& p, void*) {
    try {
      std::rethrow_exception(p);
    } catch (const StatusError& e) {
      const std::string message(e.status.message());
      nb::object exc = nb::handle(error_type)(message);
      exc.attr("code") = std::string(sy::status_code_name(e.status.code()));
      exc.attr("message") = message;
      // A lookup miss carries the table's diagnostic as data too.
      const auto* miss = e.status.payload<sy::NoBackendForOp>();
      exc.attr("payload") = miss != nullptr ? nb::object(miss_dict(*miss)) : nb::none();
      PyErr_SetObject(error_type, exc.ptr());
    }
  });

  m.def(
      "compiled_backends",
      [] {
        std::vector<std::string> out;
        for (sy::BackendId b : sy::compiled_backends()) out.emplace_back(sy::name(b));
        return out;
      },
      "The backends this build has, by name.");
  m.def("coverage", &coverage,
        "Every key of the binding table: op, dtypes, backend and its alternatives (name, "
        "source, caps, precision claim, registration site), best first.");
  m.def("alternatives", &alternatives, nb::arg("op"), nb::arg("dtypes"), nb::arg("backend"),
        "The siblings bound at (op, dtypes, backend), best first; [] when none.");
  m.def("lookup", &lookup, nb::arg("op"), nb::arg("dtypes"), nb::arg("backend"),
        "The entry dispatch picks at (op, dtypes, backend); raises Error (code 'not_found') "
        "with the table's diagnostic when there is none.");
  m.def("backend_supports", &backend_supports, nb::arg("op"), nb::arg("dtypes"), nb::arg("backend"),
        "Whether the backend has a kernel for the key.");
  m.def("quantize", &quantize, nb::arg("values"), nb::arg("type"),
        "float32 values (a whole number of blocks) as the bytes of a GGUF block type.");
  m.def("dequantize", &dequantize, nb::arg("data"), nb::arg("type"), nb::arg("count"),
        "The float32 values of `count` elements stored as the block type in `data`.");

  m.def("call", &call, nb::arg("op"), nb::arg("operands"), nb::arg("backend") = "cpu",
        nb::arg("kernel") = nb::none(), nb::arg("out_dtype") = nb::none(),
        nb::arg("params") = nb::dict(),
        "Runs op on the operands through the table (switchyard.ops wraps it).");
  m.def("binary_op", &binary_op, nb::arg("op"), nb::arg("general"),
        "An elementwise binary op as a function of (a, b, *, backend, kernel): two NumPy arrays "
        "of one shape run directly, any other operands through general(op, a, b, backend, "
        "kernel) (switchyard.ops makes add, sub, mul and div with it).");
  m.def("registry_probe", &registry_probe, nb::arg("op"), nb::arg("dtypes"), nb::arg("backend"),
        nb::arg("role") = "", nb::arg("fallback") = "",
        "Asks the table what dispatch asks and records the answer in the process-wide registry; "
        "the entry, or None on a miss.");
  m.def("registry_seal", &registry_seal, nb::arg("check") = false,
        "Seals the process-wide registry; its report as JSON.");
  m.def("registry_reset", &registry_reset, "Forgets every record and unseals.");
  m.def("set_kernel_mask", &set_mask, nb::arg("spec"),
        "Replaces the kernel mask (backend:op:dtype patterns); returns the previous one.");
  m.def("kernel_mask", &kernel_mask, "The kernel mask in force, as patterns.");
  nb::class_<sy::StrictPolicy>(m, "StrictPolicy")
      .def("__str__", &sy::StrictPolicy::to_string)
      .def_prop_ro("enabled", &sy::StrictPolicy::enabled);
  m.def(
      "parse_strict_policy",
      [](std::string_view text) { return value(sy::parse_strict_policy(text)); }, nb::arg("text"));
  m.def(
      "strict_policy", [] { return sy::global_registry().strict_policy(); },
      "The process-wide registry's strict policy.");
  m.def(
      "set_strict_policy",
      [](const sy::StrictPolicy& policy) { sy::global_registry().set_strict_policy(policy); },
      nb::arg("policy"));
  nb::class_<PyGraph>(m, "Graph")
      .def(nb::init<>())
      .def("input", &PyGraph::input, nb::arg("name"), nb::arg("dtype"), nb::arg("shape"))
      .def("constant", &PyGraph::constant, nb::arg("name"), nb::arg("data"))
      .def("op", &PyGraph::op, nb::arg("op"), nb::arg("inputs"), nb::arg("name"),
           nb::arg("params") = nb::dict(), nb::arg("role") = "", nb::arg("out_dtype") = nb::none())
      .def("reshape", &PyGraph::reshape, nb::arg("x"), nb::arg("shape"), nb::arg("name") = "")
      .def("output", &PyGraph::output, nb::arg("value"));
  m.def("plan", &plan, nb::arg("graph"), nb::arg("prefer"), nb::arg("fallback"),
        nb::arg("fusion") = true, nb::arg("casts") = true, nb::arg("record") = true,
        nb::arg("admit_precision_trades") = false,
        "Plans the graph: (planned, report JSON, explanation, error).");

  nb::class_<Model>(m, "Model")
      .def_static("load", &Model::load, nb::arg("path"), nb::arg("backend") = "cpu",
                  nb::arg("max_context") = 0, nb::arg("cache_type") = "f16", nb::arg("threads") = 0,
                  nb::arg("admit_precision_trades") = false, nb::arg("devices") = 0,
                  nb::arg("pack_weights") = true,
                  "Loads a llama-family GGUF file (probing and sealing its kernels).")
      .def_prop_ro("config", &Model::config)
      .def_prop_ro("kernel_report", &Model::kernel_report)
      .def_prop_ro("position", &Model::position)
      .def("reset", &Model::reset, "Empties the KV cache.")
      .def("tokenize", &Model::tokenize, nb::arg("text"), nb::arg("add_special") = true,
           nb::arg("parse_special") = false)
      .def("detokenize", &Model::detokenize, nb::arg("ids"), nb::arg("render_special") = false,
           "The bytes the ids decode to (UTF-8 unless a token ends inside a character).")
      .def("eval", &Model::eval, nb::arg("tokens"), nb::arg("from_start") = false,
           "Appends tokens to the cache (emptied first when from_start); returns their "
           "logits, float32 [n, vocab].");

  nb::class_<Generation>(m, "Generation")
      .def(
          "__init__",
          [](Generation* self, Model& model, std::vector<std::int32_t> prompt,
             std::int64_t max_tokens, float temperature, std::int32_t top_k, float top_p,
             float min_p, float repeat_penalty, std::uint64_t seed, bool stop_at_eos) {
            sy::SamplingOptions s;
            s.temperature = temperature;
            s.top_k = top_k;
            s.top_p = top_p;
            s.min_p = min_p;
            s.repeat_penalty = repeat_penalty;
            s.seed = seed;
            new (self) Generation(model, std::move(prompt), max_tokens, s, stop_at_eos);
          },
          nb::arg("model"), nb::arg("prompt"), nb::arg("max_tokens"), nb::arg("temperature"),
          nb::arg("top_k"), nb::arg("top_p"), nb::arg("min_p"), nb::arg("repeat_penalty"),
          nb::arg("seed"), nb::arg("stop_at_eos"), nb::keep_alive<1, 2>())
      .def("next", &Generation::next)
      .def_prop_ro("tokens", &Generation::tokens);
}
