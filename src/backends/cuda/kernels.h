// The CUDA backend's kernel functions: each checks its KernelCall (arity, dtypes,
// shapes, the layouts it needs, operands in device memory, the stream) and queues
// its kernel on the call's CudaStream. One function serves every dtype of its
// family (the dtypes are read from the operands), so the registration table pairs
// each key with the function of its family. Errors name the kernel.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>

#include "switchyard/kernel.h"
#include "switchyard/op.h"
#include "switchyard/tensor.h"

namespace switchyard::cuda {

// The largest concat arity registered, as on the CPU.
inline constexpr int kMaxConcatInputs = 7;

// Elementwise (elementwise/elementwise.cu).
[[nodiscard]] KernelFn binary_kernel(OpKind op);
[[nodiscard]] KernelFn unary_kernel(OpKind op);
Status cast_kernel(const KernelCall& call);
Status copy_kernel(const KernelCall& call);
Status transpose_kernel(const KernelCall& call);
Status concat_kernel(const KernelCall& call);

// Rows (rowwise/rowwise.cu).
[[nodiscard]] KernelFn norm_kernel(OpKind op);
Status softmax_kernel(const KernelCall& call);
[[nodiscard]] KernelFn reduce_kernel(OpKind op);

// rope, get_rows and set_rows (tensor/tensor.cu; set_rows in place when the
// output is dst's memory, Note [Rows written in place] in the CPU's get_rows.cpp);
// attention (attention/attention.cu) and its tensor-core sibling for f16 and
// bf16 K and V (attention/attention_tc.cu), which admits head dimensions up to
// device::kMaxTensorCoreHeadDim.
Status rope_kernel(const KernelCall& call);
Status get_rows_kernel(const KernelCall& call);
Status set_rows_kernel(const KernelCall& call);
Status attention_kernel(const KernelCall& call);
Status attention_tc_kernel(const KernelCall& call);
[[nodiscard]] bool admits_tensor_core_attention(std::span<const Shape> shapes);

// Dense matmul: the portable tiled kernel (gemm/matmul_simt.cu) and cuBLASLt in
// exact f32, TF32, and f16 / bf16 with f32 accumulation (gemm/matmul.cpp).
Status matmul_simt_kernel(const KernelCall& call);
Status matmul_cublaslt_kernel(const KernelCall& call);
Status matmul_cublaslt_tf32_kernel(const KernelCall& call);

// f32 activations times bf16 weights on the tensor cores (gemm/matmul.cpp), the
// activations staged in bf16 first. kSplit stages each as two bf16 halves and
// takes two products, keeping the f32 claim (Note [Exact f32 products on bf16
// tensor cores]); kRounded rounds each once and takes one product, with a bf16
// claim: a precision trade (Note [One bf16 pass is a precision trade]). The
// kernels keep the staging in the stream's scratch and admit kSplitMinRows rows
// or more (fewer take the tiled kernel's matrix-vector path).
// stage_bf16 writes a's staging (bf16_staging_bytes(a.numel(), how) bytes that
// the caller owns; with `up`, device floats shaped as a, of silu(a) * up instead
// of a); matmul_staged_bf16 multiplies staged activations by w; matmul_bf16 does
// both.
enum class Bf16Activations { kSplit, kRounded };
inline constexpr std::int64_t kSplitMinRows = 16;
Status matmul_split_bf16_kernel(const KernelCall& call);
Status matmul_rounded_bf16_kernel(const KernelCall& call);
[[nodiscard]] std::size_t bf16_staging_bytes(std::int64_t elements, Bf16Activations how);
Status stage_bf16(const KernelCall& call, const TensorView& a, void* staging, const float* up,
                  Bf16Activations how);
Status matmul_staged_bf16(const KernelCall& call, const void* staging, Bf16Activations how);
Status matmul_bf16(const KernelCall& call, void* staging, const float* up, Bf16Activations how);
[[nodiscard]] bool admits_split_rows(std::span<const Shape> shapes);

// The fused ops as compositions on the stream (gemm/fused.cpp): linear is the
// matmul sibling of its weight dtype then the bias added in place; ffn_swiglu is
// the gate and up matmuls into the stream's scratch, silu(gate) * up in place,
// and the down matmul. The _rounded kernels take bf16 weights and, from
// kSplitMinRows rows, the rounded bf16 products (a precision trade).
Status linear_kernel(const KernelCall& call);
Status ffn_swiglu_kernel(const KernelCall& call);
Status linear_rounded_kernel(const KernelCall& call);
Status ffn_swiglu_rounded_kernel(const KernelCall& call);

// GGUF block-quantized weights (quant/quant_kernels.cpp): matmul of f32
// activations through the matrix-vector kernel (Note [Quantized matrix-vector
// products] in quant/quant.cu; any number of rows) or, from kSplitMinRows rows,
// through bf16 tiles on the tensor cores (Note [Quantized prompts on the tensor
// cores]; fewer rows take the matrix-vector kernel); get_rows and casts to f32,
// f16 and bf16.
Status quant_matmul_matvec_kernel(const KernelCall& call);
Status quant_matmul_bf16_kernel(const KernelCall& call);
Status quant_get_rows_kernel(const KernelCall& call);
Status quant_cast_kernel(const KernelCall& call);

}  // namespace switchyard::cuda
