#include "calibrate/timing.h"

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <memory>
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

// The operand values time_entry promises (quantized blocks of zeros have scale 0:
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
    return memory_->copy(host_view, views_.back(), stream);
  }
  [[nodiscard]] std::span<const TensorView> views() const { return views_; }

 private:
  BackendMemory* memory_;
  BackendId backend_;
  std::vector<HostBuffer> host_;
  std::vector<void*> device_;
  std::vector<TensorView> views_;
};

KernelTimer::KernelTimer() = default;
KernelTimer::KernelTimer(KernelTimer&&) noexcept = default;
KernelTimer& KernelTimer::operator=(KernelTimer&&) noexcept = default;

KernelTimer::~KernelTimer() {
  operands_.reset();  // its device memory goes before the stream
  if (memory_ != nullptr && stream_ != nullptr) memory_->destroy_stream(stream_);
}

Result<KernelTimer> KernelTimer::make(const BindingEntry& entry, BackendId backend,
                                      std::span<const DType> dtypes, std::span<const Shape> shapes,
                                      const OpParams& params, BackendMemory* memory,
                                      ParallelRunner& runner) {
  if (dtypes.size() != shapes.size() || shapes.empty()) {
    return invalid_argument_error(fmt::format("{}: {} dtypes for {} operand shapes", entry.name,
                                              dtypes.size(), shapes.size()));
  }
  KernelTimer t;
  t.entry_ = &entry;
  t.params_ = params;
  t.memory_ = memory;
  if (memory != nullptr && !memory->host_addressable()) {
    SWITCHYARD_ASSIGN_OR_RETURN(t.stream_, memory->create_stream());
  }
  t.operands_ = std::make_unique<Operands>(memory, backend);
  for (std::size_t i = 0; i < shapes.size(); ++i) {
    SWITCHYARD_RETURN_IF_ERROR(t.operands_->add(dtypes[i], shapes[i], t.stream_));
  }
  t.ctx_ = ExecContext{.runner = &runner, .stream = t.stream_};
  return t;
}

Result<double> KernelTimer::call_ns() {
  const std::span<const TensorView> views = operands_->views();
  const std::size_t inputs = views.size() - 1;
  const KernelCall call{views.first(inputs), views.subspan(inputs, 1), params_, ctx_,
                        entry_->name,        entry_->data.get()};
  const Clock::time_point start = Clock::now();
  SWITCHYARD_RETURN_IF_ERROR(entry_->fn(call));
  if (memory_ != nullptr) SWITCHYARD_RETURN_IF_ERROR(memory_->synchronize(stream_));
  return std::chrono::duration<double, std::nano>(Clock::now() - start).count();
}

double median(std::vector<double> times) {
  if (times.empty()) return 0.0;
  std::nth_element(times.begin(), times.begin() + static_cast<std::ptrdiff_t>(times.size() / 2),
                   times.end());
  return times[times.size() / 2];
}

Result<double> time_entry(const BindingEntry& entry, BackendId backend,
                          std::span<const DType> dtypes, std::span<const Shape> shapes,
                          const OpParams& params, BackendMemory* memory, ParallelRunner& runner,
                          double budget_s) {
  SWITCHYARD_ASSIGN_OR_RETURN(
      KernelTimer timer, KernelTimer::make(entry, backend, dtypes, shapes, params, memory, runner));
  SWITCHYARD_RETURN_IF_ERROR(timer.call_ns().status());
  std::vector<double> times;
  const Clock::time_point deadline = Clock::now() + std::chrono::duration_cast<Clock::duration>(
                                                        std::chrono::duration<double>(budget_s));
  while (times.size() < 3 || (Clock::now() < deadline && times.size() < 1000)) {
    SWITCHYARD_ASSIGN_OR_RETURN(double ns, timer.call_ns());
    times.push_back(ns);
  }
  return median(std::move(times));
}

}  // namespace switchyard
