// Entry points of the CPU backend's dense matmul family (matmul, linear,
// ffn_swiglu), as registered in registration.cpp, and the shape checks and cost
// functions they share.
//
// Each entry is a KernelFn instantiated per instruction set and per dtype key
// (activation, weight, output). The AVX2 and AVX-512 entries call into the ISA
// files, so they are registered only when cpu_features() has the instruction set.
//
// Example (registration.cpp)
//   {OpKind::kMatmul, {kF32, kF16, kF32},
//    &matmul_gemm<Isa::kAvx2, kF32, kF16, kF32>, {.name = "matmul_f32_f16_f32__cpu_avx2"}}
#pragma once

#include <cstdint>
#include <span>

#include "switchyard/cost.h"
#include "switchyard/dtype.h"
#include "switchyard/kernel.h"

namespace switchyard::cpu {

enum class Isa : unsigned char { kAvx2, kAvx512 };

// matmul a [..., M, K] x w [N, K] or [..., N, K] -> out [..., M, N] through the
// blocked GEMM (any shape).
template <Isa I, DType A, DType W, DType O>
Status matmul_gemm(const KernelCall& call);
// The same op through the streaming matvec kernels: meant for M = 1, correct for
// any M (each activation row streams the weights once more).
template <Isa I, DType A, DType W, DType O>
Status matmul_matvec(const KernelCall& call);

// linear x [..., K], w [N, K], bias [N] -> out [..., N] (bias and out in f32):
// GEMM with the bias added to each finished block, or the matvec kernels.
template <Isa I, DType W>
Status linear_gemm(const KernelCall& call);
template <Isa I, DType W>
Status linear_matvec(const KernelCall& call);

// ffn_swiglu x [..., D], gate [F, D], up [F, D], down [D, F] -> out [..., D], x and
// out in f32. Gate and up panels are packed side by side into one GEMM whose
// epilogue writes silu(g) * u for a block of rows; the down GEMM consumes that
// block. Rows are processed in blocks, so only rows x F of the hidden activation
// exist at once. A single row goes through the matvec kernels instead.
template <Isa I, DType W>
Status ffn_swiglu_fused(const KernelCall& call);

#if defined(SWITCHYARD_HAVE_OPENBLAS)
// matmul (f32, f32, f32) through cblas_sgemm (source "openblas").
Status matmul_f32_openblas(const KernelCall& call);
#endif

// The dimensions of a validated matmul call.
struct MatmulDims {
  std::int64_t batch = 1;  // product of a's leading dimensions
  std::int64_t m = 0;
  std::int64_t n = 0;
  std::int64_t k = 0;
  bool shared_weights = true;  // w is [N, K] (else [..., N, K], one per batch)
};

// Checks a matmul call (arity 2 -> 1, the dtypes, contiguity, rank >= 2, matching
// dimensions) and returns its dimensions, or kInvalidArgument naming the kernel
// (call.name).
[[nodiscard]] Result<MatmulDims> check_matmul(const KernelCall& call, DType a, DType w, DType out);

// Cost of the blocked GEMM: 2·rows·N·K flops; bytes of a, w and out plus the
// packed copy of the weights (written and read as f32 once).
[[nodiscard]] CostEstimate gemm_cost(const CostInputs& in);
// Cost of the matvec kernels: the weights stream once per activation row.
[[nodiscard]] CostEstimate matvec_cost(const CostInputs& in);
// Cost of ffn_swiglu: 6·rows·D·F flops; bytes of the operands and the three weights.
[[nodiscard]] CostEstimate ffn_swiglu_cost(const CostInputs& in);
// Admission of the matvec siblings: one activation row per weight matrix.
[[nodiscard]] bool admits_single_row(std::span<const Shape> shapes);

}  // namespace switchyard::cpu
