// A peer for the table's cuBLASLt matmul: the same product through cuBLASLt
// called directly, with a handle, descriptors and algorithm of its own, so that
// bench/cuda_bench.cpp can measure what dispatch through the binding table adds
// to a library GEMM (the target: nothing beyond the noise). This header
// names no CUDA type, so the benchmark includes it without the toolkit's headers.
#pragma once

#include <cstdint>

#include "switchyard/dtype.h"
#include "switchyard/status.h"

namespace switchyard::cuda {

// Seconds per product out [m, n] = a [m, k] . w [n, k]^T, a, w and out of `dtype`
// (f16 or bf16, f32 compute, as the table's cublaslt siblings), with random
// operands: the median over `repetitions` of `calls` products queued back to back
// and timed with CUDA events. kUnavailable without a device; kInvalidArgument for
// another dtype.
[[nodiscard]] Result<double> direct_cublaslt_seconds(DType dtype, std::int64_t m, std::int64_t n,
                                                     std::int64_t k, int calls, int repetitions);

}  // namespace switchyard::cuda
