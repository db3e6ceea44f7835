// AVX-512 (F/BW/VL + VNNI) matmul tiles for the 32-element block formats (q4_0,
// q4_1, q5_0, q5_1, q8_0, iq4_nl, mxfp4) and their activation layout. Same
// structure and precision as the AVX2 sibling (activations quantized once per row
// to q8_0 with the reference rounding, integer dot products per block, f32 block
// accumulation), at twice the width and with the VNNI fused multiply-adds. The
// shared skeleton (quant_matmul_simd.h) prepares the activation rows through
// prepare_rows here and walks the tiles over the outputs.
//
// Groups of 16 blocks (Note [Decode groups]): a 64-byte chunk holds the levels of
// four nibble blocks as stored (q8_0: dword c of each of the 16 blocks, Note [q8_0
// block lanes]); the activations are laid out once per row to match, low nibbles
// and high nibbles each against their own 64 activation bytes. The unsigned levels
// u = q + bias (q4_0: 8, q5_0: 16, q8_0 / iq4_nl / mxfp4: 128 through a biased
// table or a flipped sign bit) meet them in vpdpbusd, whose i32 accumulator starts
// at -bias * (sum of the lane's activations), prepared with the layout; so each
// lane ends at sum(q * x) exactly, with no per-block correction. A group's 16
// scales are collected and converted at once; lanes are scaled in f32 by
// d_w * d_x and accumulated per lane.
//
// Register tiles: matvec runs four weight rows at once (independent accumulator
// chains); prefill runs 4 weight rows x 4 activation rows, so each decoded weight
// group serves four activation rows (see tiles()). Every output element is
// computed by the same sequence of operations whichever tile computes it, so
// results are identical at any thread count and a matmul's rows equal the matvecs
// of its activation rows.
//
#include <immintrin.h>

#include <array>
#include <cstring>

#include "backends/cpu/avx512_diagnostics.h"
#include "backends/cpu/quant/quant_act_avx512_inl.h"
#include "backends/cpu/quant/quant_matmul_avx512vnni_inl.h"
#include "backends/cpu/quant/quant_matmul_simd.h"
#include "switchyard/quant_blocks.h"

namespace switchyard::cpu {
namespace {

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
  const __m128i ones = _mm_set1_epi8(1);
  for (std::int64_t b = 0; b < blocks; ++b) {
    __m128i lo;  // elements 0-15
    __m128i hi;  // elements 16-31
    const float dx = quantize_q8_0_levels(row + 32 * b, lo, hi);
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
// Dispatch.

// A tile (QuantTileFn) of R weight rows against C prepared activation rows.
// kAhead: prefetch the next tile's weights (decode tiles; Note [Decode prefetch]).
// kExt: the extensions the tile may use (kExtVbmi).
template <DType W, int R, int C, bool kAhead, unsigned kExt>
void tile(const std::uint8_t* w, std::int64_t w_stride, const std::uint8_t* x,
          std::int64_t x_stride, std::int64_t blocks, float* out, std::int64_t n) {
  group_tile<W, R, C, kAhead, (kExt & kExtVbmi) != 0>(w, w_stride, x, x_stride, blocks, out, n);
}

// Decode: four weight rows per tile. Prefill: 4 x 4 tiles, with 1 x 4 for
// leftover weight rows and the decode tiles for leftover activation rows
// (measured: 4 x 4 was 15-25% faster than 2 x 4 for q4_0 / q8_0). The k-quant
// tiles, which hold an i32 as well as an f32 accumulator per output, take fewer
// weight rows (quant_matmul_kquant_avx512vnni.cpp).
template <DType W, unsigned kExt = 0>
QuantTiles tiles() {
  constexpr int kRows = 4;
  return {.rows4 = &tile<W, 4, 1, true, kExt>,
          .rows1 = &tile<W, 1, 1, true, kExt>,
          .prefill = &tile<W, kRows, 4, false, kExt>,
          .cols = &tile<W, 1, 4, false, kExt>,
          .prefill_rows = kRows,
          .prefill_cols = 4};
}

// The activation layout of a 32-element format (decode_layout).
using DecodeLayoutFn = void (*)(const float* row, std::int64_t k, std::uint8_t* out);

DecodeLayoutFn decode_layout_for(DType w) {
  switch (w) {
    case DType::kQ4_0: return &decode_layout<DType::kQ4_0>;
    case DType::kQ4_1: return &decode_layout<DType::kQ4_1>;
    case DType::kQ5_0: return &decode_layout<DType::kQ5_0>;
    case DType::kQ5_1: return &decode_layout<DType::kQ5_1>;
    case DType::kQ8_0: return &decode_layout<DType::kQ8_0>;
    case DType::kIQ4_NL: return &decode_layout<DType::kIQ4_NL>;
    case DType::kMXFP4: return &decode_layout<DType::kMXFP4>;
    default: return nullptr;
  }
}

// Prepares activation rows (QuantSimdFormat::prepare_rows): each quantized to
// q8_0 and laid out for group_tile by decode_layout.
void prepare_rows(DType w, const QuantMatmulArgs& args, std::int64_t begin, std::int64_t end,
                  std::uint8_t* x, std::int64_t x_stride, char* non_finite) {
  const DecodeLayoutFn layout = decode_layout_for(w);
  for (std::int64_t r = begin; r < end; ++r) {
    const float* row = args.a + r * args.k;
    non_finite[r] = row_is_finite(row, args.k) ? 0 : 1;
    layout(row, args.k, x + r * x_stride);
  }
}

// A prepared activation row: kGroupXBytes<W> per group of 16 blocks (a multiple
// of 64, so every row stays 64-byte aligned).
template <DType W, unsigned kExt = 0>
QuantSimdFormat format() {
  static_assert(kGroupXBytes<W> % 64 == 0);
  return {.tiles = tiles<W, kExt>(),
          .act_elems = kGroupBlocks * quant::kQK,
          .act_bytes = kGroupXBytes<W>,
          .prepare_rows = &prepare_rows,
          .row_grain = kRowGrain,
          .tile_rows = kTileRows};
}

}  // namespace

QuantSimdFormat quant_format_avx512_block32(DType w, Avx512QuantExtras extras) {
  switch (w) {
    case DType::kQ4_0: return format<DType::kQ4_0>();
    case DType::kQ4_1: return format<DType::kQ4_1>();
    case DType::kQ5_0:
      return extras.avx512_vbmi ? format<DType::kQ5_0, kExtVbmi>() : format<DType::kQ5_0>();
    case DType::kQ5_1:
      return extras.avx512_vbmi ? format<DType::kQ5_1, kExtVbmi>() : format<DType::kQ5_1>();
    case DType::kQ8_0: return format<DType::kQ8_0>();
    case DType::kIQ4_NL: return format<DType::kIQ4_NL>();
    case DType::kMXFP4: return format<DType::kMXFP4>();
    default: return {};
  }
}

}  // namespace switchyard::cpu
