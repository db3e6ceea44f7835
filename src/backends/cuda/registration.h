// The CUDA backend: kernels for NVIDIA GPUs (built for Hopper, sm_90, by default).
//
// Its section in the binding table carries CudaMemory (cuda_memory.h): device
// memory, copies and streams on device 0. Its rows are listed whenever the build
// has CUDA, device or not, so `switchyard coverage --backend cuda` shows them on a
// machine without a GPU; only running them needs one, and without it every
// allocating call answers kUnavailable (BackendMemory::ready says why).
#pragma once

#include <vector>

#include "switchyard/binding_table.h"

namespace switchyard::cuda {

// The rows this backend registers, best first at every key.
[[nodiscard]] const std::vector<KernelBindingTable::Row>& registration_rows();

// Adds the CUDA backend's section and its kernels to `table`.
void register_backend(KernelBindingTable& table);

}  // namespace switchyard::cuda
