#include "backends/cuda/peer/direct_cublaslt.h"

#include <cublasLt.h>
#include <cuda_runtime_api.h>

#include <random>
#include <utility>
#include <vector>

#include <fmt/format.h>

#include "backends/cuda/cuda_stream.h"
#include "switchyard/half.h"

namespace switchyard::cuda {

// Everything the peer holds, released in the destructor whatever failed.
struct DirectCublasLt::Session {
  cudaStream_t stream = nullptr;
  cublasLtHandle_t lt = nullptr;
  cublasLtMatmulDesc_t op = nullptr;
  cublasLtMatrixLayout_t wl = nullptr, al = nullptr, ol = nullptr;
  cublasLtMatmulPreference_t preference = nullptr;
  void *a = nullptr, *w = nullptr, *out = nullptr, *workspace = nullptr;
  cublasLtMatmulAlgo_t algo{};

  ~Session() {
    if (stream != nullptr) (void)cudaStreamSynchronize(stream);
    for (void* p : {a, w, out, workspace}) (void)cudaFree(p);
    if (preference != nullptr) (void)cublasLtMatmulPreferenceDestroy(preference);
    for (cublasLtMatrixLayout_t l : {wl, al, ol}) {
      if (l != nullptr) (void)cublasLtMatrixLayoutDestroy(l);
    }
    if (op != nullptr) (void)cublasLtMatmulDescDestroy(op);
    if (lt != nullptr) (void)cublasLtDestroy(lt);
    if (stream != nullptr) (void)cudaStreamDestroy(stream);
  }
};

namespace {

// cuBLASLt's workspace, as CudaStream's.
constexpr std::size_t kWorkspace = std::size_t{32} << 20;

Status check(cudaError_t e, const char* what) {
  return e == cudaSuccess ? Status::ok() : cuda_error(e, fmt::format("cublaslt peer: {}", what));
}
Status check(cublasStatus_t s, const char* what) {
  return s == CUBLAS_STATUS_SUCCESS ? Status::ok()
                                    : cublas_error(s, fmt::format("cublaslt peer: {}", what));
}

// `count` random 16-bit values of `dtype` in device memory at *p.
Status random_operand(DType dtype, std::int64_t count, std::uint32_t seed, void** p) {
  std::vector<std::uint16_t> host(static_cast<std::size_t>(count));
  std::mt19937 rng(seed);
  std::normal_distribution<float> dist(0.0f, 0.1f);
  for (std::uint16_t& v : host)
    v = dtype == DType::kF16 ? f32_to_f16(dist(rng)) : f32_to_bf16(dist(rng));
  SWITCHYARD_RETURN_IF_ERROR(check(cudaMalloc(p, host.size() * 2), "allocating an operand"));
  return check(cudaMemcpy(*p, host.data(), host.size() * 2, cudaMemcpyHostToDevice),
               "copying an operand");
}

}  // namespace

DirectCublasLt::DirectCublasLt(std::unique_ptr<Session> session) : s_(std::move(session)) {}
DirectCublasLt::~DirectCublasLt() = default;

Result<std::unique_ptr<DirectCublasLt>> DirectCublasLt::create(DType dtype, std::int64_t m,
                                                               std::int64_t n, std::int64_t k) {
  if (dtype != DType::kF16 && dtype != DType::kBF16) {
    return invalid_argument_error(
        fmt::format("cublaslt peer: takes f16 or bf16, not {}", name(dtype)));
  }
  if (m < 1 || n < 1 || k < 1) return invalid_argument_error("cublaslt peer: sizes must be >= 1");
  int devices = 0;
  if (cudaGetDeviceCount(&devices) != cudaSuccess || devices == 0) {
    (void)cudaGetLastError();
    return unavailable_error("cublaslt peer: no CUDA device");
  }
  const cudaDataType_t type = dtype == DType::kF16 ? CUDA_R_16F : CUDA_R_16BF;
  auto s = std::make_unique<Session>();
  SWITCHYARD_RETURN_IF_ERROR(check(cudaStreamCreate(&s->stream), "making a stream"));
  SWITCHYARD_RETURN_IF_ERROR(random_operand(dtype, m * k, 1, &s->a));
  SWITCHYARD_RETURN_IF_ERROR(random_operand(dtype, n * k, 2, &s->w));
  SWITCHYARD_RETURN_IF_ERROR(
      check(cudaMalloc(&s->out, static_cast<std::size_t>(m * n) * 2), "allocating the output"));
  SWITCHYARD_RETURN_IF_ERROR(check(cudaMalloc(&s->workspace, kWorkspace), "allocating workspace"));
  SWITCHYARD_RETURN_IF_ERROR(check(cublasLtCreate(&s->lt), "making a handle"));
  SWITCHYARD_RETURN_IF_ERROR(
      check(cublasLtMatmulDescCreate(&s->op, CUBLAS_COMPUTE_32F, CUDA_R_32F), "a descriptor"));
  // Row-major out = a . w^T is column-major out^T = (w^T)^T . a^T: w is the
  // transposed first operand (K x N, leading dimension K), a the second.
  const cublasOperation_t t = CUBLAS_OP_T;
  SWITCHYARD_RETURN_IF_ERROR(check(
      cublasLtMatmulDescSetAttribute(s->op, CUBLASLT_MATMUL_DESC_TRANSA, &t, sizeof(t)), "transA"));
  const auto u = [](std::int64_t v) { return static_cast<std::uint64_t>(v); };
  SWITCHYARD_RETURN_IF_ERROR(check(cublasLtMatrixLayoutCreate(&s->wl, type, u(k), u(n), k), "w"));
  SWITCHYARD_RETURN_IF_ERROR(check(cublasLtMatrixLayoutCreate(&s->al, type, u(k), u(m), k), "a"));
  SWITCHYARD_RETURN_IF_ERROR(check(cublasLtMatrixLayoutCreate(&s->ol, type, u(n), u(m), n), "out"));
  SWITCHYARD_RETURN_IF_ERROR(check(cublasLtMatmulPreferenceCreate(&s->preference), "preference"));
  SWITCHYARD_RETURN_IF_ERROR(check(
      cublasLtMatmulPreferenceSetAttribute(s->preference, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES,
                                           &kWorkspace, sizeof(kWorkspace)),
      "workspace size"));
  cublasLtMatmulHeuristicResult_t best{};
  int found = 0;
  SWITCHYARD_RETURN_IF_ERROR(
      check(cublasLtMatmulAlgoGetHeuristic(s->lt, s->op, s->wl, s->al, s->ol, s->ol, s->preference,
                                           1, &best, &found),
            "choosing an algorithm"));
  if (found == 0) return unavailable_error("cublaslt peer: no algorithm for this product");
  s->algo = best.algo;
  std::unique_ptr<DirectCublasLt> peer(new DirectCublasLt(std::move(s)));
  SWITCHYARD_RETURN_IF_ERROR(peer->run(1));  // loads the kernel
  return peer;
}

Status DirectCublasLt::run(int calls) {
  const float one = 1.0f, zero = 0.0f;
  Session& s = *s_;
  for (int c = 0; c < calls; ++c) {
    SWITCHYARD_RETURN_IF_ERROR(
        check(cublasLtMatmul(s.lt, s.op, &one, s.w, s.wl, s.a, s.al, &zero, s.out, s.ol, s.out,
                             s.ol, &s.algo, s.workspace, kWorkspace, s.stream),
              "matmul"));
  }
  return check(cudaStreamSynchronize(s.stream), "waiting");
}

}  // namespace switchyard::cuda
