// AVX2 matmul tiles for the 32-element block formats (q4_0, q4_1, q5_0, q5_1, q8_0,
// iq4_nl, mxfp4) and their activation layout. The shared skeleton
// (quant_matmul_simd.h) quantizes each activation row once to q8_0
// (quantize_act_avx2.cpp, the reference bytes) through prepare_rows here, then
// every weight block meets its activation block in an integer dot product.
//
// The integer core is the byte multiply-add (vpmaddubsw: unsigned x signed bytes,
// adjacent pairs summed to i16), then vpmaddwd against the group scales (or ones)
// to i32. Signed weights use the sign trick: |w| times a with w's sign applied.
// No i16 sum can saturate: |w| <= 128 and |a| <= 127 give at most 2 * 128 * 127.
//
// Register tiles: decode runs four weight rows per tile; prefill runs several
// activation rows per decoded weight block (see tiles()). Every output element is
// computed by the same sequence of operations whichever tile computes it, so
// results are identical at any thread count and a matmul's rows equal the
// matvecs of its activation rows.
//
// Per format (x = activation): dot = d_w * d_x * sum(q_w * q_x) (q4_0, q5_0, q8_0,
// iq4_nl, mxfp4; q4_1 / q5_1 add m_w * d_x * sum(q_x)). All but q8_0 take eight
// blocks at a time against an activation layout prepared once per call, with
// level offsets folded into the integer sums (Note [AVX2 decode groups]).
#include <immintrin.h>

#include <array>
#include <cstring>
#include <utility>
#include <vector>

#include "backends/cpu/quant/quant_matmul_avx2_inl.h"
#include "backends/cpu/quant/quantize_act.h"
#include "switchyard/quant_blocks.h"

namespace switchyard::cpu {
namespace {

using quant::BlockQ8_0;

// q8_0 weights meet the q8_0 activation blocks as stored, one block at a time:
// out[c * n + r] = dot(weight row r, activation row c) for r < R, c < C, weight
// row r at w + r * w_stride, activation row c at x + c * x_stride. Per block one
// integer dot (sign trick), one f32 fused multiply-add by d_w * d_x, in block
// order, then one horizontal sum, whatever R and C are.
template <int R, int C, bool kAhead>
void q8_0_tile(const std::uint8_t* w, std::int64_t w_stride, const std::uint8_t* x,
               std::int64_t x_stride, std::int64_t blocks, float* out, std::int64_t n) {
  constexpr std::int64_t kBytes = sizeof(BlockQ8_0);
  __m256 acc[R][C];
#pragma GCC unroll 8
  for (int r = 0; r < R; ++r) {
#pragma GCC unroll 8
    for (int c = 0; c < C; ++c) acc[r][c] = _mm256_setzero_ps();
  }
  for (std::int64_t i = 0; i < blocks; ++i) {
    __m256i mag[R];
    __m256i sign[R];
    float d[R];
#pragma GCC unroll 8
    for (int r = 0; r < R; ++r) {
      const std::uint8_t* wb = w + r * w_stride + i * kBytes;
      prefetch_ahead<kAhead>(wb + blocks * kBytes, kBytes);  // the next row
      sign[r] = load256(wb + 2);
      mag[r] = _mm256_sign_epi8(sign[r], sign[r]);
      d[r] = f16_at(wb);
    }
#pragma GCC unroll 8
    for (int c = 0; c < C; ++c) {
      const std::uint8_t* xb = x + c * x_stride + i * kBytes;
      const __m256i xq = load256(xb + 2);
      const __m256 dx = _mm256_set1_ps(f16_at(xb));
#pragma GCC unroll 8
      for (int r = 0; r < R; ++r) {
        const __m256i p16 = _mm256_maddubs_epi16(mag[r], _mm256_sign_epi8(xq, sign[r]));
        acc[r][c] = _mm256_fmadd_ps(_mm256_mul_ps(_mm256_set1_ps(d[r]), dx),
                                    _mm256_cvtepi32_ps(sum_i16_to_i32(p16)), acc[r][c]);
      }
    }
  }
#pragma GCC unroll 8
  for (int r = 0; r < R; ++r) {
#pragma GCC unroll 8
    for (int c = 0; c < C; ++c) out[c * n + r] = hsum(acc[r][c]);
  }
}

// Note [AVX2 decode groups]
// The nibble formats (q4_0, q4_1, q5_0, q5_1, iq4_nl, mxfp4) take their blocks
// eight at a time, per weight row:
//   - A pair of blocks is one 32-byte vector: block A's 16 nibble bytes in the
//     low lane, B's in the high lane (one lane insert from memory). Its low
//     nibbles are elements 0-15 of A and B, its high nibbles elements 16-31; the
//     activation row is laid out once per call to match (XGroup), so no nibble is
//     spread twice. q5_0 / q5_1 take their fifth bits from both blocks' qh,
//     broadcast once per pair.
//   - Levels are unsigned where possible: q4_0 / q5_0 keep q + 8 / q + 16, mxfp4
//     its doubled E2M1 values + 12 through a vpshufb table, and the offset joins
//     the block's i32 sum as -offset * sum(x), prepared with the layout. Two
//     vpmaddubsw (at most 2 * 31 * 127 each) then add in i16 and one vpmaddwd
//     by ones widens them; iq4_nl, signed up to 127, keeps the sign trick and
//     widens each vpmaddubsw.
//   - The four pair sums (block 2p in lanes 0-3, 2p + 1 in lanes 4-7) reduce
//     by two rounds of in-lane unpacks to one vector of the eight blocks' sums,
//     in slot order (slot_of), converted and scaled by one f32 multiply-add: the
//     eight f16 scales are collected into one vector (one vpinsrw each) and
//     converted by one vcvtph2ps, mxfp4's exponents by integer shifts. q4_1 /
//     q5_1 mins, collected the same way, meet d_x * sum(x) in a second f32
//     multiply-add per group.
// Blocks past the last whole group go through a zero-padded copy against zero
// activations. Every output element sees the same integer sums (exact) and the
// same f32 steps per group, in group order, whichever tile computes it.

constexpr int kGroupBlocks = 8;

// The lane of block b of a group after reduce_pairs.
constexpr int slot_of(int b) { return b % 2 == 0 ? b / 2 : 4 + b / 2; }

// One group of eight activation blocks laid out for the group tiles.
struct alignas(32) XGroup {
  // Pair p: elements 0-15 of blocks 2p and 2p + 1, then elements 16-31 of both.
  std::int8_t q[kGroupBlocks * 32];
  std::int32_t init[kGroupBlocks];  // per slot: -offset * sum(x)
  float dx[kGroupBlocks];           // per slot
  float dxsum[kGroupBlocks];        // per slot: d_x * sum(x), against q4_1 / q5_1 mins
};

// The level offset folded into the integer sums (Note [AVX2 decode groups]).
template <DType W>
constexpr int kOffset = W == DType::kQ4_0    ? 8
                        : W == DType::kQ5_0  ? 16
                        : W == DType::kMXFP4 ? 12
                                             : 0;
template <DType W>
constexpr bool kHasMin = W == DType::kQ4_1 || W == DType::kQ5_1;
// Offset of the nibble bytes in a block.
template <DType W>
constexpr int kQsOffset = W == DType::kQ4_1    ? 4
                          : W == DType::kQ5_0  ? 6
                          : W == DType::kQ5_1  ? 8
                          : W == DType::kMXFP4 ? 1
                                               : 2;

// Lays out `blocks` q8_0 blocks as XGroup, zero past the last block.
void layout_groups(const BlockQ8_0* xb, std::int64_t blocks, int offset, XGroup* out) {
  const std::int64_t groups = (blocks + kGroupBlocks - 1) / kGroupBlocks;
  std::memset(static_cast<void*>(out), 0, static_cast<std::size_t>(groups) * sizeof(XGroup));
  for (std::int64_t b = 0; b < blocks; ++b) {
    XGroup& g = out[b / kGroupBlocks];
    const int m = static_cast<int>(b % kGroupBlocks);
    std::int8_t* q = g.q + 64 * (m / 2) + 16 * (m % 2);
    std::memcpy(q, xb[b].qs, 16);
    std::memcpy(q + 32, xb[b].qs + 16, 16);
    const __m256i v = load256(xb[b].qs);
    const __m256i s =
        _mm256_sad_epu8(_mm256_xor_si256(v, _mm256_set1_epi8(-128)), _mm256_setzero_si256());
    const __m128i s2 = _mm_add_epi64(_mm256_castsi256_si128(s), _mm256_extracti128_si256(s, 1));
    const int sum = static_cast<int>(_mm_cvtsi128_si64(s2) + _mm_extract_epi64(s2, 1)) - 32 * 128;
    const float dx = f16_at(xb[b].d);
    const int slot = slot_of(m);
    g.init[slot] = -offset * sum;
    g.dx[slot] = dx;
    g.dxsum[slot] = dx * static_cast<float>(sum);
  }
}

// One pair of blocks decoded: the levels meeting the first 32 activation bytes
// of the pair (elements 0-15 of both blocks) and the next 32; iq4_nl: their
// magnitudes, with the signed levels in lo_sign / hi_sign.
struct PairW {
  __m256i lo;
  __m256i hi;
  __m256i lo_sign;
  __m256i hi_sign;
};

template <DType W>
inline PairW decode_pair(const std::uint8_t* a) {
  constexpr int kB = block_bytes(W);
  const __m256i q = _mm256_inserti128_si256(
      _mm256_castsi128_si256(_mm_loadu_si128(reinterpret_cast<const __m128i*>(a + kQsOffset<W>))),
      _mm_loadu_si128(reinterpret_cast<const __m128i*>(a + kB + kQsOffset<W>)), 1);
  const __m256i low4 = _mm256_set1_epi8(0x0f);
  PairW p;
  p.lo = _mm256_and_si256(q, low4);
  p.hi = _mm256_and_si256(_mm256_srli_epi16(q, 4), low4);
  if constexpr (W == DType::kQ5_0 || W == DType::kQ5_1) {
    constexpr int kQh = W == DType::kQ5_0 ? 2 : 4;
    // A's qh in bytes 0-3 of each lane, B's in bytes 4-7. Level byte j of lo is
    // element j % 16 of A (lane 0) or B (lane 1): bit j % 8 of qh byte j / 8 (+ 4
    // for B); hi takes qh bytes 2-3 (6-7).
    const __m256i qh = _mm256_broadcastq_epi64(
        _mm_insert_epi32(_mm_cvtsi32_si128(static_cast<int>(quant::load_u32(a + kQh))),
                         static_cast<int>(quant::load_u32(a + kB + kQh)), 1));
    const __m256i others = _mm256_set1_epi64x(0x7fbfdfeff7fbfdfe);
    const __m256i sixteen = _mm256_set1_epi8(0x10);
    const auto fifth = [&](__m256i idx) {
      const __m256i set = _mm256_cmpeq_epi8(_mm256_or_si256(_mm256_shuffle_epi8(qh, idx), others),
                                            _mm256_set1_epi8(-1));
      return _mm256_and_si256(set, sixteen);
    };
    p.lo = _mm256_or_si256(p.lo, fifth(_mm256_setr_epi64x(0, 0x0101010101010101, 0x0404040404040404,
                                                          0x0505050505050505)));
    p.hi = _mm256_or_si256(p.hi, fifth(_mm256_setr_epi64x(0x0202020202020202, 0x0303030303030303,
                                                          0x0606060606060606, 0x0707070707070707)));
  }
  if constexpr (W == DType::kMXFP4) {
    const __m256i table =
        _mm256_setr_epi8(12, 13, 14, 15, 16, 18, 20, 24, 12, 11, 10, 9, 8, 6, 4, 0, 12, 13, 14, 15,
                         16, 18, 20, 24, 12, 11, 10, 9, 8, 6, 4, 0);
    p.lo = _mm256_shuffle_epi8(table, p.lo);
    p.hi = _mm256_shuffle_epi8(table, p.hi);
  }
  if constexpr (W == DType::kIQ4_NL) {
    const __m128i t = _mm_loadu_si128(reinterpret_cast<const __m128i*>(quant::kIQ4NLValues));
    const __m256i table = _mm256_set_m128i(t, t);
    const __m256i mag_table = _mm256_abs_epi8(table);
    p.lo_sign = _mm256_shuffle_epi8(table, p.lo);
    p.hi_sign = _mm256_shuffle_epi8(table, p.hi);
    p.lo = _mm256_shuffle_epi8(mag_table, p.lo);
    p.hi = _mm256_shuffle_epi8(mag_table, p.hi);
  }
  return p;
}

// A pair's exact i32 dots against its 64 activation bytes, before the offset:
// block A in lanes 0-3, B in lanes 4-7.
template <DType W>
inline __m256i pair_dot(const PairW& p, const std::int8_t* x) {
  const __m256i xlo = load256(x);
  const __m256i xhi = load256(x + 32);
  if constexpr (W == DType::kIQ4_NL) {
    return _mm256_add_epi32(
        sum_i16_to_i32(_mm256_maddubs_epi16(p.lo, _mm256_sign_epi8(xlo, p.lo_sign))),
        sum_i16_to_i32(_mm256_maddubs_epi16(p.hi, _mm256_sign_epi8(xhi, p.hi_sign))));
  } else {
    return sum_i16_to_i32(
        _mm256_add_epi16(_mm256_maddubs_epi16(p.lo, xlo), _mm256_maddubs_epi16(p.hi, xhi)));
  }
}

// The eight block sums in slot order from fold_pairs of pairs 0-1 and 2-3.
inline __m256i reduce_pairs(__m256i u0, __m256i u1) {
  return _mm256_add_epi32(_mm256_unpacklo_epi64(u0, u1), _mm256_unpackhi_epi64(u0, u1));
}

inline std::uint16_t u16_at(const std::uint8_t* p) {
  std::uint16_t h;
  std::memcpy(&h, p, sizeof h);
  return h;
}

// The 16-bit fields at `kField` of the group's eight blocks, each inserted at its
// slot. The blocks are a pack of template arguments, so every insert's lane is a
// constant whatever the optimiser unrolls (at -O1 or under the sanitizers a loop
// counter is not, and the build stops).
template <DType W, int kField, int... kBlock>
inline __m128i group_u16(const std::uint8_t* g, std::integer_sequence<int, kBlock...>) {
  __m128i v = _mm_setzero_si128();
  ((v = _mm_insert_epi16(v, u16_at(g + kBlock * block_bytes(W) + kField), slot_of(kBlock))), ...);
  return v;
}

// The group's eight block scales (mins: field offset 2) in slot order, f32.
template <DType W, int kField>
inline __m256 group_f16(const std::uint8_t* g) {
  return _mm256_cvtph_ps(group_u16<W, kField>(g, std::make_integer_sequence<int, kGroupBlocks>{}));
}

// The group's eight mxfp4 exponent bytes in slot order (as group_u16).
template <int... kBlock>
inline __m128i group_e8m0(const std::uint8_t* g, std::integer_sequence<int, kBlock...>) {
  __m128i v = _mm_setzero_si128();
  ((v = _mm_insert_epi8(v, g[kBlock * block_bytes(DType::kMXFP4)], slot_of(kBlock))), ...);
  return v;
}

template <DType W>
inline __m256 group_scales(const std::uint8_t* g) {
  if constexpr (W == DType::kMXFP4) {
    // quant::e8m0_half in lanes: exponent field e - 1, or 2^-22 << e for e < 2.
    const __m128i e8 = group_e8m0(g, std::make_integer_sequence<int, kGroupBlocks>{});
    const __m256i e = _mm256_cvtepu8_epi32(e8);
    const __m256i normal = _mm256_slli_epi32(_mm256_sub_epi32(e, _mm256_set1_epi32(1)), 23);
    const __m256i sub = _mm256_sllv_epi32(_mm256_set1_epi32(0x00200000), e);
    const __m256i small = _mm256_cmpgt_epi32(_mm256_set1_epi32(2), e);
    return _mm256_castsi256_ps(_mm256_blendv_epi8(normal, sub, small));
  } else {
    return group_f16<W, 0>(g);
  }
}

// out[c * n + r] = dot(weight row r, activation row c) for r < R, c < C. Weight
// row r starts at w + r * w_stride, activation row c (XGroup) at x + c * x_stride
// bytes.
template <DType W, int R, int C, bool kAhead>
void group_tile(const std::uint8_t* w, std::int64_t w_stride, const std::uint8_t* x,
                std::int64_t x_stride, std::int64_t blocks, float* out, std::int64_t n) {
  constexpr std::int64_t kGW = kGroupBlocks * block_bytes(W);
  __m256 acc[R][C];
#pragma GCC unroll 8
  for (int r = 0; r < R; ++r) {
#pragma GCC unroll 8
    for (int c = 0; c < C; ++c) acc[r][c] = _mm256_setzero_ps();
  }
  const std::int64_t full = blocks / kGroupBlocks;
  const std::int64_t groups = (blocks + kGroupBlocks - 1) / kGroupBlocks;
  for (std::int64_t i = 0; i < groups; ++i) {
    const XGroup* xg[C];
#pragma GCC unroll 8
    for (int c = 0; c < C; ++c) {
      xg[c] = reinterpret_cast<const XGroup*>(x + c * x_stride) + i;
    }
#pragma GCC unroll 8
    for (int r = 0; r < R; ++r) {
      const std::uint8_t* g = w + r * w_stride + i * kGW;
      prefetch_ahead<kAhead>(g + blocks * block_bytes(W), kGW);  // the next row
      // The last blocks from a zero-padded copy: zero levels and scales against
      // zero activations.
      alignas(32) std::uint8_t pad[kGW];
      if (i == full) {
        std::memset(pad, 0, sizeof pad);
        std::memcpy(pad, g, static_cast<std::size_t>(blocks % kGroupBlocks * block_bytes(W)));
        g = pad;
      }
      __m256i u0[C];
      __m256i s[C];
      PairW p = decode_pair<W>(g);
#pragma GCC unroll 8
      for (int c = 0; c < C; ++c) s[c] = pair_dot<W>(p, xg[c]->q);
      p = decode_pair<W>(g + 2 * block_bytes(W));
#pragma GCC unroll 8
      for (int c = 0; c < C; ++c) u0[c] = fold_pairs(s[c], pair_dot<W>(p, xg[c]->q + 64));
      p = decode_pair<W>(g + 4 * block_bytes(W));
#pragma GCC unroll 8
      for (int c = 0; c < C; ++c) s[c] = pair_dot<W>(p, xg[c]->q + 128);
      p = decode_pair<W>(g + 6 * block_bytes(W));
      const __m256 d = group_scales<W>(g);
#pragma GCC unroll 8
      for (int c = 0; c < C; ++c) {
        __m256i sum = reduce_pairs(u0[c], fold_pairs(s[c], pair_dot<W>(p, xg[c]->q + 192)));
        if constexpr (kOffset<W> != 0) {
          sum = _mm256_add_epi32(sum,
                                 _mm256_load_si256(reinterpret_cast<const __m256i*>(xg[c]->init)));
        }
        acc[r][c] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(sum),
                                    _mm256_mul_ps(d, _mm256_load_ps(xg[c]->dx)), acc[r][c]);
      }
      if constexpr (kHasMin<W>) {
        const __m256 m = group_f16<W, 2>(g);
#pragma GCC unroll 8
        for (int c = 0; c < C; ++c) {
          acc[r][c] = _mm256_fmadd_ps(m, _mm256_load_ps(xg[c]->dxsum), acc[r][c]);
        }
      }
    }
  }
#pragma GCC unroll 8
  for (int r = 0; r < R; ++r) {
#pragma GCC unroll 8
    for (int c = 0; c < C; ++c) out[c * n + r] = hsum(acc[r][c]);
  }
}

// ---------------------------------------------------------------------------
// Dispatch.

// A tile (QuantTileFn) of R weight rows against C quantized activation rows.
// kAhead: prefetch the next tile's weights (decode tiles; Note [Decode prefetch]).
template <DType W, int R, int C, bool kAhead = false>
void tile(const std::uint8_t* w, std::int64_t w_stride, const std::uint8_t* x,
          std::int64_t x_stride, std::int64_t blocks, float* out, std::int64_t n) {
  if constexpr (W == DType::kQ8_0) {
    q8_0_tile<R, C, kAhead>(w, w_stride, x, x_stride, blocks, out, n);
  } else {
    group_tile<W, R, C, kAhead>(w, w_stride, x, x_stride, blocks, out, n);
  }
}

// Decode: q8_0 and the group formats run four weight rows per tile (q8_0: four
// independent accumulator chains, as one chain's FMA latency bounded a single
// row; the group formats measured the same in cache with one row, and four
// rows keep the prefetch four rows ahead for weights streamed from DRAM).
//
// Prefill: q8_0 runs 2 weight rows x 4 activation rows (eight f32 accumulators,
// two unpacked blocks of two registers each, the activation block and its scale:
// the 16 ymm registers), then 1 x 4 for a leftover weight row. The group formats
// run 1 x 4 (two i32 partial sums per activation row while a group's pairs are
// decoded; 1 x 8 measured no faster). Other activation rows go through the
// decode tiles. Measured single-threaded on 512 x 4096 x 14336 against other
// shapes: 2 x 4 beat 3 x 4, 4 x 2, 2 x 6, 3 x 3 and 1 x 8 for q8_0 (the larger
// ones spill). 64 weight rows per L2 block were faster than 16.
template <DType W>
QuantTiles tiles() {
  if constexpr (W == DType::kQ8_0) {
    return {
        &tile<W, 4, 1, true>, &tile<W, 1, 1, true>, &tile<W, 2, 4>, &tile<W, 1, 4>, nullptr, 2, 4};
  } else {
    return {
        &tile<W, 4, 1, true>, &tile<W, 1, 1, true>, &tile<W, 1, 4>, &tile<W, 1, 4>, nullptr, 1, 4};
  }
}

// Prepares activation rows (QuantSimdFormat::prepare_rows): q8_0 blocks as stored
// for q8_0 weights, laid out as XGroup for the others (Note [AVX2 decode groups]).
void prepare_rows(DType w, const QuantMatmulArgs& args, std::int64_t begin, std::int64_t end,
                  std::uint8_t* x, std::int64_t x_stride, char* non_finite) {
  const int offset = w == DType::kQ4_0    ? kOffset<DType::kQ4_0>
                     : w == DType::kQ5_0  ? kOffset<DType::kQ5_0>
                     : w == DType::kMXFP4 ? kOffset<DType::kMXFP4>
                                          : 0;
  // Bytes, not BlockQ8_0: a std::vector<BlockQ8_0> would instantiate its growth
  // code here, compiled for AVX2, as a weak symbol portable code may share
  // (scripts/check_isa.sh).
  std::vector<std::uint8_t> tmp;
  for (std::int64_t r = begin; r < end; ++r) {
    const float* row = args.a + r * args.k;
    non_finite[r] = row_is_finite_avx2(row, args.k) ? 0 : 1;
    std::uint8_t* dst = x + r * x_stride;
    if (w == DType::kQ8_0) {
      quantize_row_q8_0_avx2(row, dst, args.k);
    } else {
      tmp.resize(static_cast<std::size_t>(args.k / quant::kQK) * sizeof(BlockQ8_0));
      auto* blocks_q8 = reinterpret_cast<BlockQ8_0*>(tmp.data());
      quantize_row_q8_0_avx2(row, blocks_q8, args.k);
      layout_groups(blocks_q8, args.k / quant::kQK, offset, reinterpret_cast<XGroup*>(dst));
    }
  }
}

// A prepared activation row: the q8_0 blocks (q8_0), or one XGroup per eight
// blocks.
template <DType W>
QuantSimdFormat format() {
  constexpr bool kGrouped = W != DType::kQ8_0;
  return {.tiles = tiles<W>(),
          .act_elems = kGrouped ? kGroupBlocks * quant::kQK : quant::kQK,
          .act_bytes = kGrouped ? sizeof(XGroup) : sizeof(BlockQ8_0),
          .prepare_rows = &prepare_rows,
          .row_grain = kRowGrain,
          .tile_rows = kTileRows};
}

}  // namespace

QuantSimdFormat quant_format_avx2_block32(DType w) {
  switch (w) {
    case DType::kQ4_0: return format<DType::kQ4_0>();
    case DType::kQ4_1: return format<DType::kQ4_1>();
    case DType::kQ5_0: return format<DType::kQ5_0>();
    case DType::kQ5_1: return format<DType::kQ5_1>();
    case DType::kQ8_0: return format<DType::kQ8_0>();
    case DType::kIQ4_NL: return format<DType::kIQ4_NL>();
    case DType::kMXFP4: return format<DType::kMXFP4>();
    default: return {};
  }
}

}  // namespace switchyard::cpu
