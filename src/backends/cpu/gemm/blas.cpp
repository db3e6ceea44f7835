// matmul (f32, f32, f32) through OpenBLAS's cblas_sgemm: a peer implementation kept
// as a sibling (source "openblas"), for comparison and as a fallback the planner may
// rank. Built only when CMake found OpenBLAS (SWITCHYARD_HAVE_OPENBLAS).
//
// Threads: Note [OpenBLAS on the backend's threads].
#if defined(SWITCHYARD_HAVE_OPENBLAS)

#include <cblas.h>
#include <fmt/format.h>

#include <algorithm>
#include <limits>
#include <mutex>

#include "backends/cpu/gemm/dense_kernels.h"

namespace switchyard::cpu {
namespace {

// Note [OpenBLAS on the backend's threads]
// OpenBLAS keeps its own worker threads, and after a call they spin for a while
// before they sleep, as the backend's pool does after a parallel_for. In a plan
// where this sibling runs between the backend's kernels, the two sets of
// spinning threads took cores from each other: on two cores a 512 x 256 x 64
// product timed 120 us in a calibration and 200-230 us between pool kernels in
// a plan, so a profile ranked a kernel that a run does not get. So
// OpenBLAS is set to one thread, once, and this sibling cuts the product into
// one piece per pool thread (by activation rows when there are at least as many
// as weight rows, else by weight rows; by matrix when a batch has enough), each
// piece one single-threaded cblas_sgemm on the pool's thread. A piece depends
// only on the shape and the thread count, so a thread count gives the same bits
// every run; different counts may sum in different orders inside OpenBLAS, so
// the sibling claims no cross-thread determinism.
void use_one_openblas_thread() {
  static std::once_flag once;
  std::call_once(once, [] { openblas_set_num_threads(1); });
}

// out[rows, n] = a[rows, k] . w[n, k]^T, all row-major, on the calling thread.
void sgemm_nt(const float* a, const float* w, float* out, std::int64_t rows, std::int64_t n,
              std::int64_t k, std::int64_t ldc) {
  if (rows == 0 || n == 0) return;
  const auto ld = static_cast<blasint>(std::max<std::int64_t>(k, 1));
  cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, static_cast<blasint>(rows),
              static_cast<blasint>(n), static_cast<blasint>(k), 1.0f, a, ld, w, ld, 0.0f, out,
              static_cast<blasint>(ldc));
}

}  // namespace

Status matmul_f32_openblas(const KernelCall& call) {
  SWITCHYARD_ASSIGN_OR_RETURN(const MatmulDims d,
                              check_matmul(call, DType::kF32, DType::kF32, DType::kF32));
  use_one_openblas_thread();
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
  // Note [OpenBLAS on the backend's threads]: `parts` pieces of each matrix.
  const std::int64_t threads = call.ctx.num_threads();
  const std::int64_t parts = matrices >= threads ? 1 : threads;
  const bool by_rows = rows >= d.n;
  const std::int64_t cut = by_rows ? rows : d.n;
  const std::int64_t piece = (cut + parts - 1) / parts;
  call.ctx.parallel_for(matrices * parts, 1, [&](std::int64_t begin, std::int64_t end) {
    for (std::int64_t unit = begin; unit < end; ++unit) {
      const std::int64_t b = unit / parts;
      const std::int64_t from = std::min(cut, unit % parts * piece);
      const std::int64_t count = std::min(cut, from + piece) - from;
      const float* mat_a = a + b * rows * d.k;
      const float* mat_w = w + b * d.n * d.k;
      float* mat_out = out + b * rows * d.n;
      if (by_rows) {
        sgemm_nt(mat_a + from * d.k, mat_w, mat_out + from * d.n, count, d.n, d.k, d.n);
      } else {
        sgemm_nt(mat_a, mat_w + from * d.k, mat_out + from, rows, count, d.k, d.n);
      }
    }
  });
  return Status::ok();
}

}  // namespace switchyard::cpu

#endif  // SWITCHYARD_HAVE_OPENBLAS
