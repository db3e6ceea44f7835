// A peer for the table's cuBLASLt matmul: the same product through cuBLASLt
// called directly, with a handle, descriptors and algorithm of its own, so that
// bench/cuda_bench.cpp can measure what dispatch through the binding table adds
// to a library GEMM (the target: nothing beyond the noise). This header
// names no CUDA type, so the benchmark includes it without the toolkit's headers.
#pragma once

#include <cstdint>
#include <memory>

#include "switchyard/dtype.h"
#include "switchyard/status.h"

namespace switchyard::cuda {

// out [m, n] = a [m, k] . w [n, k]^T with a, w and out of `dtype` (f16 or bf16,
// f32 compute, as the table's cublaslt siblings) and random operands, set up once
// on a stream of its own.
class DirectCublasLt {
 public:
  // kUnavailable without a device; kInvalidArgument for another dtype or a size
  // below 1.
  [[nodiscard]] static Result<std::unique_ptr<DirectCublasLt>> create(DType dtype, std::int64_t m,
                                                                      std::int64_t n,
                                                                      std::int64_t k);
  ~DirectCublasLt();
  DirectCublasLt(const DirectCublasLt&) = delete;
  DirectCublasLt& operator=(const DirectCublasLt&) = delete;

  // Queues `calls` products back to back and waits for them.
  [[nodiscard]] Status run(int calls);

 private:
  struct Session;
  explicit DirectCublasLt(std::unique_ptr<Session> session);
  std::unique_ptr<Session> s_;
};

}  // namespace switchyard::cuda
