// AVX-512 (F/BW/VL + VNNI) matmul tiles for the 256-element super-block formats
// (the k-quants q2_k .. q6_k, and iq4_xs) against q8_k activations. Same structure
// and precision as the AVX2 sibling (activations quantized once per row with the
// reference rounding, integer dot products per super-block, f32 accumulation), at
// twice the width and with the VNNI fused multiply-adds. The shared skeleton
// (quant_matmul_simd.h) prepares the activation rows through prepare_rows here and
// walks the tiles over the outputs.
//
// The activations are prepared once per row in the order the weight bits fall out
// of full-width loads (Note [k-quant decode order], in
// quant_matmul_kquant_avx512vnni_inl.h with the per-format decoding), so a
// super-block is four vectors of 64 levels with no cross-lane moves. q4_k-q6_k:
// vpmaddubsw to i16 pairs, then vpdpwssd against the chunk's i16 group scales;
// q3_k: vpdpbusd per vector, two vectors' dwords packed to words against both
// groups' scales (vpdpwssd). q2_k: levels times scales fit a byte, so a
// per-super-block vpshufb table yields scaled levels for vpdpbusd. iq4_xs: levels
// + 128 through vpdpbusd from a start of -128 times the lane's activation sum, one
// group per 128-bit lane, lanes times group scales (vpmulld). Level offsets (q3_k,
// q6_k) join the i32 sum through the group sums; mins (q2_k, q4_k, q5_k) are a
// second f32 term (q2_k: all rows of a tile in one vector).
//
// Register tiles: matvec runs four weight rows at once (independent accumulator
// chains); prefill runs 3 (q2_k: 2) weight rows x 4 activation rows, so each
// decoded vector serves four activation rows (see tiles()). Every output element
// is computed by the same sequence of operations whichever tile computes it, so
// results are identical at any thread count and a matmul's rows equal the matvecs
// of its activation rows.
//
#include <immintrin.h>

#include <array>
#include <cmath>
#include <cstring>
#include <type_traits>
#include <utility>
#include <vector>

#include "backends/cpu/avx512_diagnostics.h"
#include "backends/cpu/quant/quant_act_avx512_inl.h"
#include "backends/cpu/quant/quant_matmul_avx512vnni_inl.h"
#include "backends/cpu/quant/quant_matmul_kquant_avx512vnni_inl.h"
#include "backends/cpu/quant/quant_matmul_simd.h"
#include "switchyard/quant_blocks.h"

namespace switchyard::cpu {
namespace {

using quant::BlockQ8_K;

// Quantizes one activation row to q8_k and lays it out as KAct super-blocks at out.
// Out of line: prepare_rows calls it once per row, and inlined there it would be
// compiled anew for no gain.
[[gnu::noinline]] void prepare_k(DType w, const float* row, std::int64_t k,
                                 std::vector<std::uint8_t>& tmp, KAct* out) {
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
    case DType::kIQ4_XS: prepare(k_order<DType::kIQ4_XS>, 1); break;
    // Only formats with tiles here (quant_format_avx512_kquant) reach this.
    default: SWITCHYARD_CHECK_MSG(false, "prepare_k: a format without AVX-512 k-quant tiles");
  }
}

// pairs with dword r + 1 replaced by word(r + 1) for each r: the blend mask is an
// immediate, so the rows unfold at compile time.
template <typename Word, int... r>
inline __m128i blend_words(__m128i pairs, [[maybe_unused]] Word word,
                           std::integer_sequence<int, r...>) {
  ((pairs = _mm_blend_epi32(pairs, word(r + 1), 1 << (r + 1))), ...);
  return pairs;
}

template <DType W, int R, int C, bool kAhead, unsigned kExt>
void k_tile(const std::uint8_t* w, std::int64_t w_stride, const KAct* x, std::int64_t x_stride,
            std::int64_t blocks, float* out, std::int64_t n) {
  constexpr std::int64_t kB = block_bytes(W);
  constexpr bool kTableScaled = W == DType::kQ2_K || W == DType::kIQ4_XS;
  constexpr bool kFoldedOffset = W == DType::kQ3_K || W == DType::kQ6_K;
  constexpr bool kMinLanes = W == DType::kQ2_K;
  constexpr bool kGfni = (kExt & kExtGfni) != 0;
  // q3_k with both extensions: Note [q3_k with GFNI and VBMI].
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
    pairs = blend_words(pairs, scale_word, std::make_integer_sequence<int, R - 1>{});
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
  k_tile<W, R, C, kAhead, kExt>(w, w_stride, reinterpret_cast<const KAct*>(x),
                                x_stride / static_cast<std::int64_t>(sizeof(KAct)), blocks, out, n);
}

// Decode: four weight rows per tile. Prefill: 3 (q2_k: 2) x 4 tiles, with 1 x 4
// for leftover weight rows and the decode tiles for leftover activation rows. The
// k-quant tiles hold an i32 and an f32 accumulator per output, so they take three
// weight rows (24 of the 32 vector registers) where the 32-element ones take four
// (measured: 3 x 4 about 6% faster than 2 x 4 for the k-quants). q2_k adds a
// min-term accumulator per activation row (Note [q2_k min lanes]) and takes two:
// its 3 x 4 tile spilled, and 2 x 4 was 15-20% faster (two threads, five
// alternated runs).
template <DType W, unsigned kExt = 0>
QuantTiles tiles() {
  constexpr int kRows = W == DType::kQ2_K ? 2 : 3;
  return {.rows4 = &tile<W, 4, 1, true, kExt>,
          .rows1 = &tile<W, 1, 1, true, kExt>,
          .prefill = &tile<W, kRows, 4, false, kExt>,
          .cols = &tile<W, 1, 4, false, kExt>,
          .prefill_rows = kRows,
          .prefill_cols = 4};
}

// Prepares activation rows (QuantSimdFormat::prepare_rows): each quantized to
// q8_k and laid out as KAct super-blocks by prepare_k.
void prepare_rows(DType w, const QuantMatmulArgs& args, std::int64_t begin, std::int64_t end,
                  std::uint8_t* x, std::int64_t x_stride, char* non_finite) {
  std::vector<std::uint8_t> tmp;
  for (std::int64_t r = begin; r < end; ++r) {
    const float* row = args.a + r * args.k;
    non_finite[r] = row_is_finite(row, args.k) ? 0 : 1;
    prepare_k(w, row, args.k, tmp, reinterpret_cast<KAct*>(x + r * x_stride));
  }
}

// A prepared activation row: one KAct per super-block (64-byte aligned, so every
// row stays aligned).
template <DType W, unsigned kExt = 0>
QuantSimdFormat format() {
  return {.tiles = tiles<W, kExt>(),
          .act_elems = quant::kQKK,
          .act_bytes = sizeof(KAct),
          .prepare_rows = &prepare_rows,
          .row_grain = kRowGrain,
          .tile_rows = kTileRows};
}

}  // namespace

QuantSimdFormat quant_format_avx512_kquant(DType w, Avx512QuantExtras extras) {
  switch (w) {
    case DType::kQ2_K:
      return extras.gfni ? format<DType::kQ2_K, kExtGfni>() : format<DType::kQ2_K>();
    case DType::kQ3_K:
      return extras.gfni && extras.avx512_vbmi ? format<DType::kQ3_K, kExtGfni | kExtVbmi>()
                                               : format<DType::kQ3_K>();
    case DType::kQ4_K: return format<DType::kQ4_K>();
    case DType::kQ5_K: return format<DType::kQ5_K>();
    case DType::kQ6_K: return format<DType::kQ6_K>();
    case DType::kIQ4_XS: return format<DType::kIQ4_XS>();
    default: return {};
  }
}

}  // namespace switchyard::cpu
