// AVX-512 (F/BW/VL + VNNI) matmul with block-quantized weights. Same structure
// and precision as the AVX2 sibling (activations quantized once per row to q8_0 /
// q8_k with the reference rounding, integer dot products per block, f32 block
// accumulation), at twice the width and with the VNNI fused multiply-adds:
//
//   32-element formats: groups of 16 blocks (Note [Decode groups]). A 64-byte
//     chunk holds the levels of four nibble blocks as stored (q8_0: dword c of
//     each of the 16 blocks, Note [q8_0 block lanes]);
//     the activations are laid out once per row to match, low nibbles and high
//     nibbles each against their own 64 activation bytes. The unsigned levels
//     u = q + bias (q4_0: 8, q5_0: 16, q8_0 / iq4_nl / mxfp4: 128 through a
//     biased table or a flipped sign bit) meet them in vpdpbusd, whose i32
//     accumulator starts at -bias * (sum of the lane's activations), prepared
//     with the layout; so each lane ends at sum(q * x) exactly, with no
//     per-block correction. A group's 16 scales are collected and converted at
//     once; lanes are scaled in f32 by d_w * d_x and accumulated per lane.
//   k-quants (256-element super-blocks) against q8_k, prepared once per row in
//     the order the weight bits fall out of full-width loads (Note [k-quant
//     decode order]), so a super-block is four vectors of 64 levels with no
//     cross-lane moves. q4_k-q6_k: vpmaddubsw to i16 pairs, then vpdpwssd
//     against the chunk's i16 group scales; q3_k: vpdpbusd per vector, two
//     vectors' dwords packed to words against both groups' scales (vpdpwssd).
//     q2_k: levels times scales fit a byte, so a per-super-block vpshufb table
//     yields scaled levels for vpdpbusd. iq4_xs: levels + 128 through vpdpbusd
//     from the -128 * lane-sum start as above, one group per 128-bit lane, lanes
//     times group scales (vpmulld). Level offsets (q3_k, q6_k) join the i32 sum
//     through the group sums; mins (q2_k, q4_k, q5_k) are a second f32 term
//     (q2_k: all rows of a tile in one vector).
//
// Register tiles: matvec runs four weight rows at once (independent accumulator
// chains); prefill runs 4 (k-quants: 3, q2_k: 2) weight rows x 4 activation
// rows, so each decoded weight group (k-quant vector) serves four activation
// rows. Every output element is computed by the same sequence of operations
// whichever tile computes it, so results are identical at any thread count and
// a matmul's rows equal the matvecs of its activation rows.
//
// GCC 12's AVX-512 intrinsic headers build some results from a deliberately
// undefined vector (_mm512_undefined_*), which its uninitialised-use analysis
// reports once the intrinsics are inlined; silenced for this file only, as in the
// other AVX-512 kernels.
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#include <fmt/format.h>
#include <immintrin.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstring>
#include <limits>
#include <vector>

#include "backends/cpu/cpu_features.h"
#include "backends/cpu/quant/quant_kernels.h"
#include "switchyard/quant_blocks.h"

namespace switchyard::cpu {
namespace {

using quant::BlockQ8_0;
using quant::BlockQ8_K;

inline __m256i load256(const void* p) { return _mm256_loadu_si256(static_cast<const __m256i*>(p)); }
inline __m512i load512(const void* p) { return _mm512_loadu_si512(p); }

// Note [Decode prefetch]
// A decode step (one activation row) reads every weight byte once, from DRAM for
// a real model. The hardware prefetchers alone left the AVX-512 tiles at about
// half of the measured DRAM read bandwidth: the cores, busy unpacking, keep too
// few lines in flight. The decode tiles therefore ask, for each of their rows,
// for the bytes of the row after it in memory at the offset they are reading
// now: the row that the tile's stream of rows reads next (Note [Decode streams]
// in quant_kernels.cpp), spread evenly over the loop instead of in bursts.
// Prefetches never fault, so running past the last row is harmless. Prefill
// tiles reuse each weight row across activation rows from L2 and do not
// prefetch.
template <bool kAhead>
inline void prefetch_ahead(const std::uint8_t* p, std::int64_t bytes) {
  if constexpr (kAhead) {
    for (std::int64_t o = 0; o < bytes; o += 64) {
      _mm_prefetch(reinterpret_cast<const char*>(p + o), _MM_HINT_T0);
    }
  }
}

template <typename T, std::size_t N>
inline __m512i load_table(const std::array<T, N>& a) {
  static_assert(sizeof(T) * N == 64);
  return _mm512_loadu_si512(a.data());
}

// ---------------------------------------------------------------------------
// 32-element formats (Note [Decode groups]).

template <DType W>
constexpr int kBias = W == DType::kQ4_0                          ? 8
                      : W == DType::kQ5_0                        ? 16
                      : (W == DType::kQ4_1 || W == DType::kQ5_1) ? 0
                                                                 : 128;
template <DType W>
constexpr bool kHasMin = W == DType::kQ4_1 || W == DType::kQ5_1;

// Offsets in a block: of the f16 scale, the f16 min, the 16 nibble bytes.
template <DType W>
constexpr int kQsOffset = W == DType::kQ4_1   ? 4
                          : W == DType::kQ5_0 ? 6
                          : W == DType::kQ5_1 ? 8
                                              : 2;

// The 16 levels of a table format plus 128, as unsigned bytes, in every lane.
template <DType W>
constexpr std::array<std::uint8_t, 64> biased_table() {
  std::array<std::uint8_t, 64> a{};
  for (int i = 0; i < 64; ++i) {
    const int v = W == DType::kIQ4_NL ? quant::kIQ4NLValues[i % 16] : quant::kMXFP4Values[i % 16];
    a[static_cast<std::size_t>(i)] = static_cast<std::uint8_t>(v + 128);
  }
  return a;
}

// Note [Decode groups]
// A decode step has one activation row, so nothing amortises the per-block
// work, and unpacking was the limit (about half of the DRAM bandwidth per
// core): two blocks per vector meant, per pair and weight row, a word permute
// and a shift to spread the nibbles, an f16 scale spread by a shuffle and
// converted, and a multiply, a conversion and an FMA, nearly all on port 0.
// The 32-element tiles (decode and prefill alike, so that a matmul's rows keep
// equal to the matvecs of its activation rows) take 16 blocks of a weight row
// at a time:
//   - A chunk is the 64 level bytes of four nibble blocks as stored, block b
//     in bytes 16b .. 16b + 15: one dword permute of two loads (see
//     kSecondLoad; q5_0 / q5_1: Note [Fifth bits]), four 16-byte loads for
//     mxfp4 (blocks at odd offsets). Its low nibbles (elements 0-15) and high
//     nibbles (16-31) meet activations laid out to match (decode_layout), both
//     chained into one vpdpbusd accumulator: no byte is spread twice, and a
//     lane covers eight elements. (q8_0 lays a group out differently: Note
//     [q8_0 block lanes].)
//   - The group's 16 f16 scales (and mins) are collected by one word permute
//     per chunk into one vector, converted by one vcvtph2ps and multiplied by
//     the 16 activation scales at once; a vpermps spreads them over each
//     chunk's lanes. q4_1 / q5_1 mins meet dx * sum(x) once per group, one lane
//     per block.
// Per 16 q4_0 blocks that is 8 vpdpbusd, 4 shifts, 4 conversions, 4 FMAs and 1
// multiply where the pair tiles took 8 of each, and 13 permutes / shuffles on
// port 5 where they took 24 (counted on Ice Lake, where vpermt2w takes two
// cycles and vpermd / vpermt2d / vpermw one). Blocks past the last whole group
// go through a zero-padded copy against zero activations. The activation row
// is quantized here too (decode_layout), vectorised: the scalar reference
// quantizer took as long as the dot products of 256 rows of 4096.

constexpr int kGroupBlocks = 16;

template <DType W>
constexpr bool kNibbleFormat = W != DType::kQ8_0;
// Blocks per 64-byte chunk of levels, and chunks per group.
template <DType W>
constexpr int kChunkBlocks = kNibbleFormat<W> ? 4 : 2;
template <DType W>
constexpr int kChunks = kGroupBlocks / kChunkBlocks<W>;
template <DType W>
constexpr int kChunkBytes = kChunkBlocks<W>* block_bytes(W);
// q8_0 gives each i32 lane one block for the whole group (Note [q8_0 block
// lanes]); the nibble formats give a chunk's lanes to its four blocks.
template <DType W>
constexpr bool kBlockLanes = W == DType::kQ8_0;
// Prepared activation bytes per chunk: the levels meeting the low (and high)
// nibbles, then (except q8_0) the 16 i32 starting values; per group the chunks,
// then q8_0's starting values, then dx and dx * sum(x) per scale slot.
template <DType W>
constexpr std::int64_t kChunkXBytes = kBlockLanes<W> ? 64 : 128 + 64;
template <DType W>
constexpr std::int64_t kScaleXOffset = kChunks<W>* kChunkXBytes<W> + (kBlockLanes<W> ? 64 : 0);
template <DType W>
constexpr std::int64_t kGroupXBytes = kScaleXOffset<W> + 128;
// The lane of block m's scale in a group's scale vector: block order, except
// for mxfp4, whose exponent bytes are collected inside 128-bit lanes (block
// 4k + b of chunk k to slot 4b + k).
template <DType W>
constexpr int scale_slot(int m) {
  return W == DType::kMXFP4 ? 4 * (m % 4) + m / 4 : m;
}
// Permutes on Ice Lake: vpermw / vpermd / vpermt2d take one cycle of port 5,
// vpermt2w two (measured). The levels are therefore gathered with dword permutes, from
// two loads that put each block's 16 level bytes on a dword boundary (q4_0 /
// iq4_nl: blocks 0 and 2 from the first, 1 and 3 from the second; q4_1: blocks
// 0-2, then block 3), and the scales with one-table word permutes of the
// chunk's first 64 bytes, which reach all four blocks' scales (and mins).
// The second level load: at block 1's levels, or at block 3's when the block
// size keeps every level run dword-aligned.
template <DType W>
constexpr int kSecondLoad = kQsOffset<W> + (block_bytes(W) % 4 == 0 ? 3 : 1) * block_bytes(W);
template <DType W>
constexpr int kSecondDwords = (kChunkBytes<W> - kSecondLoad<W>) / 4;

// Note [Fifth bits]
// q5_0 / q5_1 blocks add a 32-bit qh (bit e: element e's fifth bit) to the
// nibbles, and four blocks take 88 / 96 bytes, so no one 64-byte load holds a
// chunk. Two do (kFifthLoads: q5_0 at bytes 2 and 24, q5_1 at 0 and 32), with
// every block's level run and qh (and q5_1's (d, m) pair) on a dword of one of
// them. Per chunk, dword permutes of that pair give the levels (block b in
// lane b, as chunk_dwords) and a vector holding qh_b in every dword of lane b;
// q5_1's (d, m) dwords go into the group's 16 by a third (split into d and m
// words by one vpermw per group), q5_0's d words by a word permute of the
// chunk's first 64 bytes and the second load. The fifth bits then join the
// nibbles as bit 4 (+16): with AVX512_VBMI one vpmultishiftqb per half, each
// byte taking the eight bits of its qword (qh_b twice) that put its element's
// bit at bit 4, merged by a vpternlog; without it a vpshufb spreading the qh
// bytes, a vptestmb against each byte's bit and a masked add, per half.
// The pair is pinned in registers (an empty asm): vpermt2d overwrites a table
// operand, and GCC, counting a reload as free, read the (cache-line-splitting)
// 64-byte loads again for every permute; those loads, more than the permutes,
// held q5_0 / q5_1 at about 15 GB/s of weights per core. Measured on one Ice
// Lake server core, in L2 (QuantDotInCache, CPU time): q5_0 15 -> 18.6 (without
// VBMI) / 20.0 GB/s, q5_1 15 -> 20.4 / 22.4 GB/s.
// q5_0 / q5_1 (Note [Fifth bits]): the two 64-byte loads a chunk's levels,
// fifth bits and (q5_1) scales come from, at kFifthLoads<W>[0] and [1], and the
// dword of those two loads (0-15 the first, 16-31 the second) where the byte at
// chunk offset `byte` starts.
template <DType W>
constexpr std::array<int, 2> kFifthLoads =
    W == DType::kQ5_0 ? std::array<int, 2>{2, 24} : std::array<int, 2>{0, 32};
template <DType W>
constexpr int fifth_dword(int byte) {
  for (int l = 0; l < 2; ++l) {
    const int o = byte - kFifthLoads<W>[static_cast<std::size_t>(l)];
    if (o >= 0 && o < 64 && o % 4 == 0) return 16 * l + o / 4;
  }
  throw "not on a dword of the two loads";
}
// The byte offset of a block's 32-bit qh.
template <DType W>
constexpr int kQhOffset = W == DType::kQ5_0 ? 2 : 4;

// vpermt2d indices: a chunk's level bytes, block b in dwords 4b .. 4b + 3, from
// the loads at kQsOffset<W> and kSecondLoad<W>.
template <DType W>
constexpr std::array<std::int32_t, 16> chunk_dwords() {
  constexpr int kB = block_bytes(W);
  std::array<std::int32_t, 16> a{};
  for (int d = 0; d < 16; ++d) {
    const int b = d / 4;
    const bool first = kB % 4 == 0 ? b < 3 : b % 2 == 0;
    const int start = first ? b * kB : kB % 4 == 0 ? 0 : (b - 1) * kB;
    a[static_cast<std::size_t>(d)] = (first ? 0 : 16) + start / 4 + d % 4;
  }
  return a;
}
// Word permute indices: chunk c's f16 scales to words scale_slot(m), their
// mins to 16 + scale_slot(m), from the chunk's first 64 bytes.
template <DType W>
constexpr std::array<std::int16_t, 32> scale_words(int c) {
  std::array<std::int16_t, 32> a{};
  for (int j = 0; j < kChunkBlocks<W>; ++j) {
    const int slot = scale_slot<W>(c * kChunkBlocks<W> + j);
    const int word = j * block_bytes(W) / 2;
    a[static_cast<std::size_t>(slot)] = static_cast<std::int16_t>(word);
    if (kHasMin<W>) a[static_cast<std::size_t>(16 + slot)] = static_cast<std::int16_t>(word + 1);
  }
  return a;
}
template <DType W>
constexpr __mmask32 scale_word_mask(int c) {
  __mmask32 k = 0;
  for (int j = 0; j < kChunkBlocks<W>; ++j) {
    const int slot = scale_slot<W>(c * kChunkBlocks<W> + j);
    k |= (__mmask32{1} << slot) | (kHasMin<W> ? __mmask32{1} << (16 + slot) : 0);
  }
  return k;
}
// vpermps indices: chunk c's lanes (four or eight per block) to their block's
// scale slot.
template <DType W>
constexpr std::array<std::int32_t, 16> chunk_lanes(int c) {
  std::array<std::int32_t, 16> a{};
  for (int l = 0; l < 16; ++l) {
    a[static_cast<std::size_t>(l)] =
        scale_slot<W>(c * kChunkBlocks<W> + l / (16 / kChunkBlocks<W>));
  }
  return a;
}

// q5_0 / q5_1 index tables (Note [Fifth bits]). Levels: block b in dwords
// 4b .. 4b + 3, as chunk_dwords. qh: block b's in all four dwords of 128-bit lane
// b. Scales of chunk c: q5_1's (d, m) dword of block b to dword 4c + b; q5_0's d
// word to word 4c + b, from the chunk's first 64 bytes and the second load.
template <DType W>
constexpr std::array<std::int32_t, 16> fifth_level_dwords() {
  std::array<std::int32_t, 16> a{};
  for (int d = 0; d < 16; ++d)
    a[static_cast<std::size_t>(d)] =
        fifth_dword<W>(d / 4 * block_bytes(W) + kQsOffset<W> + 4 * (d % 4));
  return a;
}
template <DType W>
constexpr std::array<std::int32_t, 16> fifth_qh_dwords() {
  std::array<std::int32_t, 16> a{};
  for (int d = 0; d < 16; ++d)
    a[static_cast<std::size_t>(d)] = fifth_dword<W>(d / 4 * block_bytes(W) + kQhOffset<W>);
  return a;
}
template <DType W>
constexpr std::array<std::array<std::int16_t, 32>, 4> fifth_scale_words() {
  std::array<std::array<std::int16_t, 32>, 4> a{};
  for (int c = 0; c < 4; ++c) {
    for (int b = 0; b < 4; ++b) {
      const int byte = b * block_bytes(W);
      // q5_1: dword indices, as the low words of the dwords.
      if constexpr (W == DType::kQ5_1) {
        a[static_cast<std::size_t>(c)][static_cast<std::size_t>(2 * (4 * c + b))] =
            static_cast<std::int16_t>(fifth_dword<W>(byte));
      } else {
        a[static_cast<std::size_t>(c)][static_cast<std::size_t>(4 * c + b)] =
            static_cast<std::int16_t>(byte + 2 <= 64 ? byte / 2
                                                     : 32 + (byte - kFifthLoads<W>[1]) / 2);
      }
    }
  }
  return a;
}
// Word permute (q5_1): the (d, m) dwords of the 16 blocks to d in words 0-15, m
// in words 16-31.
constexpr std::array<std::int16_t, 32> kSplitScaleMin = [] {
  std::array<std::int16_t, 32> a{};
  for (int w = 0; w < 32; ++w)
    a[static_cast<std::size_t>(w)] = static_cast<std::int16_t>(2 * (w % 16) + w / 16);
  return a;
}();
// vpshufb / vptestmb (no VBMI): byte j of 128-bit lane b gets qh_b's byte j / 8
// (low nibbles) or 2 + j / 8 (high nibbles), tested against bit j % 8.
template <int kFrom>
constexpr std::array<std::uint8_t, 64> kQhBytes = [] {
  std::array<std::uint8_t, 64> a{};
  for (int i = 0; i < 64; ++i)
    a[static_cast<std::size_t>(i)] = static_cast<std::uint8_t>(kFrom + i % 16 / 8);
  return a;
}();
constexpr std::array<std::uint8_t, 64> kBitOfByte = [] {
  std::array<std::uint8_t, 64> a{};
  for (int i = 0; i < 64; ++i)
    a[static_cast<std::size_t>(i)] = static_cast<std::uint8_t>(1 << (i % 8));
  return a;
}();
// vpmultishiftqb controls: byte j of 128-bit lane b takes the eight bits of its
// qword (qh_b twice) from bit kFirst + j - 4 on, so that bit 4 is qh_b's bit kFirst + j.
template <int kFirst>
constexpr std::array<std::uint8_t, 64> kQhShifts = [] {
  std::array<std::uint8_t, 64> a{};
  for (int i = 0; i < 64; ++i)
    a[static_cast<std::size_t>(i)] = static_cast<std::uint8_t>((kFirst + i % 16 - 4) & 63);
  return a;
}();

// vpmultishiftqb, vpermt2b (AVX512_VBMI) and vgf2p8affineqb (GFNI) as inline
// assembly: the file is compiled for the AVX-512 subset every registered CPU has,
// and the tiles using these are chosen at run time (kExtVbmi, kExtGfni). Compiling
// the file for the extensions instead would let the compiler use them anywhere in
// it.
//
// The extensions some tiles use, chosen once per call from cpu_features() (bits
// of the tiles' kExt):
// q2_k level indices (Note [GFNI level bits]); with kExtVbmi, q3_k's levels and
// scales (Note [q3_k with GFNI and VBMI]).
constexpr unsigned kExtGfni = 1;
// q5_0 / q5_1 fifth bits (Note [Fifth bits]); with kExtGfni, q3_k's.
constexpr unsigned kExtVbmi = 2;
inline __m512i multishift_bytes(__m512i control, __m512i data) {
  __m512i r;
  asm("vpmultishiftqb %2, %1, %0" : "=v"(r) : "v"(control), "v"(data));
  return r;
}
// Byte i of the result: byte idx_i % 64 of a, or of b where bit 6 of idx_i is set.
inline __m512i permute2_bytes(__m512i a, __m512i idx, __m512i b) {
  asm("vpermt2b %2, %1, %0" : "+v"(a) : "v"(idx), "v"(b));
  return a;
}
// Each byte of x through the 8 x 8 bit matrix of its 64-bit lane of `matrix`.
inline __m512i affine_bytes(__m512i x, __m512i matrix) {
  __m512i r;
  asm("vgf2p8affineqb $0, %2, %1, %0" : "=v"(r) : "v"(x), "v"(matrix));
  return r;
}

// One group of 16 blocks of one weight row, decoded: per chunk the unsigned
// levels meeting the low-nibble activations (all levels for q8_0) and those
// meeting the high-nibble ones; per scale slot the f32 block scale and min.
template <DType W>
struct GroupW {
  __m512i lo[kChunks<W>];
  __m512i hi[kNibbleFormat<W> ? kChunks<W> : 1];
  __m512 d;
  __m512 m;
};

// The group's block scales (and q4_1 mins) per slot; head[c] holds the first 64
// bytes of chunk c.
template <DType W>
inline void group_scales(const __m512i* head, GroupW<W>& g) {
  if constexpr (W == DType::kMXFP4) {
    // Block b of a chunk has its exponent at byte 17b: byte b of 128-bit lane b,
    // moved to byte 0 of dword c of that lane for chunk c.
    static constexpr std::array<std::uint8_t, 64> kIdx = [] {
      std::array<std::uint8_t, 64> a{};
      for (int i = 0; i < 64; ++i)
        a[static_cast<std::size_t>(i)] = static_cast<std::uint8_t>(i / 16);
      return a;
    }();
    __m512i e = _mm512_setzero_si512();
#pragma GCC unroll 4
    for (int c = 0; c < 4; ++c) {
      e = _mm512_mask_shuffle_epi8(e, 0x0001000100010001ull << (4 * c), head[c], load_table(kIdx));
    }
    // quant::e8m0_half in lanes: exponent field e - 1, or the subnormals for e < 2.
    const __m512i normal = _mm512_slli_epi32(_mm512_sub_epi32(e, _mm512_set1_epi32(1)), 23);
    const __m512i sub = _mm512_sllv_epi32(_mm512_set1_epi32(0x00200000), e);
    g.d = _mm512_castsi512_ps(
        _mm512_mask_mov_epi32(normal, _mm512_cmplt_epu32_mask(e, _mm512_set1_epi32(2)), sub));
    g.m = _mm512_setzero_ps();
  } else {
    static constexpr auto kIdx = [] {
      std::array<std::array<std::int16_t, 32>, kChunks<W>> a{};
      for (int c = 0; c < kChunks<W>; ++c) a[static_cast<std::size_t>(c)] = scale_words<W>(c);
      return a;
    }();
    __m512i words = _mm512_setzero_si512();
#pragma GCC unroll 8
    for (int c = 0; c < kChunks<W>; ++c) {
      words = _mm512_mask_permutexvar_epi16(words, scale_word_mask<W>(c),
                                            load_table(kIdx[static_cast<std::size_t>(c)]), head[c]);
    }
    g.d = _mm512_cvtph_ps(_mm512_castsi512_si256(words));
    g.m = kHasMin<W> ? _mm512_cvtph_ps(_mm512_extracti64x4_epi64(words, 1)) : _mm512_setzero_ps();
  }
}

// Decodes the q5_0 / q5_1 group of 16 blocks at p (Note [Fifth bits]).
template <DType W, bool kVbmi>
inline void decode_fifth_group(const std::uint8_t* p, GroupW<W>& g) {
  constexpr int kC = kChunks<W>;
  static constexpr auto kLevelIdx = fifth_level_dwords<W>();
  static constexpr auto kQhIdx = fifth_qh_dwords<W>();
  static constexpr auto kScaleIdx = fifth_scale_words<W>();
  const __m512i low4 = _mm512_set1_epi8(0x0f);
  __m512i scales = _mm512_setzero_si512();
#pragma GCC unroll 4
  for (int c = 0; c < kC; ++c) {
    const std::uint8_t* pc = p + c * kChunkBytes<W>;
    __m512i a = load512(pc + kFifthLoads<W>[0]);
    __m512i b = load512(pc + kFifthLoads<W>[1]);
    asm("" : "+v"(a), "+v"(b));  // in registers, not re-read per permute
    const __m512i sidx = load_table(kScaleIdx[static_cast<std::size_t>(c)]);
    if constexpr (W == DType::kQ5_1) {
      scales = _mm512_mask_mov_epi32(scales, static_cast<__mmask16>(0xf << (4 * c)),
                                     _mm512_permutex2var_epi32(a, sidx, b));
    } else {
      // Block 0's d (byte 0) is in neither load of the pair.
      scales = _mm512_mask_mov_epi16(scales, static_cast<__mmask32>(0xf << (4 * c)),
                                     _mm512_permutex2var_epi16(load512(pc), sidx, b));
    }
    const __m512i q = _mm512_permutex2var_epi32(a, load_table(kLevelIdx), b);
    const __m512i qh = _mm512_permutex2var_epi32(a, load_table(kQhIdx), b);
    __m512i lo = _mm512_and_si512(q, low4);
    __m512i hi = _mm512_and_si512(_mm512_srli_epi16(q, 4), low4);
    if constexpr (kVbmi) {
      // vpternlog 0xd8: bit 4 from the multishift, the other bits from the nibble.
      const __m512i bit4 = _mm512_set1_epi8(0x10);
      lo =
          _mm512_ternarylogic_epi32(lo, multishift_bytes(load_table(kQhShifts<0>), qh), bit4, 0xd8);
      hi = _mm512_ternarylogic_epi32(hi, multishift_bytes(load_table(kQhShifts<16>), qh), bit4,
                                     0xd8);
    } else {
      const __m512i sixteen = _mm512_set1_epi8(16);
      const __mmask64 mlo = _mm512_test_epi8_mask(_mm512_shuffle_epi8(qh, load_table(kQhBytes<0>)),
                                                  load_table(kBitOfByte));
      const __mmask64 mhi = _mm512_test_epi8_mask(_mm512_shuffle_epi8(qh, load_table(kQhBytes<2>)),
                                                  load_table(kBitOfByte));
      lo = _mm512_mask_add_epi8(lo, mlo, lo, sixteen);
      hi = _mm512_mask_add_epi8(hi, mhi, hi, sixteen);
    }
    g.lo[c] = lo;
    g.hi[c] = hi;
  }
  if constexpr (W == DType::kQ5_1) {
    const __m512i words = _mm512_permutexvar_epi16(load_table(kSplitScaleMin), scales);
    g.d = _mm512_cvtph_ps(_mm512_castsi512_si256(words));
    g.m = _mm512_cvtph_ps(_mm512_extracti64x4_epi64(words, 1));
  } else {
    g.d = _mm512_cvtph_ps(_mm512_castsi512_si256(scales));
    g.m = _mm512_setzero_ps();
  }
}

// Decodes the group of 16 blocks at p (kChunkBytes<W> * kChunks<W> bytes, all
// read, none past them) of a format other than q5_0 / q5_1.
template <DType W>
inline void decode_plain_group(const std::uint8_t* p, GroupW<W>& g) {
  static_assert(kNibbleFormat<W>, "q8_0 decodes through decode_q8_0_lanes");
  constexpr int kC = kChunks<W>;
  __m512i head[kC];
#pragma GCC unroll 8
  for (int c = 0; c < kC; ++c) head[c] = load512(p + c * kChunkBytes<W>);
  group_scales<W>(head, g);
  const __m512i low4 = _mm512_set1_epi8(0x0f);
#pragma GCC unroll 8
  for (int c = 0; c < kC; ++c) {
    const std::uint8_t* pc = p + c * kChunkBytes<W>;
    __m512i q;
    if constexpr (W == DType::kMXFP4) {
      // 17-byte blocks: odd offsets rule out word permutes.
      const auto block = [&](int b) {
        return _mm_loadu_si128(reinterpret_cast<const __m128i*>(pc + 17 * b + 1));
      };
      q = _mm512_inserti32x4(_mm512_castsi128_si512(block(0)), block(1), 1);
      q = _mm512_inserti32x4(q, block(2), 2);
      q = _mm512_inserti32x4(q, block(3), 3);
    } else {
      static constexpr auto kIdx = chunk_dwords<W>();
      q = _mm512_permutex2var_epi32(
          load512(pc + kQsOffset<W>), load_table(kIdx),
          _mm512_maskz_loadu_epi32((__mmask16{1} << kSecondDwords<W>)-1, pc + kSecondLoad<W>));
    }
    __m512i lo = _mm512_and_si512(q, low4);
    __m512i hi = _mm512_and_si512(_mm512_srli_epi16(q, 4), low4);
    if constexpr (W == DType::kIQ4_NL || W == DType::kMXFP4) {
      static constexpr auto kTable = biased_table<W>();
      lo = _mm512_shuffle_epi8(load_table(kTable), lo);
      hi = _mm512_shuffle_epi8(load_table(kTable), hi);
    }
    g.lo[c] = lo;
    g.hi[c] = hi;
  }
}

// Note [q8_0 block lanes]
// A q8_0 chunk held two blocks, so each chunk's i32 lanes had their own scales:
// per chunk and output a permute to spread d_w * d_x over the lanes, a
// conversion and an FMA, against one vpdpbusd. Prefill, where a decoded group
// meets four activation rows, ran at 0.58 of q4_0's rate. Instead, chunk c takes
// dword c (levels 4c .. 4c + 3) of each of the 16 blocks, block m in lane m: a
// transpose of the group's 16 x 8 level dwords, done once per weight row and
// group. Every chunk's lane m then belongs to block m, the eight vpdpbusd of a
// group chain into one exact i32 block sum per lane, and one conversion and one
// FMA per group and output apply the scales. The activation row is laid out to
// match (decode_layout), with the -128 * sum(x) starting values once per group.
[[gnu::always_inline]] inline void decode_q8_0_lanes(const std::uint8_t* p, __m512i (&lo)[8]) {
  // z[j]: block j's 32 levels in dwords 0-7, block j + 8's in dwords 8-15. Then
  // the 8 x 8 dword transpose of each 256-bit half.
  __m512i z[8];
#pragma GCC unroll 8
  for (int j = 0; j < 8; ++j) {
    z[j] = _mm512_inserti64x4(_mm512_castsi256_si512(load256(p + 34 * j + 2)),
                              load256(p + 34 * (j + 8) + 2), 1);
  }
  __m512i t[8];
#pragma GCC unroll 4
  for (int j = 0; j < 8; j += 2) {
    t[j] = _mm512_unpacklo_epi32(z[j], z[j + 1]);
    t[j + 1] = _mm512_unpackhi_epi32(z[j], z[j + 1]);
  }
  // u[4h + i]: rows 4h .. 4h + 3, dword i of each 128-bit lane (dwords i and
  // i + 4 of the rows, by 128-bit lane).
  __m512i u[8];
#pragma GCC unroll 2
  for (int h = 0; h < 2; ++h) {
    u[4 * h + 0] = _mm512_unpacklo_epi64(t[4 * h], t[4 * h + 2]);
    u[4 * h + 1] = _mm512_unpackhi_epi64(t[4 * h], t[4 * h + 2]);
    u[4 * h + 2] = _mm512_unpacklo_epi64(t[4 * h + 1], t[4 * h + 3]);
    u[4 * h + 3] = _mm512_unpackhi_epi64(t[4 * h + 1], t[4 * h + 3]);
  }
  // Chunk i: the even 128-bit lanes of rows 0-3 and 4-7; chunk i + 4 the odd.
  const __m512i even = _mm512_setr_epi64(0, 1, 8, 9, 4, 5, 12, 13);
  const __m512i odd = _mm512_setr_epi64(2, 3, 10, 11, 6, 7, 14, 15);
  const __m512i flip = _mm512_set1_epi8(static_cast<char>(0x80));
#pragma GCC unroll 4
  for (int i = 0; i < 4; ++i) {
    lo[i] = _mm512_xor_si512(_mm512_permutex2var_epi64(u[i], even, u[4 + i]), flip);
    lo[i + 4] = _mm512_xor_si512(_mm512_permutex2var_epi64(u[i], odd, u[4 + i]), flip);
  }
}

// kVbmi: the CPU has AVX512_VBMI (q5_0 / q5_1 only; Note [Fifth bits]).
template <DType W, bool kVbmi>
[[gnu::always_inline]] inline void decode_group(const std::uint8_t* p, GroupW<W>& g) {
  if constexpr (W == DType::kQ5_0 || W == DType::kQ5_1) {
    decode_fifth_group<W, kVbmi>(p, g);
  } else if constexpr (kBlockLanes<W>) {
    __m512i head[kChunks<W>];
#pragma GCC unroll 8
    for (int c = 0; c < kChunks<W>; ++c) head[c] = load512(p + c * kChunkBytes<W>);
    group_scales<W>(head, g);
    decode_q8_0_lanes(p, g.lo);
  } else {
    decode_plain_group<W>(p, g);
  }
}

// Adds one decoded group against one prepared activation group x to acc: per
// chunk the exact i32 dot products (from the prepared starting values) in f32
// times d_w * d_x spread over the chunk's lanes, then the min terms.
template <DType W>
inline void group_dot(const GroupW<W>& g, const std::uint8_t* x, __m512& acc) {
  constexpr int kC = kChunks<W>;
  static constexpr std::array<std::array<std::int32_t, 16>, kC> kLanes = [] {
    std::array<std::array<std::int32_t, 16>, kC> a{};
    for (int i = 0; i < kC; ++i) a[static_cast<std::size_t>(i)] = chunk_lanes<W>(i);
    return a;
  }();
  const float* dx = reinterpret_cast<const float*>(x + kScaleXOffset<W>);
  const __m512 s = _mm512_mul_ps(g.d, _mm512_load_ps(dx));
  if constexpr (kBlockLanes<W>) {
    // Two chains of vpdpbusd (its latency, not its throughput, bounds one chain);
    // the i32 sum is exact, so this equals group_dots' order bit for bit.
    __m512i even = _mm512_load_si512(x + kC * kChunkXBytes<W>);
    __m512i odd = _mm512_setzero_si512();
#pragma GCC unroll 8
    for (int c = 0; c < kC; c += 2) {
      even = _mm512_dpbusd_epi32(even, g.lo[c], _mm512_load_si512(x + c * kChunkXBytes<W>));
      odd = _mm512_dpbusd_epi32(odd, g.lo[c + 1], _mm512_load_si512(x + (c + 1) * kChunkXBytes<W>));
    }
    acc = _mm512_fmadd_ps(_mm512_cvtepi32_ps(_mm512_add_epi32(even, odd)), s, acc);
    return;
  }
#pragma GCC unroll 8
  for (int c = 0; c < kC; ++c) {
    const std::uint8_t* xc = x + c * kChunkXBytes<W>;
    __m512i dot = _mm512_load_si512(xc + (kNibbleFormat<W> ? 128 : 64));
    dot = _mm512_dpbusd_epi32(dot, g.lo[c], _mm512_load_si512(xc));
    if constexpr (kNibbleFormat<W>)
      dot = _mm512_dpbusd_epi32(dot, g.hi[c], _mm512_load_si512(xc + 64));
    const __m512 sc =
        _mm512_permutexvar_ps(_mm512_loadu_si512(kLanes[static_cast<std::size_t>(c)].data()), s);
    acc = _mm512_fmadd_ps(_mm512_cvtepi32_ps(dot), sc, acc);
  }
  if constexpr (kHasMin<W>) acc = _mm512_fmadd_ps(g.m, _mm512_load_ps(dx + 16), acc);
}

// group_dot for C activation rows at once (x_stride bytes apart), block-lane
// formats: the C chains of vpdpbusd interleave, one decoded chunk meeting every
// row before the next. Same i32 sums and f32 steps as group_dot, so the same
// bytes.
template <DType W, int C>
inline void group_dots(const GroupW<W>& g, const std::uint8_t* x, std::int64_t x_stride,
                       __m512 (&acc)[C]) {
  static_assert(kBlockLanes<W>);
  constexpr int kC = kChunks<W>;
  __m512i dot[C];
#pragma GCC unroll 8
  for (int a = 0; a < C; ++a) dot[a] = _mm512_load_si512(x + a * x_stride + kC * kChunkXBytes<W>);
#pragma GCC unroll 8
  for (int c = 0; c < kC; ++c) {
#pragma GCC unroll 8
    for (int a = 0; a < C; ++a) {
      dot[a] = _mm512_dpbusd_epi32(dot[a], g.lo[c],
                                   _mm512_load_si512(x + a * x_stride + c * kChunkXBytes<W>));
    }
  }
#pragma GCC unroll 8
  for (int a = 0; a < C; ++a) {
    const float* dx = reinterpret_cast<const float*>(x + a * x_stride + kScaleXOffset<W>);
    acc[a] =
        _mm512_fmadd_ps(_mm512_cvtepi32_ps(dot[a]), _mm512_mul_ps(g.d, _mm512_load_ps(dx)), acc[a]);
  }
}

// out[c * n + r] = dot(weight row r, activation row c) for r < R, c < C. Weight
// row r starts at w + r * w_stride, activation row c (laid out by
// decode_layout) at x + c * x_stride bytes. Every output goes through the same
// group_dot sequence whatever R and C, so any tile gives the same bytes.
template <DType W, int R, int C, bool kAhead, bool kVbmi>
void group_tile(const std::uint8_t* w, std::int64_t w_stride, const std::uint8_t* x,
                std::int64_t x_stride, std::int64_t blocks, float* out, std::int64_t n) {
  constexpr std::int64_t kGW = kGroupBlocks * block_bytes(W);
  __m512 acc[R][C];
#pragma GCC unroll 8
  for (int r = 0; r < R; ++r) {
#pragma GCC unroll 8
    for (int c = 0; c < C; ++c) acc[r][c] = _mm512_setzero_ps();
  }
  const std::int64_t full = blocks / kGroupBlocks;
  for (std::int64_t i = 0; i < full; ++i) {
#pragma GCC unroll 8
    for (int r = 0; r < R; ++r) {
      prefetch_ahead<kAhead>(w + r * w_stride + blocks * block_bytes(W) + i * kGW, kGW);
      GroupW<W> g;
      decode_group<W, kVbmi>(w + r * w_stride + i * kGW, g);
      if constexpr (kBlockLanes<W> && C > 1) {
        group_dots<W, C>(g, x + i * kGroupXBytes<W>, x_stride, acc[r]);
        continue;
      }
#pragma GCC unroll 8
      for (int c = 0; c < C; ++c)
        group_dot<W>(g, x + c * x_stride + i * kGroupXBytes<W>, acc[r][c]);
    }
  }
  if (blocks % kGroupBlocks != 0) {
    // The last blocks from a zero-padded copy: zero levels and scales against
    // zero activations.
#pragma GCC unroll 8
    for (int r = 0; r < R; ++r) {
      alignas(64) std::uint8_t pad[kGW] = {};
      std::memcpy(pad, w + r * w_stride + full * kGW,
                  static_cast<std::size_t>(blocks % kGroupBlocks * block_bytes(W)));
      GroupW<W> g;
      decode_group<W, kVbmi>(pad, g);
      if constexpr (kBlockLanes<W> && C > 1) {
        group_dots<W, C>(g, x + full * kGroupXBytes<W>, x_stride, acc[r]);
        continue;
      }
#pragma GCC unroll 8
      for (int c = 0; c < C; ++c)
        group_dot<W>(g, x + c * x_stride + full * kGroupXBytes<W>, acc[r][c]);
    }
  }
#pragma GCC unroll 8
  for (int r = 0; r < R; ++r) {
#pragma GCC unroll 8
    for (int c = 0; c < C; ++c) out[c * n + r] = _mm512_reduce_add_ps(acc[r][c]);
  }
}

// Quantizes one activation row to q8_0 (the reference rounding, bit for bit:
// d = amax / 127, q = round-half-away(x / d) clamped, d stored as f16) and lays
// it out for group_tile: kGroupXBytes<W> per group of 16 blocks, zero past the
// last block. Vectorised here because the reference quantizer, scalar and
// calling std::round, took as long as the dot products of 256 weight rows.
template <DType W>
void decode_layout(const float* row, std::int64_t k, std::uint8_t* out) {
  const std::int64_t blocks = k / quant::kQK;
  const std::int64_t groups = (blocks + kGroupBlocks - 1) / kGroupBlocks;
  std::memset(out, 0, static_cast<std::size_t>(groups * kGroupXBytes<W>));
  const __m512 magnitude = _mm512_castsi512_ps(_mm512_set1_epi32(0x7fffffff));
  const __m512 sign = _mm512_set1_ps(-0.0f);
  const __m512 one = _mm512_set1_ps(1.0f);
  const __m512 half = _mm512_set1_ps(0.5f);
  const __m128i ones = _mm_set1_epi8(1);
  for (std::int64_t b = 0; b < blocks; ++b) {
    const __m512 x0 = _mm512_loadu_ps(row + 32 * b);
    const __m512 x1 = _mm512_loadu_ps(row + 32 * b + 16);
    const float amax = _mm512_reduce_max_ps(
        _mm512_max_ps(_mm512_and_ps(x0, magnitude), _mm512_and_ps(x1, magnitude)));
    const float d = amax / 127.0f;
    const float id = d != 0.0f ? 1.0f / d : 0.0f;
    std::uint8_t dh[2];
    quant::store_f16(dh, d);
    const float dx = quant::load_f16(dh);
    // round-half-away: truncate, then step away from zero when the dropped
    // fraction (exact) is at least one half; then clamp as truncate_clamped.
    const auto levels = [&](__m512 x) {
      const __m512 t = _mm512_mul_ps(x, _mm512_set1_ps(id));
      __m512 r = _mm512_roundscale_ps(t, _MM_FROUND_TO_ZERO | _MM_FROUND_NO_EXC);
      const __mmask16 up =
          _mm512_cmp_ps_mask(_mm512_and_ps(_mm512_sub_ps(t, r), magnitude), half, _CMP_GE_OQ);
      r = _mm512_mask_add_ps(r, up, r, _mm512_or_ps(_mm512_and_ps(t, sign), one));
      r = _mm512_min_ps(_mm512_max_ps(r, _mm512_set1_ps(-128.0f)), _mm512_set1_ps(127.0f));
      return _mm512_cvtepi32_epi8(_mm512_cvttps_epi32(r));
    };
    const __m128i lo = levels(x0);  // elements 0-15
    const __m128i hi = levels(x1);  // elements 16-31
    // Sums of four consecutive levels: the vpdpbusd lanes' activation sums.
    const __m128i sum_lo = _mm_dpbusd_epi32(_mm_setzero_si128(), ones, lo);
    const __m128i sum_hi = _mm_dpbusd_epi32(_mm_setzero_si128(), ones, hi);
    const __m128i s4 = _mm_add_epi32(sum_lo, sum_hi);
    const __m128i s2 = _mm_add_epi32(s4, _mm_shuffle_epi32(s4, 0x4e));
    const int sum = _mm_cvtsi128_si32(_mm_add_epi32(s2, _mm_shuffle_epi32(s2, 0xb1)));
    const int m = static_cast<int>(b % kGroupBlocks);
    std::uint8_t* group = out + b / kGroupBlocks * kGroupXBytes<W>;
    std::uint8_t* chunk = group + m / kChunkBlocks<W> * kChunkXBytes<W>;
    const int pos = m % kChunkBlocks<W>;
    const __m128i bias = _mm_set1_epi32(-kBias<W>);
    const auto store = [](std::uint8_t* p, __m128i v) {
      _mm_storeu_si128(reinterpret_cast<__m128i*>(p), v);
    };
    if constexpr (kBlockLanes<W>) {
      // Levels 4c .. 4c + 3 to lane m of chunk c; the block's starting value.
      alignas(16) std::uint8_t levels_of[32];
      store(levels_of, lo);
      store(levels_of + 16, hi);
      for (int c = 0; c < 8; ++c) std::memcpy(group + 64 * c + 4 * m, levels_of + 4 * c, 4);
      const std::int32_t start = -kBias<W> * sum;
      std::memcpy(group + kChunks<W> * kChunkXBytes<W> + 4 * m, &start, sizeof(start));
    } else {
      // Lane l of the block: elements 4l .. 4l + 3 and 16 + 4l .. 16 + 4l + 3.
      store(chunk + 16 * pos, lo);
      store(chunk + 64 + 16 * pos, hi);
      store(chunk + 128 + 16 * pos, _mm_mullo_epi32(_mm_add_epi32(sum_lo, sum_hi), bias));
    }
    const float scales[2] = {dx, dx * static_cast<float>(sum)};
    for (int i = 0; i < 2; ++i) {
      std::memcpy(group + kScaleXOffset<W> + 64 * i + 4 * scale_slot<W>(m), &scales[i],
                  sizeof(float));
    }
  }
}

// ---------------------------------------------------------------------------
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

// One q8_k super-block with the reference's operations in vector form, so the
// same bytes: the first element of the largest magnitude sets the scale, and
// vcvtps2dq rounds to nearest even as nearest_int does. Blocks of zeros or with
// a non-finite value (whose row's outputs become NaN anyway) go to the reference.
bool quantize_q8_k_block(const float* x, BlockQ8_K& b) {
  __m512 amax = _mm512_setzero_ps();
  for (int v = 0; v < 16; ++v)
    amax = _mm512_max_ps(amax, _mm512_abs_ps(_mm512_loadu_ps(x + 16 * v)));
  const float m = _mm512_reduce_max_ps(amax);
  if (!(m > 0.0f) || !std::isfinite(m)) return false;
  int first = -1;
  for (int v = 0; v < 16 && first < 0; ++v) {
    const __mmask16 hit = _mm512_cmp_ps_mask(_mm512_abs_ps(_mm512_loadu_ps(x + 16 * v)),
                                             _mm512_set1_ps(m), _CMP_EQ_OQ);
    if (hit != 0) first = 16 * v + __builtin_ctz(hit);
  }
  if (first < 0) return false;
  const float iscale = -127.0f / x[first];
  for (int v = 0; v < 16; ++v) {
    const __m512i q = _mm512_min_epi32(
        _mm512_cvtps_epi32(_mm512_mul_ps(_mm512_set1_ps(iscale), _mm512_loadu_ps(x + 16 * v))),
        _mm512_set1_epi32(127));
    _mm_storeu_si128(reinterpret_cast<__m128i*>(b.qs + 16 * v), _mm512_cvtepi32_epi8(q));
    quant::store_i16(b.bsums + 2 * v, _mm512_reduce_add_epi32(q));
  }
  quant::store_f32(b.d, 1.0f / iscale);
  return true;
}

void prepare_k(DType w, const float* row, std::int64_t k, std::vector<std::uint8_t>& tmp,
               KAct* out) {
  const std::int64_t blocks = k / quant::kQKK;
  tmp.resize(static_cast<std::size_t>(blocks) * sizeof(BlockQ8_K));
  auto* xb = reinterpret_cast<BlockQ8_K*>(tmp.data());
  for (std::int64_t i = 0; i < blocks; ++i) {
    if (!quantize_q8_k_block(row + i * quant::kQKK, xb[i])) {
      quant::quantize_row(DType::kQ8_K, row + i * quant::kQKK, &xb[i], quant::kQKK);
    }
  }
  const auto prepare = [&](const std::array<std::uint8_t, 256>& order, int sum_scale) {
    for (std::int64_t i = 0; i < blocks; ++i) {
      KAct& a = out[i];
      // Every order moves runs of 16 consecutive elements.
      for (int p = 0; p < 256; p += 16) {
        std::memcpy(a.q + p, xb[i].qs + order[static_cast<std::size_t>(p)], 16);
      }
      if (w == DType::kQ2_K) {
        for (int g = 0; g < 16; ++g) {
          const int sum = quant::load_i16(xb[i].bsums + 2 * g);
          a.sum_bytes.lo[g] = static_cast<std::uint8_t>(sum & 0xff);
          a.sum_bytes.hi[g] = static_cast<std::int8_t>(sum >> 8);
        }
      } else {
        for (int g = 0; g < 16; ++g) {
          a.sums[g] = static_cast<std::int16_t>(sum_scale * quant::load_i16(xb[i].bsums + 2 * g));
        }
      }
      if (w == DType::kQ4_K || w == DType::kQ5_K) {
        // Per 32-element group, in slots 8-15 (KHead::coef holds the mins there).
        for (int g = 0; g < 8; ++g) {
          a.sums[8 + g] = static_cast<std::int16_t>(quant::load_i16(xb[i].bsums + 4 * g) +
                                                    quant::load_i16(xb[i].bsums + 4 * g + 2));
          a.sums[g] = 0;
        }
      }
      if (w == DType::kIQ4_XS) {
        // Lane i of load h: -128 times the sum of bytes 4i .. 4i + 3 of vectors
        // 2h and 2h + 1.
        const __m512i ones = _mm512_set1_epi8(1);
        for (int h = 0; h < 2; ++h) {
          const __m512i sum = _mm512_dpbusd_epi32(
              _mm512_dpbusd_epi32(_mm512_setzero_si512(), ones, _mm512_load_si512(a.q + 128 * h)),
              ones, _mm512_load_si512(a.q + 128 * h + 64));
          _mm512_store_si512(a.init + 16 * h, _mm512_mullo_epi32(sum, _mm512_set1_epi32(-128)));
        }
      }
      a.d = quant::load_f32(xb[i].d);
    }
  };
  switch (w) {
    case DType::kQ2_K: prepare(k_order<DType::kQ2_K>, kSumScale<DType::kQ2_K>); break;
    case DType::kQ3_K: prepare(k_order<DType::kQ3_K>, kSumScale<DType::kQ3_K>); break;
    case DType::kQ4_K: prepare(k_order<DType::kQ4_K>, 1); break;
    case DType::kQ5_K: prepare(k_order<DType::kQ5_K>, 1); break;
    case DType::kQ6_K: prepare(k_order<DType::kQ6_K>, kSumScale<DType::kQ6_K>); break;
    default: prepare(k_order<DType::kIQ4_XS>, 1); break;
  }
}

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
  __m512i v = _mm512_castsi128_si512(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p[0] + 94)));
#pragma GCC unroll 4
  for (int r = 1; r < R; ++r) {
    v = _mm512_inserti32x4(v, _mm_loadu_si128(reinterpret_cast<const __m128i*>(p[r] + 94)), r);
  }
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
  __m512i raw = _mm512_broadcast_i32x4(_mm_loadu_si128(reinterpret_cast<const __m128i*>(w[0])));
#pragma GCC unroll 4
  for (int r = 1; r < R; ++r) {
    raw = _mm512_inserti32x4(raw, _mm_loadu_si128(reinterpret_cast<const __m128i*>(w[r])), r);
  }
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

template <DType W, int R, int C, bool kAhead, unsigned kExt>
void k_tile(const std::uint8_t* w, std::int64_t w_stride, const KAct* x, std::int64_t x_stride,
            std::int64_t blocks, float* out, std::int64_t n) {
  constexpr std::int64_t kB = block_bytes(W);
  constexpr bool kTableScaled = W == DType::kQ2_K || W == DType::kIQ4_XS;
  constexpr bool kFoldedOffset = W == DType::kQ3_K || W == DType::kQ6_K;
  constexpr bool kMinLanes = W == DType::kQ2_K;
  constexpr bool kGfni = (kExt & kExtGfni) != 0;
  // Note [q3_k with GFNI and VBMI]
  constexpr bool kQ3Ext = W == DType::kQ3_K && kExt == (kExtGfni | kExtVbmi);
  static_assert(R <= 4);
  __m512 acc[R][C];
#pragma GCC unroll 8
  for (int r = 0; r < R; ++r) {
#pragma GCC unroll 8
    for (int c = 0; c < C; ++c) acc[r][c] = _mm512_setzero_ps();
  }
  // q2_k: the min terms of activation row c, row r's in 128-bit lane r.
  __m512 min_acc[C];
  if constexpr (kMinLanes) {
#pragma GCC unroll 8
    for (int c = 0; c < C; ++c) min_acc[c] = _mm512_setzero_ps();
  }
  for (std::int64_t i = 0; i < blocks; ++i) {
    const std::uint8_t* wb[R];
    KHead head[R];
#pragma GCC unroll 8
    for (int r = 0; r < R; ++r) {
      wb[r] = w + r * w_stride + i * kB;
      prefetch_ahead<kAhead>(wb[r] + blocks * kB, kB);  // the next row
      if constexpr (W != DType::kQ3_K) k_head<W, kGfni>(wb[r], head[r]);
    }
    if constexpr (W == DType::kQ3_K) q3_heads<R, kQ3Ext>(wb, head);
    const KAct* xb[C];
#pragma GCC unroll 8
    for (int c = 0; c < C; ++c) xb[c] = x + c * x_stride + i;
    // Note [k-quant scale products]
    // A super-block's f16 scales enter each output once, as f32 products with
    // the activation row's scale. Converting and broadcasting them per row took
    // a move, a conversion, two multiplies and two shuffles (port 5) per row and
    // super-block. Instead the 32-bit scale words of the tile's R rows are
    // broadcast from memory (loads only), blended into dwords 0 .. R - 1 (past
    // R, copies of row 0's) and converted at once, so that row r's scale and
    // mins' scale are lanes 2r and 2r + 1 (ordered by kScaleHalf<W>); times each
    // activation row's scale, they are stored to f; in the decode tiles the
    // empty asm keeps f in memory and the FMAs read them as embedded broadcasts.
    // The prefill tiles (four activation rows) load far more per step, and
    // there the memory broadcasts cost q2_k / q3_k about 4% (measured), so the
    // compiler keeps f in registers and broadcasts by shuffles. (Gathering the
    // words by scalar stores instead made the vector load wait for the stores to
    // retire: a load spanning several stores is not forwarded.)
    const auto scale_word = [&](int r) {
      return _mm_castps_si128(
          _mm_broadcast_ss(reinterpret_cast<const float*>(wb[r] + kScaleAt<W>)));
    };
    __m128i pairs = scale_word(0);
#pragma GCC unroll 8
    for (int r = 1; r < R; ++r) pairs = _mm_blend_epi32(pairs, scale_word(r), 1 << r);
    constexpr float kLo = kScaleHalf<W> == 0 ? kScaleFactor<W> : -1.0f;
    constexpr float kHi = kScaleHalf<W> == 0 ? -1.0f : kScaleFactor<W>;
    const __m256 wd = _mm256_mul_ps(_mm256_cvtph_ps(pairs),
                                    _mm256_setr_ps(kLo, kHi, kLo, kHi, kLo, kHi, kLo, kHi));
    alignas(32) float f[C][8];
    __m512i mins;
    if constexpr (kMinLanes) mins = q2_tile_mins<R>(wb);
#pragma GCC unroll 8
    for (int c = 0; c < C; ++c) {
      const __m256 fc = _mm256_mul_ps(wd, _mm256_set1_ps(xb[c]->d));
      _mm256_store_ps(f[c], fc);
      if constexpr (kMinLanes) q2_add_min_terms(mins, *xb[c], fc, min_acc[c]);
    }
    if constexpr (C == 1) asm("" : "+m"(f));
    __m512i sumi[R][C];
#pragma GCC unroll 8
    for (int r = 0; r < R; ++r) {
#pragma GCC unroll 8
      for (int c = 0; c < C; ++c) sumi[r][c] = _mm512_setzero_si512();
    }
    // Vector kVec of every row against every activation row, into dot.
    const auto vec = [&](auto vec_index, __m512i(&dot)[R][C]) {
      constexpr int kVec = decltype(vec_index)::value;
      __m512i levels[R];
      __m512i scales[R];
#pragma GCC unroll 8
      for (int r = 0; r < R; ++r) {
        levels[r] = k_levels<W, kVec, kGfni>(wb[r], head[r]);
        if constexpr (!kTableScaled) {
          scales[r] = _mm512_permutexvar_epi16(load_table(kChunkGroups<W, kVec>),
                                               _mm512_zextsi256_si512(head[r].scales));
        }
      }
#pragma GCC unroll 8
      for (int c = 0; c < C; ++c) {
        const __m512i xq = _mm512_load_si512(xb[c]->q + 64 * kVec);
#pragma GCC unroll 8
        for (int r = 0; r < R; ++r) {
          if constexpr (kTableScaled) {
            dot[r][c] = _mm512_dpbusd_epi32(dot[r][c], levels[r], xq);
          } else if constexpr (kVec == 0) {
            // The first vector starts the sum (vpmaddwd): no zeroed register to copy.
            dot[r][c] = _mm512_madd_epi16(_mm512_maddubs_epi16(levels[r], xq), scales[r]);
          } else {
            dot[r][c] =
                _mm512_dpwssd_epi32(dot[r][c], _mm512_maddubs_epi16(levels[r], xq), scales[r]);
          }
        }
      }
    };
    if constexpr (W == DType::kIQ4_XS) {
      // Per 64-byte load: exact i32 dots per lane, then the lane's group scale.
      const auto half = [&](auto half_index) {
        constexpr int kHalf = decltype(half_index)::value;
        __m512i dot[R][C];
#pragma GCC unroll 8
        for (int r = 0; r < R; ++r) {
#pragma GCC unroll 8
          for (int c = 0; c < C; ++c) dot[r][c] = _mm512_load_si512(xb[c]->init + 16 * kHalf);
        }
        vec(std::integral_constant<int, 2 * kHalf>{}, dot);
        vec(std::integral_constant<int, 2 * kHalf + 1>{}, dot);
#pragma GCC unroll 8
        for (int r = 0; r < R; ++r) {
#pragma GCC unroll 8
          for (int c = 0; c < C; ++c) {
            sumi[r][c] =
                _mm512_add_epi32(sumi[r][c], _mm512_mullo_epi32(dot[r][c], head[r].t[kHalf]));
          }
        }
      };
      half(std::integral_constant<int, 0>{});
      half(std::integral_constant<int, 1>{});
    } else if constexpr (W == DType::kQ3_K) {
      // Note [q3_k vector pairs]
      // Each vector's levels meet the activations in vpdpbusd, whose dwords (the
      // sum over four elements, at most 4 * 28 * 127) fit a word; vpackssdw puts
      // two vectors' dwords side by side in each 128-bit lane (one group each),
      // and one vpdpwssd against both groups' scales adds them to the row's sum.
      // Per pair of vectors that is two vpdpbusd, a pack and a vpdpwssd where
      // two vpmaddubsw and two vpdpwssd were, and one scale shuffle where two
      // were; the pack runs on port 5 beside port 0's multiplies. Dword d of a
      // lane collects different elements than with vpmaddubsw, and every tile
      // uses the pairs, so rows still do not depend on the tile. With one
      // thread in cache (QuantDotInCache, fastest of 30 runs per binary,
      // alternated) q3_k took 34.0 -> 30.7 us; prefill went 178-192 -> 199-201
      // GFLOP/s.
      // Note [q3_k with GFNI and VBMI]: each row's qs and hmask in registers.
      __m512i qs[R];
      __m512i hmask[R];
      if constexpr (kQ3Ext) {
#pragma GCC unroll 8
        for (int r = 0; r < R; ++r) {
          qs[r] = load512(wb[r] + 32);
          asm("" : "+v"(qs[r]));  // one load, not one folded into each vector's mask
          hmask[r] = broadcast256(wb[r]);
        }
      }
      const auto pair = [&](auto pair_index) {
        constexpr int kPair = decltype(pair_index)::value;
        __m512i levels[R][2];
        __m512i scales[R];
#pragma GCC unroll 8
        for (int r = 0; r < R; ++r) {
          if constexpr (kQ3Ext) {
            levels[r][0] = q3_levels<2 * kPair>(qs[r], hmask[r]);
            levels[r][1] = q3_levels<2 * kPair + 1>(qs[r], hmask[r]);
            scales[r] = head[r].t[kPair];
          } else {
            levels[r][0] = k_levels<W, 2 * kPair, false>(wb[r], head[r]);
            levels[r][1] = k_levels<W, 2 * kPair + 1, false>(wb[r], head[r]);
            scales[r] = _mm512_shuffle_epi8(head[r].t[0], load_table(kQ3PairScale<kPair>));
          }
        }
#pragma GCC unroll 8
        for (int c = 0; c < C; ++c) {
          const __m512i x_even = _mm512_load_si512(xb[c]->q + 128 * kPair);
          const __m512i x_odd = _mm512_load_si512(xb[c]->q + 128 * kPair + 64);
#pragma GCC unroll 8
          for (int r = 0; r < R; ++r) {
            const __m512i words =
                _mm512_packs_epi32(_mm512_dpbusd_epi32(zeroed(), levels[r][0], x_even),
                                   _mm512_dpbusd_epi32(zeroed(), levels[r][1], x_odd));
            sumi[r][c] = kPair == 0 ? _mm512_madd_epi16(words, scales[r])
                                    : _mm512_dpwssd_epi32(sumi[r][c], words, scales[r]);
          }
        }
      };
      pair(std::integral_constant<int, 0>{});
      pair(std::integral_constant<int, 1>{});
    } else {
      vec(std::integral_constant<int, 0>{}, sumi);
      vec(std::integral_constant<int, 1>{}, sumi);
      vec(std::integral_constant<int, 2>{}, sumi);
      vec(std::integral_constant<int, 3>{}, sumi);
    }
#pragma GCC unroll 8
    for (int c = 0; c < C; ++c) {
#pragma GCC unroll 8
      for (int r = 0; r < R; ++r) {
        if constexpr (kFoldedOffset) {
          // The sums' zero upper half makes the coefficients' upper half
          // irrelevant (undefined: no zero-extending copy).
          sumi[r][c] = _mm512_dpwssd_epi32(sumi[r][c], _mm512_zextsi256_si512(load256(xb[c]->sums)),
                                           _mm512_castsi256_si512(head[r].coef));
        }
        acc[r][c] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(sumi[r][c]),
                                    _mm512_set1_ps(f[c][2 * r + kScaleHalf<W>]), acc[r][c]);
        if constexpr (kMinTerm<W>) {
          // Lanes 8-15 add 0 times the mins' scale.
          const __m512i corr = _mm512_madd_epi16(_mm512_zextsi256_si512(load256(xb[c]->sums)),
                                                 _mm512_castsi256_si512(head[r].coef));
          acc[r][c] =
              _mm512_fmadd_ps(_mm512_cvtepi32_ps(corr), _mm512_set1_ps(f[c][2 * r + 1]), acc[r][c]);
        }
      }
    }
  }
#pragma GCC unroll 8
  for (int c = 0; c < C; ++c) {
    alignas(64) float min_terms[16];
    if constexpr (kMinLanes) _mm512_store_ps(min_terms, min_acc[c]);
#pragma GCC unroll 8
    for (int r = 0; r < R; ++r) {
      float sum = _mm512_reduce_add_ps(acc[r][c]);
      if constexpr (kMinLanes) {
        const float* m = min_terms + 4 * r;
        sum += (m[0] + m[1]) + (m[2] + m[3]);
      }
      out[c * n + r] = sum;
    }
  }
}

// ---------------------------------------------------------------------------
// Dispatch.

// A tile (QuantTileFn) of R weight rows against C prepared activation rows.
// kAhead: prefetch the next tile's weights (decode tiles; Note [Decode prefetch]).
// kExt: the extensions the tile may use (kExtGfni, kExtVbmi).
template <DType W, int R, int C, bool kAhead, unsigned kExt>
void tile(const std::uint8_t* w, std::int64_t w_stride, const std::uint8_t* x,
          std::int64_t x_stride, std::int64_t blocks, float* out, std::int64_t n) {
  if constexpr (block_elems(W) == 32) {
    group_tile<W, R, C, kAhead, (kExt & kExtVbmi) != 0>(w, w_stride, x, x_stride, blocks, out, n);
  } else {
    k_tile<W, R, C, kAhead, kExt>(w, w_stride, reinterpret_cast<const KAct*>(x),
                                  x_stride / static_cast<std::int64_t>(sizeof(KAct)), blocks, out,
                                  n);
  }
}

// Decode: four weight rows per tile. Prefill: (4, 3 or 2) x 4 tiles, with 1 x 4
// for leftover weight rows and the decode tiles for leftover activation rows. The
// k-quant tiles hold an i32 and an f32 accumulator per output, so they take three
// weight rows (24 of the 32 vector registers) where the 32-element ones take four
// (measured: 4 x 4 was 15-25% faster than 2 x 4 for q4_0 / q8_0, 3 x 4 about 6%
// faster than 2 x 4 for the k-quants). q2_k adds a min-term accumulator per
// activation row (Note [q2_k min lanes]) and takes two: its 3 x 4 tile spilled,
// and 2 x 4 was 15-20% faster (two threads, five alternated runs).
template <DType W, unsigned kExt = 0>
QuantTiles tiles() {
  constexpr int kRows = block_elems(W) == 32 ? 4 : W == DType::kQ2_K ? 2 : 3;
  return {.rows4 = &tile<W, 4, 1, true, kExt>,
          .rows1 = &tile<W, 1, 1, true, kExt>,
          .prefill = &tile<W, kRows, 4, false, kExt>,
          .cols = &tile<W, 1, 4, false, kExt>,
          .prefill_rows = kRows,
          .prefill_cols = 4};
}

QuantTiles tiles_for(DType w, Avx512QuantExtras extras) {
  switch (w) {
    case DType::kQ4_0: return tiles<DType::kQ4_0>();
    case DType::kQ4_1: return tiles<DType::kQ4_1>();
    case DType::kQ5_0:
      return extras.avx512_vbmi ? tiles<DType::kQ5_0, kExtVbmi>() : tiles<DType::kQ5_0>();
    case DType::kQ5_1:
      return extras.avx512_vbmi ? tiles<DType::kQ5_1, kExtVbmi>() : tiles<DType::kQ5_1>();
    case DType::kQ8_0: return tiles<DType::kQ8_0>();
    case DType::kIQ4_NL: return tiles<DType::kIQ4_NL>();
    case DType::kMXFP4: return tiles<DType::kMXFP4>();
    case DType::kQ2_K: return extras.gfni ? tiles<DType::kQ2_K, kExtGfni>() : tiles<DType::kQ2_K>();
    case DType::kQ3_K:
      return extras.gfni && extras.avx512_vbmi ? tiles<DType::kQ3_K, kExtGfni | kExtVbmi>()
                                               : tiles<DType::kQ3_K>();
    case DType::kQ4_K: return tiles<DType::kQ4_K>();
    case DType::kQ5_K: return tiles<DType::kQ5_K>();
    case DType::kQ6_K: return tiles<DType::kQ6_K>();
    case DType::kIQ4_XS: return tiles<DType::kIQ4_XS>();
    default: return {};
  }
}

// The activation layout of a 32-element format (decode_layout).
struct DecodeLayout {
  void (*fn)(const float* row, std::int64_t k, std::uint8_t* out) = nullptr;
  std::int64_t group_bytes = 0;
};

template <DType W>
DecodeLayout decode_layout_of() {
  return {&decode_layout<W>, kGroupXBytes<W>};
}

DecodeLayout decode_layout_for(DType w) {
  switch (w) {
    case DType::kQ4_0: return decode_layout_of<DType::kQ4_0>();
    case DType::kQ4_1: return decode_layout_of<DType::kQ4_1>();
    case DType::kQ5_0: return decode_layout_of<DType::kQ5_0>();
    case DType::kQ5_1: return decode_layout_of<DType::kQ5_1>();
    case DType::kQ8_0: return decode_layout_of<DType::kQ8_0>();
    case DType::kIQ4_NL: return decode_layout_of<DType::kIQ4_NL>();
    case DType::kMXFP4: return decode_layout_of<DType::kMXFP4>();
    default: return {};
  }
}

struct alignas(64) CacheLine {
  std::uint8_t b[64];
};

// Weight rows per parallel task, and per tile inside a task: a tile's rows stay
// in L2 while every group of four activation rows passes over them.
constexpr std::int64_t kRowGrain = 16;

constexpr std::int64_t kTileRows = 64;

}  // namespace

Status matmul_quant_avx512(const KernelCall& call, DType w_dtype) {
  return matmul_quant_avx512(
      call, w_dtype, {.gfni = cpu_features().gfni, .avx512_vbmi = cpu_features().avx512_vbmi});
}

Status matmul_quant_avx512(const KernelCall& call, DType w_dtype, Avx512QuantExtras extras) {
  const QuantTiles fns = tiles_for(w_dtype, extras);
  if (fns.rows1 == nullptr) {
    return invalid_argument_error(
        fmt::format("{}: no AVX-512 dot product for {}", call.name, name(w_dtype)));
  }
  SWITCHYARD_ASSIGN_OR_RETURN(QuantMatmulArgs args, check_quant_matmul_simd(call, w_dtype));
  const bool small = block_elems(w_dtype) == 32;
  const std::int64_t blocks = args.k / block_elems(w_dtype);
  // Prepared activation rows: decode_layout groups for the 32-element formats
  // (CacheLine keeps every row 64-byte aligned), KAct super-blocks for the
  // k-quants (aligned the same way).
  const DecodeLayout layout = decode_layout_for(w_dtype);
  const std::int64_t x_stride =
      small ? (blocks + kGroupBlocks - 1) / kGroupBlocks * layout.group_bytes
            : blocks * static_cast<std::int64_t>(sizeof(KAct));
  std::vector<CacheLine> groups;
  std::vector<KAct> kq;
  if (small) {
    groups.resize(static_cast<std::size_t>(x_stride / 64 * args.rows));
  } else {
    kq.resize(static_cast<std::size_t>(blocks * args.rows));
  }
  auto* x = small ? reinterpret_cast<std::uint8_t*>(groups.data())
                  : reinterpret_cast<std::uint8_t*>(kq.data());
  // A row with NaN or infinity cannot be quantized meaningfully; its outputs are
  // set to NaN afterwards, as a float dot product would propagate them.
  std::vector<char> non_finite(static_cast<std::size_t>(args.rows), 0);
  call.ctx.parallel_for(args.rows, 1, [&](std::int64_t begin, std::int64_t end) {
    std::vector<std::uint8_t> tmp;
    for (std::int64_t r = begin; r < end; ++r) {
      const float* row = args.a + r * args.k;
      non_finite[static_cast<std::size_t>(r)] = row_is_finite(row, args.k) ? 0 : 1;
      if (small) {
        layout.fn(row, args.k, x + r * x_stride);
      } else {
        prepare_k(w_dtype, row, args.k, tmp, kq.data() + r * blocks);
      }
    }
  });
  run_quant_tiles(fns, args, call.ctx, x, x_stride, blocks, kRowGrain, kTileRows);
  fill_non_finite_rows(args, non_finite);
  return Status::ok();
}

}  // namespace switchyard::cpu
