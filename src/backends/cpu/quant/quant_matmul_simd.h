// The skeleton the integer-dot quantized matmul siblings share (matmul_quant_avx2,
// matmul_quant_avx512): each instruction-set file provides, per weight format, its
// register tiles and how it prepares activation rows for them (QuantSimdFormat);
// run_quant_matmul_simd does the rest, the same for every ISA:
//   1. checks the call (check_quant_matmul_simd);
//   2. prepares every activation row into a 64-byte aligned buffer, in parallel
//      over rows, noting the rows that hold NaN or infinity;
//   3. walks the tiles over the outputs (run_quant_tiles: weight rows in parallel
//      tasks, L2 blocks of them, prefill tiles, then decode tiles in streams);
//   4. sets the outputs of the non-finite rows to NaN.
// Portable code: allocation, threads and std containers stay out of the ISA files,
// which define only their own functions (gemm.h, "Why the ISA files are kept
// small").
//
// Example (an ISA file, per format family)
//   QuantSimdFormat quant_format_avx2_kquant(DType w) {
//     switch (w) {
//       case DType::kQ4_K: return format<DType::kQ4_K>();  // tiles, layout, blocking
//       ...
//       default: return {};
//     }
//   }
// and the entry (quant_matmul_simd.cpp)
//   return run_quant_matmul_simd(call, w, quant_format_avx2_kquant(w));
#pragma once

#include <cstdint>
#include <span>

#include "backends/cpu/quant/quant_kernels.h"
#include "switchyard/kernel.h"

namespace switchyard::cpu {

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

// One weight format of an integer-dot sibling, as its ISA file builds it.
struct QuantSimdFormat {
  QuantTiles tiles;
  // A prepared activation row holds act_bytes per act_elems activations (K rounded
  // up to whole act_elems). Rows are that many bytes apart from a 64-byte aligned
  // start, so a tile may use aligned loads where act_bytes is a multiple of their
  // width.
  std::int64_t act_elems = 0;
  std::int64_t act_bytes = 0;
  // Prepares activation rows [begin, end) of args for weights of dtype w, row r at
  // x + r * x_stride, and sets non_finite[r] to 1 where row r holds NaN or infinity
  // (else 0). Runs on several threads at once for disjoint ranges.
  void (*prepare_rows)(DType w, const QuantMatmulArgs& args, std::int64_t begin, std::int64_t end,
                       std::uint8_t* x, std::int64_t x_stride, char* non_finite) = nullptr;
  // run_quant_tiles's blocking: weight rows per parallel task, and per L2 block.
  std::int64_t row_grain = 0;
  std::int64_t tile_rows = 0;
};

// Runs matmul (f32, w, f32) with the format's tiles (steps 1-4 above). Returns
// kInvalidArgument naming the kernel (call.name) for a malformed call, or for a
// format without tiles (format.tiles.rows1 null).
Status run_quant_matmul_simd(const KernelCall& call, DType w, const QuantSimdFormat& format);

// The formats of the ISA files, by family: the 32-element block formats (q4_0,
// q4_1, q5_0, q5_1, q8_0, iq4_nl, mxfp4) and the 256-element super-block ones
// (q2_k .. q6_k, iq4_xs). A format outside the family gives tiles.rows1 null. Call
// one only where cpu_features() has its instruction set (each extra in `extras`
// too).
[[nodiscard]] QuantSimdFormat quant_format_avx2_block32(DType w);
[[nodiscard]] QuantSimdFormat quant_format_avx2_kquant(DType w);
[[nodiscard]] QuantSimdFormat quant_format_avx512_block32(DType w, Avx512QuantExtras extras);
[[nodiscard]] QuantSimdFormat quant_format_avx512_kquant(DType w, Avx512QuantExtras extras);

}  // namespace switchyard::cpu
