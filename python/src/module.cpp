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
#include <nanobind/stl/string.h>
#include <nanobind/stl/string_view.h>
#include <nanobind/stl/unique_ptr.h>
#include <nanobind/stl/vector.h>

#include <cstring>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "switchyard/backends.h"
#include "switchyard/dispatch.h"
#include "switchyard/gguf.h"
#include "switchyard/llama.h"
#include "switchyard/quant.h"
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
  d["site"] = fmt::format("{}:{}", e.site.file_name(), e.site.line());
  nb::dict caps;
  caps["strided_input"] = e.caps.strided_input;
  caps["broadcast_input"] = e.caps.broadcast_input;
  caps["requires_broadcast"] = e.caps.requires_broadcast;
  caps["in_place"] = e.caps.in_place;
  d["caps"] = caps;
  d["precision"] = precision_dict(e.precision);
  d["known_cost"] = e.has_known_cost();
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

// A loaded model with its tokenizer (when the file has one) and its own pool.
// Its cache is state: calls that run the model take its lock (after letting go of
// the GIL), so two Python threads sharing one Model take turns instead of racing.
class Model {
 public:
  static std::unique_ptr<Model> load(const std::string& path, std::string_view backend,
                                     std::int64_t max_context, std::string_view cache_type,
                                     int threads) {
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
      if (cache_type == "f32") {
        o.cache_dtype = DType::kF32;
      } else if (cache_type != "f16") {
        raise(invalid_argument_error(
            fmt::format("Model.load: cache_type must be 'f16' or 'f32', not '{}'", cache_type)));
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

  nb::class_<Model>(m, "Model")
      .def_static("load", &Model::load, nb::arg("path"), nb::arg("backend") = "cpu",
                  nb::arg("max_context") = 0, nb::arg("cache_type") = "f16", nb::arg("threads") = 0,
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
