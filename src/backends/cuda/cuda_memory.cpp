#include "backends/cuda/cuda_memory.h"

#include <cuda_runtime_api.h>

#include <algorithm>
#include <cstring>
#include <mutex>

#include <fmt/format.h>

#include "backends/cuda/collective/nccl.h"
#include "backends/cuda/cuda_stream.h"

namespace switchyard::cuda {

Status cuda_error(cudaError_t error, std::string_view what) {
  const std::string text =
      fmt::format("{}: {} ({})", what, cudaGetErrorString(error), cudaGetErrorName(error));
  switch (error) {
    case cudaErrorMemoryAllocation: return resource_exhausted_error(text);
    case cudaErrorNoDevice:
    case cudaErrorInsufficientDriver:
    case cudaErrorInitializationError:
    case cudaErrorDevicesUnavailable:
    case cudaErrorNoKernelImageForDevice: return unavailable_error(text);
    default: return internal_error(text);
  }
}

Status cublas_error(cublasStatus_t status, std::string_view what) {
  const std::string text = fmt::format("{}: cuBLASLt status {} ({})", what,
                                       static_cast<int>(status), cublasLtGetStatusString(status));
  switch (status) {
    case CUBLAS_STATUS_ALLOC_FAILED: return resource_exhausted_error(text);
    case CUBLAS_STATUS_NOT_INITIALIZED:
    case CUBLAS_STATUS_ARCH_MISMATCH: return unavailable_error(text);
    case CUBLAS_STATUS_NOT_SUPPORTED:
    case CUBLAS_STATUS_INVALID_VALUE: return invalid_argument_error(text);
    default: return internal_error(text);
  }
}

Result<CudaStream*> stream_of(const KernelCall& call) {
  if (call.ctx.stream == nullptr) {
    return failed_precondition_error(
        fmt::format("{}: no CUDA stream in the call's context (ExecContext::stream must be a "
                    "stream that the cuda backend's memory made)",
                    call.name));
  }
  return static_cast<CudaStream*>(call.ctx.stream);
}

Result<void*> scratch(CudaStream& stream, std::size_t bytes) {
  if (bytes <= stream.scratch_bytes) return stream.scratch;
  bytes = std::max(bytes, 2 * stream.scratch_bytes);
  void* p = nullptr;
  const cudaError_t e = cudaMalloc(&p, bytes);
  if (e != cudaSuccess) {
    (void)cudaGetLastError();
    return cuda_error(e, fmt::format("cuda: allocating {} bytes of scratch memory", bytes));
  }
  if (stream.scratch != nullptr) stream.retired_scratch.push_back(stream.scratch);
  stream.scratch = p;
  stream.scratch_bytes = bytes;
  return p;
}

namespace {

// cuBLASLt's workspace per stream: what its heuristics ask for on Hopper.
constexpr std::size_t kWorkspaceBytes = std::size_t{32} << 20;

// Note [Staged uploads]
// A copy from pageable host memory (a weight in the memory-mapped model file)
// cannot be read by the copy engine directly: the driver stages it through
// pinned memory of its own, in pieces, and the host waits for each piece. An
// upload of kStagedMinBytes or more goes through the stream's own two pinned
// buffers of kStagingBytes instead: the host fills one while the copy engine
// drains the other, an event per buffer saying when it may be refilled. The
// source is read once, by memcpy, which also takes the file's page faults. Small
// copies (tokens, masks, positions) go straight through cudaMemcpyAsync.
constexpr std::size_t kStagingBytes = std::size_t{16} << 20;
constexpr std::size_t kStagedMinBytes = std::size_t{4} << 20;

// Note [Device readiness is asked once]
// The first CUDA call of a process initialises the runtime and tells whether a
// device and a new enough driver are there; the answer does not change while the
// process lives, so it is asked once and kept. Every allocating call checks it
// first, so that a build with CUDA on a machine without a GPU fails each call
// with the same kUnavailable saying why, never with a stray CUDA error.
const Status& readiness() {
  static const Status kReady = [] {
    int count = 0;
    const cudaError_t e = cudaGetDeviceCount(&count);
    if (e == cudaErrorNoDevice || (e == cudaSuccess && count == 0)) {
      return unavailable_error("cuda: no CUDA device is present");
    }
    if (e == cudaErrorInsufficientDriver) {
      int runtime = 0;
      (void)cudaRuntimeGetVersion(&runtime);
      return unavailable_error(fmt::format(
          "cuda: the NVIDIA driver is missing or older than this build's CUDA runtime {}.{}",
          runtime / 1000, runtime % 1000 / 10));
    }
    if (e != cudaSuccess) return cuda_error(e, "cuda: looking for a device");
    return Status::ok();
  }();
  return kReady;
}

class CudaMemory final : public BackendMemory {
 public:
  Status ready() const override { return readiness(); }

  Result<void*> allocate(std::int64_t bytes) override {
    SWITCHYARD_RETURN_IF_ERROR(readiness());
    if (bytes <= 0) return static_cast<void*>(nullptr);
    void* p = nullptr;
    // cudaMalloc aligns to 256 bytes, more than the 64 the contract asks.
    const cudaError_t e = cudaMalloc(&p, static_cast<std::size_t>(bytes));
    if (e != cudaSuccess) {
      (void)cudaGetLastError();  // an allocation failure is not sticky; clear it
      return cuda_error(e, fmt::format("cuda: allocating {} bytes of device memory", bytes));
    }
    return p;
  }

  void deallocate(void* pointer) override {
    if (pointer != nullptr) (void)cudaFree(pointer);
  }

  // Note [Copies and the host]
  // Host to device and device to device copies are queued on the stream. A copy to
  // the host waits for it: what follows a copy to the host is host code (a CPU
  // kernel, the caller reading its output), which must see the bytes, and the
  // executor has no event to wait on between steps. The planner counts these
  // copies as transfers, so a plan that bounces between the backends pays for it
  // there first.
  Status copy(const TensorView& src, const TensorView& dst, void* stream) override {
    if (src.dtype() != dst.dtype() || !(src.shape() == dst.shape()) || !src.is_contiguous() ||
        !dst.is_contiguous()) {
      return invalid_argument_error(
          fmt::format("cuda copy: {} into {}", describe(src), describe(dst)));
    }
    SWITCHYARD_ASSIGN_OR_RETURN(std::int64_t bytes, row_bytes(src.dtype(), src.numel()));
    if (bytes == 0) return Status::ok();
    SWITCHYARD_RETURN_IF_ERROR(readiness());
    const bool from_host = src.backend() != BackendId::kCuda;
    const bool to_host = dst.backend() != BackendId::kCuda;
    const cudaMemcpyKind kind = from_host && to_host ? cudaMemcpyHostToHost
                                : from_host          ? cudaMemcpyHostToDevice
                                : to_host            ? cudaMemcpyDeviceToHost
                                                     : cudaMemcpyDeviceToDevice;
    const auto size = static_cast<std::size_t>(bytes);
    const std::string what = fmt::format("cuda copy of {} bytes ({} to {})", bytes,
                                         name(src.backend()), name(dst.backend()));
    if (stream == nullptr) {
      const cudaError_t e = cudaMemcpy(dst.first(), src.first(), size, kind);
      return e == cudaSuccess ? Status::ok() : cuda_error(e, what);
    }
    CudaStream& s = *static_cast<CudaStream*>(stream);
    if (kind == cudaMemcpyHostToDevice && size >= kStagedMinBytes) {
      return staged_upload(s, src.first(), dst.first(), size).with_context(what);
    }
    cudaError_t e = cudaMemcpyAsync(dst.first(), src.first(), size, kind, s.stream);
    if (e == cudaSuccess && to_host) return synchronize(stream).with_context(what);
    return e == cudaSuccess ? Status::ok() : cuda_error(e, what);
  }

  bool host_addressable() const override { return false; }

  std::string device_description() const override {
    if (!readiness().is_ok()) return "no usable CUDA device";
    int device = 0;
    cudaDeviceProp prop{};
    int driver = 0;
    if (cudaGetDevice(&device) != cudaSuccess ||
        cudaGetDeviceProperties(&prop, device) != cudaSuccess ||
        cudaDriverGetVersion(&driver) != cudaSuccess) {
      (void)cudaGetLastError();
      return "CUDA device (properties unavailable)";
    }
    return fmt::format("{} | {} SMs | driver {}", prop.name, prop.multiProcessorCount, driver);
  }

  Result<std::vector<std::unique_ptr<Communicator>>> create_communicators(int ranks) override {
    SWITCHYARD_RETURN_IF_ERROR(readiness());
    return create_nccl_communicators(ranks);
  }

  // Note [One device per rank] in backend_memory.h: the CUDA runtime's current
  // device is the calling thread's, so cudaSetDevice is the whole of it.
  int device_count() const override {
    int devices = 0;
    if (!readiness().is_ok() || cudaGetDeviceCount(&devices) != cudaSuccess) {
      (void)cudaGetLastError();
      return 0;
    }
    return devices;
  }

  Status use_device(int device) override {
    SWITCHYARD_RETURN_IF_ERROR(readiness());
    const int devices = device_count();
    if (device < 0 || device >= devices) {
      return invalid_argument_error(
          fmt::format("cuda: there is no device {}; this machine has {} (0 to {})", device, devices,
                      devices - 1));
    }
    const cudaError_t e = cudaSetDevice(device);
    return e == cudaSuccess ? Status::ok()
                            : cuda_error(e, fmt::format("cuda: choosing device {}", device));
  }

  Result<void*> create_stream() override {
    SWITCHYARD_RETURN_IF_ERROR(readiness());
    auto s = std::make_unique<CudaStream>();
    Status made = make(*s);
    if (!made.is_ok()) {
      destroy(*s);
      return made;
    }
    return static_cast<void*>(s.release());
  }

  void destroy_stream(void* stream) override {
    if (stream == nullptr) return;
    std::unique_ptr<CudaStream> s(static_cast<CudaStream*>(stream));
    if (s->stream != nullptr) (void)cudaStreamSynchronize(s->stream);
    destroy(*s);
  }

  Status synchronize(void* stream) override {
    if (stream == nullptr) return Status::ok();
    CudaStream& s = *static_cast<CudaStream*>(stream);
    const cudaError_t e = cudaStreamSynchronize(s.stream);
    if (e != cudaSuccess) return cuda_error(e, "cuda: the stream's queued work failed");
    const int code = *s.error_host;
    if (code == 0) return Status::ok();
    *s.error_host = 0;
    // Only get_rows reports through the word today (device.h, ErrorCode).
    return out_of_range_error(
        "cuda: a kernel found an index out of range (get_rows: an index "
        "outside the table's rows)");
  }

  // Note [Replaying captured steps] in backend_memory.h. Capture is thread-local:
  // other threads (another executor's) may allocate and synchronize meanwhile,
  // while a call of this thread that cannot be recorded (cudaMalloc, a wait)
  // breaks the capture, and end_capture says so.
  bool can_capture() const override { return readiness().is_ok(); }

  Status begin_capture(void* stream) override {
    SWITCHYARD_RETURN_IF_ERROR(readiness());
    CudaStream& s = *static_cast<CudaStream*>(stream);
    const cudaError_t e = cudaStreamBeginCapture(s.stream, cudaStreamCaptureModeThreadLocal);
    return e == cudaSuccess ? Status::ok() : cuda_error(e, "cuda: beginning a stream capture");
  }

  Result<void*> end_capture(void* stream) override {
    CudaStream& s = *static_cast<CudaStream*>(stream);
    cudaGraph_t graph = nullptr;
    cudaError_t e = cudaStreamEndCapture(s.stream, &graph);
    cudaGraphExec_t exec = nullptr;
    if (e == cudaSuccess) e = cudaGraphInstantiate(&exec, graph, 0);
    if (graph != nullptr) (void)cudaGraphDestroy(graph);
    if (e != cudaSuccess) {
      (void)cudaGetLastError();  // a broken capture is not sticky; clear it
      return cuda_error(e, "cuda: recording the stream's work");
    }
    return static_cast<void*>(exec);
  }

  Status replay(void* recording, void* stream) override {
    CudaStream& s = *static_cast<CudaStream*>(stream);
    const cudaError_t e = cudaGraphLaunch(static_cast<cudaGraphExec_t>(recording), s.stream);
    return e == cudaSuccess ? Status::ok() : cuda_error(e, "cuda: replaying recorded work");
  }

  void destroy_recording(void* recording) override {
    if (recording != nullptr) (void)cudaGraphExecDestroy(static_cast<cudaGraphExec_t>(recording));
  }

 private:
  // Note [Staged uploads].
  static Status staged_upload(CudaStream& s, const std::byte* src, std::byte* dst,
                              std::size_t size) {
    for (int b = 0; b < 2; ++b) {
      if (s.staging[b] != nullptr) continue;
      cudaError_t e = cudaHostAlloc(&s.staging[b], kStagingBytes, cudaHostAllocDefault);
      if (e == cudaSuccess) e = cudaEventCreateWithFlags(&s.staged[b], cudaEventDisableTiming);
      if (e != cudaSuccess) {
        (void)cudaGetLastError();
        return cuda_error(e, "cuda: making the pinned staging buffers");
      }
    }
    for (std::size_t at = 0, piece = 0; at < size; at += kStagingBytes, ++piece) {
      const std::size_t b = piece % 2;
      const std::size_t n = std::min(kStagingBytes, size - at);
      // The copy engine may still be reading this buffer (an earlier piece, or an
      // earlier upload's).
      cudaError_t e = cudaEventSynchronize(s.staged[b]);
      if (e == cudaSuccess) {
        std::memcpy(s.staging[b], src + at, n);
        e = cudaMemcpyAsync(dst + at, s.staging[b], n, cudaMemcpyHostToDevice, s.stream);
      }
      if (e == cudaSuccess) e = cudaEventRecord(s.staged[b], s.stream);
      if (e != cudaSuccess) return cuda_error(e, "cuda: a staged upload");
    }
    return Status::ok();
  }

  static Status make(CudaStream& s) {
    cudaError_t e = cudaStreamCreateWithFlags(&s.stream, cudaStreamNonBlocking);
    if (e != cudaSuccess) return cuda_error(e, "cuda: creating a stream");
    e = cudaHostAlloc(reinterpret_cast<void**>(&s.error_host), sizeof(int), cudaHostAllocMapped);
    if (e != cudaSuccess) return cuda_error(e, "cuda: allocating the stream's error word");
    *s.error_host = 0;
    e = cudaHostGetDevicePointer(reinterpret_cast<void**>(&s.error_device), s.error_host, 0);
    if (e != cudaSuccess) return cuda_error(e, "cuda: mapping the stream's error word");
    const cublasStatus_t b = cublasLtCreate(&s.lt);
    if (b != CUBLAS_STATUS_SUCCESS) return cublas_error(b, "cuda: creating a cuBLASLt handle");
    e = cudaMalloc(&s.workspace, kWorkspaceBytes);
    if (e != cudaSuccess) return cuda_error(e, "cuda: allocating the cuBLASLt workspace");
    s.workspace_bytes = kWorkspaceBytes;
    return Status::ok();
  }

  static void destroy(CudaStream& s) {
    for (auto& [key, plan] : s.lt_plans) {
      (void)cublasLtMatrixLayoutDestroy(plan.a);
      (void)cublasLtMatrixLayoutDestroy(plan.b);
      (void)cublasLtMatrixLayoutDestroy(plan.c);
      (void)cublasLtMatmulDescDestroy(plan.op);
    }
    s.lt_plans.clear();
    if (s.workspace != nullptr) (void)cudaFree(s.workspace);
    if (s.scratch != nullptr) (void)cudaFree(s.scratch);
    for (void* p : s.retired_scratch) (void)cudaFree(p);
    if (s.lt != nullptr) (void)cublasLtDestroy(s.lt);
    if (s.error_host != nullptr) (void)cudaFreeHost(s.error_host);
    for (int b = 0; b < 2; ++b) {
      if (s.staged[b] != nullptr) (void)cudaEventDestroy(s.staged[b]);
      if (s.staging[b] != nullptr) (void)cudaFreeHost(s.staging[b]);
    }
    if (s.stream != nullptr) (void)cudaStreamDestroy(s.stream);
    s = CudaStream{};
  }
};

}  // namespace

BackendMemory& cuda_memory() {
  static CudaMemory memory;
  return memory;
}

}  // namespace switchyard::cuda
