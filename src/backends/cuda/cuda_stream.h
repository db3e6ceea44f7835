// The CUDA backend's stream object and its error conversions.
//
// What an executor (or the conformance harness) holds as its CUDA "stream" is a
// CudaStream: the cudaStream_t its work is queued on, plus what the kernels of
// one stream share: the cuBLASLt handle, workspace and matmul plans, and a word
// of mapped host memory where a kernel reports an error it found on the device (an
// index out of range). CudaMemory makes and destroys it (create_stream /
// destroy_stream); kernels find it in ExecContext::stream.
#pragma once

#include <cublasLt.h>
#include <cuda_runtime_api.h>

#include <cstdint>
#include <map>
#include <string_view>
#include <tuple>
#include <vector>

#include "switchyard/kernel.h"
#include "switchyard/status.h"

namespace switchyard::cuda {

// A cuBLASLt matmul set up for one shape and type (gemm/matmul.cpp).
struct LtPlan {
  cublasLtMatmulDesc_t op = nullptr;
  cublasLtMatrixLayout_t a = nullptr, b = nullptr, c = nullptr;
  cublasLtMatmulAlgo_t algo{};
};
// (compute type, input type, output type, m, n, k, batch, w batch stride, operand
// alignment, output leading dimension)
using LtPlanKey = std::tuple<int, int, int, std::int64_t, std::int64_t, std::int64_t, std::int64_t,
                             std::int64_t, std::uint32_t, std::int64_t>;

struct CudaStream {
  cudaStream_t stream = nullptr;
  // Mapped, pinned: the host reads what kernels write through `error_device`.
  int* error_host = nullptr;
  int* error_device = nullptr;
  cublasLtHandle_t lt = nullptr;
  void* workspace = nullptr;
  std::size_t workspace_bytes = 0;
  // One stream belongs to one user at a time, so its plans need no lock.
  std::map<LtPlanKey, LtPlan> lt_plans;
  // Device memory the composite kernels (linear, ffn_swiglu) keep intermediates
  // in, grown on demand and kept (scratch()).
  void* scratch = nullptr;
  std::size_t scratch_bytes = 0;
  // Blocks the scratch outgrew: a recorded step may still name them (Note
  // [Replaying captured steps] in backend_memory.h), so they are freed with the
  // stream, not when they are outgrown.
  std::vector<void*> retired_scratch;
  // Pinned host buffers for large uploads and the events that say when the copy
  // engine is done with each (Note [Staged uploads] in cuda_memory.cpp); made on
  // the first large upload.
  void* staging[2] = {nullptr, nullptr};
  cudaEvent_t staged[2] = {nullptr, nullptr};
};

// At least `bytes` of the stream's scratch memory. Growing it at least doubles it
// and keeps the old block until the stream is destroyed (a recording may use it),
// so a stream reaches its largest size in a few steps, then allocates nothing,
// and holds under twice that.
[[nodiscard]] Result<void*> scratch(CudaStream& stream, std::size_t bytes);

// kResourceExhausted for out of memory, kUnavailable for no device or a driver
// too old, kInternal otherwise; the message says `what` failed and CUDA's words.
[[nodiscard]] Status cuda_error(cudaError_t error, std::string_view what);
// As cuda_error, for a cuBLASLt status.
[[nodiscard]] Status cublas_error(cublasStatus_t status, std::string_view what);

// The CudaStream of a kernel call, or kFailedPrecondition naming the kernel when
// the caller gave none (a CUDA kernel runs only on a stream its memory made).
[[nodiscard]] Result<CudaStream*> stream_of(const KernelCall& call);

}  // namespace switchyard::cuda
