// What the matmul kernel functions share (gemm/matmul.cpp, quant/): the checked
// shape of a product, and its cuBLASLt plan on a stream.
#pragma once

#include <cublasLt.h>

#include <cstdint>
#include <initializer_list>

#include "backends/cuda/cuda_stream.h"
#include "switchyard/kernel.h"

namespace switchyard::cuda {

struct MatmulShape {
  std::int64_t batch = 1, m = 0, n = 0, k = 0;
  // Elements between consecutive batches' w; 0 when w is shared.
  std::int64_t w_batch_stride = 0;
};

// a [..., M, K], w [N, K] or [..., N, K], out [..., M, N], all contiguous; a w
// shared by every batch folds the batch into M.
[[nodiscard]] Result<MatmulShape> check_matmul(const KernelCall& call);

// The alignment cuBLASLt may assume of the operands: the largest power of two,
// up to 256, that divides every address (its heuristic otherwise assumes 256, and
// an arena's buffers and views need not start there).
[[nodiscard]] std::uint32_t alignment(std::initializer_list<const void*> operands);

// Builds (or finds) the stream's cuBLASLt plan for out = a . w^T of `shape`
// (Note [Row-major matmul through cuBLASLt] in gemm/matmul.cpp). `type` is a's
// and w's, `out_type` the output's; `ldc` the distance between output rows (0:
// shape.n), for a product that writes a slice of a wider output's columns.
[[nodiscard]] Result<const LtPlan*> lt_plan(const KernelCall& call, CudaStream& s,
                                            cublasComputeType_t compute, cudaDataType_t type,
                                            cudaDataType_t out_type, const MatmulShape& shape,
                                            std::uint32_t align, std::int64_t ldc = 0);

}  // namespace switchyard::cuda
