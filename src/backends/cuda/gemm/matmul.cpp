// Dense matmul on CUDA: out [..., M, N] = a [..., M, K] . w [N, K]^T (or per batch
// w [..., N, K]), through cuBLASLt or the portable tiled kernel.
//
// Note [Row-major matmul through cuBLASLt]
// cuBLASLt is column-major. Our row-major out [M, N] read column-major is out^T
// [N, M] with leading dimension N, and out^T = w . a^T, where w [N, K] row-major
// is, column-major, a K x N matrix with leading dimension K that the op transposes,
// and a [M, K] row-major is, column-major, exactly a^T (K x M, leading dimension
// K). So cuBLASLt computes C = op(A) B with A = w (transposed), B = a, m = N,
// n = M, k = K; no data moves. When w is shared by every batch (the usual weight),
// the batch is folded into M; a w per batch uses the strided batch.
//
// Note [Exact f32 products on bf16 tensor cores]
// A model with bf16 weights keeps f32 activations, and cuBLASLt multiplies f32 by
// bf16 only after rounding the f32 side to bf16 (2^-9 relative per product), which
// breaks the f32 dot-product claim (1e-4 of sum |a w|) that the tiled kernel keeps.
// The split sibling keeps it on the tensor cores: each activation a becomes
// hi + lo, two bf16 numbers (hi its top 16 bits, lo the rest rounded), within
// 2^-16 |a| of a (gemm/split.cu). A product of two bf16 numbers is exact in f32,
// and cuBLASLt sums in f32, so out = hi . w + lo . w (two bf16 products, the
// second with beta = 1) is within about 2^-16 of sum |a w| plus the f32 sum's
// own rounding: the tiled kernel's claim, at two tensor-core passes instead of
// one pass of the SIMT kernel (docs/benchmarks.md has both rates). The halves
// need 4 bytes per activation of device memory: the stream's scratch, or the
// staging a composite hands over (gemm/fused.cpp). Below kSplitMinRows rows the
// matrix-vector kernel, which reads each weight once, is faster, so the sibling
// admits only larger products (admits_split_rows).
//
// Note [One bf16 pass is a precision trade]
// The rounded sibling stages each activation as its nearest bf16 (within 2^-9
// of it) and takes one product: half the tensor-core work and half the staging
// of the split sibling, with each product a w within 2^-9 |a w| and the f32 sum
// on top, so it claims 1/128 of sum |a w|, as the quantized weights' bf16 tiles
// do. That is the claim of a bf16 activation, not an f32 one, so the row is
// flagged as a precision trade (Note [Precision trades] in binding_table.h):
// plans take it only when they admit trades, and then by its cost, which counts
// one pass where the split sibling's counts two. A prompt through bf16 weights
// is mostly these products, so the trade halves its tensor-core passes.
#include <array>
#include <limits>
#include <utility>

#include "backends/cuda/gemm/matmul_plan.h"
#include "backends/cuda/kernel_checks.h"
#include "backends/cuda/kernels.h"

namespace switchyard::cuda {

Result<MatmulShape> check_matmul(const KernelCall& call) {
  const TensorView &a = call.inputs[0], &w = call.inputs[1], &out = call.outputs[0];
  for (const TensorView* t : {&a, &w, &out}) {
    if (!t->is_contiguous()) {
      return invalid_argument_error(
          fmt::format("{}: operand {} must be contiguous", label(call), describe(*t)));
    }
  }
  const int rank = a.rank();
  MatmulShape s;
  bool ok = rank >= 2 && out.rank() == rank && (w.rank() == 2 || w.rank() == rank);
  if (ok) {
    s.m = a.dim(rank - 2);
    s.k = a.dim(rank - 1);
    s.n = w.dim(w.rank() - 2);
    ok = w.dim(w.rank() - 1) == s.k && out.dim(rank - 2) == s.m && out.dim(rank - 1) == s.n;
    for (int d = 0; ok && d < rank - 2; ++d) {
      ok = out.dim(d) == a.dim(d) && (w.rank() == 2 || w.dim(d) == a.dim(d));
      s.batch *= a.dim(d);
    }
    if (w.rank() > 2 && s.batch > 1) s.w_batch_stride = s.n * s.k;
  }
  if (!ok) {
    return invalid_argument_error(fmt::format(
        "{}: a {}, w {}, out {} are not [..., M, K], [N, K] "
        "or [..., N, K], and [..., M, N]",
        label(call), a.shape().to_string(), w.shape().to_string(), out.shape().to_string()));
  }
  if (s.w_batch_stride == 0) {
    // One w for every batch: the batches are rows of one product.
    s.m *= s.batch;
    s.batch = 1;
  }
  return s;
}

namespace {

cudaDataType_t lt_type(DType t) {
  switch (t) {
    case DType::kF16: return CUDA_R_16F;
    case DType::kBF16: return CUDA_R_16BF;
    default: return CUDA_R_32F;
  }
}

}  // namespace

std::uint32_t alignment(std::initializer_list<const void*> operands) {
  std::uint32_t align = 256;
  for (const void* p : operands) {
    const auto address = reinterpret_cast<std::uintptr_t>(p);
    while (align > 1 && address % align != 0) align /= 2;
  }
  return align;
}

Result<const LtPlan*> lt_plan(const KernelCall& call, CudaStream& s, cublasComputeType_t compute,
                              cudaDataType_t type, cudaDataType_t out_type,
                              const MatmulShape& shape, std::uint32_t align, std::int64_t ldc) {
  if (ldc == 0) ldc = shape.n;
  const LtPlanKey key{static_cast<int>(compute),
                      static_cast<int>(type),
                      static_cast<int>(out_type),
                      shape.m,
                      shape.n,
                      shape.k,
                      shape.batch,
                      shape.w_batch_stride,
                      align,
                      ldc};
  if (auto it = s.lt_plans.find(key); it != s.lt_plans.end()) return &it->second;
  LtPlan plan;
  auto fail = [&](cublasStatus_t st, std::string_view what) {
    if (plan.a != nullptr) (void)cublasLtMatrixLayoutDestroy(plan.a);
    if (plan.b != nullptr) (void)cublasLtMatrixLayoutDestroy(plan.b);
    if (plan.c != nullptr) (void)cublasLtMatrixLayoutDestroy(plan.c);
    if (plan.op != nullptr) (void)cublasLtMatmulDescDestroy(plan.op);
    return cublas_error(st, fmt::format("{}: {}", label(call), what));
  };
  cublasStatus_t st = cublasLtMatmulDescCreate(&plan.op, compute, CUDA_R_32F);
  if (st != CUBLAS_STATUS_SUCCESS) return fail(st, "creating the matmul descriptor");
  const cublasOperation_t transpose = CUBLAS_OP_T;
  st = cublasLtMatmulDescSetAttribute(plan.op, CUBLASLT_MATMUL_DESC_TRANSA, &transpose,
                                      sizeof(transpose));
  if (st != CUBLAS_STATUS_SUCCESS) return fail(st, "setting the transpose of w");
  const auto u = [](std::int64_t v) { return static_cast<std::uint64_t>(v); };
  // Note [Row-major matmul through cuBLASLt]: A = w (K x N), B = a (K x M), C = out (N x M).
  st = cublasLtMatrixLayoutCreate(&plan.a, type, u(shape.k), u(shape.n), shape.k);
  if (st == CUBLAS_STATUS_SUCCESS) {
    st = cublasLtMatrixLayoutCreate(&plan.b, type, u(shape.k), u(shape.m), shape.k);
  }
  if (st == CUBLAS_STATUS_SUCCESS) {
    st = cublasLtMatrixLayoutCreate(&plan.c, out_type, u(shape.n), u(shape.m), ldc);
  }
  if (st != CUBLAS_STATUS_SUCCESS) return fail(st, "creating the matrix layouts");
  if (shape.batch > 1) {
    const auto count = static_cast<std::int32_t>(shape.batch);
    const std::int64_t strides[3] = {shape.w_batch_stride, shape.m * shape.k, shape.m * shape.n};
    cublasLtMatrixLayout_t layouts[3] = {plan.a, plan.b, plan.c};
    for (int i = 0; i < 3 && st == CUBLAS_STATUS_SUCCESS; ++i) {
      st = cublasLtMatrixLayoutSetAttribute(layouts[i], CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT, &count,
                                            sizeof(count));
      if (st == CUBLAS_STATUS_SUCCESS) {
        st = cublasLtMatrixLayoutSetAttribute(layouts[i],
                                              CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET,
                                              &strides[i], sizeof(strides[i]));
      }
    }
    if (st != CUBLAS_STATUS_SUCCESS) return fail(st, "setting the batch");
  }
  cublasLtMatmulPreference_t preference = nullptr;
  st = cublasLtMatmulPreferenceCreate(&preference);
  if (st != CUBLAS_STATUS_SUCCESS) return fail(st, "creating the algorithm preference");
  const std::size_t workspace = s.workspace_bytes;
  st = cublasLtMatmulPreferenceSetAttribute(preference, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES,
                                            &workspace, sizeof(workspace));
  for (const cublasLtMatmulPreferenceAttributes_t attribute :
       {CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES,
        CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES}) {
    if (st == CUBLAS_STATUS_SUCCESS) {
      st = cublasLtMatmulPreferenceSetAttribute(preference, attribute, &align, sizeof(align));
    }
  }
  cublasLtMatmulHeuristicResult_t result{};
  int found = 0;
  if (st == CUBLAS_STATUS_SUCCESS) {
    st = cublasLtMatmulAlgoGetHeuristic(s.lt, plan.op, plan.a, plan.b, plan.c, plan.c, preference,
                                        1, &result, &found);
  }
  (void)cublasLtMatmulPreferenceDestroy(preference);
  if (st != CUBLAS_STATUS_SUCCESS) return fail(st, "choosing an algorithm");
  if (found == 0) return fail(CUBLAS_STATUS_NOT_SUPPORTED, "no algorithm for this product");
  plan.algo = result.algo;
  return &s.lt_plans.emplace(key, plan).first->second;
}

namespace {

Status matmul_lt(const KernelCall& call, bool tf32) {
  SWITCHYARD_ASSIGN_OR_RETURN(cudaStream_t stream, prepare(call, 2));
  SWITCHYARD_ASSIGN_OR_RETURN(CudaStream * s, stream_of(call));
  const TensorView &a = call.inputs[0], &w = call.inputs[1], &out = call.outputs[0];
  const DType t = out.dtype();
  if (a.dtype() != t || w.dtype() != t ||
      (t != DType::kF32 && t != DType::kF16 && t != DType::kBF16) || (tf32 && t != DType::kF32)) {
    return invalid_argument_error(
        fmt::format("{}: a {}, w {}, out {}: cuBLASLt takes one dtype, f32{}", label(call),
                    name(a.dtype()), name(w.dtype()), name(t), tf32 ? "" : ", f16 or bf16"));
  }
  SWITCHYARD_ASSIGN_OR_RETURN(MatmulShape shape, check_matmul(call));
  if (shape.m == 0 || shape.n == 0) return Status::ok();
  if (shape.k == 0 || shape.batch > std::numeric_limits<std::int32_t>::max()) {
    // cuBLASLt refuses k = 0; the tiled kernel writes the zeros.
    return matmul_simt_kernel(call);
  }
  const cublasComputeType_t compute = tf32 ? CUBLAS_COMPUTE_32F_FAST_TF32 : CUBLAS_COMPUTE_32F;
  SWITCHYARD_ASSIGN_OR_RETURN(const LtPlan* plan,
                              lt_plan(call, *s, compute, lt_type(t), lt_type(t), shape,
                                      alignment({a.first(), w.first(), out.first()})));
  const float one = 1.0f, zero = 0.0f;
  const cublasStatus_t st = cublasLtMatmul(
      s->lt, plan->op, &one, w.first(), plan->a, a.first(), plan->b, &zero, out.first(), plan->c,
      out.first(), plan->c, &plan->algo, s->workspace, s->workspace_bytes, stream);
  if (st != CUBLAS_STATUS_SUCCESS) return cublas_error(st, fmt::format("{}: matmul", label(call)));
  return Status::ok();
}

// Where the halves go in `staging`: hi at 0, lo at the next 256-byte boundary.
std::size_t split_half_bytes(std::int64_t elements) {
  const auto bytes = static_cast<std::size_t>(elements) * 2;
  return (bytes + 255) / 256 * 256;
}

}  // namespace

std::size_t bf16_staging_bytes(std::int64_t elements, Bf16Activations how) {
  return how == Bf16Activations::kSplit ? 2 * split_half_bytes(elements)
                                        : split_half_bytes(elements);
}

Status stage_bf16(const KernelCall& call, const TensorView& a, void* staging, const float* up,
                  Bf16Activations how) {
  SWITCHYARD_ASSIGN_OR_RETURN(CudaStream * s, stream_of(call));
  const std::int64_t elements = a.numel();
  auto* hi = static_cast<std::byte*>(staging);
  std::byte* lo = how == Bf16Activations::kSplit ? hi + split_half_bytes(elements) : nullptr;
  return launched(device::split_bf16(reinterpret_cast<const float*>(a.first()), up, hi, lo,
                                     elements, s->stream),
                  call);
}

namespace {

// The checked shape of a bf16 tensor-core product (f32 a and out, bf16 w).
Result<MatmulShape> check_bf16_product(const KernelCall& call) {
  SWITCHYARD_RETURN_IF_ERROR(prepare(call, 2).status());
  const TensorView &a = call.inputs[0], &w = call.inputs[1], &out = call.outputs[0];
  if (a.dtype() != DType::kF32 || w.dtype() != DType::kBF16 || out.dtype() != DType::kF32) {
    return invalid_argument_error(
        fmt::format("{}: a {}, w {}, out {}: the bf16 tensor-core product takes f32 a and out "
                    "and bf16 w",
                    label(call), name(a.dtype()), name(w.dtype()), name(out.dtype())));
  }
  return check_matmul(call);
}

// cuBLASLt takes neither k = 0 nor more than 2^31 - 1 batches; the tiled kernel
// does (as matmul_lt).
bool tiled_instead(const MatmulShape& shape) {
  return shape.k == 0 || shape.batch > std::numeric_limits<std::int32_t>::max();
}

// The product from staged activations, for a shape check_bf16_product passed
// (neither empty nor one for the tiled kernel).
Status run_staged_bf16(const KernelCall& call, const MatmulShape& shape, const void* staging,
                       Bf16Activations how) {
  SWITCHYARD_ASSIGN_OR_RETURN(CudaStream * s, stream_of(call));
  const TensorView &a = call.inputs[0], &w = call.inputs[1], &out = call.outputs[0];
  const auto* hi = static_cast<const std::byte*>(staging);
  const std::byte* lo = hi + split_half_bytes(a.numel());
  SWITCHYARD_ASSIGN_OR_RETURN(const LtPlan* plan,
                              lt_plan(call, *s, CUBLAS_COMPUTE_32F, CUDA_R_16BF, CUDA_R_32F, shape,
                                      alignment({w.first(), hi, lo, out.first()})));
  const float one = 1.0f, zero = 0.0f;
  // out = hi . w, then (split) out += lo . w.
  const std::pair<const void*, const float*> passes[] = {{hi, &zero}, {lo, &one}};
  const int count = how == Bf16Activations::kSplit ? 2 : 1;
  for (int p = 0; p < count; ++p) {
    const cublasStatus_t st =
        cublasLtMatmul(s->lt, plan->op, &one, w.first(), plan->a, passes[p].first, plan->b,
                       passes[p].second, out.first(), plan->c, out.first(), plan->c, &plan->algo,
                       s->workspace, s->workspace_bytes, s->stream);
    if (st != CUBLAS_STATUS_SUCCESS) {
      return cublas_error(st, fmt::format("{}: bf16 tensor-core matmul", label(call)));
    }
  }
  return Status::ok();
}

}  // namespace

Status matmul_staged_bf16(const KernelCall& call, const void* staging, Bf16Activations how) {
  SWITCHYARD_ASSIGN_OR_RETURN(MatmulShape shape, check_bf16_product(call));
  if (shape.m == 0 || shape.n == 0) return Status::ok();
  if (tiled_instead(shape)) return matmul_simt_kernel(call);
  return run_staged_bf16(call, shape, staging, how);
}

Status matmul_bf16(const KernelCall& call, void* staging, const float* up, Bf16Activations how) {
  SWITCHYARD_ASSIGN_OR_RETURN(MatmulShape shape, check_bf16_product(call));
  if (shape.m == 0 || shape.n == 0) return Status::ok();
  if (tiled_instead(shape)) return matmul_simt_kernel(call);
  SWITCHYARD_RETURN_IF_ERROR(stage_bf16(call, call.inputs[0], staging, up, how));
  return run_staged_bf16(call, shape, staging, how);
}

namespace {

Status matmul_bf16_kernel(const KernelCall& call, Bf16Activations how) {
  SWITCHYARD_ASSIGN_OR_RETURN(CudaStream * s, stream_of(call));
  const std::int64_t elements = call.inputs.empty() ? 0 : call.inputs[0].numel();
  // Planned for a bucket's largest size, run here with fewer rows (a prompt's
  // last row through the output head): the tiled kernel's matrix-vector path
  // reads the weights once instead of twice.
  if (!call.inputs.empty() && !admits_split_rows(std::array{call.inputs[0].shape()})) {
    return matmul_simt_kernel(call);
  }
  SWITCHYARD_ASSIGN_OR_RETURN(void* staging, scratch(*s, bf16_staging_bytes(elements, how)));
  return matmul_bf16(call, staging, nullptr, how);
}

}  // namespace

Status matmul_split_bf16_kernel(const KernelCall& call) {
  return matmul_bf16_kernel(call, Bf16Activations::kSplit);
}
Status matmul_rounded_bf16_kernel(const KernelCall& call) {
  return matmul_bf16_kernel(call, Bf16Activations::kRounded);
}

bool admits_split_rows(std::span<const Shape> shapes) {
  if (shapes.empty() || shapes[0].rank() < 1) return false;
  const std::int64_t k = shapes[0][shapes[0].rank() - 1];
  return k > 0 && shapes[0].numel() / k >= kSplitMinRows;
}

Status matmul_simt_kernel(const KernelCall& call) {
  SWITCHYARD_ASSIGN_OR_RETURN(cudaStream_t stream, prepare(call, 2));
  const TensorView &a = call.inputs[0], &w = call.inputs[1], &out = call.outputs[0];
  const std::optional<device::Type> at = device_type(a.dtype()), wt = device_type(w.dtype()),
                                    ot = device_type(out.dtype());
  const bool mixed = a.dtype() == DType::kF32 && out.dtype() == DType::kF32 &&
                     (w.dtype() == DType::kF16 || w.dtype() == DType::kBF16);
  const bool same =
      a.dtype() == w.dtype() && w.dtype() == out.dtype() && at && at != device::Type::kI32;
  if (!at || !wt || !ot || !(mixed || same)) {
    return invalid_argument_error(
        fmt::format("{}: a {}, w {}, out {} is not a dense matmul key of op.def", label(call),
                    name(a.dtype()), name(w.dtype()), name(out.dtype())));
  }
  SWITCHYARD_ASSIGN_OR_RETURN(MatmulShape s, check_matmul(call));
  return launched(device::matmul_simt(*at, *wt, *ot, a.first(), w.first(), out.first(), s.batch,
                                      s.m, s.n, s.k, s.w_batch_stride, stream),
                  call);
}

Status matmul_cublaslt_kernel(const KernelCall& call) { return matmul_lt(call, false); }
Status matmul_cublaslt_tf32_kernel(const KernelCall& call) { return matmul_lt(call, true); }

}  // namespace switchyard::cuda
