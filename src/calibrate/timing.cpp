#include "calibrate/timing.h"

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <memory>
#include <utility>
#include <vector>

#include <fmt/format.h>

#include "switchyard/half.h"

namespace switchyard {
namespace {

using Clock = std::chrono::steady_clock;

struct HostBuffer {
  std::vector<std::byte> bytes;
  std::byte* aligned = nullptr;
};

// The operand values KernelTimer promises (quantized blocks of zeros have scale 0:
// valid, and as fast to decode as any other).
Result<HostBuffer> make_host(DType t, const Shape& shape) {
  SWITCHYARD_ASSIGN_OR_RETURN(std::int64_t size, row_bytes(t, shape.numel()));
  HostBuffer b;
  b.bytes.assign(static_cast<std::size_t>(size) + 64, std::byte{0});
  auto address = reinterpret_cast<std::uintptr_t>(b.bytes.data());
  b.aligned = b.bytes.data() + ((64 - address % 64) % 64);
  const std::int64_t n = shape.numel();
  auto value = [](std::int64_t i) { return static_cast<float>((i * 37) % 2001) / 1000.0f - 1.0f; };
  if (t == DType::kF32) {
    auto* p = reinterpret_cast<float*>(b.aligned);
    for (std::int64_t i = 0; i < n; ++i) p[i] = value(i);
  } else if (t == DType::kF16 || t == DType::kBF16) {
    auto* p = reinterpret_cast<std::uint16_t*>(b.aligned);
    for (std::int64_t i = 0; i < n; ++i) {
      p[i] = t == DType::kF16 ? f32_to_f16(value(i)) : f32_to_bf16(value(i));
    }
  } else if (t == DType::kI32) {
    auto* p = reinterpret_cast<std::int32_t*>(b.aligned);
    for (std::int64_t i = 0; i < n; ++i) p[i] = static_cast<std::int32_t>(i);
  }
  return b;
}

// The operands of one point on `backend`, freed when it goes.
}  // namespace

class KernelTimer::Operands {
 public:
  Operands(BackendMemory* memory, BackendId backend) : memory_(memory), backend_(backend) {}
  Operands(const Operands&) = delete;
  Operands& operator=(const Operands&) = delete;
  ~Operands() {
    for (void* p : device_) memory_->deallocate(p);
  }

  Status add(DType t, const Shape& shape, void* stream) {
    SWITCHYARD_ASSIGN_OR_RETURN(HostBuffer host, make_host(t, shape));
    const TensorView host_view = TensorView::contiguous(host.aligned, t, shape);
    if (memory_ == nullptr || memory_->host_addressable()) {
      views_.push_back(host_view);
      host_.push_back(std::move(host));
      return Status::ok();
    }
    SWITCHYARD_ASSIGN_OR_RETURN(std::int64_t size, row_bytes(t, shape.numel()));
    SWITCHYARD_ASSIGN_OR_RETURN(void* p, memory_->allocate(size));
    device_.push_back(p);
    views_.push_back(TensorView::contiguous(p, t, shape, backend_));
    SWITCHYARD_RETURN_IF_ERROR(memory_->copy(host_view, views_.back(), stream));
    // The host values go when this returns: the copy must be done by then.
    return memory_->synchronize(stream);
  }
  [[nodiscard]] std::span<const TensorView> views() const { return views_; }

  // Puts a packed copy of host operand i in its place (Note [Prepacked weights]).
  Status pack(std::size_t i, const WeightPacking& packing, ExecContext& ctx) {
    if (memory_ != nullptr && !memory_->host_addressable()) {
      return unimplemented_error("packing a weight outside host memory");
    }
    SWITCHYARD_ASSIGN_OR_RETURN(std::shared_ptr<void> copy, pack_operand(packing, views_[i], ctx));
    packed_.push_back(std::move(copy));
    return Status::ok();
  }

 private:
  BackendMemory* memory_;
  BackendId backend_;
  std::vector<HostBuffer> host_;
  std::vector<void*> device_;
  std::vector<TensorView> views_;
  std::vector<std::shared_ptr<void>> packed_;
};

KernelTimer::KernelTimer() = default;

// A moved-from timer owns no stream: the stream is destroyed once, by the timer
// that holds it last.
KernelTimer::KernelTimer(KernelTimer&& other) noexcept
    : entry_(other.entry_),
      params_(other.params_),
      memory_(other.memory_),
      stream_(std::exchange(other.stream_, nullptr)),
      operands_(std::move(other.operands_)),
      in_place_(other.in_place_),
      ctx_(other.ctx_) {}

KernelTimer& KernelTimer::operator=(KernelTimer&& other) noexcept {
  if (this != &other) {
    release();
    entry_ = other.entry_;
    params_ = other.params_;
    memory_ = other.memory_;
    stream_ = std::exchange(other.stream_, nullptr);
    operands_ = std::move(other.operands_);
    in_place_ = other.in_place_;
    ctx_ = other.ctx_;
  }
  return *this;
}

KernelTimer::~KernelTimer() { release(); }

void KernelTimer::release() {
  operands_.reset();  // its device memory goes before the stream
  if (memory_ != nullptr && stream_ != nullptr) memory_->destroy_stream(stream_);
  stream_ = nullptr;
}

Result<KernelTimer> KernelTimer::make(const BindingEntry& entry, BackendId backend,
                                      std::span<const DType> dtypes, std::span<const Shape> shapes,
                                      const OpParams& params, BackendMemory* memory,
                                      ParallelRunner& runner, bool in_place) {
  if (dtypes.size() != shapes.size() || shapes.size() < (in_place ? 2u : 1u)) {
    return invalid_argument_error(fmt::format("{}: {} dtypes for {} operand shapes", entry.name,
                                              dtypes.size(), shapes.size()));
  }
  if (in_place && (dtypes.front() != dtypes.back() || !(shapes.front() == shapes.back()))) {
    return invalid_argument_error(
        fmt::format("{}: an output in place of the first input must match it", entry.name));
  }
  KernelTimer t;
  t.entry_ = &entry;
  t.params_ = params;
  t.memory_ = memory;
  if (memory != nullptr && !memory->host_addressable()) {
    SWITCHYARD_ASSIGN_OR_RETURN(t.stream_, memory->create_stream());
  }
  t.operands_ = std::make_unique<Operands>(memory, backend);
  t.in_place_ = in_place;
  for (std::size_t i = 0; i + (in_place ? 1 : 0) < shapes.size(); ++i) {
    SWITCHYARD_RETURN_IF_ERROR(t.operands_->add(dtypes[i], shapes[i], t.stream_));
  }
  t.ctx_ = ExecContext{.runner = &runner, .stream = t.stream_};
  if (entry.packing != nullptr) {
    SWITCHYARD_RETURN_IF_ERROR(t.operands_->pack(static_cast<std::size_t>(entry.packing->operand),
                                                 *entry.packing, t.ctx_));
  }
  return t;
}

Result<double> KernelTimer::call_ns() {
  const std::span<const TensorView> views = operands_->views();
  const std::size_t inputs = in_place_ ? views.size() : views.size() - 1;
  const std::span<const TensorView> out = in_place_ ? views.first(1) : views.subspan(inputs, 1);
  const KernelCall call{views.first(inputs), out, params_, ctx_, entry_->name, entry_->data.get()};
  const Clock::time_point start = Clock::now();
  SWITCHYARD_RETURN_IF_ERROR(entry_->fn(call));
  if (memory_ != nullptr) SWITCHYARD_RETURN_IF_ERROR(memory_->synchronize(stream_));
  return std::chrono::duration<double, std::nano>(Clock::now() - start).count();
}

double clock_step_ns() {
  static const double step = [] {
    Clock::duration smallest = Clock::duration::max();
    for (int i = 0; i < 1000; ++i) {
      const Clock::time_point t0 = Clock::now();
      Clock::time_point t1 = Clock::now();
      while (t1 == t0) t1 = Clock::now();
      smallest = std::min(smallest, t1 - t0);
    }
    return std::chrono::duration<double, std::nano>(smallest).count();
  }();
  return step;
}

std::vector<Result<double>> time_in_turn(std::vector<KernelTimer>& timers, double budget_s,
                                         int min_rounds) {
  std::vector<Result<double>> out(timers.size(), Result<double>(0.0));
  std::vector<std::vector<double>> times(timers.size());
  std::vector<bool> live(timers.size(), true);
  const auto call = [&](std::size_t i) {
    Result<double> ns = timers[i].call_ns();
    if (!ns.is_ok()) {
      out[i] = ns.status();
      live[i] = false;
    }
    return ns;
  };
  for (std::size_t i = 0; i < timers.size(); ++i) (void)call(i);  // warm-up
  const auto budget = std::chrono::duration_cast<Clock::duration>(
      std::chrono::duration<double>(budget_s * static_cast<double>(timers.size())));
  const Clock::time_point deadline = Clock::now() + budget;
  for (int round = 0; round < 1000; ++round) {
    if (round >= min_rounds && Clock::now() >= deadline) break;
    for (std::size_t k = 0; k < timers.size(); ++k) {
      const std::size_t i = (k + static_cast<std::size_t>(round)) % timers.size();
      if (!live[i]) continue;
      if (Result<double> ns = call(i); ns.is_ok()) times[i].push_back(*ns);
    }
  }
  for (std::size_t i = 0; i < timers.size(); ++i) {
    if (live[i]) out[i] = median(std::move(times[i]));
  }
  return out;
}

std::string timing_key(std::string_view kernel, std::span<const Shape> shapes, const OpParams& p) {
  std::string key(kernel);
  for (const Shape& s : shapes) {
    key += ' ';
    key += s.to_string();
  }
  key += fmt::format(" | {} {} {} {} {} {} {} {}", p.scale, p.eps, p.axis, p.causal,
                     static_cast<int>(p.rope_mode), p.rope_base, p.rope_dims, p.query_offset);
  return key;
}

double median(std::vector<double> times) {
  if (times.empty()) return 0.0;
  std::nth_element(times.begin(), times.begin() + static_cast<std::ptrdiff_t>(times.size() / 2),
                   times.end());
  return times[times.size() / 2];
}

}  // namespace switchyard
