// The conformance harness: runs each alternative on generated cases and judges it
// against the float64 references by its own precision claim.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <optional>
#include <random>
#include <utility>

#include <fmt/format.h>

#include "switchyard/thread_pool.h"
#include "switchyard/verify.h"
#include "verify/cases.h"
#include "verify/quantized_operands.h"
#include "verify/reference.h"
#include "verify/storage.h"

namespace switchyard {
namespace {

using verify_detail::Case;
using verify_detail::GuardedOutput;
using verify_detail::HostInput;
using verify_detail::InputSpec;
using verify_detail::Layout;
using verify_detail::RefOutput;
using verify_detail::RefTensor;

// FNV-1a, so an entry's inputs depend on its name and not on its table position.
std::uint64_t name_hash(std::string_view text) {
  std::uint64_t h = 0xcbf29ce484222325ULL;
  for (char c : text) {
    h ^= static_cast<unsigned char>(c);
    h *= 0x100000001b3ULL;
  }
  return h;
}

std::string describe_case(const Case& c) {
  std::string text;
  for (const InputSpec& in : c.inputs) {
    if (!text.empty()) text += ", ";
    text += fmt::format("{} {}{}", in.role, name(in.dtype), in.shape.to_string());
    if (in.strided) text += " strided";
    if (in.broadcast_mask != 0) {
      std::string dims;
      for (int d = 0; d < in.shape.rank(); ++d) {
        if (in.broadcast_mask & (1u << d)) dims += fmt::format("{}{}", dims.empty() ? "" : ",", d);
      }
      text += fmt::format(" broadcast(dim {})", dims);
    }
  }
  if (!c.note.empty()) text += "; " + c.note;
  return text;
}

// The outcome of one kernel run.
struct RunOutcome {
  VerifyFailure failure = VerifyFailure::kNone;
  std::string detail;
  std::vector<std::byte> bytes;
};

// Raw bytes as a tensor BackendMemory::copy accepts.
TensorView byte_view(void* data, std::size_t size, BackendId backend) {
  return TensorView::contiguous(data, DType::kU8, Shape{static_cast<std::int64_t>(size)}, backend);
}

// A device backend's copy of one case: every input's bytes (whatever its layout)
// and the guarded output, in that backend's memory (Note [Verifying on a device]).
//
// Note [Verifying on a device]
// The harness judges a device kernel on the host, with the same cases, guards and
// poison as a CPU kernel: each input's whole buffer (gaps of a strided layout
// included) is uploaded and its view rebuilt over the device copy with the same
// strides and offset; the output buffer, poisoned between its guards, is uploaded
// before every run and downloaded after it, so an unwritten element still reads
// as NaN and a write past either end still breaks a guard. After the run the
// inputs are downloaded and compared with what was uploaded. The kernel runs on a
// stream the backend's memory made, which the harness waits on before reading.
class DeviceCase {
 public:
  DeviceCase(BackendId backend, BackendMemory& memory, void* stream)
      : backend_(backend), memory_(memory), stream_(stream) {}
  DeviceCase(const DeviceCase&) = delete;
  DeviceCase& operator=(const DeviceCase&) = delete;
  ~DeviceCase() {
    for (void* p : blocks_) memory_.deallocate(p);
  }

  // Uploads the inputs and allocates the output; fills the device views.
  Status upload(std::span<const HostInput> inputs, GuardedOutput& out) {
    for (const HostInput& in : inputs) {
      SWITCHYARD_ASSIGN_OR_RETURN(std::byte * d, copy_up(in.bytes.span()));
      const TensorView& h = in.view;
      const std::span<const std::int64_t> strides = h.strides();
      views_.push_back(TensorView::strided(d, h.dtype(), h.shape(), strides, h.offset(), backend_));
    }
    const std::span<std::byte> guarded = out.guarded_bytes();
    SWITCHYARD_ASSIGN_OR_RETURN(void* o,
                                memory_.allocate(static_cast<std::int64_t>(guarded.size())));
    blocks_.push_back(o);
    output_ = static_cast<std::byte*>(o);
    out_view_ = TensorView::contiguous(output_ + GuardedOutput::kGuardBytes, out.view().dtype(),
                                       out.view().shape(), backend_);
    return Status::ok();
  }
  // Uploads the host output buffer (poison and guards) before a run.
  Status reset_output(GuardedOutput& out) {
    const std::span<std::byte> guarded = out.guarded_bytes();
    return memory_.copy(byte_view(guarded.data(), guarded.size(), kHostBackend),
                        byte_view(output_, guarded.size(), backend_), stream_);
  }
  // Waits for the run and brings the output buffer back into `out`.
  Status download_output(GuardedOutput& out) {
    SWITCHYARD_RETURN_IF_ERROR(memory_.synchronize(stream_));
    const std::span<std::byte> guarded = out.guarded_bytes();
    return memory_.copy(byte_view(output_, guarded.size(), backend_),
                        byte_view(guarded.data(), guarded.size(), kHostBackend), stream_);
  }
  // Input i's bytes as they are now on the device.
  Result<std::vector<std::byte>> input_bytes(std::size_t i, std::size_t size) {
    std::vector<std::byte> bytes(size);
    SWITCHYARD_RETURN_IF_ERROR(memory_.copy(byte_view(input_blocks_[i], size, backend_),
                                            byte_view(bytes.data(), size, kHostBackend), stream_));
    return bytes;
  }
  [[nodiscard]] std::span<const TensorView> inputs() const { return views_; }
  [[nodiscard]] const TensorView& output() const { return out_view_; }
  [[nodiscard]] void* stream() const { return stream_; }

 private:
  Result<std::byte*> copy_up(std::span<const std::byte> bytes) {
    SWITCHYARD_ASSIGN_OR_RETURN(void* p, memory_.allocate(static_cast<std::int64_t>(bytes.size())));
    blocks_.push_back(p);
    input_blocks_.push_back(static_cast<std::byte*>(p));
    if (!bytes.empty()) {
      SWITCHYARD_RETURN_IF_ERROR(
          memory_.copy(byte_view(const_cast<std::byte*>(bytes.data()), bytes.size(), kHostBackend),
                       byte_view(p, bytes.size(), backend_), stream_));
    }
    return static_cast<std::byte*>(p);
  }

  BackendId backend_;
  BackendMemory& memory_;
  void* stream_;
  std::vector<void*> blocks_;
  std::vector<std::byte*> input_blocks_;
  std::vector<TensorView> views_;
  std::byte* output_ = nullptr;
  TensorView out_view_;
};

class CaseRunner {
 public:
  // `device` is null for a kernel on host memory.
  CaseRunner(const BindingEntry& entry, std::span<const HostInput> inputs,
             std::span<const std::vector<std::byte>> pristine, const OpParams& params,
             GuardedOutput& out, DeviceCase* device = nullptr)
      : entry_(entry),
        inputs_(inputs),
        pristine_(pristine),
        params_(params),
        out_(out),
        device_(device) {}

  RunOutcome run(ParallelRunner* runner) {
    RunOutcome outcome;
    out_.reset();
    std::vector<TensorView> in_views;
    for (const HostInput& in : inputs_) in_views.push_back(in.view);
    TensorView out_view = out_.view();
    ExecContext ctx{.runner = runner};
    // A sibling that reads a weight packed at load gets it packed, as an
    // executor would give it (Note [Prepacked weights]).
    std::shared_ptr<void> packed;
    if (entry_.packing != nullptr && device_ == nullptr) {
      TensorView& w = in_views[static_cast<std::size_t>(entry_.packing->operand)];
      Result<std::shared_ptr<void>> copy = pack_operand(*entry_.packing, w, ctx);
      if (!copy.is_ok()) return harness_error(outcome, "packing the weight", copy.status());
      packed = *std::move(copy);
    }
    if (device_ != nullptr) {
      if (Status s = device_->reset_output(out_); !s.is_ok()) {
        return harness_error(outcome, "uploading the poisoned output", s);
      }
      in_views.assign(device_->inputs().begin(), device_->inputs().end());
      out_view = device_->output();
      ctx.stream = device_->stream();
    }
    const KernelCall call{.inputs = in_views,
                          .outputs = std::span<const TensorView>(&out_view, 1),
                          .params = params_,
                          .ctx = ctx,
                          .name = entry_.name,
                          .data = entry_.data.get()};
    Status status = entry_.fn(call);
    // A device kernel's own errors may surface only once its stream is waited on.
    if (device_ != nullptr && status.is_ok()) status = device_->download_output(out_);
    if (!status.is_ok()) {
      outcome.failure = VerifyFailure::kKernelError;
      outcome.detail = fmt::format("the kernel refused a valid case: {}", status.to_string());
      return outcome;
    }
    if (std::optional<std::int64_t> at = out_.first_damaged_guard()) {
      outcome.failure = VerifyFailure::kOutOfBoundsWrite;
      outcome.detail = *at < 0 ? fmt::format("wrote {} bytes before the output", -*at)
                               : fmt::format("wrote at byte {} of a {}-byte output", *at,
                                             out_.output_bytes().size());
      return outcome;
    }
    for (std::size_t i = 0; i < inputs_.size(); ++i) {
      std::vector<std::byte> downloaded;
      std::span<const std::byte> now = inputs_[i].bytes.span();
      if (device_ != nullptr) {
        Result<std::vector<std::byte>> bytes = device_->input_bytes(i, now.size());
        if (!bytes.is_ok()) return harness_error(outcome, "downloading an input", bytes.status());
        downloaded = std::move(*bytes);
        now = downloaded;
      }
      if (!std::equal(now.begin(), now.end(), pristine_[i].begin(), pristine_[i].end())) {
        outcome.failure = VerifyFailure::kInputModified;
        outcome.detail = fmt::format("input {} was written to", i);
        return outcome;
      }
    }
    const auto bytes = out_.output_bytes();
    outcome.bytes.assign(bytes.begin(), bytes.end());
    return outcome;
  }

 private:
  // A copy the harness itself could not make: reported as the case's failure, so
  // that it is never a pass.
  static RunOutcome& harness_error(RunOutcome& outcome, std::string_view what, const Status& s) {
    outcome.failure = VerifyFailure::kKernelError;
    outcome.detail = fmt::format("harness: {}: {}", what, s.to_string());
    return outcome;
  }

  const BindingEntry& entry_;
  std::span<const HostInput> inputs_;
  std::span<const std::vector<std::byte>> pristine_;
  const OpParams& params_;
  GuardedOutput& out_;
  DeviceCase* device_;
};

// Whether |out - ref| = err is within one of the claim's bounds (Note [Verify
// thresholds] in verify.h).
bool within_bounds(const PrecisionGuarantee& p, DType dtype, double err, double ref, double scale) {
  if (!p.max_abs && !p.max_rel && !p.max_ulp) return err == 0.0;
  if (p.max_abs && err <= *p.max_abs) return true;
  if (p.max_rel && err <= *p.max_rel * scale) return true;
  if (p.max_ulp &&
      err <= *p.max_ulp * verify_detail::ulp_of(dtype, ref) + std::abs(ref) * 0x1p-50) {
    return true;
  }
  return false;
}

std::string describe_bounds(const PrecisionGuarantee& p, DType dtype, double ref, double scale) {
  std::string text;
  if (p.max_abs) text += fmt::format(" abs {:.3g}", *p.max_abs);
  if (p.max_rel)
    text += fmt::format(" rel {:.3g}*{:.6g}={:.3g}", *p.max_rel, scale, *p.max_rel * scale);
  if (p.max_ulp) {
    text += fmt::format(" ulp {:g}*{:.3g}", *p.max_ulp, verify_detail::ulp_of(dtype, ref));
  }
  return text.empty() ? " exact" : text;
}

struct Comparison {
  VerifyFailure failure = VerifyFailure::kNone;
  std::string detail;
  double nmse = 0.0;
  double max_abs = 0.0;
};

Comparison compare(std::span<const double> out, const RefOutput& ref, DType dtype,
                   const PrecisionGuarantee& p, double max_nmse) {
  Comparison c;
  double err2 = 0.0, ref2 = 0.0;
  for (std::size_t i = 0; i < out.size(); ++i) {
    const double o = out[i];
    const double r = ref.values[i];
    if (std::isnan(o)) {
      c.failure = VerifyFailure::kNaN;
      c.detail = fmt::format("element {} is NaN (expected {:.9g}){}", i, r,
                             is_float(dtype) ? "; an unwritten element shows as NaN" : "");
      c.nmse = std::numeric_limits<double>::infinity();
      c.max_abs = std::numeric_limits<double>::infinity();
      return c;
    }
    double err = 0.0;
    if (std::isinf(o) || std::isinf(r)) {
      err = o == r ? 0.0 : std::numeric_limits<double>::infinity();
    } else {
      err = std::abs(o - r);
      // A dot product's draw can cancel to a result far below its terms; the
      // gate then measures against the terms' energy (see RefOutput::energy).
      ref2 += ref.energy.empty() ? r * r : std::max(r * r, ref.energy[i]);
    }
    err2 += err * err;
    c.max_abs = std::max(c.max_abs, err);
    if (p.audit == AuditState::kBounded && c.failure == VerifyFailure::kNone &&
        !within_bounds(p, dtype, err, r, ref.scale[i])) {
      c.failure = VerifyFailure::kBoundExceeded;
      c.detail = fmt::format("element {}: got {:.9g}, expected {:.9g}, error {:.3g} exceeds{}", i,
                             o, r, err, describe_bounds(p, dtype, r, ref.scale[i]));
    }
  }
  c.nmse = ref2 > 0.0 ? err2 / ref2 : err2;
  if (c.failure == VerifyFailure::kNone && c.nmse > max_nmse) {
    c.failure = VerifyFailure::kNmseExceeded;
    c.detail = fmt::format("NMSE {:.3g} is above the gate {:.3g}", c.nmse, max_nmse);
  }
  return c;
}

// A quantized output keeps each value to within a fraction of its block's
// largest magnitude (the block's scale sets every value's step), so that is
// what a relative bound measures against: the scale of every element becomes
// the largest |reference value| of its block of `block` consecutive elements.
void measure_by_blocks(RefOutput& ref, std::int64_t block) {
  ref.scale.resize(ref.values.size());
  for (std::size_t b = 0; b < ref.values.size(); b += static_cast<std::size_t>(block)) {
    const std::size_t end = std::min(ref.values.size(), b + static_cast<std::size_t>(block));
    double largest = 0.0;
    for (std::size_t i = b; i < end; ++i) {
      if (std::isfinite(ref.values[i])) largest = std::max(largest, std::abs(ref.values[i]));
    }
    std::fill(ref.scale.begin() + static_cast<std::ptrdiff_t>(b),
              ref.scale.begin() + static_cast<std::ptrdiff_t>(end), largest);
  }
}

// Rounds a case's operands to their dtypes and lays them out. Fills `refs` with
// the values the kernel will read.
Status prepare_inputs(Case& c, std::vector<RefTensor>& refs, std::vector<HostInput>& host) {
  for (InputSpec& in : c.inputs) {
    std::vector<std::byte> quantized;
    if (is_quantized(in.dtype)) {
      SWITCHYARD_ASSIGN_OR_RETURN(quantized,
                                  verify_detail::quantize_operand(in.dtype, in.shape, in.values));
    } else {
      verify_detail::round_to_dtype(in.dtype, in.values);
      verify_detail::collapse_broadcast(in.shape, in.broadcast_mask, in.values);
    }
    const Layout layout = in.strided               ? Layout::kStrided
                          : in.broadcast_mask != 0 ? Layout::kBroadcast
                                                   : Layout::kContiguous;
    SWITCHYARD_ASSIGN_OR_RETURN(HostInput h,
                                verify_detail::make_input(in.dtype, in.shape, in.values, layout,
                                                          in.broadcast_mask, quantized));
    host.push_back(std::move(h));
    refs.push_back({in.dtype, in.shape, in.values});
  }
  return Status::ok();
}

// Note [Poisoned inputs]
// Every entry also runs its first case with its first float operand poisoned, in
// three ways: one element NaN, every element NaN (a softmax or attention row of
// nothing but NaN, which a maximum that drops NaN mistakes for a masked row), and
// one element +infinity. The float64 reference computes the same function on
// the poisoned values, and wherever it gives NaN or an infinity the kernel's
// output must be NaN or infinite too (docs/ops.md). Finite reference outputs are
// not compared: how far a NaN may spread beyond the reference's (a whole
// quantized row, say) is the kernel's business. A poison that reaches no output
// of the reference (an embedding row no index selects) checks nothing.
enum class Poison : std::uint8_t { kOneNaN, kAllNaN, kOneInf };
constexpr Poison kPoisons[] = {Poison::kOneNaN, Poison::kAllNaN, Poison::kOneInf};

std::string_view describe(Poison poison) {
  switch (poison) {
    case Poison::kOneNaN: return "its first element NaN";
    case Poison::kAllNaN: return "every element NaN";
    case Poison::kOneInf: return "its first element +inf";
  }
  return "?";
}

// Poisons the first float operand of `c`; false when it has none.
bool poison_first_float(Case& c, Poison poison) {
  for (InputSpec& in : c.inputs) {
    if (!is_float(in.dtype) || in.values.empty()) continue;
    if (poison == Poison::kAllNaN) {
      std::fill(in.values.begin(), in.values.end(), std::numeric_limits<double>::quiet_NaN());
    } else {
      in.values[0] = poison == Poison::kOneNaN ? std::numeric_limits<double>::quiet_NaN()
                                               : std::numeric_limits<double>::infinity();
    }
    return true;
  }
  return false;
}

// Where an entry's kernel runs: on host memory, or on a device through its
// memory and a stream (the harness's own).
struct RunSite {
  BackendId backend = kHostBackend;
  BackendMemory* memory = nullptr;  // null: host memory
  void* stream = nullptr;
  ParallelRunner* runner = nullptr;
};

// Runs `c` poisoned; the failure (kNone when the kernel kept every non-finite
// value the reference has) and its detail.
std::pair<VerifyFailure, std::string> run_poisoned(const BindingEntry& entry, OpKind op,
                                                   DType out_dtype, Case c, Poison poison,
                                                   const RunSite& site) {
  if (!is_float(out_dtype) || !poison_first_float(c, poison)) return {VerifyFailure::kNone, {}};
  const std::string role = [&] {
    for (const InputSpec& in : c.inputs)
      if (is_float(in.dtype)) return in.role;
    return std::string();
  }();
  std::vector<RefTensor> refs;
  std::vector<HostInput> host;
  if (!prepare_inputs(c, refs, host).is_ok()) return {VerifyFailure::kNone, {}};
  Result<RefOutput> ref = verify_detail::compute_reference(op, refs, c.params, out_dtype);
  if (!ref.is_ok()) return {VerifyFailure::kNone, {}};
  std::vector<std::vector<std::byte>> pristine;
  for (const HostInput& h : host)
    pristine.emplace_back(h.bytes.span().begin(), h.bytes.span().end());
  GuardedOutput out(out_dtype, ref->shape);
  const std::string what = fmt::format("{} with {}", role, describe(poison));
  std::optional<DeviceCase> device;
  if (site.memory != nullptr) {
    device.emplace(site.backend, *site.memory, site.stream);
    if (Status s = device->upload(host, out); !s.is_ok()) {
      return {VerifyFailure::kKernelError, fmt::format("{}: uploading: {}", what, s.to_string())};
    }
  }
  RunOutcome outcome = CaseRunner(entry, host, pristine, c.params, out, device ? &*device : nullptr)
                           .run(site.runner);
  if (outcome.failure != VerifyFailure::kNone) {
    return {outcome.failure, fmt::format("{}: {}", what, outcome.detail)};
  }
  const std::vector<double> values = out.values();
  for (std::size_t i = 0; i < values.size(); ++i) {
    if (!std::isfinite(ref->values[i]) && std::isfinite(values[i])) {
      return {VerifyFailure::kNonFiniteDropped,
              fmt::format("{}: element {} is {:.9g} where the reference gives {}", what, i,
                          values[i], ref->values[i])};
    }
  }
  return {VerifyFailure::kNone, {}};
}

void skip(VerifyEntryReport& report, std::string reason) {
  report.verdict = VerifyVerdict::kSkipped;
  report.reason = std::move(reason);
}

}  // namespace

std::string_view name(VerifyVerdict verdict) {
  switch (verdict) {
    case VerifyVerdict::kPass: return "pass";
    case VerifyVerdict::kFail: return "fail";
    case VerifyVerdict::kUnaudited: return "unaudited";
    case VerifyVerdict::kSkipped: return "skipped";
  }
  return "?";
}

Result<VerifyVerdict> parse_verify_verdict(std::string_view text) {
  for (VerifyVerdict v : {VerifyVerdict::kPass, VerifyVerdict::kFail, VerifyVerdict::kUnaudited,
                          VerifyVerdict::kSkipped}) {
    if (text == name(v)) return v;
  }
  return invalid_argument_error(fmt::format("unknown verdict '{}'", text));
}

std::string_view name(VerifyFailure failure) {
  switch (failure) {
    case VerifyFailure::kNone: return "none";
    case VerifyFailure::kKernelError: return "kernel-error";
    case VerifyFailure::kNaN: return "nan";
    case VerifyFailure::kOutOfBoundsWrite: return "out-of-bounds-write";
    case VerifyFailure::kInputModified: return "input-modified";
    case VerifyFailure::kBoundExceeded: return "bound-exceeded";
    case VerifyFailure::kNmseExceeded: return "nmse-exceeded";
    case VerifyFailure::kNonFiniteDropped: return "non-finite-dropped";
    case VerifyFailure::kNotBitStable: return "not-bit-stable";
    case VerifyFailure::kNotThreadDeterministic: return "not-thread-deterministic";
  }
  return "?";
}

VerifyEntryReport verify_entry(const KernelBindingTable::Slot& slot, const BindingEntry& entry,
                               const VerifyOptions& options) {
  VerifyEntryReport report;
  report.backend = slot.backend;
  report.key = slot.key;
  report.dtypes = slot.dtypes;
  report.kernel = entry.name;
  report.source = entry.source;
  report.revision_hash = entry.revision_hash;
  report.precision = entry.precision;

  const std::optional<OpKind> op = slot.key.static_op();
  if (!op) {
    skip(report, "runtime-fused recipes have no reference in the harness");
    return report;
  }
  BackendMemory* memory = options.memory[static_cast<std::size_t>(slot.backend)];
  if (memory == nullptr && slot.backend == kHostBackend) memory = &host_memory();
  if (memory == nullptr) {
    skip(report, fmt::format("the harness was given no memory for backend {}", name(slot.backend)));
    return report;
  }
  const bool on_device = !memory->host_addressable();
  if (on_device) {
    if (Status ready = memory->ready(); !ready.is_ok()) {
      skip(report, fmt::format("{} is not usable here: {}", name(slot.backend), ready.message()));
      return report;
    }
  }
  if (entry.fn == nullptr) {
    report.verdict = VerifyVerdict::kFail;
    report.failure = VerifyFailure::kKernelError;
    report.reason = "the entry has no kernel function";
    return report;
  }
  std::mt19937_64 rng(options.seed ^ name_hash(entry.name));
  Result<std::vector<Case>> cases = verify_detail::make_cases(*op, slot.dtypes, entry.caps, rng);
  if (!cases.is_ok()) {
    skip(report, std::string(cases.status().message()));
    return report;
  }

  const DType out_dtype = slot.dtypes[slot.dtypes.size() - 1];
  const int threads = std::max(options.threads, 1);
  // The CPU backend's own pool, so the runs split work exactly as in production.
  ThreadPool parallel(threads);
  ThreadPool other(threads == 1 ? 3 : 1);
  // A device entry runs on a stream of its own, made and destroyed here.
  void* stream = nullptr;
  if (on_device) {
    Result<void*> made = memory->create_stream();
    if (!made.is_ok()) {
      report.verdict = VerifyVerdict::kFail;
      report.failure = VerifyFailure::kKernelError;
      report.reason = fmt::format("harness: no stream on {}: {}", name(slot.backend),
                                  made.status().to_string());
      return report;
    }
    stream = *made;
  }
  struct StreamGuard {
    BackendMemory* memory;
    void* stream;
    ~StreamGuard() {
      if (stream != nullptr) memory->destroy_stream(stream);
    }
  } stream_guard{memory, stream};
  if (cases->empty()) {
    skip(report, "the case generator made no case");
    return report;
  }
  const Case first_case = cases->front();
  for (Case& c : *cases) {
    VerifyCaseResult result;
    result.description = describe_case(c);
    std::vector<RefTensor> refs;
    std::vector<HostInput> host;
    if (Status s = prepare_inputs(c, refs, host); !s.is_ok()) {
      skip(report, std::string(s.message()));
      report.cases.clear();
      return report;
    }
    Result<RefOutput> ref = verify_detail::compute_reference(*op, refs, c.params, out_dtype);
    if (!ref.is_ok()) {
      // A generator and a reference that disagree are a harness bug: never a pass.
      report.verdict = VerifyVerdict::kFail;
      report.reason =
          fmt::format("harness error on case {}: {}", result.description, ref.status().message());
      return report;
    }
    if (is_quantized(out_dtype)) measure_by_blocks(*ref, block_elems(out_dtype));
    std::vector<std::vector<std::byte>> pristine;
    for (const HostInput& h : host)
      pristine.emplace_back(h.bytes.span().begin(), h.bytes.span().end());
    GuardedOutput out(out_dtype, ref->shape);
    std::optional<DeviceCase> device;
    if (on_device) {
      device.emplace(slot.backend, *memory, stream);
      if (Status s = device->upload(host, out); !s.is_ok()) {
        report.verdict = VerifyVerdict::kFail;
        report.failure = VerifyFailure::kKernelError;
        report.reason = fmt::format("harness: uploading case {} to {}: {}", result.description,
                                    name(slot.backend), s.to_string());
        return report;
      }
    }
    CaseRunner runner(entry, host, pristine, c.params, out, device ? &*device : nullptr);
    result.elements = ref->shape.numel();

    RunOutcome first = runner.run(&parallel);
    if (first.failure != VerifyFailure::kNone) {
      result.failure = first.failure;
      result.detail = first.detail;
    } else {
      const std::vector<double> values = out.values();
      Comparison cmp = compare(values, *ref, out_dtype, entry.precision, options.max_nmse);
      result.nmse = cmp.nmse;
      result.max_abs_error = cmp.max_abs;
      result.failure = cmp.failure;
      result.detail = cmp.detail;
    }
    if (result.failure == VerifyFailure::kNone && entry.precision.bit_stable) {
      report.bit_stable_checked = true;
      RunOutcome again = runner.run(&parallel);
      if (again.failure != VerifyFailure::kNone) {
        result.failure = again.failure;
        result.detail = "second run: " + again.detail;
      } else if (again.bytes != first.bytes) {
        result.failure = VerifyFailure::kNotBitStable;
        result.detail = fmt::format("two runs at {} threads gave different bytes", threads);
      }
    }
    if (result.failure == VerifyFailure::kNone && entry.precision.deterministic_across_threads) {
      report.thread_determinism_checked = true;
      RunOutcome again = runner.run(&other);
      if (again.failure != VerifyFailure::kNone) {
        result.failure = again.failure;
        result.detail = fmt::format("run at {} threads: {}", other.num_threads(), again.detail);
      } else if (again.bytes != first.bytes) {
        result.failure = VerifyFailure::kNotThreadDeterministic;
        result.detail = fmt::format("runs at {} and {} threads gave different bytes", threads,
                                    other.num_threads());
      }
    }
    report.worst_nmse = std::max(report.worst_nmse, result.nmse);
    report.worst_max_abs = std::max(report.worst_max_abs, result.max_abs_error);
    if (result.failure != VerifyFailure::kNone && report.failure == VerifyFailure::kNone) {
      report.failure = result.failure;
      report.reason =
          fmt::format("{} on case {}: {}", name(result.failure), result.description, result.detail);
    }
    report.cases.push_back(std::move(result));
  }
  for (Poison poison : kPoisons) {
    if (report.failure != VerifyFailure::kNone) break;
    const RunSite site{.backend = slot.backend,
                       .memory = on_device ? memory : nullptr,
                       .stream = stream,
                       .runner = &parallel};
    auto [failure, detail] = run_poisoned(entry, *op, out_dtype, first_case, poison, site);
    if (failure != VerifyFailure::kNone) {
      report.failure = failure;
      report.reason = fmt::format("{} on a poisoned case: {}", name(failure), detail);
    }
  }
  if (report.failure != VerifyFailure::kNone) {
    report.verdict = VerifyVerdict::kFail;
  } else if (entry.precision.is_unaudited()) {
    report.verdict = VerifyVerdict::kUnaudited;
    report.reason = "the kernel makes no precision claim";
  } else {
    report.verdict = VerifyVerdict::kPass;
  }
  return report;
}

std::vector<VerifyEntryReport> verify_table(const KernelBindingTable& table,
                                            const VerifyOptions& options) {
  VerifyOptions with_memory = options;
  for (BackendId b : kAllBackends) {
    BackendMemory*& memory = with_memory.memory[static_cast<std::size_t>(b)];
    if (memory == nullptr) memory = table.backend_memory(b);
  }
  std::vector<VerifyEntryReport> reports;
  for (const KernelBindingTable::EntryRef ref : table.entries()) {
    if (options.backend && ref.slot.backend != *options.backend) continue;
    if (options.op && ref.slot.key != BindingKey(*options.op)) continue;
    reports.push_back(verify_entry(ref.slot, ref.entry, with_memory));
  }
  return reports;
}

}  // namespace switchyard
