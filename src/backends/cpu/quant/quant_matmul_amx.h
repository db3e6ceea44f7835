// The AMX-INT8 quantized matmul sibling (matmul_quant_amx, registered as "amx"):
// prefill on the tile units of CPUs that have them.
//
// Per call, the portable driver (quant_matmul_simd.cpp) quantizes every activation
// row exactly as the AVX-512 sibling does (activation_format: q8_0 or q8_k) and
// lays the bytes out as AMX wants its second operand (AmxActivations). Then, per
// panel of 16 weight rows, in parallel, it unpacks the panel's blocks to signed
// bytes with a scale (and an offset) per group of 16 or 32 elements (AmxPanel)
// and runs the panel against every activation row here:
//
//   C[16 weight rows][16 activation rows] = tdpbssd(panel bytes, activation bytes)
//
// one tile product per group (K = 16 or 32), because every group has its own
// scale; each product is scaled into f32 accumulators that stay in registers for
// the whole row of K. The weights are the tiles' first operand (each group's 16
// rows unpacked as one contiguous tile: AmxPanelLayout::kTiles) and the
// activations the second (four consecutive k of one row per 32-bit column), so
// the results come out transposed and are written back row by row at the end.
// The loop is software-pipelined: group g + 1's tile product is issued before
// group g is scaled, on a second set of tiles.
//
// A panel is unpacked once per call and used by every 16 activation rows, so the
// unpacking costs about what reading the weights costs; for a handful of
// activation rows that doubles a decode step's work, and the cost function
// (registration.cpp) sends those to the AVX-512 sibling.
//
// Only the unpacking and the tile loop live in the AMX file: allocation, threads
// and the activation layout are portable (gemm.h, "Why the ISA files are kept
// small").
#pragma once

#include <cstdint>

#include "switchyard/dtype.h"

namespace switchyard::cpu {

// Rows per tile on either side (weights and activations).
inline constexpr std::int64_t kAmxTileRows = 16;

// The activation rows of a call, in tiles of 16 rows (the last padded with zero
// rows). Tile t holds q[t][k / 4][16][4]: the four bytes k..k+3 (k a multiple of
// 4) of its row m at [k / 4][m]. For group g of `group` elements, scale[t][g][m]
// is the activation scale that applies to the group's bytes and sum[t][g][m] that
// scale times the sum of the group's bytes (for the formats with an offset).
struct AmxActivations {
  const std::int8_t* q = nullptr;
  const float* scale = nullptr;
  const float* sum = nullptr;
  std::int64_t k = 0;
  std::int64_t groups = 0;  // k / group
};

// Where unpacking puts 16 weight rows of k elements in groups of `group`:
//   kRows:  element e of row r at q[r * k + e]; its group g's scale and offset at
//           scale[r * groups + g] and offset[r * groups + g];
//   kTiles: group g of every row as one 16 x group tile, q[g][r][e % group], and
//           its scales and offsets as scale[g][r] and offset[g][r]: the AMX-INT8
//           product loads each group's weights as one contiguous 512- or 256-byte
//           tile (rows k bytes apart would map 16 rows onto one L1 set).
enum class AmxPanelLayout { kRows, kTiles };

// 16 weight rows unpacked: element e of row r, in group g, is
//   scale(r, g) * q(r, e) + offset(r, g)
// equal in f32 to what the format's dequantization gives. The formats without an
// offset leave theirs as they found it (all three arrays must be there).
struct AmxPanel {
  std::int8_t* q = nullptr;
  float* scale = nullptr;
  float* offset = nullptr;
  AmxPanelLayout layout = AmxPanelLayout::kRows;
};

// How a weight format is unpacked: its group size (32, or 16 for q2_k, q3_k and
// q6_k, whose scales change every 16 elements) and whether it has an offset
// (q4_1, q5_1, q2_k, q4_k, q5_k). group 0: the format has no AMX path.
struct AmxFormat {
  std::int64_t group = 0;
  bool has_offset = false;
};
[[nodiscard]] AmxFormat amx_format(DType w);

// Quantizes activation row `row` (k floats) to `act` (q8_0 or q8_k, the
// reference quantizer's bytes) into row m (< 16) of one AmxActivations tile: its
// bytes at tile_q, and for each group of `group` elements its scale and scaled
// sum at tile_scale[g * 16 + m] and tile_sum[g * 16 + m]. Returns false, having
// written nothing meaningful, when the row holds NaN or infinity.
[[nodiscard]] bool amx_prepare_row(DType act, const float* row, std::int64_t k, std::int64_t group,
                                   std::int8_t* tile_q, std::int64_t m, float* tile_scale,
                                   float* tile_sum);

// Unpacks `rows` (at most 16) weight rows of dtype w at `w_rows`, row_bytes apart,
// k elements each, into rows 0..rows-1 of `panel`.
void amx_unpack_rows(DType w, const std::uint8_t* w_rows, std::int64_t row_bytes, std::int64_t rows,
                     std::int64_t k, const AmxPanel& panel);

// out[m * ldo + j] = the dot product of activation row m and panel row j (panel
// in the kTiles layout), for
// m < rows (the call's activation rows) and j < cols (at most 16).
void amx_panel_product(const AmxPanel& panel, const AmxActivations& x, AmxFormat format,
                       std::int64_t rows, float* out, std::int64_t ldo, std::int64_t cols);

// --- The AMX-BF16 sibling (matmul_quant_amx_bf16, "amx_bf16"; the ISA half in
// quant_matmul_amxbf16.cpp) ---
//
// The weights, dequantized exactly to f32 and rounded once to bf16, against the
// activations rounded once to bf16, on tdpbf16ps: the products are exact and the
// tiles accumulate in f32 over all of K, so no per-group scaling interrupts the
// tile units. Blocked like a GEMM: per block of weight rows (a multiple of 32)
// and of K, the driver unpacks the weights through amx_unpack_rows and
// amx_bf16_pack_rows into the tiles' layout, then amx_bf16_block_product runs
// every 32 activation rows against them, 32 x 32 outputs at a time in four
// accumulator tiles.

// Rows per accumulator block on either side (two tiles of 16).
inline constexpr std::int64_t kAmxBf16Block = 32;

// Rounds activation row x (k floats, k a multiple of 32) to bf16, to nearest
// even, into row m (< 16) of a tile column at `column`: k / 32 tiles of 16 rows x
// 32 bf16, one after the other (the tiles' own layout, so that every tile load
// reads 1 KiB in one piece). Returns false, having written nothing meaningful,
// when x holds NaN or infinity.
[[nodiscard]] bool amx_bf16_convert_row(const float* x, std::int64_t k, std::uint16_t* column,
                                        std::int64_t m);

// Packs 16 unpacked weight rows (panel as amx_unpack_rows leaves it, kc elements
// each, groups of `group`) as bf16 into kc / 32 consecutive tiles at `tiles`:
// tile s holds k 32s..32s+31 as [16 pairs][16 rows][2].
void amx_bf16_pack_rows(const AmxPanel& panel, std::int64_t group, std::int64_t kc,
                        std::uint16_t* tiles);

// c[m * ldc + j] (+)= sum over k < kc of x_m[k] * w_j[k], for m below 32 *
// m_blocks and j below nc (a multiple of 32): x_m row m % 16 of tile column m /
// 16 of the activations at `a` (columns a_column_stride elements apart, as
// amx_bf16_convert_row lays them out, starting at the block's first k), w_j from
// `tiles` (nc / 16 tile columns of kc / 32 tiles each, as amx_bf16_pack_rows
// packs them). Adds to c when `accumulate`, else overwrites it.
void amx_bf16_block_product(const std::uint16_t* a, std::int64_t a_column_stride,
                            const std::uint16_t* tiles, std::int64_t kc, std::int64_t nc,
                            std::int64_t m_blocks, float* c, std::int64_t ldc, bool accumulate);

}  // namespace switchyard::cpu
