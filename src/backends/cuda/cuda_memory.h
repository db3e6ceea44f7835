// CudaMemory: the CUDA backend's BackendMemory (device 0).
#pragma once

#include "switchyard/backend_memory.h"

namespace switchyard::cuda {

// Device memory through cudaMalloc / cudaFree; copies through cudaMemcpyAsync on
// the caller's CudaStream (synchronously without one); streams as CudaStream
// objects (cuda_stream.h). Without a device or with a driver too old for this
// build's runtime, ready() and every allocating call answer kUnavailable saying
// which; nothing aborts. Process-lifetime, safe to call from several threads.
[[nodiscard]] BackendMemory& cuda_memory();

}  // namespace switchyard::cuda
