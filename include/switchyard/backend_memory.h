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
#pragma once

#include <cstdint>

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
};

// Memory in the process's own address space: 64-byte aligned heap blocks and
// memmove. The CPU backend's memory, and that of any backend whose device is the
// host (the null skeleton).
[[nodiscard]] BackendMemory& host_memory();

}  // namespace switchyard
