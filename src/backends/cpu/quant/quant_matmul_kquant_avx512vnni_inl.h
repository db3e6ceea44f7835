// The k-quant super-block layouts (activations: KAct; weights: the decode order)
// and the per-format decoding of one weight super-block, for the AVX-512 VNNI
// k-quant tiles (quant_matmul_kquant_avx512vnni.cpp, the one file that includes
// this). Inline code in an anonymous namespace, as quant_tile_inl.h says.
#pragma once

#include <immintrin.h>

#include <array>
#include <cstdint>

#include "backends/cpu/quant/quant_matmul_avx512vnni_inl.h"
#include "switchyard/quant_blocks.h"

namespace switchyard::cpu {
namespace {

// k-quants against q8_k.
//
// Note [k-quant decode order]
// A weight super-block decodes into four vectors of 64 levels, each taken from
// a full-width load in the order its bits fall out, not in element order: q2_k /
// q3_k shift one 64-byte load of qs by 0, 2, 4, 6 (vector j holds elements
// 32j .. 32j + 31 and 128 + 32j .. 128 + 32j + 31), q4_k / q5_k / iq4_xs take the
// low and high nibbles of two 64-byte loads, q6_k keeps element order. The
// activation row is prepared once per call (KAct) in that same order, so the
// weights need no cross-lane inserts or permutes; the group-scale permute indices
// follow the same order (k_order).
//
// Per format, the integer dot of a super-block and how the group scales enter:
//   q4_k, q5_k, q6_k: vpmaddubsw (unsigned levels x activations) into i16
//     pairs, then vpdpwssd (the first chunk: vpmaddwd) against the chunk's group
//     scales, one vpermw per chunk.
//   q3_k: vpdpbusd per vector, and per pair of vectors a pack to words and one
//     vpdpwssd against both groups' scales (Note [q3_k vector pairs]), one
//     vpshufb per pair (each 128-bit lane of a vector is one group) from the
//     per-lane scales q3_heads lays out once per super-block. The high bits are
//     rotated and merged by vpternlog, and the level bits 2-3 are taken in place
//     (levels x 4) with the other vectors' scales times 4 instead, so each
//     64-byte load needs one shift for four vectors; the final scale carries
//     the 1 / 4.
//   q2_k: levels (0-3) times scales (0-15) fit a byte, so a vpshufb table per
//     super-block (four groups' products in each 128-bit lane, selected by the
//     level's bit position) turns levels into scaled levels, and vpdpbusd takes
//     them straight into the i32 sum: no vpmaddubsw, no scale permutes. With
//     GFNI one table serves all four vectors (Note [GFNI level bits]).
//   iq4_xs: levels + 128 through a vpshufb table meet the activations in vpdpbusd,
//     whose accumulator starts at -128 times the lane's activation sum (prepared
//     once per row), so each i32 lane ends at its exact signed dot; a 128-bit
//     lane is one group, and the group scales multiply the lanes (vpmulld).
// The level offsets of q3_k / q6_k go through q8_k's group sums into the same i32
// sum (vpdpwssd); the mins of q2_k / q4_k / q5_k, with their own f16 scale, are a
// second f32 term (q2_k's for all rows of a tile at once: Note [q2_k min lanes]).
// The f16 scales of a tile's rows are converted together (Note [k-quant scale
// products]). Every i32 sum is exact (bounds per format checked against
// |x| <= 127), and decode and prefill tiles share the layout and the f32 steps.
// q3_k as q2_k did not gain (before Note [q3_k vector pairs]): its scaled levels
// (l - 4) s + 124 (l 0-7, s -32..31) fit a byte, so two vpshufb tables per row
// and super-block (one vpmullw of the widened scales against both levels of a
// word, plus the bias, per table) and an accumulator starting at -124 times the
// lane's activations (prepared per row) make each vector a vpternlog-merged
// index, one vpshufb and one vpdpbusd, with no scale shuffles or offset term.
// The decode loop dropped from 207 to 197 instructions, but with one thread in
// cache (QuantDotInCache, CPU time, base and table binaries alternated on a
// shared machine) the best of eight runs moved 33.0 -> 32.5 us, within the
// noise, and prefill (QuantMatmul) stayed level: building the tables (8
// instructions per row) and the eight live tables (16 register copies and
// reloads per loop against 11) took back what the vectors saved.

// A q8_k super-block prepared for format W (prepare_k): the levels in k_order<W>,
// and the group sums scaled as the format's correction needs (kSumScale; q2_k:
// split into bytes instead).
struct alignas(64) KAct {
  // q2_k's group sums split into bytes, sum = lo + 256 hi (Note [q2_k min lanes]).
  struct SumBytes {
    std::uint8_t lo[16];
    std::int8_t hi[16];
  };
  std::int8_t q[256];
  std::int32_t init[32];  // iq4_xs: -128 * (sum of lane i's eight activations), per 64-byte load
  // In the cache line of d: a prefill tile reads them for every activation row.
  union {
    std::int16_t sums[16];
    SumBytes sum_bytes;  // q2_k
  };
  float d;
};

// Element index of decode position 64 * v + b (vector v, byte b).
template <DType W>
constexpr std::array<std::uint8_t, 256> k_order = [] {
  std::array<std::uint8_t, 256> a{};
  for (int p = 0; p < 256; ++p) {
    const int v = p / 64;
    const int b = p % 64;
    int e = p;
    if (W == DType::kQ2_K || W == DType::kQ3_K) {
      e = 128 * (b / 32) + 32 * v + b % 32;
    } else if (W == DType::kQ4_K || W == DType::kQ5_K) {
      e = 128 * (v / 2) + 64 * (b / 32) + 32 * (v % 2) + b % 32;
    } else if (W == DType::kIQ4_XS) {
      e = 32 * (4 * (v / 2) + b / 16) + 16 * (v % 2) + b % 16;
    }
    a[static_cast<std::size_t>(p)] = static_cast<std::uint8_t>(e);
  }
  return a;
}();

// Group sums as stored in KAct::sums: q3_k's offset 4 against levels times 4
// (-16), q6_k's offset 32 with the scales times 32 (-1); q4_k / q5_k sum per
// 32-element group, in slots 8-15 beside the mins in KHead::coef (slots 0-7 zero).
template <DType W>
constexpr int kSumScale = W == DType::kQ3_K   ? -16
                          : W == DType::kQ6_K ? -1
                                              : 1;

// One weight super-block's per-row data (the f16 scales: Note [k-quant scale
// products]).
struct KHead {
  __m512i t[2];    // q2_k: scaled-level tables; q3_k: t[0] the chunk scales per
                   // 128-bit lane (q3_heads), or with GFNI and VBMI the two
                   // pairs' scale words; iq4_xs: group scale per i32 lane
  __m256i scales;  // group scales as i16 (q4_k / q5_k: per 32-element group)
  __m256i coef;    // i16, against KAct::sums
};

// The 32 bits of a super-block holding its f16 scale (q2_k / q4_k / q5_k: and
// the mins' f16 scale right after it): the byte offset, the half holding the
// scale (the mins' in the other), and the scale's factor before the activation
// scale (q3_k's levels x 4 take 1 / 4; the mins enter negated).
template <DType W>
constexpr int kScaleAt = W == DType::kQ2_K   ? 80
                         : W == DType::kQ3_K ? 106
                         : W == DType::kQ6_K ? 206
                                             : 0;
template <DType W>
constexpr int kScaleHalf = W == DType::kQ3_K || W == DType::kQ6_K ? 1 : 0;
// A min term per row (q2_k's are per tile: Note [q2_k min lanes]).
template <DType W>
constexpr bool kMinTerm = W == DType::kQ4_K || W == DType::kQ5_K;
template <DType W>
constexpr float kScaleFactor = W == DType::kQ3_K ? 0.25f : 1.0f;

// q2_k / q3_k: g(j, k), the 16-element group of vector j's bytes 16k .. 16k + 15
// (Note [k-quant decode order]).
constexpr int k_group(int j, int k) { return 2 * j + k % 2 + 8 * (k / 2); }

// vpshufb indices / i16 multipliers building q2_k's tables: in the 128-bit lane k
// of table t, entries 0-3 are level 0-3 times group g(2t, k)'s scale, entries 4, 8,
// 12 levels 1-3 times group g(2t + 1, k)'s (k_group).
template <int kTable>
constexpr std::array<std::uint8_t, 64> kQ2Spread = [] {
  std::array<std::uint8_t, 64> a{};
  for (int b = 0; b < 64; ++b) {
    const int k = b / 16;
    const int word = b % 16 / 2;
    const int j = 2 * kTable + (word < 2 ? 0 : 1);
    a[static_cast<std::size_t>(b)] = b % 2 != 0 ? 0x80 : static_cast<std::uint8_t>(k_group(j, k));
  }
  return a;
}();
constexpr std::array<std::int16_t, 32> kQ2Multipliers = [] {
  constexpr std::int16_t kLane[8] = {256, 2 + 3 * 256, 1, 0, 2, 0, 3, 0};
  std::array<std::int16_t, 32> a{};
  for (int w = 0; w < 32; ++w) a[static_cast<std::size_t>(w)] = kLane[w % 8];
  return a;
}();

// Note [GFNI level bits]
// vgf2p8affineqb maps every byte through an 8 x 8 bit matrix (one per 64-bit
// lane): each output bit the parity of chosen input bits, so it can move bit
// fields anywhere in their byte and clear the rest in one instruction. On CPUs
// with GFNI (cpu_features().gfni; the matmul picks the tiles once per call) q2_k
// uses it for one scaled-level table per row and super-block instead of two: the
// four vectors index disjoint entries of each 128-bit lane, vectors 0 and 1 as
// without GFNI (levels 1-3 at 1, 2, 3 and at 4, 8, 12: a mask of qs), vectors 2
// and 3 at 5, 10, 15 and at 6, 11, 13, linear in the level bits, so one affine
// form each takes them from bits 4-5 / 6-7 of qs with no shift. One vpshufb and
// one vpmullw build the table where two of each did. The scaled levels meeting
// the activations are the same bytes as without GFNI, so the results are
// identical (a test compares the two paths; the suite also runs with GFNI
// hidden). With one thread in cache (QuantDotInCache, CPU time, Ice Lake, base
// and GFNI binaries alternated on a shared machine) q2_k took 3-12% less time,
// 8% in the median of six comparisons (22.7 -> 21.0 us, 15.2 -> 16.4 GB/s, in
// the quietest). Moving more of the table work to port 5 (vpermb from a table
// of products instead of vpmullw, vpermb for vector 2's indices) gained
// nothing: the tile is bound by its total vector uops on ports 0 and 5, and the
// exact per-lane f32 steps (then two conversions and two FMAs per row; since
// Note [q2_k min lanes] one per row and one per tile) and the per-vector vpshufb
// and vpdpbusd leave little else to remove.
// q3_k did not gain (before Note [q3_k vector pairs], and again after it: the
// same time in cache): an affine form per vector putting hmask's bit above the
// level, then one vpternlog merging it with the level bits of qs (34 instead of
// 50 instructions per four rows to form the levels: the masks, the rotation and
// the shifts gone), was 5% slower. Its port-0 work (vpmaddubsw, vpdpwssd, and
// now the affine forms in place of the shifts) stayed the same while the masks
// it dropped could run on port 5.

// The affine matrix taking a 2-bit level from bits `at`, `at` + 1 of each byte to
// the 4-bit index whose bit i is set for level 1 by bit i of `one`, for level 2 by
// bit i of `two` (level 3: one ^ two); the index's bits 4-7 clear. Output bit i
// is the parity of the input bits in byte 7 - i of the matrix.
constexpr std::uint64_t level_matrix(int at, int one, int two) {
  std::uint64_t m = 0;
  for (int i = 0; i < 4; ++i) {
    const int sources = ((one >> i) & 1) << at | ((two >> i) & 1) << (at + 1);
    m |= static_cast<std::uint64_t>(sources) << (8 * (7 - i));
  }
  return m;
}

// q2_k with GFNI: vector j's levels 1 and 2 index table entries kQ2Index[j]
// (level 3: their xor); vectors 0 and 1 by a mask of qs, 2 and 3 through
// level_matrix.
constexpr int kQ2Index[4][2] = {{1, 2}, {4, 8}, {5, 10}, {6, 11}};
// vpshufb indices and i16 multipliers building that table: in 128-bit lane k,
// word w takes the scales of vectors kQ2Words[w] (group g(j, k), as for the two
// tables; -1: zero) as its low and high byte, times kQ2WordMul[w].
constexpr int kQ2Words[8][2] = {{0, -1}, {0, -1}, {1, 2}, {3, -1},
                                {1, -1}, {2, 3},  {1, 3}, {2, -1}};
constexpr int kQ2WordMul[8] = {256, 2 + 3 * 256, 1, 1, 2, 2, 3, 3 * 256};
// Checks the table: the words built from scales s_j hold l * s_j at the index of
// level l of vector j and zero at index 0 (scales up to 15: no carries).
constexpr bool q2_table_ok() {
  const int s[4] = {15, 14, 13, 11};
  int t[16] = {};
  for (int w = 0; w < 8; ++w) {
    const int lo = kQ2Words[w][0] < 0 ? 0 : s[kQ2Words[w][0]];
    const int hi = kQ2Words[w][1] < 0 ? 0 : s[kQ2Words[w][1]];
    const int v = (lo + 256 * hi) * kQ2WordMul[w];
    t[2 * w] = v & 0xff;
    t[2 * w + 1] = v >> 8 & 0xff;
  }
  bool ok = t[0] == 0;
  for (int j = 0; j < 4; ++j) {
    const int one = kQ2Index[j][0];
    const int two = kQ2Index[j][1];
    ok = ok && t[one] == s[j] && t[two] == 2 * s[j] && t[one ^ two] == 3 * s[j];
  }
  return ok;
}
static_assert(q2_table_ok());
constexpr std::array<std::uint8_t, 64> kQ2OneSpread = [] {
  std::array<std::uint8_t, 64> a{};
  for (int b = 0; b < 64; ++b) {
    const int k = b / 16;
    const int j = kQ2Words[b % 16 / 2][b % 2];
    a[static_cast<std::size_t>(b)] = j < 0 ? 0x80 : static_cast<std::uint8_t>(k_group(j, k));
  }
  return a;
}();
constexpr std::array<std::int16_t, 32> kQ2OneMultipliers = [] {
  std::array<std::int16_t, 32> a{};
  for (int w = 0; w < 32; ++w) a[static_cast<std::size_t>(w)] = kQ2WordMul[w % 8];
  return a;
}();
template <int kVec>
constexpr std::array<std::uint64_t, 8> kQ2LevelMatrix = [] {
  std::array<std::uint64_t, 8> a{};
  a.fill(level_matrix(2 * kVec, kQ2Index[kVec][0], kQ2Index[kVec][1]));
  return a;
}();
template <std::size_t N>
inline __m512i load_table(const std::array<std::uint64_t, N>& a) {
  static_assert(N == 8);
  return _mm512_loadu_si512(a.data());
}

// q3_k's chunk scales per 128-bit lane: vector j's lane k holds group
// g(j, k) = 2j + k % 2 + 8 (k / 2) (Note [k-quant decode order]). Each row's 16
// scales shuffled so that byte 4k + j is g(j, k)'s (kQ3LaneGroups, per 128-bit
// lane), then spread to word j of lane k (kQ3LaneShift: times 4 for j = 0, 2),
// and per pair of vectors spread over its lane (kQ3PairScale).
constexpr std::array<std::uint8_t, 64> kQ3LaneGroups = [] {
  std::array<std::uint8_t, 64> a{};
  for (int i = 0; i < 64; ++i) {
    const int k = i % 16 / 4;
    const int j = i % 4;
    a[static_cast<std::size_t>(i)] = static_cast<std::uint8_t>(k_group(j, k));
  }
  return a;
}();
constexpr std::array<std::int16_t, 32> kQ3LaneShift = [] {
  std::array<std::int16_t, 32> a{};
  for (int w = 0; w < 32; ++w) a[static_cast<std::size_t>(w)] = w % 8 == 0 || w % 8 == 2 ? 2 : 0;
  return a;
}();
// Vectors 2p and 2p + 1 (Note [q3_k vector pairs]): in each 128-bit lane, words
// 0-3 the scale of vector 2p's group there, words 4-7 vector 2p + 1's.
template <int kPair>
constexpr std::array<std::uint8_t, 64> kQ3PairScale = [] {
  std::array<std::uint8_t, 64> a{};
  for (int b = 0; b < 64; ++b) {
    const int word = 2 * kPair + (b % 16 >= 8 ? 1 : 0);
    a[static_cast<std::size_t>(b)] = static_cast<std::uint8_t>(2 * word + b % 2);
  }
  return a;
}();

// Note [q3_k with GFNI and VBMI]: vpermt2b indices building row r's scales for
// both pairs of vectors at once, as bytes to widen: bytes 32p .. 32p + 31 are the
// words of pair p (kQ3PairScale's layout), vector 2p's from the scales times 4
// (bit 6), vector 2p + 1's from the scales, in 128-bit lane r of either.
constexpr std::array<std::array<std::uint8_t, 64>, 4> kQ3PairBytes = [] {
  std::array<std::array<std::uint8_t, 64>, 4> rows{};
  for (int r = 0; r < 4; ++r) {
    for (int b = 0; b < 64; ++b) {
      const int word = b % 32;
      const int k = word / 8;
      const int j = 2 * (b / 32) + (word % 8 < 4 ? 0 : 1);
      rows[static_cast<std::size_t>(r)][static_cast<std::size_t>(b)] =
          static_cast<std::uint8_t>((j % 2 == 0 ? 64 : 0) + 16 * r + k_group(j, k));
    }
  }
  return rows;
}();

// iq4_xs: per i32 lane of 64-byte load h, the bit positions of its group's
// scale: low four bits in scales_l (the u32 at byte 4), top two in scales_h (the
// high half of the u32 at byte 0), moved to bits 4-5.
template <int kHalf>
constexpr std::array<std::uint32_t, 16> kIq4ScaleLow = [] {
  std::array<std::uint32_t, 16> a{};
  for (int l = 0; l < 16; ++l) a[static_cast<std::size_t>(l)] = 4 * (4 * kHalf + l / 4);
  return a;
}();
template <int kHalf>
constexpr std::array<std::uint32_t, 16> kIq4ScaleHigh = [] {
  std::array<std::uint32_t, 16> a{};
  for (int l = 0; l < 16; ++l) a[static_cast<std::size_t>(l)] = 12 + 2 * (4 * kHalf + l / 4);
  return a;
}();

template <DType W, bool kGfni>
inline void k_head(const std::uint8_t* p, KHead& h) {
  if constexpr (W == DType::kQ4_K || W == DType::kQ5_K) {
    // The 6-bit scales and mins of groups 0-3 sit in bytes 0-3 / 4-7; groups 4-7
    // take a nibble of bytes 8-11 and the top two bits of bytes 0-3 / 4-7.
    // Unpacked in vector registers (scalar code here ends up SLP-vectorized into
    // more vector uops than this): bytes 0-7 the scales, 8-15 the mins.
    const __m128i v = _mm_loadu_si128(reinterpret_cast<const __m128i*>(p + 4));
    const __m128i a =
        _mm_shuffle_epi8(v, _mm_setr_epi8(0, 1, 2, 3, 8, 9, 10, 11, 4, 5, 6, 7, 8, 9, 10, 11));
    const __m128i top =
        _mm_shuffle_epi8(v, _mm_setr_epi8(-1, -1, -1, -1, 0, 1, 2, 3, -1, -1, -1, -1, 4, 5, 6, 7));
    const __m128i low = _mm_and_si128(
        _mm_srlv_epi32(a, _mm_setr_epi32(0, 0, 0, 4)),
        _mm_setr_epi8(63, 63, 63, 63, 15, 15, 15, 15, 63, 63, 63, 63, 15, 15, 15, 15));
    // Scales in words 0-7 (the chunk permutes read those), mins in words 8-15
    // (against the group sums in KAct::sums[8..15]).
    h.scales = _mm256_cvtepu8_epi16(
        _mm_or_si128(low, _mm_and_si128(_mm_srli_epi32(top, 2), _mm_set1_epi8(0x30))));
    h.coef = h.scales;
  } else if constexpr (W == DType::kQ6_K) {
    h.scales = _mm256_cvtepi8_epi16(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p + 192)));
    h.coef = _mm256_slli_epi16(h.scales, 5);
  } else if constexpr (W == DType::kQ2_K) {
    const __m512i raw =
        _mm512_broadcast_i32x4(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
    const __m512i sc = _mm512_and_si512(raw, _mm512_set1_epi8(0x0f));
    if constexpr (kGfni) {
      h.t[0] = _mm512_mullo_epi16(_mm512_shuffle_epi8(sc, load_table(kQ2OneSpread)),
                                  load_table(kQ2OneMultipliers));
    } else {
      const __m512i mul = load_table(kQ2Multipliers);
      h.t[0] = _mm512_mullo_epi16(_mm512_shuffle_epi8(sc, load_table(kQ2Spread<0>)), mul);
      h.t[1] = _mm512_mullo_epi16(_mm512_shuffle_epi8(sc, load_table(kQ2Spread<1>)), mul);
    }
  } else {
    static_assert(W == DType::kIQ4_XS);
    const __m512i lo = _mm512_set1_epi32(static_cast<int>(quant::load_u32(p + 4)));
    const __m512i hi = _mm512_set1_epi32(static_cast<int>(quant::load_u32(p)));
    const __m512i low4 = _mm512_set1_epi32(0x0f);
    const __m512i bits45 = _mm512_set1_epi32(0x30);
    const __m512i bias = _mm512_set1_epi32(32);
    h.t[0] = _mm512_sub_epi32(
        _mm512_ternarylogic_epi32(
            _mm512_srlv_epi32(lo, load_table(kIq4ScaleLow<0>)), low4,
            _mm512_and_si512(_mm512_srlv_epi32(hi, load_table(kIq4ScaleHigh<0>)), bits45), 0xea),
        bias);
    h.t[1] = _mm512_sub_epi32(
        _mm512_ternarylogic_epi32(
            _mm512_srlv_epi32(lo, load_table(kIq4ScaleLow<1>)), low4,
            _mm512_and_si512(_mm512_srlv_epi32(hi, load_table(kIq4ScaleHigh<1>)), bits45), 0xea),
        bias);
  }
}

// The heads of R q3_k rows, one 128-bit lane per row while the scales are
// unpacked. The 6-bit scales are stored + 32 in the 12 bytes at p + 96 (loaded
// from p + 94 so as to stay in the block): low nibbles from bytes 0-7 (groups
// 0-7 low, 8-15 high nibble), top two bits from bytes 8-11, byte g % 4, bits
// 2 (g / 4) .. + 1. Per row then the group scales as i16 in group order (coef,
// against KAct::sums) and the chunk scales per 128-bit lane (t[0]: in lane k,
// word j (0-3) the scale of vector j's group there, times 4 for vectors 0 and 2,
// whose levels are not; words 4-7 repeat them without the factor and are not
// read).
template <int R, bool kPairBytes>
inline void q3_heads(const std::uint8_t* const (&p)[R], KHead (&h)[R]) {
  static_assert(R >= 1 && R <= 4);
  const auto lane = [&](int r) {
    return _mm_loadu_si128(reinterpret_cast<const __m128i*>(p[r] + 94));
  };
  const __m512i v = insert_lanes<R>(_mm512_castsi128_si512(lane(0)), lane);
  const __m512i nibbles = _mm512_srlv_epi64(
      _mm512_shuffle_epi8(
          v, _mm512_broadcast_i32x4(_mm_setr_epi8(2, 3, 4, 5, 6, 7, 8, 9, 2, 3, 4, 5, 6, 7, 8, 9))),
      _mm512_broadcast_i32x4(_mm_setr_epi32(0, 0, 4, 0)));
  const __m512i top = _mm512_rolv_epi32(
      _mm512_shuffle_epi8(v, _mm512_broadcast_i32x4(_mm_setr_epi8(10, 11, 12, 13, 10, 11, 12, 13,
                                                                  10, 11, 12, 13, 10, 11, 12, 13))),
      _mm512_broadcast_i32x4(_mm_setr_epi32(4, 2, 0, 30)));
  const __m512i s = _mm512_sub_epi8(
      _mm512_ternarylogic_epi32(nibbles, _mm512_set1_epi8(0x0f),
                                _mm512_and_si512(top, _mm512_set1_epi8(0x30)), 0xea),
      _mm512_set1_epi8(32));
  if constexpr (kPairBytes) {
    // Note [q3_k with GFNI and VBMI]: both pairs' scales of row r by one vpermt2b
    // from the scales and the scales times 4 (-128 .. 124: still a byte).
    const __m512i s2 = _mm512_add_epi8(s, s);
    const __m512i s4 = _mm512_add_epi8(s2, s2);
#pragma GCC unroll 4
    for (int r = 0; r < R; ++r) {
      const __m512i both =
          permute2_bytes(s, load_table(kQ3PairBytes[static_cast<std::size_t>(r)]), s4);
      h[r].t[0] = _mm512_cvtepi8_epi16(_mm512_castsi512_si256(both));
      h[r].t[1] = _mm512_cvtepi8_epi16(_mm512_extracti64x4_epi64(both, 1));
    }
  } else {
    // Byte 4k + j of each row's lane: the scale of g(j, k) (kQ3LaneGroups).
    const __m512i lanes = _mm512_shuffle_epi8(s, load_table(kQ3LaneGroups));
#pragma GCC unroll 4
    for (int r = 0; r < R; ++r) {
      // Dwords 2k and 2k + 1 from dword k of row r's lane: lane k of the words
      // below starts with that dword's four scales.
      const __m512i spread = _mm512_permutexvar_epi32(
          _mm512_setr_epi32(4 * r, 4 * r, 4 * r + 1, 4 * r + 1, 4 * r + 2, 4 * r + 2, 4 * r + 3,
                            4 * r + 3, 0, 0, 0, 0, 0, 0, 0, 0),
          lanes);
      h[r].t[0] = _mm512_sllv_epi16(_mm512_cvtepi8_epi16(_mm512_castsi512_si256(spread)),
                                    load_table(kQ3LaneShift));
    }
  }
  const __m512i coef01 = _mm512_cvtepi8_epi16(_mm512_castsi512_si256(s));
  h[0].coef = _mm512_castsi512_si256(coef01);
  if constexpr (R > 1) h[1].coef = _mm512_extracti64x4_epi64(coef01, 1);
  if constexpr (R > 2) {
    const __m512i coef23 = _mm512_cvtepi8_epi16(_mm512_extracti64x4_epi64(s, 1));
    h[2].coef = _mm512_castsi512_si256(coef23);
    if constexpr (R > 3) h[3].coef = _mm512_extracti64x4_epi64(coef23, 1);
  }
}

// i16 permute indices for the maddubs formats: word w of vector v takes the scale
// of the group of decode position 64 v + 2 w.
template <DType W, int kVec>
constexpr std::array<std::int16_t, 32> kChunkGroups = [] {
  constexpr int kGroup = W == DType::kQ4_K || W == DType::kQ5_K ? 32 : 16;
  std::array<std::int16_t, 32> a{};
  for (int w = 0; w < 32; ++w) {
    a[static_cast<std::size_t>(w)] =
        static_cast<std::int16_t>(k_order<W>[static_cast<std::size_t>(64 * kVec + 2 * w)] / kGroup);
  }
  return a;
}();

// One bit per byte: bit `lo` in the first 32 bytes, bit `hi` in the rest.
inline __m512i bit_halves(int lo, int hi) {
  return _mm512_inserti64x4(_mm512_set1_epi8(static_cast<char>(1 << lo)),
                            _mm256_set1_epi8(static_cast<char>(1 << hi)), 1);
}
inline __m512i broadcast256(const std::uint8_t* p) { return _mm512_broadcast_i64x4(load256(p)); }

// Vector kVec (Note [k-quant decode order]) of super-block p as the unsigned
// bytes that meet the activations: levels (q3_k: vectors 1 and 3 times 4), q2_k's
// scaled levels, iq4_xs's levels + 128.
template <DType W, int kVec, bool kGfni>
inline __m512i k_levels(const std::uint8_t* p, const KHead& h) {
  static_assert(!kGfni || W == DType::kQ2_K);
  const __m512i low4 = _mm512_set1_epi8(0x0f);
  if constexpr (W == DType::kQ4_K || W == DType::kQ5_K || W == DType::kIQ4_XS) {
    constexpr int kQs = W == DType::kQ4_K ? 16 : W == DType::kQ5_K ? 48 : 8;
    const __m512i q = load512(p + kQs + 64 * (kVec / 2));
    __m512i v = _mm512_and_si512(kVec % 2 == 0 ? q : _mm512_srli_epi16(q, 4), low4);
    if constexpr (W == DType::kQ5_K) {
      constexpr int kBit = 4 * (kVec / 2) + kVec % 2;
      const __mmask64 high =
          _mm512_test_epi8_mask(broadcast256(p + 16), bit_halves(kBit, kBit + 2));
      v = _mm512_mask_add_epi8(v, high, v, _mm512_set1_epi8(16));
    }
    if constexpr (W == DType::kIQ4_XS) {
      static constexpr auto kTable = biased_table<DType::kIQ4_NL>();
      v = _mm512_shuffle_epi8(load_table(kTable), v);
    }
    return v;
  } else if constexpr (W == DType::kQ6_K) {
    constexpr int kHalf = kVec / 2;
    constexpr int kPart = kVec % 2;
    const __m512i ql = load512(p + 64 * kHalf);
    // The two high bits of each level, rotated within their byte to bits 4-5.
    const __m512i qh = _mm512_rolv_epi64(broadcast256(p + 128 + 32 * kHalf),
                                         kPart == 0 ? _mm512_set_epi64(2, 2, 2, 2, 4, 4, 4, 4)
                                                    : _mm512_set_epi64(62, 62, 62, 62, 0, 0, 0, 0));
    return _mm512_ternarylogic_epi32(kPart == 0 ? ql : _mm512_srli_epi16(ql, 4), low4,
                                     _mm512_and_si512(qh, _mm512_set1_epi8(0x30)), 0xea);
  } else {
    static_assert(W == DType::kQ2_K || W == DType::kQ3_K);
    constexpr int kQs = W == DType::kQ2_K ? 16 : 32;
    const __m512i qs = load512(p + kQs);
    const __m512i level_bits = _mm512_set1_epi8(kVec % 2 == 0 ? 0x03 : 0x0c);
    if constexpr (kGfni) {
      // q2_k's one table (Note [GFNI level bits]).
      if constexpr (kVec < 2) {
        return _mm512_shuffle_epi8(h.t[0], _mm512_and_si512(qs, level_bits));
      } else {
        return _mm512_shuffle_epi8(h.t[0], affine_bytes(qs, load_table(kQ2LevelMatrix<kVec>)));
      }
    }
    __m512i v = _mm512_and_si512(kVec < 2 ? qs : _mm512_srli_epi16(qs, 4), level_bits);
    if constexpr (W == DType::kQ2_K) {
      return _mm512_shuffle_epi8(h.t[kVec / 2], v);
    } else {
      // The high bits: bit kVec of hmask for the first 32 bytes, bit 4 + kVec for
      // the rest. Rotated so that both are bit kVec (the same rotation for all
      // four vectors), then shifted to the bit above the level (2, or 4 for the
      // levels in bits 2-3) and merged under a mask: a rotation per super-block
      // and a shift per vector on port 0 where a vptestmb (port 5), a
      // merge-masked add and the register copy it took were.
      constexpr int kTo = kVec % 2 == 0 ? 2 : 4;
      const __m512i high =
          _mm512_rolv_epi64(broadcast256(p), _mm512_set_epi64(60, 60, 60, 60, 0, 0, 0, 0));
      return _mm512_ternarylogic_epi32(v, kTo == kVec ? high : _mm512_slli_epi64(high, kTo - kVec),
                                       _mm512_set1_epi8(static_cast<char>(1 << kTo)), 0xf8);
    }
  }
}

// Note [q3_k with GFNI and VBMI]
// Where the CPU has both extensions, q3_k's tiles form the levels and the pair
// scales with fewer instructions; the bytes meeting the activations and the
// words meeting the dwords are the same as without them, so are the results (a
// test compares the two; the suite also runs with either hidden).
// - Levels: one affine form per vector takes hmask's bit straight to its place
//   above the level bits and clears the rest of the byte (the matrix of the
//   first 32 bytes' qwords reads bit kVec, that of the others bit 4 + kVec, so
//   no rotation), and one vpternlog merges it with the level bits of qs: two
//   instructions per vector where the rotation, shifts, masks and merges took
//   three or four. The qs bytes are loaded once per row and super-block rather
//   than folded into each vector's mask as a 64-byte load across cache lines.
// - Scales: both pairs' words of a row come from one vpermt2b over the scales
//   and the scales times 4 (kQ3PairBytes) and two widenings, where a permute, a
//   widening, a shift and two vpshufb were.
// Per four rows and super-block the decode loop went from 139 to 120 vector
// instructions other than moves. With one thread in cache (QuantDotInCache,
// base and new binaries alternated, 50 runs each) q3_k took 30.7 -> 28.9 us at
// best, 32.5 -> 30.8 us in the median; prefill gained 7-14% (the "q3_k with
// GFNI and VBMI" table in the history of docs/benchmarks.md, 7dea69f and before).

// Bit kVec of each hmask byte (bit 4 + kVec in the second 32 bytes) to the bit
// above vector kVec's level bits (Note [k-quant decode order]): 2, or 4 for the
// levels in bits 2-3. Output bit i is the parity of the input bits in byte 7 - i.
template <int kVec>
constexpr std::array<std::uint64_t, 8> kQ3HighMatrix = [] {
  constexpr int kTo = kVec % 2 == 0 ? 2 : 4;
  std::array<std::uint64_t, 8> a{};
  for (int q = 0; q < 8; ++q) {
    const int from = q < 4 ? kVec : kVec + 4;
    a[static_cast<std::size_t>(q)] = std::uint64_t{1} << from << (8 * (7 - kTo));
  }
  return a;
}();

// Vector kVec's bytes for the activations (as k_levels<kQ3_K>) from the row's qs
// (64 bytes) and hmask (32 bytes, broadcast to both halves).
template <int kVec>
inline __m512i q3_levels(__m512i qs, __m512i hmask) {
  const __m512i level_bits = _mm512_set1_epi8(kVec % 2 == 0 ? 0x03 : 0x0c);
  // (level bits of qs) | high: the high bit's byte is clear elsewhere.
  return _mm512_ternarylogic_epi32(kVec < 2 ? qs : _mm512_srli_epi16(qs, 4),
                                   affine_bytes(hmask, load_table(kQ3HighMatrix<kVec>)), level_bits,
                                   0xec);
}

// A zeroed register by the zeroing idiom, which the CPU resolves at rename:
// vpdpbusd accumulates into its destination, and a sum starting at zero otherwise
// costs a register copy from one zeroed register.
inline __m512i zeroed() {
  __m512i z;
  asm volatile("vpxord %0, %0, %0" : "=v"(z));
  return z;
}

// Note [q2_k min lanes]
// q2_k's min term, -dmin * sum over groups of min_g * bsum_g, was per row and
// super-block a widening of the mins, a vpmaddwd against the group sums, a
// conversion and an FMA. Instead the 16 scale bytes of the tile's rows go into
// one vector, row r in 128-bit lane r, and with the activation's group sums
// split into bytes (lo unsigned, hi signed: KAct::SumBytes) two vpdpbusd and a
// shift give every row's dot in its lane's four dwords; one conversion and one
// FMA against the rows' min scales (a permute of the scale products) serve all
// rows. Each dword is an exact integer as before, but it now holds four groups'
// terms where the per-row form held two, and is added after the row's reduction,
// so q2_k results moved in their last bits (within the declared bound). Each
// row's lane is summed at the end in a fixed order, so a row's result does not
// depend on the tile that computed it.
// The decode loop went from 95 to 86 vector ALU instructions per four rows;
// with one thread in cache (QuantDotInCache, fastest of 30 runs per binary,
// alternated) q2_k took 21.7 -> 19.9 us.

// The mins of the R rows at w[r], row r's 16 in 128-bit lane r (past R: row 0's).
template <int R>
inline __m512i q2_tile_mins(const std::uint8_t* const (&w)[R]) {
  const auto lane = [&](int r) { return _mm_loadu_si128(reinterpret_cast<const __m128i*>(w[r])); };
  const __m512i raw = insert_lanes<R>(_mm512_broadcast_i32x4(lane(0)), lane);
  return _mm512_and_si512(_mm512_srli_epi16(raw, 4), _mm512_set1_epi8(0x0f));
}

// Adds the min terms of a tile's rows (mins: q2_tile_mins) against activation
// super-block x, scaled by the mins' scale products in fc (dword 2r + 1), to
// lane r of acc.
inline void q2_add_min_terms(__m512i mins, const KAct& x, __m256 fc, __m512& acc) {
  const auto broadcast16 = [](const void* p) {
    return _mm512_broadcast_i32x4(_mm_load_si128(static_cast<const __m128i*>(p)));
  };
  // Every product fits: mins 0-15, lo 0-255, hi -8..7 (|bsum| <= 16 * 127).
  const __m512i high = _mm512_slli_epi32(
      _mm512_dpbusd_epi32(_mm512_setzero_si512(), mins, broadcast16(x.sum_bytes.hi)), 8);
  const __m512i dot = _mm512_dpbusd_epi32(high, broadcast16(x.sum_bytes.lo), mins);
  const __m512 scale =
      _mm512_permutexvar_ps(_mm512_setr_epi32(1, 1, 1, 1, 3, 3, 3, 3, 5, 5, 5, 5, 7, 7, 7, 7),
                            _mm512_castps256_ps512(fc));
  acc = _mm512_fmadd_ps(_mm512_cvtepi32_ps(dot), scale, acc);
}

}  // namespace
}  // namespace switchyard::cpu
