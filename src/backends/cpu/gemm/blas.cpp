// matmul (f32, f32, f32) through OpenBLAS's cblas_sgemm: a peer implementation kept
// as a sibling (source "openblas"), for comparison and as a fallback the planner may
// rank. Built only when CMake found OpenBLAS (SWITCHYARD_HAVE_OPENBLAS).
//
// Threads: OpenBLAS runs its own thread pool. It is sized once to the backend's
// SWITCHYARD_THREADS count, so a process asking for 2 CPU threads gets 2 here too,
// and a 1-thread runner never has OpenBLAS fan out behind its back. OpenBLAS's
// blocked sums may differ between its thread counts, so this sibling claims no
// cross-thread determinism.
#if defined(SWITCHYARD_HAVE_OPENBLAS)

#include <cblas.h>
#include <fmt/format.h>

#include <algorithm>
#include <limits>
#include <mutex>

#include "backends/cpu/gemm/dense_kernels.h"

namespace switchyard::cpu {
namespace {

// Sets OpenBLAS's thread count when a call needs a different one. OpenBLAS's
// setting is process-wide, so changes are serialised.
void match_openblas_threads(int threads) {
  static std::mutex mutex;
  static int current = 0;
  std::lock_guard lock(mutex);
  if (current != threads) {
    openblas_set_num_threads(threads);
    current = threads;
  }
}

}  // namespace

Status matmul_f32_openblas(const KernelCall& call) {
  SWITCHYARD_ASSIGN_OR_RETURN(const MatmulDims d,
                              check_matmul(call, DType::kF32, DType::kF32, DType::kF32));
  // The runner's thread count when there is one, else the caller's single thread.
  match_openblas_threads(call.ctx.num_threads());
  const float* a = call.inputs[0].first_as<const float>();
  const float* w = call.inputs[1].first_as<const float>();
  float* out = call.outputs[0].first_as<float>();
  const std::int64_t rows = d.shared_weights ? d.batch * d.m : d.m;
  const std::int64_t matrices = d.shared_weights ? 1 : d.batch;
  if (rows == 0 || d.n == 0) return Status::ok();
  constexpr std::int64_t kMaxBlasInt = std::numeric_limits<blasint>::max();
  if (rows > kMaxBlasInt || d.n > kMaxBlasInt || d.k > kMaxBlasInt) {
    return invalid_argument_error(fmt::format(
        "{}: dimensions {} x {} x {} exceed OpenBLAS's integer range", call.name, rows, d.n, d.k));
  }
  for (std::int64_t b = 0; b < matrices; ++b) {
    // out = a · wᵀ, all row-major: w [N, K] is used transposed.
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, static_cast<blasint>(rows),
                static_cast<blasint>(d.n), static_cast<blasint>(d.k), 1.0f, a + b * rows * d.k,
                static_cast<blasint>(std::max<std::int64_t>(d.k, 1)), w + b * d.n * d.k,
                static_cast<blasint>(std::max<std::int64_t>(d.k, 1)), 0.0f, out + b * rows * d.n,
                static_cast<blasint>(d.n));
  }
  return Status::ok();
}

}  // namespace switchyard::cpu

#endif  // SWITCHYARD_HAVE_OPENBLAS
