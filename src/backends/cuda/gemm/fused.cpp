// linear and ffn_swiglu on CUDA, composed of the backend's own kernels on the
// call's stream.
//
// Note [Composite fused kernels]
// The planner forms a fused node only where a backend binds its key, so binding
// linear and ffn_swiglu here keeps graphs planned for cuda from differing in shape
// from the CPU's. These bindings are compositions, not fused kernels: the matmul
// sibling the weight dtype and the row count select (cuBLASLt in f32 compute for
// f32 weights; for bf16 weights the tensor-core product from kSplitMinRows rows,
// split or, in the _rounded siblings, rounded (Notes [Exact f32 products on bf16
// tensor cores] and [One bf16 pass is a precision trade]); otherwise the tiled
// kernel, which takes the matrix-vector path for few rows), then an elementwise
// pass. ffn_swiglu on the tensor cores stages x once for the gate and up
// products and forms silu(gate) * up while it stages the down projection's
// input, so that step costs no pass of its own; with few rows, gate, up and the
// activation are one matrix-vector kernel (Note [Fused decode feed-forward]).
// The intermediates go through device memory (the stream's scratch), which a
// single fused kernel would avoid; what the compositions save today is the
// planner's and the executor's per-node work. Their precision is the matmul's
// (one more rounding for the bias, and for silu and the product).
#include <algorithm>
#include <utility>

#include "backends/cuda/kernel_checks.h"
#include "backends/cuda/kernels.h"

namespace switchyard::cuda {
namespace {

// Whether a product of `m` rows by w takes the bf16 tensor-core path (Note
// [Composite fused kernels]).
bool tensor_core_path(const TensorView& w, std::int64_t m) {
  return w.dtype() == DType::kBF16 && m >= kSplitMinRows;
}

// The call a composite makes of one product: a [m, k] and w into out [m, n], all
// device views, with the fused call's context and name.
struct Product {
  TensorView inputs[2];
  TensorView out;
  KernelCall call;
  Product(const KernelCall& fused, const TensorView& a, const TensorView& w, const TensorView& o)
      : inputs{a, w},
        out(o),
        call{inputs, std::span<const TensorView>(&out, 1), fused.params, fused.ctx, fused.name} {}
  Product(const Product&) = delete;
  Product& operator=(const Product&) = delete;
};

// Runs a matmul of a and w into out. The tensor-core path stages a (`how`) in
// `staging` (bf16_staging_bytes(m * k, how) bytes) and, given `up`, multiplies
// silu(a) * up.
Status matmul(const KernelCall& call, const TensorView& a, const TensorView& w,
              const TensorView& out, Bf16Activations how, void* staging = nullptr,
              const float* up = nullptr) {
  const Product p(call, a, w, out);
  if (tensor_core_path(w, a.dim(0))) return matmul_bf16(p.call, staging, up, how);
  return w.dtype() == DType::kF32 ? matmul_cublaslt_kernel(p.call) : matmul_simt_kernel(p.call);
}

TensorView rows(const TensorView& t, std::int64_t m, std::int64_t n, void* data = nullptr) {
  return TensorView::contiguous(data != nullptr ? data : static_cast<void*>(t.first()), t.dtype(),
                                Shape{m, n}, BackendId::kCuda);
}

// x [..., k] as [m, k]; kInvalidArgument unless contiguous with rank >= 1.
Result<std::int64_t> row_count(const KernelCall& call, const TensorView& x) {
  if (x.rank() < 1 || !x.is_contiguous()) {
    return invalid_argument_error(
        fmt::format("{}: x {} must be contiguous [..., K]", label(call), describe(x)));
  }
  const std::int64_t k = x.dim(x.rank() - 1);
  return k > 0 ? x.numel() / k : 0;
}

Status linear(const KernelCall& call, Bf16Activations how) {
  SWITCHYARD_ASSIGN_OR_RETURN(cudaStream_t stream, prepare(call, 3));
  const TensorView &x = call.inputs[0], &w = call.inputs[1], &bias = call.inputs[2];
  const TensorView& out = call.outputs[0];
  if (x.dtype() != DType::kF32 || bias.dtype() != DType::kF32 || out.dtype() != DType::kF32 ||
      (w.dtype() != DType::kF32 && w.dtype() != DType::kF16 && w.dtype() != DType::kBF16)) {
    return invalid_argument_error(fmt::format(
        "{}: takes f32 x, bias and out and f32, f16 or bf16 weights; got {}, {}, {}, {}",
        label(call), name(x.dtype()), name(w.dtype()), name(bias.dtype()), name(out.dtype())));
  }
  SWITCHYARD_ASSIGN_OR_RETURN(std::int64_t m, row_count(call, x));
  if (w.rank() != 2 || w.dim(1) != x.dim(x.rank() - 1) || bias.rank() != 1 ||
      bias.dim(0) != w.dim(0) || !bias.is_contiguous() || !out.is_contiguous() ||
      out.numel() != m * w.dim(0)) {
    return invalid_argument_error(
        fmt::format("{}: x {}, w {}, bias {}, out {} are not [..., K], "
                    "[N, K], [N] and [..., N]",
                    label(call), x.shape().to_string(), w.shape().to_string(),
                    bias.shape().to_string(), out.shape().to_string()));
  }
  const std::int64_t n = w.dim(0), k = w.dim(1);
  const TensorView out2 = rows(out, m, n);
  void* staging = nullptr;
  if (tensor_core_path(w, m)) {
    SWITCHYARD_ASSIGN_OR_RETURN(CudaStream * s, stream_of(call));
    SWITCHYARD_ASSIGN_OR_RETURN(staging, scratch(*s, bf16_staging_bytes(m * k, how)));
  }
  SWITCHYARD_RETURN_IF_ERROR(matmul(call, rows(x, m, k), w, out2, how, staging));
  // out += bias, each row: the bias read with stride 0 across rows.
  device::Layout b;
  b.rank = 2;
  b.dims[0] = m;
  b.dims[1] = n;
  b.strides[0] = 0;
  b.strides[1] = 1;
  b.contiguous = m <= 1;
  return launched(device::binary(device::BinaryOp::kAdd, device::Type::kF32, out2.first(),
                                 layout_of(out2), bias.first(), b, out2.first(), m * n, stream),
                  call);
}

Status ffn_swiglu(const KernelCall& call, Bf16Activations how) {
  SWITCHYARD_ASSIGN_OR_RETURN(cudaStream_t stream, prepare(call, 4));
  SWITCHYARD_ASSIGN_OR_RETURN(CudaStream * s, stream_of(call));
  const TensorView &x = call.inputs[0], &gate = call.inputs[1], &up = call.inputs[2];
  const TensorView &down = call.inputs[3], &out = call.outputs[0];
  const DType wt = gate.dtype();
  if (x.dtype() != DType::kF32 || out.dtype() != DType::kF32 || up.dtype() != wt ||
      down.dtype() != wt || (wt != DType::kF32 && wt != DType::kF16 && wt != DType::kBF16)) {
    return invalid_argument_error(
        fmt::format("{}: takes f32 x and out and gate, up, down of one dtype among f32, f16, bf16",
                    label(call)));
  }
  SWITCHYARD_ASSIGN_OR_RETURN(std::int64_t m, row_count(call, x));
  const std::int64_t d = x.dim(x.rank() - 1);
  const std::int64_t f = gate.rank() == 2 ? gate.dim(0) : -1;
  if (gate.rank() != 2 || gate.dim(1) != d || !(up.shape() == gate.shape()) || down.rank() != 2 ||
      down.dim(0) != d || down.dim(1) != f || !(out.shape() == x.shape()) || !out.is_contiguous()) {
    return invalid_argument_error(fmt::format(
        "{}: x {}, gate {}, up {}, down {}, out {} are not [..., D], [F, D], [F, D], [D, F] and "
        "[..., D]",
        label(call), x.shape().to_string(), gate.shape().to_string(), up.shape().to_string(),
        down.shape().to_string(), out.shape().to_string()));
  }
  if (m == 0) return Status::ok();
  // Scratch: gate's and up's products, then the tensor-core path's staging.
  const auto half = static_cast<std::size_t>(m * f) * sizeof(float);
  const bool tensor_cores = tensor_core_path(gate, m);
  const std::size_t staging_bytes = tensor_cores ? bf16_staging_bytes(m * std::max(d, f), how) : 0;
  SWITCHYARD_ASSIGN_OR_RETURN(void* tmp, scratch(*s, 2 * half + staging_bytes));
  auto* g_data = static_cast<std::byte*>(tmp);
  void* staging = tensor_cores ? g_data + 2 * half : nullptr;
  const TensorView g = TensorView::contiguous(g_data, DType::kF32, Shape{m, f}, BackendId::kCuda);
  const TensorView u =
      TensorView::contiguous(g_data + half, DType::kF32, Shape{m, f}, BackendId::kCuda);
  const TensorView x2 = rows(x, m, d);
  // Note [Fused decode feed-forward]
  // Decoding reads the gate and up matrices once per token, and the composition
  // spends four launches on them (two matrix-vector products, silu, the product),
  // each a gap on the device between small kernels. With few rows and f16 / bf16
  // weights one matrix-vector kernel reads row i of both matrices in the same
  // warp and writes silu(gate . x) * (up . x) directly: the same sums in the same
  // order, silu in double and one f32 product as the elementwise kernels do, so
  // the bits are the unfused composition's.
  if (!tensor_cores && gate.dtype() != DType::kF32) {
    const cudaError_t fused = device::matvec_swiglu(
        gate.dtype() == DType::kF16 ? device::Type::kF16 : device::Type::kBF16,
        reinterpret_cast<const float*>(x2.first()), gate.first(), up.first(),
        reinterpret_cast<float*>(g.first()), m, f, d, stream);
    if (fused == cudaSuccess) return matmul(call, g, down, rows(out, m, d), how);
    if (fused != cudaErrorNotSupported) return launched(fused, call);
  }
  if (tensor_cores) {
    // x is staged once for both products, then silu(gate) * up for down.
    const Product gate_product(call, x2, gate, g), up_product(call, x2, up, u);
    SWITCHYARD_RETURN_IF_ERROR(stage_bf16(call, x2, staging, nullptr, how));
    SWITCHYARD_RETURN_IF_ERROR(matmul_staged_bf16(gate_product.call, staging, how));
    SWITCHYARD_RETURN_IF_ERROR(matmul_staged_bf16(up_product.call, staging, how));
    return matmul(call, g, down, rows(out, m, d), how, staging,
                  reinterpret_cast<const float*>(u.first()));
  }
  SWITCHYARD_RETURN_IF_ERROR(matmul(call, x2, gate, g, how));
  SWITCHYARD_RETURN_IF_ERROR(matmul(call, x2, up, u, how));
  const device::Layout dense = layout_of(g);
  SWITCHYARD_RETURN_IF_ERROR(
      launched(device::unary(device::UnaryOp::kSilu, device::Type::kF32, g.first(), dense,
                             g.first(), m * f, 1.0f, stream),
               call));
  SWITCHYARD_RETURN_IF_ERROR(
      launched(device::binary(device::BinaryOp::kMul, device::Type::kF32, g.first(), dense,
                              u.first(), dense, g.first(), m * f, stream),
               call));
  return matmul(call, g, down, rows(out, m, d), how);
}

}  // namespace

Status linear_kernel(const KernelCall& call) { return linear(call, Bf16Activations::kSplit); }
Status linear_rounded_kernel(const KernelCall& call) {
  return linear(call, Bf16Activations::kRounded);
}
Status ffn_swiglu_kernel(const KernelCall& call) {
  return ffn_swiglu(call, Bf16Activations::kSplit);
}
Status ffn_swiglu_rounded_kernel(const KernelCall& call) {
  return ffn_swiglu(call, Bf16Activations::kRounded);
}

}  // namespace switchyard::cuda
