// AVX2 matmul tiles for the 256-element super-block formats (the k-quants q2_k ..
// q6_k, and iq4_xs) against q8_k activations. The shared skeleton
// (quant_matmul_simd.h) quantizes each activation row once to q8_k
// (quantize_act_avx2.cpp, the reference bytes) through prepare_rows here, then
// every weight super-block meets its activation block in an integer dot product.
//
// The integer core is the byte multiply-add (vpmaddubsw: unsigned x signed bytes,
// adjacent pairs summed to i16), then vpmaddwd against the group scales (or ones)
// to i32. Signed weights use the sign trick: |w| times a with w's sign applied.
// No i16 sum can saturate: |w| <= 128 and |a| <= 127 give at most 2 * 128 * 127.
//
// Register tiles: decode runs one weight row per tile; prefill runs eight (or
// four) activation rows per decoded super-block (see tiles()). Every output
// element is computed by the same sequence of operations whichever tile computes
// it, so results are identical at any thread count and a matmul's rows equal the
// matvecs of its activation rows.
//
// Per format (x = activation, s_g = group scale, m_g = group min):
//   dot = d_w * d_x * sum_g s_g * sum(q_w * q_x) - dmin_w * d_x * sum_g m_g * bsum_g
// where an offset level (q6_k's q - 32, q3_k's q - 4) is applied through the q8_k
// group sums instead of per element, inside the integer sum. The chunks are kept
// to a few single-uop instructions each (Note [AVX2 k-quant chunks]); iq4_xs meets
// activations reordered once per call (Note [iq4_xs group pairs]).
#include <immintrin.h>

#include <array>
#include <cstring>
#include <vector>

#include "backends/cpu/quant/quant_matmul_avx2_inl.h"
#include "backends/cpu/quant/quantize_act.h"
#include "switchyard/quant_blocks.h"

namespace switchyard::cpu {
namespace {

using quant::BlockQ8_K;

// k-quants against q8_k. A weight super-block is unpacked into eight 32-byte
// chunks of unsigned levels (q8_k element order, except iq4_xs: see
// Note [iq4_xs group pairs]), each meeting its 32 activation bytes in vpmaddubsw
// and then vpmaddwd against the chunk's i16 group scales (q2_k: see below):
//   dot = d * d_x * sum_chunks(...) - dmin * d_x * sum_g m_g * bsum_g
// with the i32 sums and the f32 steps per super-block as in Note [AVX2 k-quant
// tail].
//
// Note [AVX2 k-quant chunks]
// The decode step spends nothing but unpacking per weight byte, so every chunk
// is kept to a few single-uop instructions and nothing per chunk goes through
// the cross-lane shuffle port:
//   - Group scales are decoded once per super-block into an i16 vector; a chunk's
//     scale vector (first 16 bytes' group, last 16 bytes' group) is one vpshufb
//     of that vector with both 128-bit lanes made equal once per super-block
//     (q3_k: with its lanes holding the even and the odd groups, no copies).
//   - q2_k / q3_k: the levels of bits 2-3 of a qs byte stay in place (levels
//     times 4), so one shift of a 32-byte load serves four chunks. q3_k scales
//     the other chunks by 4 instead and takes the 1 / 4 at the end (kRowFactor);
//     q2_k's vpshufb tables (below) are indexed by either position. q5_k moves
//     its high level bit to its place with one shift and one mask; q3_k takes
//     the high bits of chunks 4h .. 4h + 3 from nibble h of hmask (masked once
//     per super-block) through one constant vpshufb table per chunk
//     (kQ3HighBit), one instruction where a shift and a mask were.
//   - q2_k: levels (0-3) times scales (0-15) fit a byte, so per pair of chunks a
//     vpshufb table per super-block (entries 0-3: levels times the scale of the
//     chunk with levels in bits 0-1; entries 4, 8, 12: levels times the other
//     chunk's) turns levels into scaled levels, two chunks' vpmaddubsw sums add
//     in i16 (at most 2 * 2 * 45 * 127) and one vpmaddwd by ones widens them.
//   - The level offsets of q3_k (q - 4) and q6_k (q - 32) join the same i32 sum
//     through q8_k's group sums (coef = -offset * scale); the mins of q2_k /
//     q4_k / q5_k, with their own f16 scale, meet the group sums in a second
//     i32 vector (Note [AVX2 k-quant tail]).
// Every i32 sum is exact (|x| <= 127), so decode and prefill tiles, which run
// this same sequence per output element, give identical bytes.
//
// Note [AVX2 k-quant tail]
// Per super-block and output, the i32 sums meet the f16 scale(s) and the
// activation scale once. That tail took about a third of q2_k's decode
// instructions: two scalar f16 conversions (each a word insert and a
// conversion), scalar products, two broadcasts, and two conversions and two
// multiply-adds for the sums and the mins. Now:
//   - The weight scales are converted as vectors: q2_k / q4_k / q5_k broadcast
//     the 32 bits holding d and dmin, so one vcvtph2ps puts d in the even lanes
//     and dmin in the odd ones; the others broadcast d's 16 bits. One multiply
//     by the activation scale (broadcast from memory) gives the lane factors.
//   - With mins, the two i32 vectors (sums, mins against the group sums) fold
//     into one by two in-lane unpacks and an add (fold_pairs): the sums' pairs
//     in the even lanes, the mins' in the odd ones, so one conversion and one
//     multiply-add serve both. The mins' minus sign is in the group sums,
//     negated once per call (negate_bsums).
//   - q3_k's 1 / 4 (levels or scales times 4) multiplies each output once at
//     the end (kRowFactor), exact as a power of two.
// A folded lane sums the products of 64 elements, below 2^24 in magnitude for
// every format (the largest, q5_k: 64 * 31 * 63 * 127), so the conversions stay
// exact.
//
// Measured with one thread in cache (QuantDotInCache, CPU time, on an Ice Lake
// server shared with other work; best of three rounds of 20 runs, base and new
// binaries alternated), with this tail, q3_k's scale layout and high-bit tables
// and row_is_finite_avx2 (about 5% of those runs before): q2_k 9.1 -> 10.6 GB/s,
// q3_k 9.3 -> 10.2, and through the shared tail q4_k 15.3 -> 16.9, q5_k 14.5 ->
// 16.0, q6_k 18.3 -> 19.1, iq4_xs 12.0 -> 13.0. q2_k's chunk work (mask,
// table vpshufb, vpmaddubsw; per pair an i16 add, vpmaddwd and i32 add; a
// vpshufb and vpmullw per table) is now most of its about 56 vector
// instructions per super-block, which keep ports 0, 1 and 5 busy. Prefill
// (QuantMatmul, one thread) did not slow: q2_k 112 -> 122 GFLOP/s, q3_k 90 ->
// 90. Four weight rows per decode tile instead of one measured the same in
// cache (within the noise of the shared machine), so the decode tile keeps one.

struct KHeader {
  __m256i coef;  // 16 x i16, against q8_k's group sums (negated for the mins)
  // The f16 scale in every lane; q2_k / q4_k / q5_k: the scale in the even lanes,
  // the mins' scale in the odd ones.
  __m256 scale;
};

// The two f16 values of the 32 bits at p in alternating f32 lanes.
inline __m256 f16_pair_lanes(const std::uint8_t* p) {
  return _mm256_cvtph_ps(_mm_castps_si128(_mm_broadcast_ss(reinterpret_cast<const float*>(p))));
}
// The f16 value at p in every f32 lane.
inline __m256 f16_splat(const std::uint8_t* p) {
  return _mm256_cvtph_ps(_mm_set1_epi16(quant::load_i16(p)));
}

// Formats whose level offset goes through the group sums into the integer sum.
template <DType W>
constexpr bool kFoldedOffset = W == DType::kQ3_K || W == DType::kQ6_K;
template <DType W>
constexpr bool kMinTerm = W == DType::kQ2_K || W == DType::kQ4_K || W == DType::kQ5_K;
// A factor applied to each output once: q3_k's 1 / 4 against levels or scales
// times 4.
template <DType W>
constexpr float kRowFactor = W == DType::kQ3_K ? 0.25f : 1.0f;

// The group sums of `blocks` q8_k blocks negated, for the formats whose mins
// enter negated (kMinTerm). |sum| <= 16 * 127, so none overflows.
void negate_bsums(BlockQ8_K* x, std::int64_t blocks) {
  for (std::int64_t i = 0; i < blocks; ++i) {
    auto* p = reinterpret_cast<__m256i*>(x[i].bsums);
    _mm256_storeu_si256(p, _mm256_sub_epi16(_mm256_setzero_si256(), _mm256_loadu_si256(p)));
  }
}

// The group sums of `blocks` q8_k blocks in the order of q3_k's coefficients
// (its scale vector in unpack_k): slot 8l + k holds group 2k + l's sum times -4
// where the scale is times 4 (even k), else times -16, so each product is -16
// (the offset 4 against levels times 4) times scale times sum. |16 * sum| <=
// 16 * 16 * 127 fits an i16.
void q3k_bsums(BlockQ8_K* x, std::int64_t blocks) {
  for (std::int64_t i = 0; i < blocks; ++i) {
    std::int16_t sums[16];
    for (int g = 0; g < 16; ++g) sums[g] = quant::load_i16(x[i].bsums + 2 * g);
    for (int slot = 0; slot < 16; ++slot) {
      const int k = slot % 8;
      const int g = 2 * k + slot / 8;
      quant::store_i16(x[i].bsums + 2 * slot,
                       static_cast<std::int16_t>((k % 2 == 0 ? -4 : -16) * sums[g]));
    }
  }
}

// Eight bytes, each twice: the eight 32-element groups' values as 16 x i16, one
// per 16-element group of q8_k's sums.
inline __m256i bytes_twice(std::uint64_t eight) {
  const __m128i v = _mm_cvtsi64_si128(static_cast<long long>(eight));
  return _mm256_cvtepu8_epi16(_mm_unpacklo_epi8(v, v));
}

// Both 128-bit lanes set to lane `lane` of v.
template <int kLane>
inline __m256i lane_twice(__m256i v) {
  return _mm256_permute2x128_si256(v, v, kLane == 0 ? 0x00 : 0x11);
}

// From v (i16, both lanes equal): word w0 in every word of the first lane,
// word w1 in every word of the second.
inline __m256i pick_words(__m256i v, int w0, int w1) {
  const auto pair = [](int w) { return static_cast<short>((2 * w + 1) << 8 | 2 * w); };
  const short a = pair(w0);
  const short b = pair(w1);
  // One 256-bit constant (GCC does not fold a lane insert of two 128-bit ones).
  return _mm256_shuffle_epi8(v, _mm256_setr_epi16(a, a, a, a, a, a, a, a, b, b, b, b, b, b, b, b));
}

// Bit `from` of each byte of v moved to bit `to` (both at most 7), others zero.
inline __m256i move_bit(__m256i v, int from, int to) {
  const __m256i m = _mm256_set1_epi8(static_cast<char>(1 << to));
  if (from < to) return _mm256_and_si256(_mm256_slli_epi16(v, to - from), m);
  if (from > to) return _mm256_and_si256(_mm256_srli_epi16(v, from - to), m);
  return _mm256_and_si256(v, m);
}

// q2_k's table for chunks (h, 2 t) and (h, 2 t + 1), built from the 16 scales
// (both lanes) as i16 words, then multiplied into bytes: word 0 = s_a * 256
// (entries 0, 1: 0, s_a), word 1 = s_a * (2 + 3 * 256) (entries 2, 3), words 2,
// 4, 6 = s_b, 2 s_b, 3 s_b (entries 4, 8, 12), where in lane l, a = 8h + 4t + l
// and b = a + 2 are the groups of the two chunks' bytes 16l .. 16l + 15.
inline __m256i q2_table(__m256i scales, int h, int t) {
  const auto w = [](int g) { return static_cast<short>(0x8000 | g); };
  const short a0 = w(8 * h + 4 * t);
  const short b0 = w(8 * h + 4 * t + 2);
  const short a1 = w(8 * h + 4 * t + 1);
  const short b1 = w(8 * h + 4 * t + 3);
  const __m256i spread =
      _mm256_setr_epi16(a0, a0, b0, b0, b0, b0, b0, b0, a1, a1, b1, b1, b1, b1, b1, b1);
  const __m256i mult =
      _mm256_setr_epi16(256, 2 + 3 * 256, 1, 0, 2, 0, 3, 0, 256, 2 + 3 * 256, 1, 0, 2, 0, 3, 0);
  return _mm256_mullo_epi16(_mm256_shuffle_epi8(scales, spread), mult);
}

// q3_k's high level bits through vpshufb: chunk 4h + r takes bit 4h + r of
// hmask, which is bit r of nibble h; entry n of table r is bit r of n moved to
// bit 2 (even r: levels in bits 0-1) or 4 (odd r: levels in bits 2-3). One
// vpshufb per chunk replaces a shift and a mask.
constexpr std::array<std::array<std::uint8_t, 32>, 4> kQ3HighBit = [] {
  std::array<std::array<std::uint8_t, 32>, 4> t{};
  for (int r = 0; r < 4; ++r) {
    for (int i = 0; i < 32; ++i) {
      t[static_cast<std::size_t>(r)][static_cast<std::size_t>(i)] =
          static_cast<std::uint8_t>((i % 16 >> r & 1) << (r % 2 == 0 ? 2 : 4));
    }
  }
  return t;
}();

// Unpacks one super-block: fills the header and hands each 32-byte chunk to
// chunk(index, levels, signs, i16 scales) as soon as it is decoded, so the levels
// stay in registers (signs matter only for iq4_xs, whose levels are signed);
// q2_k hands pairs of scaled-level chunks to pair(index, levels, index, levels).
template <DType W, typename Chunk, typename Pair>
inline void unpack_k(const std::uint8_t* wb, KHeader& k, Chunk&& chunk, Pair&& pair) {
  const __m256i none = _mm256_setzero_si256();
  const __m256i low4 = _mm256_set1_epi8(0x0f);
  if constexpr (W == DType::kQ4_K || W == DType::kQ5_K) {
    // Same leading fields in both layouts: d, dmin, 12 scale bytes.
    const std::uint8_t* scales = wb + 4;
    const std::uint8_t* qs = W == DType::kQ4_K ? wb + 16 : wb + 48;
    k.scale = f16_pair_lanes(wb);
    // Groups 0-3 keep their 6-bit scale / min in bytes 0-3 / 4-7; groups 4-7 take
    // a nibble of bytes 8-11 and the top two bits of bytes 0-3 / 4-7. Decoded four
    // groups at a time in 32-bit words (bytes stay in their lanes).
    const std::uint32_t u0 = quant::load_u32(scales);
    const std::uint32_t u1 = quant::load_u32(scales + 4);
    const std::uint32_t u2 = quant::load_u32(scales + 8);
    const std::uint64_t sc =
        (u0 & 0x3f3f3f3fu) |
        static_cast<std::uint64_t>((u2 & 0x0f0f0f0fu) | ((u0 >> 2) & 0x30303030u)) << 32;
    const std::uint64_t mins =
        (u1 & 0x3f3f3f3fu) |
        static_cast<std::uint64_t>(((u2 >> 4) & 0x0f0f0f0fu) | ((u1 >> 2) & 0x30303030u)) << 32;
    k.coef = bytes_twice(mins);
    // Scale of chunk j (group j) in word j of both lanes.
    const __m256i s = _mm256_broadcastsi128_si256(
        _mm_cvtepu8_epi16(_mm_cvtsi64_si128(static_cast<long long>(sc))));
    const __m256i hbits = W == DType::kQ5_K ? load256(wb + 16) : _mm256_setzero_si256();
#pragma GCC unroll 8
    for (int c = 0; c < 4; ++c) {
      const __m256i q = load256(qs + 32 * c);
      __m256i lo = _mm256_and_si256(q, low4);
      __m256i hi = _mm256_and_si256(_mm256_srli_epi16(q, 4), low4);
      if constexpr (W == DType::kQ5_K) {
        lo = _mm256_or_si256(lo, move_bit(hbits, 2 * c, 4));
        hi = _mm256_or_si256(hi, move_bit(hbits, 2 * c + 1, 4));
      }
      chunk(2 * c, lo, none, pick_words(s, 2 * c, 2 * c));
      chunk(2 * c + 1, hi, none, pick_words(s, 2 * c + 1, 2 * c + 1));
    }
  } else if constexpr (W == DType::kQ6_K) {
    const auto& b = *reinterpret_cast<const quant::BlockQ6_K*>(wb);
    const __m256i low2 = _mm256_set1_epi8(0x03);
    k.scale = f16_splat(b.d);
    const __m256i s =
        _mm256_cvtepi8_epi16(_mm_loadu_si128(reinterpret_cast<const __m128i*>(b.scales)));
    k.coef = _mm256_sub_epi16(_mm256_setzero_si256(), _mm256_slli_epi16(s, 5));
    const __m256i halves[2] = {lane_twice<0>(s), lane_twice<1>(s)};
#pragma GCC unroll 8
    for (int h = 0; h < 2; ++h) {
      const __m256i qh = load256(b.qh + 32 * h);
      const __m256i ql0 = load256(b.ql + 64 * h);
      const __m256i ql1 = load256(b.ql + 64 * h + 32);
      const __m256i lows[4] = {_mm256_and_si256(ql0, low4), _mm256_and_si256(ql1, low4),
                               _mm256_and_si256(_mm256_srli_epi16(ql0, 4), low4),
                               _mm256_and_si256(_mm256_srli_epi16(ql1, 4), low4)};
      const __m256i highs[4] = {_mm256_slli_epi16(_mm256_and_si256(qh, low2), 4),
                                _mm256_slli_epi16(_mm256_and_si256(qh, _mm256_set1_epi8(0x0c)), 2),
                                _mm256_and_si256(qh, _mm256_set1_epi8(0x30)),
                                _mm256_and_si256(_mm256_srli_epi16(qh, 2), _mm256_set1_epi8(0x30))};
#pragma GCC unroll 8
      for (int r = 0; r < 4; ++r) {
        chunk(4 * h + r, _mm256_or_si256(lows[r], highs[r]), none,
              pick_words(halves[h], 2 * r, 2 * r + 1));
      }
    }
  } else if constexpr (W == DType::kQ3_K) {
    const auto& b = *reinterpret_cast<const quant::BlockQ3_K*>(wb);
    // Levels times 4 in chunks 4h + 1 and 4h + 3, scales times 4 in the others
    // (kRowFactor takes the 1 / 4).
    k.scale = f16_splat(b.d);
    // The 6-bit scales (stored + 32) of the 12 bytes at b.scales, loaded from two
    // bytes before them so as to stay in the block: low nibbles from bytes 0-7
    // (groups 0-7 the low, 8-15 the high nibble), top two bits from bytes 8-11
    // (group g: byte g % 4, bits 2 (g / 4) and 2 (g / 4) + 1, moved to bits 4-5;
    // a shift by 32 gives zero).
    const __m128i v = _mm_loadu_si128(reinterpret_cast<const __m128i*>(b.scales - 2));
    const __m128i nib = _mm_srlv_epi64(
        _mm_shuffle_epi8(v, _mm_setr_epi8(2, 3, 4, 5, 6, 7, 8, 9, 2, 3, 4, 5, 6, 7, 8, 9)),
        _mm_set_epi64x(4, 0));
    const __m128i t = _mm_shuffle_epi8(
        v, _mm_setr_epi8(10, 11, 12, 13, 10, 11, 12, 13, 10, 11, 12, 13, 10, 11, 12, 13));
    const __m128i top = _mm_or_si128(_mm_sllv_epi32(t, _mm_setr_epi32(4, 2, 0, 32)),
                                     _mm_srlv_epi32(t, _mm_setr_epi32(32, 32, 32, 2)));
    const __m128i g = _mm_or_si128(_mm_and_si128(nib, _mm_set1_epi8(0x0f)),
                                   _mm_and_si128(top, _mm_set1_epi8(0x30)));
    // Chunk 4h + r meets group 8h + 2r in its first 16 bytes, 8h + 2r + 1 in the
    // rest. So word k of the scales' first lane holds group 2k, of the second
    // group 2k + 1, times 4 for even k (even r), and chunk 4h + r's scale vector
    // is word 4h + r of both lanes: one vpshufb, no lane copies. The same vector
    // is the coefficients against the group sums, which q3k_bsums lays out to
    // match once per call.
    const __m128i order = _mm_setr_epi8(0, 2, 4, 6, 8, 10, 12, 14, 1, 3, 5, 7, 9, 11, 13, 15);
    const __m256i s = _mm256_mullo_epi16(
        _mm256_cvtepi8_epi16(_mm_shuffle_epi8(_mm_sub_epi8(g, _mm_set1_epi8(32)), order)),
        _mm256_setr_epi16(4, 1, 4, 1, 4, 1, 4, 1, 4, 1, 4, 1, 4, 1, 4, 1));
    k.coef = s;
    const __m256i hm = load256(b.hmask);
    const __m256i hm_nibbles[2] = {_mm256_and_si256(hm, low4),
                                   _mm256_and_si256(_mm256_srli_epi16(hm, 4), low4)};
    const __m256i low2 = _mm256_set1_epi8(0x03);
    const __m256i high2 = _mm256_set1_epi8(0x0c);
#pragma GCC unroll 8
    for (int h = 0; h < 2; ++h) {
      const __m256i qs = load256(b.qs + 32 * h);
      const __m256i qs4 = _mm256_srli_epi16(qs, 4);
      const __m256i lows[4] = {_mm256_and_si256(qs, low2), _mm256_and_si256(qs, high2),
                               _mm256_and_si256(qs4, low2), _mm256_and_si256(qs4, high2)};
#pragma GCC unroll 8
      for (int r = 0; r < 4; ++r) {
        const __m256i levels = _mm256_or_si256(
            lows[r], _mm256_shuffle_epi8(load256(kQ3HighBit[r].data()), hm_nibbles[h]));
        chunk(4 * h + r, levels, none, pick_words(s, 4 * h + r, 4 * h + r));
      }
    }
  } else if constexpr (W == DType::kQ2_K) {
    const auto& b = *reinterpret_cast<const quant::BlockQ2_K*>(wb);
    k.scale = f16_pair_lanes(b.d);
    const __m128i raw = _mm_loadu_si128(reinterpret_cast<const __m128i*>(b.scales));
    // The mins: each byte's high nibble, shifted down once widened to i16.
    k.coef = _mm256_srli_epi16(_mm256_cvtepu8_epi16(raw), 4);
    const __m256i scales = _mm256_and_si256(_mm256_broadcastsi128_si256(raw), low4);
    const __m256i low2 = _mm256_set1_epi8(0x03);
    const __m256i high2 = _mm256_set1_epi8(0x0c);
#pragma GCC unroll 8
    for (int h = 0; h < 2; ++h) {
      const __m256i qs = load256(b.qs + 32 * h);
      const __m256i qs4 = _mm256_srli_epi16(qs, 4);
      const __m256i t0 = q2_table(scales, h, 0);
      const __m256i t1 = q2_table(scales, h, 1);
      pair(4 * h, _mm256_shuffle_epi8(t0, _mm256_and_si256(qs, low2)), 4 * h + 1,
           _mm256_shuffle_epi8(t0, _mm256_and_si256(qs, high2)));
      pair(4 * h + 2, _mm256_shuffle_epi8(t1, _mm256_and_si256(qs4, low2)), 4 * h + 3,
           _mm256_shuffle_epi8(t1, _mm256_and_si256(qs4, high2)));
    }
  } else {
    static_assert(W == DType::kIQ4_XS);
    const auto& b = *reinterpret_cast<const quant::BlockIQ4_XS*>(wb);
    k.scale = f16_splat(b.d);
    k.coef = _mm256_setzero_si256();
    // Group g's scale in i32 lane g: low four bits from scales_l, top two from
    // scales_h, minus 32; as i16 its value is word 2g.
    const __m256i g = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
    const __m256i lo = _mm256_and_si256(
        _mm256_srlv_epi32(_mm256_set1_epi32(static_cast<int>(quant::load_u32(b.scales_l))),
                          _mm256_slli_epi32(g, 2)),
        _mm256_set1_epi32(0x0f));
    const __m256i hi =
        _mm256_and_si256(_mm256_srlv_epi32(_mm256_set1_epi32(b.scales_h[0] | b.scales_h[1] << 8),
                                           _mm256_add_epi32(g, g)),
                         _mm256_set1_epi32(0x03));
    const __m256i s =
        _mm256_sub_epi32(_mm256_or_si256(lo, _mm256_slli_epi32(hi, 4)), _mm256_set1_epi32(32));
    const __m256i halves[2] = {lane_twice<0>(s), lane_twice<1>(s)};
    const __m128i t = _mm_loadu_si128(reinterpret_cast<const __m128i*>(quant::kIQ4NLValues));
    const __m256i table = _mm256_set_m128i(t, t);
    const __m256i mag_table = _mm256_abs_epi8(table);
#pragma GCC unroll 8
    for (int p = 0; p < 4; ++p) {
      const __m256i q = load256(b.qs + 32 * p);
      const __m256i scales = pick_words(halves[p / 2], 2 * (2 * p % 4), 2 * ((2 * p + 1) % 4));
      const __m256i lo_idx = _mm256_and_si256(q, low4);
      const __m256i hi_idx = _mm256_and_si256(_mm256_srli_epi16(q, 4), low4);
      chunk(2 * p, _mm256_shuffle_epi8(mag_table, lo_idx), _mm256_shuffle_epi8(table, lo_idx),
            scales);
      chunk(2 * p + 1, _mm256_shuffle_epi8(mag_table, hi_idx), _mm256_shuffle_epi8(table, hi_idx),
            scales);
    }
  }
}

// Note [iq4_xs group pairs]
// An iq4_xs group keeps its 32 levels in 16 nibble bytes, so a 32-byte load holds
// groups g and g + 1: its low nibbles are elements 0-15 of both, its high nibbles
// elements 16-31. The q8_k activations are reordered once per call to match
// (iq4xs_pair_order: per 64 elements, the 16-byte runs 1 and 2 swap), so each
// load's nibbles meet 32 consecutive activation bytes without a lane insert.
void iq4xs_pair_order(BlockQ8_K* x, std::int64_t blocks) {
  for (std::int64_t i = 0; i < blocks; ++i) {
    for (int p = 0; p < quant::kQKK; p += 64) {
      std::int8_t* q = x[i].qs + p;
      const __m128i a = _mm_loadu_si128(reinterpret_cast<const __m128i*>(q + 16));
      const __m128i b = _mm_loadu_si128(reinterpret_cast<const __m128i*>(q + 32));
      _mm_storeu_si128(reinterpret_cast<__m128i*>(q + 16), b);
      _mm_storeu_si128(reinterpret_cast<__m128i*>(q + 32), a);
    }
  }
}

// out[c * n + r] as q8_0_tile. The R weight rows are unpacked one after the
// other, each chunk meeting the C activation rows while in registers: the i32
// group sums of one super-block need C registers, the f32 accumulators (touched
// once per super-block) R * C more.
template <DType W, int R, int C, bool kAhead>
void k_tile(const std::uint8_t* w, std::int64_t w_stride, const std::uint8_t* x,
            std::int64_t x_stride, std::int64_t blocks, float* out, std::int64_t n) {
  constexpr std::int64_t kWBytes = block_bytes(W);
  constexpr std::int64_t kXBytes = sizeof(BlockQ8_K);
  constexpr bool kSigned = W == DType::kIQ4_XS;
  __m256 acc[R][C];
#pragma GCC unroll 8
  for (int r = 0; r < R; ++r) {
#pragma GCC unroll 8
    for (int c = 0; c < C; ++c) acc[r][c] = _mm256_setzero_ps();
  }
  for (std::int64_t i = 0; i < blocks; ++i) {
    const BlockQ8_K* xb[C];
#pragma GCC unroll 8
    for (int c = 0; c < C; ++c) {
      xb[c] = reinterpret_cast<const BlockQ8_K*>(x + c * x_stride + i * kXBytes);
    }
#pragma GCC unroll 8
    for (int r = 0; r < R; ++r) {
      const std::uint8_t* wb = w + r * w_stride + i * kWBytes;
      prefetch_ahead<kAhead>(wb + blocks * kWBytes, kWBytes);  // the next row
      __m256i sumi[C];
#pragma GCC unroll 8
      for (int c = 0; c < C; ++c) sumi[c] = _mm256_setzero_si256();
      KHeader k;
      unpack_k<W>(
          wb, k,
          [&](int chunk, __m256i mag, __m256i sign, __m256i scales) {
#pragma GCC unroll 8
            for (int c = 0; c < C; ++c) {
              __m256i xq = load256(xb[c]->qs + 32 * chunk);
              if constexpr (kSigned) xq = _mm256_sign_epi8(xq, sign);
              const __m256i p = _mm256_maddubs_epi16(mag, xq);
              sumi[c] = _mm256_add_epi32(sumi[c], _mm256_madd_epi16(p, scales));
            }
          },
          [&](int chunk0, __m256i scaled0, int chunk1, __m256i scaled1) {
#pragma GCC unroll 8
            for (int c = 0; c < C; ++c) {
              const __m256i p =
                  _mm256_add_epi16(_mm256_maddubs_epi16(scaled0, load256(xb[c]->qs + 32 * chunk0)),
                                   _mm256_maddubs_epi16(scaled1, load256(xb[c]->qs + 32 * chunk1)));
              sumi[c] = _mm256_add_epi32(sumi[c], sum_i16_to_i32(p));
            }
          });
#pragma GCC unroll 8
      for (int c = 0; c < C; ++c) {
        const __m256 f =
            _mm256_mul_ps(k.scale, _mm256_broadcast_ss(reinterpret_cast<const float*>(xb[c]->d)));
        const __m256i bsum_dot = _mm256_madd_epi16(load256(xb[c]->bsums), k.coef);
        if constexpr (kFoldedOffset<W>) {
          sumi[c] = _mm256_add_epi32(sumi[c], bsum_dot);
        } else if constexpr (kMinTerm<W>) {
          sumi[c] = fold_pairs(sumi[c], bsum_dot);
        }
        acc[r][c] = _mm256_fmadd_ps(f, _mm256_cvtepi32_ps(sumi[c]), acc[r][c]);
      }
    }
  }
#pragma GCC unroll 8
  for (int r = 0; r < R; ++r) {
#pragma GCC unroll 8
    for (int c = 0; c < C; ++c) out[c * n + r] = kRowFactor<W> * hsum(acc[r][c]);
  }
}

// ---------------------------------------------------------------------------
// Dispatch.

// A tile (QuantTileFn) of R weight rows against C quantized activation rows.
// kAhead: prefetch the next tile's weights (decode tiles; Note [Decode prefetch]).
template <DType W, int R, int C, bool kAhead = false>
void tile(const std::uint8_t* w, std::int64_t w_stride, const std::uint8_t* x,
          std::int64_t x_stride, std::int64_t blocks, float* out, std::int64_t n) {
  k_tile<W, R, C, kAhead>(w, w_stride, x, x_stride, blocks, out, n);
}

// Decode: one weight row per tile, as the tiles sum a super-block in integers
// first.
//
// Prefill: 1 x 8 (eight i32 group sums in registers, the f32 accumulators touched
// once per super-block), then 1 x 4 for a leftover group of four activation rows.
// Other activation rows go through the decode tiles. Measured single-threaded on
// 512 x 4096 x 14336 against other shapes: 1 x 8 and 1 x 6 were 10-25% faster
// than 1 x 4 and 2 x 4. 64 weight rows per L2 block were faster than 16.
template <DType W>
QuantTiles tiles() {
  return {nullptr, &tile<W, 1, 1, true>, &tile<W, 1, 8>, &tile<W, 1, 8>, &tile<W, 1, 4>, 1, 8};
}

// Prepares activation rows (QuantSimdFormat::prepare_rows): q8_k blocks, with the
// group sums (and iq4_xs's levels) laid out as the format's tiles read them.
void prepare_rows(DType w, const QuantMatmulArgs& args, std::int64_t begin, std::int64_t end,
                  std::uint8_t* x, std::int64_t x_stride, char* non_finite) {
  for (std::int64_t r = begin; r < end; ++r) {
    const float* row = args.a + r * args.k;
    non_finite[r] = row_is_finite_avx2(row, args.k) ? 0 : 1;
    std::uint8_t* dst = x + r * x_stride;
    quantize_row_q8_k_avx2(row, dst, args.k);
    if (w == DType::kIQ4_XS) {
      iq4xs_pair_order(reinterpret_cast<BlockQ8_K*>(dst), args.k / quant::kQKK);
    }
    if (w == DType::kQ2_K || w == DType::kQ4_K || w == DType::kQ5_K) {
      negate_bsums(reinterpret_cast<BlockQ8_K*>(dst), args.k / quant::kQKK);
    }
    if (w == DType::kQ3_K) q3k_bsums(reinterpret_cast<BlockQ8_K*>(dst), args.k / quant::kQKK);
  }
}

// A prepared activation row: its q8_k blocks.
template <DType W>
QuantSimdFormat format() {
  return {.tiles = tiles<W>(),
          .act_elems = quant::kQKK,
          .act_bytes = sizeof(BlockQ8_K),
          .prepare_rows = &prepare_rows,
          .row_grain = kRowGrain,
          .tile_rows = kTileRows};
}

}  // namespace

QuantSimdFormat quant_format_avx2_kquant(DType w) {
  switch (w) {
    case DType::kQ2_K: return format<DType::kQ2_K>();
    case DType::kQ3_K: return format<DType::kQ3_K>();
    case DType::kQ4_K: return format<DType::kQ4_K>();
    case DType::kQ5_K: return format<DType::kQ5_K>();
    case DType::kQ6_K: return format<DType::kQ6_K>();
    case DType::kIQ4_XS: return format<DType::kIQ4_XS>();
    default: return {};
  }
}

}  // namespace switchyard::cpu
