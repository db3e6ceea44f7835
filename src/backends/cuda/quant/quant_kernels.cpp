// The CUDA kernel functions over GGUF block-quantized weights: matmul (the
// matrix-vector kernel for decoding, bf16 tiles on the tensor cores for prompts),
// get_rows and casts to f32, f16 and bf16. Each checks its KernelCall and
// queues its device kernels (quant/quant.cu) on the call's stream.
//
// Note [Quantized prompts on the tensor cores]
// A prompt multiplies many activation rows by each weight, so the matrix-vector
// kernel, which reads the weights once per 8 rows, would read them 64 times for
// 512 rows. The prompt sibling instead dequantizes the weights, a tile of rows at
// a time, into bf16 in the stream's scratch, rounds the activations to bf16 once,
// and runs one cuBLASLt bf16 product per tile into the tile's columns of the
// f32 output (f32 accumulation). Both operands round once to bf16 (each within
// 2^-9 of itself), so each product is within about 2^-8 of |a w| and the sum
// within 1/128 of sum |a w|: the CPU's AMX-BF16 sibling's claim (quant_bf16_dot),
// for any activation distribution. A tile is at most kTileElements weights (128
// MiB of bf16), so a vocabulary-sized output head does not need a bf16 copy of
// itself; the ffn matrices of an 8B model are one tile each.
#include <algorithm>
#include <array>
#include <limits>
#include <optional>

#include "backends/cuda/gemm/matmul_plan.h"
#include "backends/cuda/kernel_checks.h"
#include "backends/cuda/kernels.h"

namespace switchyard::cuda {
namespace {

constexpr std::int64_t kTileElements = std::int64_t{64} << 20;

std::optional<device::QuantFormat> quant_format(DType t) {
  using F = device::QuantFormat;
  switch (t) {
    case DType::kQ4_0: return F::kQ4_0;
    case DType::kQ4_1: return F::kQ4_1;
    case DType::kQ5_0: return F::kQ5_0;
    case DType::kQ5_1: return F::kQ5_1;
    case DType::kQ8_0: return F::kQ8_0;
    case DType::kQ2_K: return F::kQ2_K;
    case DType::kQ3_K: return F::kQ3_K;
    case DType::kQ4_K: return F::kQ4_K;
    case DType::kQ5_K: return F::kQ5_K;
    case DType::kQ6_K: return F::kQ6_K;
    case DType::kIQ4_NL: return F::kIQ4_NL;
    case DType::kIQ4_XS: return F::kIQ4_XS;
    case DType::kMXFP4: return F::kMXFP4;
    default: return std::nullopt;
  }
}

// The device format of the quantized operand q, its rows whole blocks
// (`cols` elements each) and its first byte on the format's alignment.
Result<device::QuantFormat> check_quantized(const KernelCall& call, const TensorView& q,
                                            std::int64_t cols) {
  const std::optional<device::QuantFormat> format = quant_format(q.dtype());
  if (!format) {
    return invalid_argument_error(
        fmt::format("{}: {} is not a quantized weight format", label(call), name(q.dtype())));
  }
  if (cols % block_elems(q.dtype()) != 0) {
    return invalid_argument_error(
        fmt::format("{}: rows of {} elements are not whole {} blocks of {}", label(call), cols,
                    name(q.dtype()), block_elems(q.dtype())));
  }
  const int align = device::quant_alignment(*format);
  if (reinterpret_cast<std::uintptr_t>(q.first()) % static_cast<std::uintptr_t>(align) != 0) {
    return invalid_argument_error(fmt::format("{}: the {} operand must start on a {}-byte boundary",
                                              label(call), name(q.dtype()), align));
  }
  return *format;
}

struct QuantMatmul {
  device::QuantFormat format;
  MatmulShape shape;
  // Bytes between consecutive batches' weights (0 when shared).
  std::int64_t w_batch_bytes = 0;
};

Result<QuantMatmul> check_quant_matmul(const KernelCall& call) {
  const TensorView &a = call.inputs[0], &w = call.inputs[1], &out = call.outputs[0];
  if (a.dtype() != DType::kF32 || out.dtype() != DType::kF32) {
    return invalid_argument_error(fmt::format("{}: a {}, out {}: takes f32 activations and output",
                                              label(call), name(a.dtype()), name(out.dtype())));
  }
  QuantMatmul q;
  SWITCHYARD_ASSIGN_OR_RETURN(q.shape, check_matmul(call));
  SWITCHYARD_ASSIGN_OR_RETURN(q.format, check_quantized(call, w, q.shape.k));
  if (q.shape.w_batch_stride != 0) {
    SWITCHYARD_ASSIGN_OR_RETURN(q.w_batch_bytes, row_bytes(w.dtype(), q.shape.w_batch_stride));
  }
  return q;
}

Status matvec(const KernelCall& call, const QuantMatmul& q, cudaStream_t stream) {
  SWITCHYARD_ASSIGN_OR_RETURN(CudaStream * s, stream_of(call));
  const MatmulShape& sh = q.shape;
  SWITCHYARD_ASSIGN_OR_RETURN(void* staging,
                              scratch(*s, device::quant_matvec_scratch_bytes(sh.m, sh.k)));
  const auto* a = call.inputs[0].first_as<const float>();
  const std::byte* w = call.inputs[1].first();
  auto* out = call.outputs[0].first_as<float>();
  for (std::int64_t b = 0; b < sh.batch; ++b) {
    SWITCHYARD_RETURN_IF_ERROR(
        launched(device::quant_matvec(q.format, a + b * sh.m * sh.k, w + b * q.w_batch_bytes,
                                      out + b * sh.m * sh.n, sh.m, sh.n, sh.k, staging, stream),
                 call));
  }
  return Status::ok();
}

// Bytes of the bf16 activations in the prompt sibling's scratch (the tile follows).
std::size_t bf16_activation_bytes(std::int64_t elements) {
  return (static_cast<std::size_t>(elements) * 2 + 255) / 256 * 256;
}

}  // namespace

Status quant_matmul_matvec_kernel(const KernelCall& call) {
  SWITCHYARD_ASSIGN_OR_RETURN(cudaStream_t stream, prepare(call, 2));
  SWITCHYARD_ASSIGN_OR_RETURN(QuantMatmul q, check_quant_matmul(call));
  if (q.shape.m == 0 || q.shape.n == 0) return Status::ok();
  return matvec(call, q, stream);
}

Status quant_matmul_bf16_kernel(const KernelCall& call) {
  SWITCHYARD_ASSIGN_OR_RETURN(cudaStream_t stream, prepare(call, 2));
  SWITCHYARD_ASSIGN_OR_RETURN(CudaStream * s, stream_of(call));
  SWITCHYARD_ASSIGN_OR_RETURN(QuantMatmul q, check_quant_matmul(call));
  const MatmulShape& sh = q.shape;
  if (sh.m == 0 || sh.n == 0) return Status::ok();
  // Planned for a bucket's largest size and run with fewer rows (a prompt's last
  // row through the output head), or weights per batch: the matrix-vector kernel
  // reads the weights once.
  if (sh.batch != 1 || !admits_split_rows(std::array{call.inputs[0].shape()}) ||
      sh.m > std::numeric_limits<std::int32_t>::max()) {
    return matvec(call, q, stream);
  }
  const TensorView &a = call.inputs[0], &w = call.inputs[1], &out = call.outputs[0];
  const std::int64_t tile_rows =
      std::min(sh.n, std::max<std::int64_t>(256, kTileElements / sh.k / 256 * 256));
  const std::size_t a_bytes = bf16_activation_bytes(a.numel());
  SWITCHYARD_ASSIGN_OR_RETURN(
      void* staging, scratch(*s, a_bytes + static_cast<std::size_t>(tile_rows * sh.k) * 2));
  auto* a16 = static_cast<std::byte*>(staging);
  std::byte* tile = a16 + a_bytes;
  device::Layout flat;
  flat.rank = 1;
  flat.dims[0] = a.numel();
  flat.strides[0] = 1;
  SWITCHYARD_RETURN_IF_ERROR(launched(device::cast(device::Type::kF32, a.first(), flat,
                                                   device::Type::kBF16, a16, a.numel(), stream),
                                      call));
  SWITCHYARD_ASSIGN_OR_RETURN(const std::int64_t w_row_bytes, row_bytes(w.dtype(), sh.k));
  const float one = 1.0f, zero = 0.0f;
  for (std::int64_t n0 = 0; n0 < sh.n; n0 += tile_rows) {
    const std::int64_t rows = std::min(tile_rows, sh.n - n0);
    SWITCHYARD_RETURN_IF_ERROR(launched(
        device::dequantize_rows(q.format, w.first() + n0 * w_row_bytes, rows, sh.k, nullptr, rows,
                                device::Type::kBF16, tile, s->error_device, stream),
        call));
    float* out_tile = out.first_as<float>() + n0;
    const MatmulShape tile_shape{.batch = 1, .m = sh.m, .n = rows, .k = sh.k};
    SWITCHYARD_ASSIGN_OR_RETURN(const LtPlan* plan,
                                lt_plan(call, *s, CUBLAS_COMPUTE_32F, CUDA_R_16BF, CUDA_R_32F,
                                        tile_shape, alignment({tile, a16, out_tile}), sh.n));
    const cublasStatus_t st =
        cublasLtMatmul(s->lt, plan->op, &one, tile, plan->a, a16, plan->b, &zero, out_tile, plan->c,
                       out_tile, plan->c, &plan->algo, s->workspace, s->workspace_bytes, stream);
    if (st != CUBLAS_STATUS_SUCCESS) {
      return cublas_error(
          st, fmt::format("{}: bf16 product of rows {}..{}", label(call), n0, n0 + rows - 1));
    }
  }
  return Status::ok();
}

Status quant_get_rows_kernel(const KernelCall& call) {
  SWITCHYARD_ASSIGN_OR_RETURN(cudaStream_t stream, prepare(call, 2));
  SWITCHYARD_ASSIGN_OR_RETURN(CudaStream * s, stream_of(call));
  const TensorView &table = call.inputs[0], &idx = call.inputs[1], &out = call.outputs[0];
  const std::optional<device::Type> out_type = device_type(out.dtype());
  if (!out_type || *out_type == device::Type::kI32 || idx.dtype() != DType::kI32) {
    return invalid_argument_error(fmt::format(
        "{}: takes a quantized table, i32 indices and a float output; got {}, {} and {}",
        label(call), name(table.dtype()), name(idx.dtype()), name(out.dtype())));
  }
  SWITCHYARD_RETURN_IF_ERROR(check_get_rows_layout(call));
  SWITCHYARD_ASSIGN_OR_RETURN(device::QuantFormat format,
                              check_quantized(call, table, table.dim(1)));
  // An index out of range is found on the device and reported when the stream is
  // next synchronized (CudaMemory::synchronize), as kOutOfRange.
  return launched(device::dequantize_rows(format, table.first(), table.dim(0), table.dim(1),
                                          idx.first_as<const std::int32_t>(), idx.dim(0), *out_type,
                                          out.first(), s->error_device, stream),
                  call);
}

Status quant_cast_kernel(const KernelCall& call) {
  SWITCHYARD_ASSIGN_OR_RETURN(cudaStream_t stream, prepare(call, 1));
  SWITCHYARD_ASSIGN_OR_RETURN(CudaStream * s, stream_of(call));
  const TensorView &x = call.inputs[0], &out = call.outputs[0];
  const std::optional<device::Type> out_type = device_type(out.dtype());
  if (!out_type || *out_type == device::Type::kI32) {
    return invalid_argument_error(
        fmt::format("{}: cast {} -> {}: the kernel dequantizes to f32, "
                    "f16 or bf16",
                    label(call), name(x.dtype()), name(out.dtype())));
  }
  if (!(x.shape() == out.shape()) || x.rank() < 1 || !x.is_contiguous() || !out.is_contiguous()) {
    return invalid_argument_error(
        fmt::format("{}: {} -> {}: takes contiguous operands of one shape", label(call),
                    describe(x), describe(out)));
  }
  if (x.numel() == 0) return Status::ok();
  const std::int64_t cols = x.dim(x.rank() - 1);
  SWITCHYARD_ASSIGN_OR_RETURN(device::QuantFormat format, check_quantized(call, x, cols));
  const std::int64_t rows = x.numel() / cols;
  return launched(device::dequantize_rows(format, x.first(), rows, cols, nullptr, rows, *out_type,
                                          out.first(), s->error_device, stream),
                  call);
}

}  // namespace switchyard::cuda
