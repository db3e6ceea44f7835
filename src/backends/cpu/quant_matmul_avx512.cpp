// AVX-512 (F/BW/VL + VNNI) matmul with block-quantized weights. Same structure
// and precision as the AVX2 sibling (activations quantized once per row to q8_0 /
// q8_k with the reference rounding, integer dot products per block, f32 block
// accumulation), at twice the width and with the VNNI fused multiply-adds:
//
//   32-element formats: groups of 16 blocks (Note [Decode groups]). A 64-byte
//     chunk holds the levels of four nibble blocks (two q8_0 blocks) as stored;
//     the activations are laid out once per row to match, low nibbles and high
//     nibbles each against their own 64 activation bytes. The unsigned levels
//     u = q + bias (q4_0: 8, q5_0: 16, q8_0 / iq4_nl / mxfp4: 128 through a
//     biased table or a flipped sign bit) meet them in vpdpbusd, whose i32
//     accumulator starts at -bias * (sum of the lane's activations), prepared
//     with the layout; so each lane ends at sum(q * x) exactly, with no
//     per-block correction. A group's 16 scales are collected and converted at
//     once; lanes are scaled in f32 by d_w * d_x and accumulated per lane.
//   k-quants (256-element super-blocks) against q8_k: 64 levels per vector,
//     vpmaddubsw to i16 pairs, then vpdpwssd against the i16 group scales; the
//     group mins / level offsets go through q8_k's group sums as in AVX2.
//     iq4_xs levels are signed: their magnitudes meet activations negated where
//     the level is negative (AVX-512 has no vpsignb).
//
// Register tiles: matvec runs four weight rows at once (independent accumulator
// chains); prefill runs 4 (k-quants: 3) weight rows x 4 activation rows, so
// each decoded weight group (k-quant vector) serves four activation rows. Every
// output element is computed by the same sequence of operations whichever tile
// computes it, so results are identical at any thread count and a matmul's rows
// equal the matvecs of its activation rows.
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

#include "backends/cpu/quant_kernels.h"
#include "quant/blocks.h"

namespace switchyard::cpu {
namespace {

using detail::BlockQ8_0;
using detail::BlockQ8_K;

inline float f16_at(const std::uint8_t* p) {
  std::uint16_t h;
  std::memcpy(&h, p, sizeof h);
  return _cvtsh_ss(h);
}

inline __m256i load256(const void* p) { return _mm256_loadu_si256(static_cast<const __m256i*>(p)); }
inline __m512i load512(const void* p) { return _mm512_loadu_si512(p); }

// Note [Decode prefetch]
// A decode step (one activation row) reads every weight byte once, from DRAM for
// a real model. The hardware prefetchers alone left the AVX-512 tiles at about
// half of the measured DRAM read bandwidth: the cores, busy unpacking, keep too
// few lines in flight. The decode tiles therefore ask for the bytes that the tile
// R rows further on will read, at the offset they are reading now: one tile ahead,
// spread evenly over the loop instead of in bursts. Prefetches never fault, so
// running past the last row is harmless. Prefill tiles reuse each weight row
// across activation rows from L2 and do not prefetch.
template <bool kAhead>
inline void prefetch_ahead(const std::uint8_t* p, std::int64_t bytes) {
  if constexpr (kAhead) {
    for (std::int64_t o = 0; o < bytes; o += 64) {
      _mm_prefetch(reinterpret_cast<const char*>(p + o), _MM_HINT_T0);
    }
  }
}
inline __m512i both_halves(__m256i v) {
  return _mm512_inserti64x4(_mm512_zextsi256_si512(v), v, 1);
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
    const int v = W == DType::kIQ4_NL ? detail::kIQ4NLValues[i % 16] : detail::kMXFP4Values[i % 16];
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
//   - A chunk is the 64 level bytes of four nibble blocks (two q8_0 blocks) as
//     stored, block b in bytes 16b .. 16b + 15: one dword permute of two loads
//     (see kSecondLoad), four 16-byte loads for mxfp4 (blocks at odd offsets),
//     two 32-byte loads for q8_0. Its low nibbles (elements 0-15) and high
//     nibbles (16-31) meet activations laid out to match (decode_layout), both
//     chained into one vpdpbusd accumulator: no byte is spread twice, and a
//     lane covers eight elements.
//   - The group's 16 f16 scales (and mins) are collected by one word permute
//     per chunk into one vector, converted by one vcvtph2ps and multiplied by
//     the 16 activation scales at once; a vpermps spreads them over each
//     chunk's lanes. q4_1 / q5_1 mins meet dx * sum(x) once per group, one lane
//     per block. q5_0 / q5_1 fifth bits come out of one word permute per chunk
//     as two 64-bit masks.
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
// Prepared activation bytes per chunk: the levels meeting the low (and high)
// nibbles, then the 16 i32 starting values; per group the chunks, then dx and
// dx * sum(x) per scale slot.
template <DType W>
constexpr std::int64_t kChunkXBytes = (kNibbleFormat<W> ? 128 : 64) + 64;
template <DType W>
constexpr std::int64_t kGroupXBytes = kChunks<W>* kChunkXBytes<W> + 128;
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
// iq4_nl / q5_0: blocks 0 and 2 from the first, 1 and 3 from the second;
// q4_1 / q5_1: blocks 0-2, then block 3), and the scales with one-table word
// permutes of the chunk's first 64 bytes where they reach all four blocks.
template <DType W>
constexpr bool kScaleOneLoad = (kChunkBlocks<W> - 1) * block_bytes(W) + (kHasMin<W> ? 4 : 2) <= 64;
// Words of a chunk past its first 64 bytes.
template <DType W>
constexpr int kTailWords = (kChunkBytes<W> - 64) / 2;
// The second level load: at block 1's levels, or at block 3's when the block
// size keeps every level run dword-aligned.
template <DType W>
constexpr int kSecondLoad = kQsOffset<W> + (block_bytes(W) % 4 == 0 ? 3 : 1) * block_bytes(W);
template <DType W>
constexpr int kSecondDwords = (kChunkBytes<W> - kSecondLoad<W>) / 4;

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
// mins to 16 + scale_slot(m); from the chunk's first 64 bytes, and for q5_0 /
// q5_1 the rest (kTailWords<W> words from byte 64).
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
// Word permute indices (q5_0 / q5_1): words 0-3 the low halves of the chunk's
// four 32-bit qh, words 4-7 the high halves: the fifth bits of the levels in
// the low and in the high nibbles, as two 64-bit masks.
template <DType W>
constexpr std::array<std::int16_t, 32> qh_words() {
  constexpr int kQh = W == DType::kQ5_0 ? 2 : 4;
  std::array<std::int16_t, 32> a{};
  for (int b = 0; b < 4; ++b) {
    a[static_cast<std::size_t>(b)] = static_cast<std::int16_t>((b * block_bytes(W) + kQh) / 2);
    a[static_cast<std::size_t>(4 + b)] =
        static_cast<std::int16_t>((b * block_bytes(W) + kQh) / 2 + 1);
  }
  return a;
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

// The group's block scales (and q4_1 / q5_1 mins) per slot; head[c] holds the
// first 64 bytes of chunk c.
template <DType W>
inline void group_scales(const __m512i* head, const __m512i* tail, GroupW<W>& g) {
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
    // detail::e8m0_half in lanes: exponent field e - 1, or the subnormals for e < 2.
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
      const __m512i idx = load_table(kIdx[static_cast<std::size_t>(c)]);
      if constexpr (kScaleOneLoad<W>) {
        words = _mm512_mask_permutexvar_epi16(words, scale_word_mask<W>(c), idx, head[c]);
      } else {
        words = _mm512_mask_mov_epi16(words, scale_word_mask<W>(c),
                                      _mm512_permutex2var_epi16(head[c], idx, tail[c]));
      }
    }
    g.d = _mm512_cvtph_ps(_mm512_castsi512_si256(words));
    g.m = kHasMin<W> ? _mm512_cvtph_ps(_mm512_extracti64x4_epi64(words, 1)) : _mm512_setzero_ps();
  }
}

// Decodes the group of 16 blocks at p (kChunkBytes<W> * kChunks<W> bytes, all
// read, none past them).
template <DType W>
inline void decode_group(const std::uint8_t* p, GroupW<W>& g) {
  constexpr int kC = kChunks<W>;
  __m512i head[kC];
#pragma GCC unroll 8
  for (int c = 0; c < kC; ++c) head[c] = load512(p + c * kChunkBytes<W>);
  // The rest of each chunk, where the first 64 bytes miss scales (q5_0 / q5_1).
  __m512i tail[kScaleOneLoad<W> ? 1 : kC];
  if constexpr (!kScaleOneLoad<W>) {
#pragma GCC unroll 8
    for (int c = 0; c < kC; ++c) {
      tail[c] =
          _mm512_maskz_loadu_epi16((__mmask32{1} << kTailWords<W>)-1, p + c * kChunkBytes<W> + 64);
    }
  }
  group_scales<W>(head, tail, g);
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
    } else if constexpr (W == DType::kQ8_0) {
      q = _mm512_inserti64x4(_mm512_castsi256_si512(load256(pc + 2)), load256(pc + 36), 1);
    } else {
      static constexpr auto kIdx = chunk_dwords<W>();
      q = _mm512_permutex2var_epi32(
          load512(pc + kQsOffset<W>), load_table(kIdx),
          _mm512_maskz_loadu_epi32((__mmask16{1} << kSecondDwords<W>)-1, pc + kSecondLoad<W>));
    }
    if constexpr (W == DType::kQ8_0) {
      g.lo[c] = _mm512_xor_si512(q, _mm512_set1_epi8(static_cast<char>(0x80)));
    } else {
      __m512i lo = _mm512_and_si512(q, low4);
      __m512i hi = _mm512_and_si512(_mm512_srli_epi16(q, 4), low4);
      if constexpr (W == DType::kQ5_0 || W == DType::kQ5_1) {
        // Fifth bits: element e of block b is bit e of its 32-bit qh, and byte
        // 16b + j of the chunk holds elements j (low) and 16 + j (high).
        static constexpr auto kQhIdx = qh_words<W>();
        const __m128i qh =
            _mm512_castsi512_si128(_mm512_permutex2var_epi16(head[c], load_table(kQhIdx), tail[c]));
        const auto mlo = static_cast<std::uint64_t>(_mm_cvtsi128_si64(qh));
        const auto mhi = static_cast<std::uint64_t>(_mm_extract_epi64(qh, 1));
        const __m512i sixteen = _mm512_set1_epi8(16);
        lo = _mm512_mask_add_epi8(lo, static_cast<__mmask64>(mlo), lo, sixteen);
        hi = _mm512_mask_add_epi8(hi, static_cast<__mmask64>(mhi), hi, sixteen);
      }
      if constexpr (W == DType::kIQ4_NL || W == DType::kMXFP4) {
        static constexpr auto kTable = biased_table<W>();
        lo = _mm512_shuffle_epi8(load_table(kTable), lo);
        hi = _mm512_shuffle_epi8(load_table(kTable), hi);
      }
      g.lo[c] = lo;
      g.hi[c] = hi;
    }
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
  const float* dx = reinterpret_cast<const float*>(x + kC * kChunkXBytes<W>);
  const __m512 s = _mm512_mul_ps(g.d, _mm512_load_ps(dx));
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

// out[c * n + r] = dot(weight row r, activation row c) for r < R, c < C. Weight
// row r starts at w + r * w_stride, activation row c (laid out by
// decode_layout) at x + c * x_stride bytes. Every output goes through the same
// group_dot sequence whatever R and C, so any tile gives the same bytes.
template <DType W, int R, int C, bool kAhead>
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
      prefetch_ahead<kAhead>(w + (r + R) * w_stride + i * kGW, kGW);
      GroupW<W> g;
      decode_group<W>(w + r * w_stride + i * kGW, g);
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
      decode_group<W>(pad, g);
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
  const std::int64_t blocks = k / detail::kQK;
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
    detail::store_f16(dh, d);
    const float dx = detail::load_f16(dh);
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
    const int m = static_cast<int>(b % kGroupBlocks);
    std::uint8_t* group = out + b / kGroupBlocks * kGroupXBytes<W>;
    std::uint8_t* chunk = group + m / kChunkBlocks<W> * kChunkXBytes<W>;
    const int pos = m % kChunkBlocks<W>;
    const __m128i bias = _mm_set1_epi32(-kBias<W>);
    const auto store = [](std::uint8_t* p, __m128i v) {
      _mm_storeu_si128(reinterpret_cast<__m128i*>(p), v);
    };
    if constexpr (kNibbleFormat<W>) {
      // Lane l of the block: elements 4l .. 4l + 3 and 16 + 4l .. 16 + 4l + 3.
      store(chunk + 16 * pos, lo);
      store(chunk + 64 + 16 * pos, hi);
      store(chunk + 128 + 16 * pos, _mm_mullo_epi32(_mm_add_epi32(sum_lo, sum_hi), bias));
    } else {
      store(chunk + 32 * pos, lo);
      store(chunk + 32 * pos + 16, hi);
      store(chunk + 64 + 32 * pos, _mm_mullo_epi32(sum_lo, bias));
      store(chunk + 64 + 32 * pos + 16, _mm_mullo_epi32(sum_hi, bias));
    }
    const __m128i s4 = _mm_add_epi32(sum_lo, sum_hi);
    const __m128i s2 = _mm_add_epi32(s4, _mm_shuffle_epi32(s4, 0x4e));
    const int sum = _mm_cvtsi128_si32(_mm_add_epi32(s2, _mm_shuffle_epi32(s2, 0xb1)));
    const float scales[2] = {dx, dx * static_cast<float>(sum)};
    for (int i = 0; i < 2; ++i) {
      std::memcpy(group + kChunks<W> * kChunkXBytes<W> + 64 * i + 4 * scale_slot<W>(m), &scales[i],
                  sizeof(float));
    }
  }
}

// ---------------------------------------------------------------------------
// k-quants against q8_k. A super-block is four chunks of 64 levels; group scales
// and correction coefficients are kept per 16-element group (16 x i16), so chunk
// c uses groups 4c .. 4c + 3, eight i16 pairs each.

struct KHead {
  __m256i scales;  // 16 x i16 per 16-element group
  __m256i coef;    // 16 x i16, the correction's group coefficients
  float d;
  float corr;
};

// Eight bytes, each repeated: the eight 32-element group values as 16 x i16.
inline __m256i per_16_groups(std::uint64_t eight_bytes) {
  const __m128i v = _mm_cvtsi64_si128(static_cast<long long>(eight_bytes));
  return _mm256_cvtepu8_epi16(_mm_unpacklo_epi8(v, v));
}

template <DType W>
inline void k_head(const std::uint8_t* p, KHead& h) {
  if constexpr (W == DType::kQ4_K || W == DType::kQ5_K) {
    // The 6-bit scales and mins of groups 0-3 sit in bytes 0-3 / 4-7; groups 4-7
    // take a nibble of bytes 8-11 and the top two bits of bytes 0-3 / 4-7.
    const std::uint32_t u0 = detail::load_u32(p + 4);
    const std::uint32_t u1 = detail::load_u32(p + 8);
    const std::uint32_t u2 = detail::load_u32(p + 12);
    const std::uint64_t sc =
        (u0 & 0x3f3f3f3fu) |
        static_cast<std::uint64_t>((u2 & 0x0f0f0f0fu) | ((u0 >> 2) & 0x30303030u)) << 32;
    const std::uint64_t mn =
        (u1 & 0x3f3f3f3fu) |
        static_cast<std::uint64_t>(((u2 >> 4) & 0x0f0f0f0fu) | ((u1 >> 2) & 0x30303030u)) << 32;
    h.scales = per_16_groups(sc);
    h.coef = per_16_groups(mn);
    h.d = f16_at(p);
    h.corr = -f16_at(p + 2);
  } else if constexpr (W == DType::kQ6_K) {
    h.scales = _mm256_cvtepi8_epi16(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p + 192)));
    h.coef = h.scales;
    h.d = f16_at(p + 208);
    h.corr = -32.0f * h.d;
  } else if constexpr (W == DType::kQ2_K) {
    const __m128i s = _mm_loadu_si128(reinterpret_cast<const __m128i*>(p));
    const __m128i low4 = _mm_set1_epi8(0x0f);
    h.scales = _mm256_cvtepu8_epi16(_mm_and_si128(s, low4));
    h.coef = _mm256_cvtepu8_epi16(_mm_and_si128(_mm_srli_epi16(s, 4), low4));
    h.d = f16_at(p + 80);
    h.corr = -f16_at(p + 82);
  } else if constexpr (W == DType::kQ3_K) {
    // 6-bit scales stored + 32: low nibbles from bytes 0-7 (groups 0-7 low, 8-15
    // high nibble), top two bits from bytes 8-11, two bits per group of four.
    const std::uint8_t* s = p + 96;
    const std::uint32_t a0 = detail::load_u32(s);
    const std::uint32_t a1 = detail::load_u32(s + 4);
    const std::uint32_t t = detail::load_u32(s + 8);
    const std::uint32_t g0 = (a0 & 0x0f0f0f0fu) | ((t << 4) & 0x30303030u);
    const std::uint32_t g1 = (a1 & 0x0f0f0f0fu) | ((t << 2) & 0x30303030u);
    const std::uint32_t g2 = ((a0 >> 4) & 0x0f0f0f0fu) | (t & 0x30303030u);
    const std::uint32_t g3 = ((a1 >> 4) & 0x0f0f0f0fu) | ((t >> 2) & 0x30303030u);
    const __m128i v = _mm_set_epi32(static_cast<int>(g3), static_cast<int>(g2),
                                    static_cast<int>(g1), static_cast<int>(g0));
    h.scales = _mm256_sub_epi16(_mm256_cvtepu8_epi16(v), _mm256_set1_epi16(32));
    h.coef = h.scales;
    h.d = f16_at(p + 108);
    h.corr = -4.0f * h.d;
  } else {
    static_assert(W == DType::kIQ4_XS);
    const std::uint32_t hi = static_cast<std::uint32_t>(p[2] | (p[3] << 8));
    const std::uint32_t lo = detail::load_u32(p + 4);
    std::uint64_t sc = 0;
    for (int j = 0; j < 8; ++j) {
      const std::uint64_t v = ((lo >> (4 * j)) & 0xf) | (((hi >> (2 * j)) & 3) << 4);
      sc |= v << (8 * j);
    }
    h.scales = _mm256_sub_epi16(per_16_groups(sc), _mm256_set1_epi16(32));
    h.coef = _mm256_setzero_si256();
    h.d = f16_at(p);
    h.corr = 0.0f;
  }
}

// i16 permute indices: chunk c's 32 words take groups 4c .. 4c + 3, eight each.
template <int kChunk>
constexpr std::array<std::int16_t, 32> kChunkGroups = [] {
  std::array<std::int16_t, 32> a{};
  for (int w = 0; w < 32; ++w)
    a[static_cast<std::size_t>(w)] = static_cast<std::int16_t>(4 * kChunk + w / 8);
  return a;
}();

// One bit per byte: bit `lo` in the first 32 bytes, bit `hi` in the rest.
inline __m512i bit_halves(int lo, int hi) {
  return _mm512_inserti64x4(_mm512_set1_epi8(static_cast<char>(1 << lo)),
                            _mm256_set1_epi8(static_cast<char>(1 << hi)), 1);
}

// Levels 64 * kChunk .. + 63 of super-block p as unsigned bytes; for iq4_xs
// magnitudes, with `neg` marking the negative levels.
template <DType W, int kChunk>
inline __m512i k_levels(const std::uint8_t* p, __mmask64& neg) {
  const __m512i low4 = _mm512_set1_epi8(0x0f);
  const __m512i low2 = _mm512_set1_epi8(0x03);
  constexpr int kHalf = kChunk / 2;
  constexpr int kPart = kChunk % 2;
  if constexpr (W == DType::kQ4_K || W == DType::kQ5_K) {
    const __m256i q = load256(p + (W == DType::kQ4_K ? 16 : 48) + 32 * kChunk);
    __m512i v = _mm512_and_si512(
        _mm512_inserti64x4(_mm512_zextsi256_si512(q), _mm256_srli_epi16(q, 4), 1), low4);
    if constexpr (W == DType::kQ5_K) {
      const __mmask64 high = _mm512_test_epi8_mask(both_halves(load256(p + 16)),
                                                   bit_halves(2 * kChunk, 2 * kChunk + 1));
      v = _mm512_mask_add_epi8(v, high, v, _mm512_set1_epi8(16));
    }
    return v;
  } else if constexpr (W == DType::kQ6_K) {
    const __m512i ql = load512(p + 64 * kHalf);
    const __m512i lo = _mm512_and_si512(kPart == 0 ? ql : _mm512_srli_epi16(ql, 4), low4);
    const __m512i qh = both_halves(load256(p + 128 + 32 * kHalf));
    const __m512i shifted = _mm512_srlv_epi64(
        qh, _mm512_set_epi64(4 * kPart + 2, 4 * kPart + 2, 4 * kPart + 2, 4 * kPart + 2, 4 * kPart,
                             4 * kPart, 4 * kPart, 4 * kPart));
    const __m512i hi = _mm512_and_si512(_mm512_slli_epi16(shifted, 4), _mm512_set1_epi8(0x30));
    return _mm512_or_si512(lo, hi);
  } else if constexpr (W == DType::kQ2_K || W == DType::kQ3_K) {
    constexpr int kQs = W == DType::kQ2_K ? 16 : 32;
    const __m512i qs = both_halves(load256(p + kQs + 32 * kHalf));
    __m512i v = _mm512_and_si512(
        _mm512_srlv_epi64(
            qs, _mm512_set_epi64(4 * kPart + 2, 4 * kPart + 2, 4 * kPart + 2, 4 * kPart + 2,
                                 4 * kPart, 4 * kPart, 4 * kPart, 4 * kPart)),
        low2);
    if constexpr (W == DType::kQ3_K) {
      const __mmask64 high = _mm512_test_epi8_mask(
          both_halves(load256(p)), bit_halves(4 * kHalf + 2 * kPart, 4 * kHalf + 2 * kPart + 1));
      v = _mm512_mask_add_epi8(v, high, v, _mm512_set1_epi8(4));
    }
    return v;
  } else {
    static_assert(W == DType::kIQ4_XS);
    const __m256i t = load256(p + 8 + 32 * kChunk);
    const __m512i spread = _mm512_permutexvar_epi64(_mm512_set_epi64(3, 2, 3, 2, 1, 0, 1, 0),
                                                    _mm512_zextsi256_si512(t));
    const __m512i idx =
        _mm512_and_si512(_mm512_srlv_epi64(spread, _mm512_set_epi64(4, 4, 0, 0, 4, 4, 0, 0)), low4);
    // The first eight levels are the negative ones.
    neg = _mm512_cmplt_epu8_mask(idx, _mm512_set1_epi8(8));
    static constexpr std::array<std::uint8_t, 64> kMagnitudes = [] {
      std::array<std::uint8_t, 64> a{};
      for (int i = 0; i < 64; ++i) {
        const int v = detail::kIQ4NLValues[i % 16];
        a[static_cast<std::size_t>(i)] = static_cast<std::uint8_t>(v < 0 ? -v : v);
      }
      return a;
    }();
    return _mm512_shuffle_epi8(load_table(kMagnitudes), idx);
  }
}

template <DType W, int R, int C, bool kAhead>
void k_tile(const std::uint8_t* w, std::int64_t w_stride, const std::uint8_t* x,
            std::int64_t x_stride, std::int64_t blocks, float* out, std::int64_t n) {
  constexpr std::int64_t kB = block_bytes(W);
  constexpr std::int64_t kX = sizeof(BlockQ8_K);
  constexpr bool kSigned = W == DType::kIQ4_XS;
  __m512 acc[R][C];
#pragma GCC unroll 8
  for (int r = 0; r < R; ++r) {
#pragma GCC unroll 8
    for (int c = 0; c < C; ++c) acc[r][c] = _mm512_setzero_ps();
  }
  for (std::int64_t i = 0; i < blocks; ++i) {
    const std::uint8_t* wb[R];
    const BlockQ8_K* xb[C];
    KHead head[R];
#pragma GCC unroll 8
    for (int r = 0; r < R; ++r) {
      wb[r] = w + r * w_stride + i * kB;
      prefetch_ahead<kAhead>(wb[r] + R * w_stride, kB);
      k_head<W>(wb[r], head[r]);
    }
#pragma GCC unroll 8
    for (int c = 0; c < C; ++c)
      xb[c] = reinterpret_cast<const BlockQ8_K*>(x + c * x_stride + i * kX);
    __m512i sumi[R][C];
#pragma GCC unroll 8
    for (int r = 0; r < R; ++r) {
#pragma GCC unroll 8
      for (int c = 0; c < C; ++c) sumi[r][c] = _mm512_setzero_si512();
    }
    const auto chunk = [&](auto chunk_index) {
      constexpr int kChunk = decltype(chunk_index)::value;
      __m512i levels[R];
      __m512i scales[R];
      __mmask64 neg[R] = {};
#pragma GCC unroll 8
      for (int r = 0; r < R; ++r) {
        levels[r] = k_levels<W, kChunk>(wb[r], neg[r]);
        scales[r] = _mm512_permutexvar_epi16(load_table(kChunkGroups<kChunk>),
                                             _mm512_zextsi256_si512(head[r].scales));
      }
#pragma GCC unroll 8
      for (int c = 0; c < C; ++c) {
        const __m512i xq = load512(xb[c]->qs + 64 * kChunk);
#pragma GCC unroll 8
        for (int r = 0; r < R; ++r) {
          const __m512i xs =
              kSigned ? _mm512_mask_sub_epi8(xq, neg[r], _mm512_setzero_si512(), xq) : xq;
          sumi[r][c] =
              _mm512_dpwssd_epi32(sumi[r][c], _mm512_maddubs_epi16(levels[r], xs), scales[r]);
        }
      }
    };
    chunk(std::integral_constant<int, 0>{});
    chunk(std::integral_constant<int, 1>{});
    chunk(std::integral_constant<int, 2>{});
    chunk(std::integral_constant<int, 3>{});
#pragma GCC unroll 8
    for (int c = 0; c < C; ++c) {
      const float dx = detail::load_f32(xb[c]->d);
#pragma GCC unroll 8
      for (int r = 0; r < R; ++r) {
        acc[r][c] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(sumi[r][c]), _mm512_set1_ps(head[r].d * dx),
                                    acc[r][c]);
        if constexpr (!kSigned) {
          const __m256i corr = _mm256_madd_epi16(load256(xb[c]->bsums), head[r].coef);
          acc[r][c] = _mm512_fmadd_ps(_mm512_zextps256_ps512(_mm256_cvtepi32_ps(corr)),
                                      _mm512_set1_ps(head[r].corr * dx), acc[r][c]);
        }
      }
    }
  }
#pragma GCC unroll 8
  for (int r = 0; r < R; ++r) {
#pragma GCC unroll 8
    for (int c = 0; c < C; ++c) out[c * n + r] = _mm512_reduce_add_ps(acc[r][c]);
  }
}

// ---------------------------------------------------------------------------
// Dispatch.

// A tile: R weight rows (w_stride bytes apart) against C prepared activation rows
// (x_stride bytes apart), `blocks` weight blocks per row.
using TileFn = void (*)(const std::uint8_t* w, std::int64_t w_stride, const std::uint8_t* x,
                        std::int64_t x_stride, std::int64_t blocks, float* out, std::int64_t n);

// kAhead: prefetch the next tile's weights (decode tiles; Note [Decode prefetch]).
template <DType W, int R, int C, bool kAhead = false>
void tile(const std::uint8_t* w, std::int64_t w_stride, const std::uint8_t* x,
          std::int64_t x_stride, std::int64_t blocks, float* out, std::int64_t n) {
  if constexpr (block_elems(W) == 32) {
    group_tile<W, R, C, kAhead>(w, w_stride, x, x_stride, blocks, out, n);
  } else {
    k_tile<W, R, C, kAhead>(w, w_stride, x, x_stride, blocks, out, n);
  }
}

// Decode: four weight rows per tile. Prefill: (4 or 3) x 4 tiles, with 1 x 4 for
// leftover weight rows and the decode tiles for leftover activation rows. The
// k-quant tiles hold an i32 and an f32 accumulator per output, so they take three
// weight rows (24 of the 32 vector registers) where the 32-element ones take four
// (measured: 4 x 4 was 15-25% faster than 2 x 4 for q4_0 / q8_0, 3 x 4 about 6%
// faster than 2 x 4 for the k-quants).
struct Tiles {
  TileFn rows4 = nullptr;
  TileFn rows1 = nullptr;
  TileFn prefill = nullptr;  // prefill_rows x 4
  TileFn block14 = nullptr;
  std::int64_t prefill_rows = 0;
};

template <DType W>
Tiles tiles() {
  constexpr int kRows = block_elems(W) == 32 ? 4 : 3;
  return {&tile<W, 4, 1, true>, &tile<W, 1, 1, true>, &tile<W, kRows, 4>, &tile<W, 1, 4>, kRows};
}

Tiles tiles_for(DType w) {
  switch (w) {
    case DType::kQ4_0: return tiles<DType::kQ4_0>();
    case DType::kQ4_1: return tiles<DType::kQ4_1>();
    case DType::kQ5_0: return tiles<DType::kQ5_0>();
    case DType::kQ5_1: return tiles<DType::kQ5_1>();
    case DType::kQ8_0: return tiles<DType::kQ8_0>();
    case DType::kIQ4_NL: return tiles<DType::kIQ4_NL>();
    case DType::kMXFP4: return tiles<DType::kMXFP4>();
    case DType::kQ2_K: return tiles<DType::kQ2_K>();
    case DType::kQ3_K: return tiles<DType::kQ3_K>();
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
  const Tiles fns = tiles_for(w_dtype);
  if (fns.rows1 == nullptr) {
    return invalid_argument_error(
        fmt::format("matmul_f32_{}_f32__cpu_avx512: no AVX-512 dot product for {}", name(w_dtype),
                    name(w_dtype)));
  }
  SWITCHYARD_ASSIGN_OR_RETURN(QuantMatmulArgs args,
                              check_quant_matmul_simd(call, w_dtype, "avx512"));
  const DType act = activation_format(w_dtype);
  const bool small = block_elems(w_dtype) == 32;
  const std::int64_t blocks = args.k / block_elems(w_dtype);
  // Prepared activation rows: decode_layout groups for the 32-element formats
  // (CacheLine keeps every row 64-byte aligned), q8_k rows for the k-quants.
  const DecodeLayout layout = decode_layout_for(w_dtype);
  const std::int64_t x_stride =
      small ? (blocks + kGroupBlocks - 1) / kGroupBlocks * layout.group_bytes
            : blocks * static_cast<std::int64_t>(sizeof(BlockQ8_K));
  std::vector<CacheLine> groups;
  std::vector<std::uint8_t> kq;
  if (small) {
    groups.resize(static_cast<std::size_t>(x_stride / 64 * args.rows));
  } else {
    kq.resize(static_cast<std::size_t>(x_stride * args.rows));
  }
  auto* x = small ? reinterpret_cast<std::uint8_t*>(groups.data()) : kq.data();
  // A row with NaN or infinity cannot be quantized meaningfully; its outputs are
  // set to NaN afterwards, as a float dot product would propagate them.
  std::vector<char> non_finite(static_cast<std::size_t>(args.rows), 0);
  call.ctx.parallel_for(args.rows, 1, [&](std::int64_t begin, std::int64_t end) {
    for (std::int64_t r = begin; r < end; ++r) {
      const float* row = args.a + r * args.k;
      non_finite[static_cast<std::size_t>(r)] = row_is_finite(row, args.k) ? 0 : 1;
      if (small) {
        layout.fn(row, args.k, x + r * x_stride);
      } else {
        detail::quantize_row(act, row, kq.data() + r * x_stride, args.k);
      }
    }
  });
  const auto* w = reinterpret_cast<const std::uint8_t*>(args.w);
  const std::int64_t wb = args.row_bytes;
  const std::int64_t n = args.n;
  call.ctx.parallel_for(n, kRowGrain, [&](std::int64_t begin, std::int64_t end) {
    for (std::int64_t t0 = begin; t0 < end; t0 += kTileRows) {
      const std::int64_t t1 = std::min(end, t0 + kTileRows);
      std::int64_t r = 0;
      for (; r + 4 <= args.rows; r += 4) {
        const std::uint8_t* xr = x + r * x_stride;
        std::int64_t j = t0;
        for (; j + fns.prefill_rows <= t1; j += fns.prefill_rows) {
          fns.prefill(w + j * wb, wb, xr, x_stride, blocks, args.out + r * n + j, n);
        }
        for (; j < t1; ++j)
          fns.block14(w + j * wb, wb, xr, x_stride, blocks, args.out + r * n + j, n);
      }
      for (; r < args.rows; ++r) {
        const std::uint8_t* xr = x + r * x_stride;
        std::int64_t j = t0;
        for (; j + 4 <= t1; j += 4) {
          fns.rows4(w + j * wb, wb, xr, x_stride, blocks, args.out + r * n + j, n);
        }
        for (; j < t1; ++j)
          fns.rows1(w + j * wb, wb, xr, x_stride, blocks, args.out + r * n + j, n);
      }
    }
  });
  fill_non_finite_rows(args, non_finite);
  return Status::ok();
}

}  // namespace switchyard::cpu
