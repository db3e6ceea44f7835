// BackendMemory: the memory hooks a backend registers with its identity.
//
// Every backend owns the memory its kernels read and write: host memory for the
// CPU, device memory for an accelerator. The executor never allocates or copies
// by itself; it asks the memory of the backend a buffer lives on, which the
// backend registered in the binding table (KernelBindingTable::add_backend). So a
// new backend brings its own allocator and copy engine, and nothing above the
// backends names one.
//
// Example
//   BackendMemory* memory = table.backend_memory(BackendId::kCpu);
//   SWITCHYARD_ASSIGN_OR_RETURN(void* arena, memory->allocate(bytes));
//   ...
//   memory->deallocate(arena);
//
// Streams
//   A device backend queues work on streams. An executor asks the memory of each
//   backend its plan uses for one stream (create_stream) the first time it needs
//   it, hands it to that backend's kernels and copies (ExecContext::stream), waits
//   on it at the end of every run (synchronize) and destroys it with itself. The
//   host has no streams: its create_stream gives null and synchronize does nothing.
//   A stream is opaque outside its backend (the CUDA backend's is a CudaStream,
//   src/backends/cuda/cuda_stream.h, not a bare cudaStream_t).
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "switchyard/collective.h"
#include "switchyard/status.h"
#include "switchyard/tensor.h"

namespace switchyard {

// Memory of one backend, for arenas, constant uploads and copies between backends.
// Implementations are process-lifetime objects shared by every table and executor;
// calls may come from several threads at once.
class BackendMemory {
 public:
  virtual ~BackendMemory() = default;
  // `bytes` of memory aligned to 64 bytes (null for bytes <= 0), or
  // kResourceExhausted.
  [[nodiscard]] virtual Result<void*> allocate(std::int64_t bytes) = 0;
  // Frees what allocate() returned; null is ignored.
  virtual void deallocate(void* pointer) = 0;
  // Copies `src` into `dst` (same dtype and shape, both contiguous), on `stream`
  // where the backend has streams. Between two backends, the executor asks the
  // side that is not host-addressable, so that side's memory must accept host
  // memory as the other operand.
  [[nodiscard]] virtual Status copy(const TensorView& src, const TensorView& dst, void* stream) = 0;
  // True when the process can read and write this memory directly (host memory).
  [[nodiscard]] virtual bool host_addressable() const = 0;

  // Whether this memory can be used by this process now. The host's always can; a
  // device backend compiled into a build that runs where it has no device, or whose
  // driver is too old, answers kUnavailable saying which, and so do its other calls.
  [[nodiscard]] virtual Status ready() const { return Status::ok(); }
  // What a measurement on this memory's device depends on, for the fingerprint of
  // a calibration profile ("NVIDIA H200 | 132 SMs | driver 13000"); empty for the
  // host, which the calibration layer describes itself.
  [[nodiscard]] virtual std::string device_description() const { return {}; }
  // A new stream for one user's work (an executor, the conformance harness), or
  // null where the backend has no streams. kUnavailable without a device.
  [[nodiscard]] virtual Result<void*> create_stream() { return static_cast<void*>(nullptr); }
  // Destroys what create_stream returned, after waiting for its work; null is ignored.
  virtual void destroy_stream(void* /*stream*/) {}
  // Waits until everything queued on `stream` has finished. An error that the
  // queued work raised (a failed launch, an index a kernel found out of range)
  // comes back here, once.
  [[nodiscard]] virtual Status synchronize(void* /*stream*/) { return Status::ok(); }

  // Note [Replaying captured steps]
  // A device backend may record the work a run queues on a stream once and then
  // replay the recording with one call: a decode step of a 32-layer model queues
  // hundreds of kernels, and launching each from the host costs more than some of
  // them take on the device. Between begin_capture and end_capture, work queued on
  // `stream` is recorded, not run; end_capture returns the recording (opaque to
  // the caller) or the error that broke it (a call the backend cannot record), and
  // the stream is usable again either way. A recording keeps the addresses and
  // sizes it was made with: the caller replays it only while every operand is
  // where, and as large as, it was, and the backend keeps any memory its kernels
  // used (scratch) alive until the stream is destroyed. Only the calling thread's
  // work is recorded. A backend without recordings answers false to
  // can_capture and kUnimplemented to the rest.
  [[nodiscard]] virtual bool can_capture() const { return false; }
  [[nodiscard]] virtual Status begin_capture(void* /*stream*/) {
    return unimplemented_error("this backend's memory does not record streams");
  }
  [[nodiscard]] virtual Result<void*> end_capture(void* /*stream*/) {
    return unimplemented_error("this backend's memory does not record streams");
  }
  // Queues the recorded work on `stream` (the one it was recorded on).
  [[nodiscard]] virtual Status replay(void* /*recording*/, void* /*stream*/) {
    return unimplemented_error("this backend's memory does not record streams");
  }
  // Frees what end_capture returned; null is ignored.
  virtual void destroy_recording(void* /*recording*/) {}

  // The communicators of a group of `ranks` ranks on this backend's devices, rank r
  // on device r, for the collective kernels of a tensor-parallel plan (Note
  // [Collectives] in collective.h). kUnimplemented for a backend without
  // collectives of its own (the host's: its ranks are HostRankGroup's threads);
  // kUnavailable when the machine has fewer devices than ranks.
  [[nodiscard]] virtual Result<std::vector<std::unique_ptr<Communicator>>> create_communicators(
      int /*ranks*/) {
    return unimplemented_error("this backend's memory makes no communicators");
  }

  // Note [One device per rank]
  // A backend may drive several devices of one kind (the GPUs of a host). Its
  // allocations, streams and launches go to the calling thread's current device,
  // which use_device sets, so a tensor-parallel plan's rank r loads and runs on a
  // thread that has chosen device r first (the streams it makes then belong to
  // device r, and so must every call that uses them). The devices this process
  // may use are 0 .. device_count() - 1; the host has one.
  [[nodiscard]] virtual int device_count() const { return 1; }
  // Makes `device` the calling thread's current device. kInvalidArgument outside
  // 0 .. device_count() - 1; kUnavailable without a usable device.
  [[nodiscard]] virtual Status use_device(int device) {
    if (device == 0) return Status::ok();
    return invalid_argument_error("this backend's memory has one device (0); there is no device " +
                                  std::to_string(device));
  }
};

// Memory in the process's own address space: 64-byte aligned heap blocks and
// memmove. The CPU backend's memory, and that of any backend whose device is the
// host (the null skeleton).
[[nodiscard]] BackendMemory& host_memory();

}  // namespace switchyard
