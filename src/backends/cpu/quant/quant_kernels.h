// CPU kernels on GGUF block-quantized operands: matmul with quantized weights
// (decode and prefill), get_rows from quantized tables, and casts from quantized
// types to f32 / f16 / bf16.
//
// Each kernel takes the weight / table dtype as a template argument, so every
// binding key has its own function (and a wrong operand dtype is refused), while
// the work is shared by one implementation per kernel family.
//
//   matmul_quant_ref   portable: dequantizes a weight row to f32 once, then one
//                      f32 dot product per activation row, in index order.
//   matmul_quant_avx2  AVX2 + FMA + F16C: quantizes each activation row once to
//                      the format's activation type (q8_0 or q8_k) and runs
//                      integer dot products (byte multiply-adds) per block,
//                      in register tiles (2 or 1 weight rows x 4 or 8
//                      activation rows for prefill).
//   matmul_quant_avx512 AVX-512 F/BW/VL + VNNI: the same activation quantization
//                      and precision, 64 levels per vpdpbusd / vpdpwssd, and
//                      register tiles (4 weight rows for decode, 4, 3 or 2 weight
//                      rows x 4 activation rows for prefill).
//
// All are deterministic at any thread count: work is split by weight (output) row
// and each output element is computed by one thread in a fixed order.
#pragma once

#include <span>
#include <string_view>

#include "switchyard/kernel.h"

namespace switchyard::cpu {

// The validated operands of a quantized matmul: `rows` activation rows of `k`
// floats (all leading dimensions of a flattened), `n` weight rows of `row_bytes`.
struct QuantMatmulArgs {
  const float* a = nullptr;
  const std::byte* w = nullptr;
  float* out = nullptr;
  std::int64_t rows = 0;
  std::int64_t n = 0;
  std::int64_t k = 0;
  std::int64_t row_bytes = 0;
};

// Checks a matmul call: a f32 [..., M, K] and out f32 [..., M, N] contiguous,
// w [N, K] of dtype `w` contiguous with K a whole number of blocks. Errors are
// kInvalidArgument naming the kernel (call.name).
Result<QuantMatmulArgs> check_quant_matmul(const KernelCall& call, DType w);

// The checks of an integer-dot sibling: those of check_quant_matmul, plus K a whole
// number of blocks of activation_format(w).
Result<QuantMatmulArgs> check_quant_matmul_simd(const KernelCall& call, DType w);

// Activation rows holding NaN or infinity cannot be quantized meaningfully: the
// integer-dot siblings flag them while quantizing (row_is_finite) and afterwards
// set their outputs to NaN (fill_non_finite_rows), as a float dot product would.
bool row_is_finite(const float* row, std::int64_t k);
void fill_non_finite_rows(const QuantMatmulArgs& args, std::span<const char> non_finite);

// A register tile of an integer-dot sibling: R weight rows (w_stride bytes apart)
// against C prepared activation rows (x_stride bytes apart), `blocks` weight
// blocks per row, out[c * n + r] for row r and activation row c.
using QuantTileFn = void (*)(const std::uint8_t* w, std::int64_t w_stride, const std::uint8_t* x,
                             std::int64_t x_stride, std::int64_t blocks, float* out,
                             std::int64_t n);

// A sibling's tiles, by shape (weight rows x activation rows).
struct QuantTiles {
  QuantTileFn rows4 = nullptr;    // decode, 4 x 1 (optional)
  QuantTileFn rows1 = nullptr;    // decode, 1 x 1
  QuantTileFn prefill = nullptr;  // prefill_rows x prefill_cols
  QuantTileFn cols = nullptr;     // 1 x prefill_cols, for weight rows the prefill tiles leave
  QuantTileFn cols4 = nullptr;    // 1 x 4 where prefill_cols is larger (optional)
  std::int64_t prefill_rows = 0;
  std::int64_t prefill_cols = 0;
};

// Runs the tiles over every output of args from activation rows prepared at x,
// x_stride bytes apart. Weight rows go to parallel tasks of at least row_grain
// rows; a task takes tile_rows of them at a time (they stay in L2) past every
// activation row: prefill tiles while prefill_cols activation rows are left,
// then at most one cols4 step, then the decode tiles one activation row at a
// time.
void run_quant_tiles(const QuantTiles& tiles, const QuantMatmulArgs& args, const ExecContext& ctx,
                     const std::uint8_t* x, std::int64_t x_stride, std::int64_t blocks,
                     std::int64_t row_grain, std::int64_t tile_rows);

// The implementations, for the quantized dtype `w`.
Status matmul_quant_ref(const KernelCall& call, DType w);
Status get_rows_quant_ref(const KernelCall& call, DType table, DType out);
Status cast_quant_ref(const KernelCall& call, DType from, DType to);
// Requires AVX2, FMA and F16C (the caller registers it only when the CPU has them).
Status matmul_quant_avx2(const KernelCall& call, DType w);
// Requires AVX-512 F/BW/VL/DQ, AVX-512 VNNI and F16C; uses GFNI and AVX512_VBMI
// where cpu_features() has them. The second form chooses (each extra requires
// the CPU to have it), for tests that compare the paths.
struct Avx512QuantExtras {
  bool gfni = false;         // q2_k tiles
  bool avx512_vbmi = false;  // q5_0 / q5_1 tiles
};
Status matmul_quant_avx512(const KernelCall& call, DType w);
Status matmul_quant_avx512(const KernelCall& call, DType w, Avx512QuantExtras extras);

// The activation format the integer dot product of `w` pairs with: q8_k for the
// 256-element formats, q8_0 for the 32-element ones. (q4_1 and q5_1 pair with q8_0
// too: their min term needs the activation block's sum, which the AVX2 dot takes
// exactly from the quantized values instead of q8_1's f16-rounded d * sum.)
DType activation_format(DType w);

template <DType W>
Status matmul_quant_ref_for(const KernelCall& call) {
  return matmul_quant_ref(call, W);
}
template <DType W>
Status matmul_quant_avx2_for(const KernelCall& call) {
  return matmul_quant_avx2(call, W);
}
template <DType W>
Status matmul_quant_avx512_for(const KernelCall& call) {
  return matmul_quant_avx512(call, W);
}
template <DType Table, DType Out>
Status get_rows_quant_ref_for(const KernelCall& call) {
  return get_rows_quant_ref(call, Table, Out);
}
template <DType From, DType To>
Status cast_quant_ref_for(const KernelCall& call) {
  return cast_quant_ref(call, From, To);
}

}  // namespace switchyard::cpu
