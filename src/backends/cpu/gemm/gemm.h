// The CPU backend's dense matmul machinery: a blocked, packed GEMM driver shared by
// the ISA-specific micro-kernels, and the M = 1 matvec kernels.
//
// Overview
//   Every dense matmul here is "NT": activations a [M, K] and weights w [N, K] are
//   both stored with K contiguous (weights by output row, as GGUF stores them), and
//   out [M, N] = a · wᵀ. The driver (gemm.cpp, portable code) blocks the problem as
//   BLIS does: column blocks of `nc` weight rows, K blocks of `kc`, row blocks of
//   `mc`; it packs weight panels of NR rows and activation panels of MR rows into
//   k-major scratch (converting f16/bf16 to f32 on the way) and calls an MR x NR
//   register-blocked micro-kernel. The ISA files provide the micro-kernel and the
//   packers through a GemmKernels table; only the driver allocates and threads.
//
// Threads and determinism
//   The output is split into a grid of regions, one per thread (rows in whole
//   panels of MR, columns in whole panels of NR); each thread runs the whole loop
//   nest over its region with its own packed buffers, so a call is one fork-join.
//   K is never split. Each output element is accumulated in the same order whatever
//   region or thread computes it: within a K block by the micro-kernel's k loop,
//   across K blocks by adding the block's partial sum to C. `kc` is fixed per kernel
//   set, so the bytes are the same at any thread count.
//
// Why the ISA files are kept small
//   Code compiled with -mavx512f must not end up running on a CPU without it. Inline
//   functions and template instantiations that two translation units share are
//   merged by the linker, which may keep the copy compiled for the wider ISA. So the
//   *_avx2.cpp / *_avx512*.cpp files define only their own functions (in anonymous
//   namespaces, reached through the tables below) and use no standard-library
//   templates; allocation, threading and std containers live in portable files.
//   (The quantized matmul files keep a std::vector for their activation scratch;
//   their driver is portable, quant_matmul_simd.cpp. scripts/check_isa.sh fails
//   the build's tests if any such shared code in a SIMD object uses an
//   instruction beyond the x86-64 baseline.)
//
// Example
//   const GemmKernels* kernels = gemm_kernels_avx2();
//   GemmProblem p{.m = m, .n = n, .k = k, .a = {a, DType::kF32, k},
//                 .b = {w, DType::kF32, k}, .c = out, .ldc = n};
//   run_gemm(*kernels, p, ctx);
#pragma once

#include <cstddef>
#include <cstdint>

#include "switchyard/dtype.h"
#include "switchyard/function_ref.h"
#include "switchyard/kernel.h"

namespace switchyard::cpu {

// Packs rows [0, rows) of a K-contiguous operand (row r starts `ld` elements after
// row r-1; columns k0 .. k0+kc are read) into panels of `width` rows: panel p holds,
// for each k, the `width` values of its rows at k, consecutively. Rows past `rows`
// in the last panel are zero. `dst` holds ceil(rows / width) * width * kc floats.
using PackFn = void (*)(const void* src, std::int64_t ld, std::int64_t rows, std::int64_t k0,
                        std::int64_t kc, float* dst);

// One MR x NR output tile from packed panels: acc = Σ_k a[k] ⊗ b[k] over kc steps,
// starting from zero; then C = acc, or C = C + acc when `accumulate`. C has row
// stride ldc.
using MicroKernelFn = void (*)(std::int64_t kc, const float* a, const float* b, float* c,
                               std::int64_t ldc, bool accumulate);

// Index of a float storage type in the packer arrays: f32, f16, bf16; -1 otherwise.
[[nodiscard]] constexpr int float_storage_index(DType t) {
  return t == DType::kF32 ? 0 : t == DType::kF16 ? 1 : t == DType::kBF16 ? 2 : -1;
}

// A micro-kernel with its packers and cache blocking, provided by an ISA file.
struct GemmKernels {
  const char* isa;
  int mr;
  int nr;
  std::int64_t mc;  // rows per activation block (a multiple of mr)
  std::int64_t kc;  // K per block; fixed, because it fixes the summation order
  std::int64_t nc;  // weight rows per column block (a multiple of nr)
  MicroKernelFn micro;
  PackFn pack_a[3];  // panels of mr rows, by float_storage_index of the source
  PackFn pack_b[3];  // panels of nr rows
};

// One K-contiguous operand: `rows` rows of K elements, row r at data + r * ld.
struct GemmOperand {
  const void* data = nullptr;
  DType dtype = DType::kF32;
  std::int64_t ld = 0;
};

// Packs the weight panels for rows [n0, n0 + rows) (n0 a multiple of nr) and
// columns [k0, k0 + kc) into dst, as PackFn does. Lets a caller present a virtual
// weight matrix (ffn_swiglu interleaves gate and up panels).
using PackBlockFn = FunctionRef<void(std::int64_t n0, std::int64_t rows, std::int64_t k0,
                                     std::int64_t kc, float* dst)>;
// Called once per finished output block, from the thread that computed it:
// c points at C[m0, n0] with row stride ldc; rows [m0, m1), columns [n0, n1).
using EpilogueFn = FunctionRef<void(std::int64_t m0, std::int64_t m1, std::int64_t n0,
                                    std::int64_t n1, const float* c, std::int64_t ldc)>;

struct GemmProblem {
  std::int64_t m = 0;
  std::int64_t n = 0;
  std::int64_t k = 0;
  GemmOperand a;
  GemmOperand b;
  // Optional: packs weight panels instead of kernels.pack_b[b.dtype].
  const PackBlockFn* pack_b = nullptr;
  // f32 destination with row stride ldc, written directly. When null the driver
  // accumulates into its own scratch and the epilogue must consume each block.
  float* c = nullptr;
  std::int64_t ldc = 0;
  // Optional: runs on each finished block (bias, conversion, activation).
  const EpilogueFn* epilogue = nullptr;
  // Column blocks handed to one thread start at multiples of panel_align * nr
  // (ffn_swiglu keeps a gate panel and its up panel together).
  int panel_align = 1;
};

// Runs the blocked GEMM on ctx's threads. The caller has validated shapes; m, n, k
// may be 0 (k = 0 gives zeros).
void run_gemm(const GemmKernels& kernels, const GemmProblem& problem, const ExecContext& ctx);

// The kernel sets of the ISA files. Only call into one after cpu_features() says
// the CPU has its instruction set.
[[nodiscard]] const GemmKernels* gemm_kernels_avx2();
// The AVX-512 set for a product with `rows` activation rows (per weight matrix):
// a narrower tile for a few rows. Outputs are bit-identical whichever is chosen.
[[nodiscard]] const GemmKernels* gemm_kernels_avx512(std::int64_t rows);

// Matvec: y[n] = Σ_k x[k] · w[n, k] for n in [n0, n1), x in f32, w rows of k
// elements with row stride ldw in the weight dtype. Each y[n] is summed in one fixed
// order whatever range it is computed in.
using MatvecFn = void (*)(const float* x, const void* w, std::int64_t ldw, std::int64_t k,
                          std::int64_t n0, std::int64_t n1, float* y);
// Same, for bf16 activations and bf16 weights (exact products, f32 sums).
using MatvecBf16Fn = void (*)(const std::uint16_t* x, const std::uint16_t* w, std::int64_t ldw,
                              std::int64_t k, std::int64_t n0, std::int64_t n1, float* y);

struct MatvecKernels {
  const char* isa;
  MatvecFn by_weight[3];   // by float_storage_index of the weights
  MatvecBf16Fn bf16_bf16;  // null when the ISA has no bf16 dot product
};

// Likewise only after checking cpu_features() (AVX2 with F16C; AVX-512).
[[nodiscard]] const MatvecKernels* matvec_kernels_avx2();
[[nodiscard]] const MatvecKernels* matvec_kernels_avx512();
// AVX-512 without AVX512_BF16: bf16_bf16 is null.
[[nodiscard]] const MatvecKernels* matvec_kernels_avx512_no_bf16();
// The bf16 x bf16 matvec of matvec_kernels_avx512() (matvec_avx512bf16.cpp); needs
// AVX512_BF16.
void matvec_bf16_bf16_avx512bf16(const std::uint16_t* x, const std::uint16_t* w, std::int64_t ldw,
                                 std::int64_t k, std::int64_t n0, std::int64_t n1, float* y);

}  // namespace switchyard::cpu
