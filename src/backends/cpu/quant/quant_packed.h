// The prepacked layout of the packed integer-dot GEMM sibling (Note [Prepacked
// weights] in binding_table.h), for every weight format: the file's blocks are
// turned once, at load, into unsigned 8-bit levels in the order vpdpbusd reads
// them, with one f32 scale (and, for formats with a min, one f32 offset) per
// sub-block and row. The prefill tiles then spend no instruction on unpacking
// nibbles, fifth bits or 6-bit scales.
//
// Every format's element is an affine image of a small integer level, exactly:
//   symmetric  w = d * (u - z)   q4_0 (z 8), q5_0 (16), q8_0 / iq4_nl / iq4_xs /
//                                mxfp4 (128: u = value + 128), q3_k (4), q6_k (32)
//   affine     w = d * u + m     q4_1, q5_1, q2_k, q4_k, q5_k (m: the format's min)
// with d and m per sub-block of 32 elements, or of 16 for q2_k, q3_k and q6_k (their
// scales' granularity). Packing dequantizes each row with the reference, recovers
// the levels and checks that d * (u - z) (or d * u + m) gives every element back
// exactly; a block that does not (a non-finite scale) fails the pack, naming it.
//
// Layout (64-byte aligned, `packed_bytes` in all):
//   header (64 bytes): magic, dtype, sub-block, N, K
//   panels of 16 weight rows (the last zero-padded), panel after panel; in each,
//   one tile per sub-block s of K, in order:
//     levels: sub/4 groups of 64 bytes; group g holds, for rows 0..15, the four
//             levels of elements 4g..4g+3 of sub-block s (row r in bytes 4r..4r+3)
//     scales: f32 d of rows 0..15
//     offsets (affine formats only): f32 m of rows 0..15
// so a 512-bit load of a group is one vpdpbusd operand: 16 rows' dwords.
#pragma once

#include <cstdint>

#include "switchyard/dtype.h"
#include "switchyard/kernel.h"
#include "switchyard/status.h"
#include "switchyard/tensor.h"

namespace switchyard::cpu {

inline constexpr std::uint64_t kPackedMagic = 0x3130'4b43'4150'5953ull;  // "SYPACK01"
inline constexpr int kPanelRows = 16;

// How a weight format packs: elements per sub-block (0: it does not), the zero
// point z of a symmetric format, and whether it carries offsets instead.
struct PackedFormat {
  int sub = 0;
  int zero = 0;
  bool affine = false;
};

[[nodiscard]] constexpr PackedFormat packed_format(DType w) {
  switch (w) {
    case DType::kQ4_0: return {32, 8, false};
    case DType::kQ5_0: return {32, 16, false};
    case DType::kQ8_0:
    case DType::kIQ4_NL:
    case DType::kIQ4_XS:
    case DType::kMXFP4: return {32, 128, false};
    case DType::kQ4_1:
    case DType::kQ5_1:
    case DType::kQ4_K:
    case DType::kQ5_K: return {32, 0, true};
    case DType::kQ2_K: return {16, 0, true};
    case DType::kQ3_K: return {16, 4, false};
    case DType::kQ6_K: return {16, 32, false};
    default: return {};
  }
}

struct PackedHeader {
  std::uint64_t magic = kPackedMagic;
  std::int32_t dtype = 0;
  std::int32_t sub = 0;
  std::int64_t n = 0;
  std::int64_t k = 0;
  std::uint8_t reserved[32] = {};
};
static_assert(sizeof(PackedHeader) == 64);

// Bytes of one sub-block tile of a panel.
[[nodiscard]] constexpr std::int64_t packed_tile_bytes(PackedFormat f) {
  return std::int64_t{kPanelRows} * f.sub + (f.affine ? 128 : 64);
}

// WeightPacking's hooks for the packed sibling: the size of a [N, K] weight of
// dtype `w` packed (-1 for a format without a packed layout, a shape that is not
// [N, K] or K not a whole number of blocks), and the packing itself.
[[nodiscard]] std::int64_t packed_weight_bytes(DType w, const Shape& shape);
[[nodiscard]] Status pack_weight(const TensorView& src, void* dst, ExecContext& ctx);

// Bytes of one prepared activation row of K elements (a multiple of 64): the
// q8_0 levels of the row, then its K / 32 f32 scales, then per sub-block an i32
// -z * sum(levels) (symmetric formats) or an f32 d * sum(levels) (affine ones).
[[nodiscard]] std::int64_t packed_act_bytes(PackedFormat f, std::int64_t k);
// Writes block b (elements 32b..32b+31) of a prepared activation row x of K
// elements: its 32 q8_0 levels, its scale d as the f16 gives it back, and its
// sub-blocks' sums. Both instruction sets' row preparations end here.
void store_packed_act_block(PackedFormat f, std::int64_t k, std::int64_t b,
                            const std::int8_t* levels, float d, std::uint8_t* x);

// The elements [begin, end) of K that a tile call covers (whole sub-blocks),
// and whether it adds to the outputs (a later span) or sets them (the first).
struct PackedSpan {
  std::int64_t begin = 0;
  std::int64_t end = 0;
  bool accumulate = false;
};

// What a packed sibling's instruction set supplies to the shared driver
// (matmul_quant_packed): the activation rows' preparation and the register tiles.
struct PackedTiles {
  // Quantizes activation row a (K finite elements, K a multiple of 32) into x.
  void (*prepare_row)(PackedFormat f, const float* a, std::int64_t k, std::uint8_t* x);
  // Runs `panels` (1 to max_panels) consecutive panels at w (panel_bytes apart)
  // against `rows` (1 to max_rows) prepared activation rows at x (x_stride apart)
  // over `span`: out[r * n + i] for panel row i; of the last panel only its first
  // last_panel_rows rows are read and written.
  void (*tiles)(PackedFormat f, const std::uint8_t* w, std::int64_t panel_bytes, int panels,
                const std::uint8_t* x, std::int64_t x_stride, int rows, std::int64_t k,
                PackedSpan span, float* out, std::int64_t n, int last_panel_rows);
  int max_panels;
  int max_rows;
};

// The instruction sets' parts. 512-bit tiles (quant_matmul_packed_avx512vnni.cpp):
// two panels by up to six activation rows; AVX-512 F/BW/VL/DQ, VNNI and F16C.
void prepare_packed_row_avx512(PackedFormat f, const float* a, std::int64_t k, std::uint8_t* x);
void packed_tiles_avx512(PackedFormat f, const std::uint8_t* w, std::int64_t panel_bytes,
                         int panels, const std::uint8_t* x, std::int64_t x_stride, int rows,
                         std::int64_t k, PackedSpan span, float* out, std::int64_t n,
                         int last_panel_rows);
// 256-bit tiles (quant_matmul_packed256_inl.h): one panel, as two halves of eight
// rows, by up to four activation rows, in AVX2's sixteen registers. The same
// source is built twice: with the VEX vpdpbusd of AVX-VNNI (AVX2, F16C and
// AVX-VNNI: CPUs without AVX-512) and with the EVEX one of AVX-512 VNNI (which
// has it at 256 bits too). Rows are prepared with AVX2 (quantize_act_avx2.cpp).
void prepare_packed_row_avx2(PackedFormat f, const float* a, std::int64_t k, std::uint8_t* x);
void packed_tiles256_avxvnni(PackedFormat f, const std::uint8_t* w, std::int64_t panel_bytes,
                             int panels, const std::uint8_t* x, std::int64_t x_stride, int rows,
                             std::int64_t k, PackedSpan span, float* out, std::int64_t n,
                             int last_panel_rows);
void packed_tiles256_avx512vnni(PackedFormat f, const std::uint8_t* w, std::int64_t panel_bytes,
                                int panels, const std::uint8_t* x, std::int64_t x_stride, int rows,
                                std::int64_t k, PackedSpan span, float* out, std::int64_t n,
                                int last_panel_rows);

inline constexpr PackedTiles kPackedTilesAvx512{&prepare_packed_row_avx512, &packed_tiles_avx512, 2,
                                                6};
inline constexpr PackedTiles kPackedTiles256AvxVnni{&prepare_packed_row_avx2,
                                                    &packed_tiles256_avxvnni, 1, 4};
inline constexpr PackedTiles kPackedTiles256Avx512Vnni{&prepare_packed_row_avx2,
                                                       &packed_tiles256_avx512vnni, 1, 4};

// The packed siblings' entry: matmul (f32 activations, weight packed by
// pack_weight, f32 out) with the given tiles, whose instruction set the caller
// has checked. Refuses (kFailedPrecondition) weight bytes that are not a packing
// of this weight.
Status matmul_quant_packed(const KernelCall& call, DType w, const PackedTiles& tiles);
template <DType W, const PackedTiles& kTiles>
Status matmul_quant_packed_for(const KernelCall& call) {
  return matmul_quant_packed(call, W, kTiles);
}

}  // namespace switchyard::cpu
