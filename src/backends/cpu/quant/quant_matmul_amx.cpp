// The AMX-INT8 sibling's ISA half (quant_matmul_amx.h): each weight format
// unpacked to signed bytes with per-group scales, and the tile loop. Compiled
// with AVX-512 and AMX-TILE / AMX-INT8; called only where cpu_features().amx_int8
// (which includes the kernel's grant of the tile state).
#include "backends/cpu/quant/quant_matmul_amx.h"

#include <immintrin.h>

#include <algorithm>
#include <cmath>
#include <cstring>

#include "backends/cpu/avx512_diagnostics.h"
#include "backends/cpu/quant/amx_tile_config.h"
#include "backends/cpu/quant/quant_act_avx512_inl.h"
#include "switchyard/quant_blocks.h"

namespace switchyard::cpu {
namespace {

using namespace quant;  // NOLINT(google-build-using-namespace): the block layouts

// Row r's output of one format's unpacking, in either AmxPanelLayout: where
// its groups' bytes, scales and offsets go.
struct RowOut {
  std::int8_t* q;       // group 0's bytes
  float* scale;         // group 0's scale
  float* offset;        // group 0's offset
  std::int64_t group;   // elements per group: 16 or 32
  std::int64_t q_step;  // bytes from one group's bytes to the next's
  std::int64_t s_step;  // floats from one group's scale (and offset) to the next's

  // Elements e..e+31 (e a multiple of 32) of the row.
  void put32(std::int64_t e, __m256i v) const {
    if (group == 32) {
      _mm256_storeu_si256(reinterpret_cast<__m256i*>(q + e / 32 * q_step), v);
      return;
    }
    std::int8_t* first = q + e / 16 * q_step;
    _mm_storeu_si128(reinterpret_cast<__m128i*>(first), _mm256_castsi256_si128(v));
    _mm_storeu_si128(reinterpret_cast<__m128i*>(first + q_step), _mm256_extracti128_si256(v, 1));
  }
  void set_scale(std::int64_t g, float value) const { scale[g * s_step] = value; }
  void set_offset(std::int64_t g, float value) const { offset[g * s_step] = value; }
};

// The 32-element formats: element j of a block is the low nibble of qs[j] for
// j < 16 and the high nibble of qs[j - 16] otherwise (quant_blocks.h). `decode`
// returns the block's 32 levels and sets the block's scale (and offset).
template <typename Block, typename Decode>
void unpack_block32(const std::uint8_t* row, std::int64_t blocks, const RowOut& out,
                    Decode decode) {
  const auto* b = reinterpret_cast<const Block*>(row);
  for (std::int64_t i = 0; i < blocks; ++i) out.put32(32 * i, decode(b[i], i));
}

// The 32 nibbles of a 32-element block's 16 bytes in element order: the low
// nibbles (elements 0-15), then the high ones (16-31).
inline __m256i block_nibbles(const std::uint8_t* qs) {
  const __m128i bytes = _mm_loadu_si128(reinterpret_cast<const __m128i*>(qs));
  const __m128i mask = _mm_set1_epi8(0xf);
  return _mm256_set_m128i(_mm_and_si128(_mm_srli_epi16(bytes, 4), mask),
                          _mm_and_si128(bytes, mask));
}

// Each nibble looked up in a 16-entry table of signed levels.
inline __m256i lookup_levels(__m256i nibbles, const std::int8_t (&table)[16]) {
  const __m256i levels =
      _mm256_broadcastsi128_si256(_mm_loadu_si128(reinterpret_cast<const __m128i*>(table)));
  return _mm256_shuffle_epi8(levels, nibbles);
}

// Bit e of the 32-bit word at p as 16 in byte e (q5_0 / q5_1's fifth bits).
inline __m256i fifth_bits(const std::uint8_t* p) {
  return _mm256_and_si256(_mm256_movm_epi8(load_u32(p)), _mm256_set1_epi8(16));
}

// The two-bit fields of a q2_k / q3_k half: element 32 r + l of the half is bits
// 2r of byte l of its 32 bytes.
inline __m256i two_bits(__m256i bytes, int r) {
  return _mm256_and_si256(_mm256_srli_epi16(bytes, 2 * r), _mm256_set1_epi8(3));
}

void unpack_row(DType w, const std::uint8_t* row, std::int64_t k, const RowOut& out) {
  switch (w) {
    case DType::kQ4_0:
      return unpack_block32<BlockQ4_0>(row, k / kQK, out, [&](const BlockQ4_0& b, std::int64_t i) {
        out.set_scale(i, load_f16(b.d));
        return _mm256_sub_epi8(block_nibbles(b.qs), _mm256_set1_epi8(8));
      });
    case DType::kQ4_1:
      return unpack_block32<BlockQ4_1>(row, k / kQK, out, [&](const BlockQ4_1& b, std::int64_t i) {
        out.set_scale(i, load_f16(b.d));
        out.set_offset(i, load_f16(b.m));
        return block_nibbles(b.qs);
      });
    case DType::kQ5_0:
      return unpack_block32<BlockQ5_0>(row, k / kQK, out, [&](const BlockQ5_0& b, std::int64_t i) {
        out.set_scale(i, load_f16(b.d));
        const __m256i v = _mm256_or_si256(block_nibbles(b.qs), fifth_bits(b.qh));
        return _mm256_sub_epi8(v, _mm256_set1_epi8(16));
      });
    case DType::kQ5_1:
      return unpack_block32<BlockQ5_1>(row, k / kQK, out, [&](const BlockQ5_1& b, std::int64_t i) {
        out.set_scale(i, load_f16(b.d));
        out.set_offset(i, load_f16(b.m));
        return _mm256_or_si256(block_nibbles(b.qs), fifth_bits(b.qh));
      });
    case DType::kQ8_0:
      return unpack_block32<BlockQ8_0>(row, k / kQK, out, [&](const BlockQ8_0& b, std::int64_t i) {
        out.set_scale(i, load_f16(b.d));
        return _mm256_loadu_si256(reinterpret_cast<const __m256i*>(b.qs));
      });
    case DType::kIQ4_NL:
      return unpack_block32<BlockIQ4_NL>(row, k / kQK, out,
                                         [&](const BlockIQ4_NL& b, std::int64_t i) {
                                           out.set_scale(i, load_f16(b.d));
                                           return lookup_levels(block_nibbles(b.qs), kIQ4NLValues);
                                         });
    case DType::kMXFP4:
      return unpack_block32<BlockMXFP4>(row, k / kQK, out,
                                        [&](const BlockMXFP4& b, std::int64_t i) {
                                          out.set_scale(i, e8m0_half(b.e));
                                          return lookup_levels(block_nibbles(b.qs), kMXFP4Values);
                                        });
    case DType::kQ2_K: {
      const auto* blocks = reinterpret_cast<const BlockQ2_K*>(row);
      for (std::int64_t i = 0; i < k / kQKK; ++i) {
        const BlockQ2_K& b = blocks[i];
        const float d = load_f16(b.d);
        const float dmin = load_f16(b.dmin);
        for (int h = 0; h < 2; ++h) {
          const __m256i bytes = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(b.qs + 32 * h));
          for (int r = 0; r < 4; ++r) out.put32(kQKK * i + 128 * h + 32 * r, two_bits(bytes, r));
        }
        for (int g = 0; g < 16; ++g) {
          out.set_scale(16 * i + g, d * static_cast<float>(b.scales[g] & 0xf));
          out.set_offset(16 * i + g, -(dmin * static_cast<float>(b.scales[g] >> 4)));
        }
      }
      return;
    }
    case DType::kQ3_K: {
      const auto* blocks = reinterpret_cast<const BlockQ3_K*>(row);
      for (std::int64_t i = 0; i < k / kQKK; ++i) {
        const BlockQ3_K& b = blocks[i];
        const float d = load_f16(b.d);
        // Element 32 j + l (j = 4h + r) takes bit j of hmask[l] as its third bit;
        // the level is that 3-bit value minus 4.
        const __m256i hmask = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(b.hmask));
        for (int h = 0; h < 2; ++h) {
          const __m256i bytes = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(b.qs + 32 * h));
          for (int r = 0; r < 4; ++r) {
            const int j = 4 * h + r;
            const __m256i high = _mm256_and_si256(_mm256_srli_epi16(hmask, j), _mm256_set1_epi8(1));
            const __m256i v = _mm256_or_si256(two_bits(bytes, r), _mm256_slli_epi16(high, 2));
            out.put32(kQKK * i + 32 * j, _mm256_sub_epi8(v, _mm256_set1_epi8(4)));
          }
        }
        for (int g = 0; g < 16; ++g)
          out.set_scale(16 * i + g, d * static_cast<float>(q3k_scale(g, b.scales)));
      }
      return;
    }
    case DType::kQ4_K:
    case DType::kQ5_K: {
      const bool five = w == DType::kQ5_K;
      const std::int64_t bytes = block_bytes(w);
      for (std::int64_t i = 0; i < k / kQKK; ++i) {
        // q4_k and q5_k share d, dmin and scales; q5_k adds qh before qs.
        const std::uint8_t* p = row + bytes * i;
        const auto& head = *reinterpret_cast<const BlockQ4_K*>(p);
        const std::uint8_t* qh = five ? reinterpret_cast<const BlockQ5_K*>(p)->qh : nullptr;
        const std::uint8_t* qs = five ? reinterpret_cast<const BlockQ5_K*>(p)->qs : head.qs;
        const float d = load_f16(head.d);
        const float dmin = load_f16(head.dmin);
        for (int g = 0; g < 8; ++g) {
          int sc = 0;
          int m = 0;
          k4_scale_min(g, head.scales, sc, m);
          out.set_scale(8 * i + g, d * static_cast<float>(sc));
          out.set_offset(8 * i + g, -(dmin * static_cast<float>(m)));
        }
        // Groups 2j and 2j + 1 are the low and high nibbles of qs[32j..32j+31];
        // q5_k's fifth bit of element l of group g is bit g of qh[l].
        const __m256i mask = _mm256_set1_epi8(0xf);
        const __m256i high_bits = five ? _mm256_loadu_si256(reinterpret_cast<const __m256i*>(qh))
                                       : _mm256_setzero_si256();
        for (int j = 0; j < 4; ++j) {
          const __m256i packed = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(qs + 32 * j));
          __m256i low = _mm256_and_si256(packed, mask);
          __m256i high = _mm256_and_si256(_mm256_srli_epi16(packed, 4), mask);
          if (five) {
            const __m256i one = _mm256_set1_epi8(1);
            const __m256i b0 = _mm256_and_si256(_mm256_srli_epi16(high_bits, 2 * j), one);
            const __m256i b1 = _mm256_and_si256(_mm256_srli_epi16(high_bits, 2 * j + 1), one);
            low = _mm256_or_si256(low, _mm256_slli_epi16(b0, 4));
            high = _mm256_or_si256(high, _mm256_slli_epi16(b1, 4));
          }
          out.put32(kQKK * i + 64 * j, low);
          out.put32(kQKK * i + 64 * j + 32, high);
        }
      }
      return;
    }
    case DType::kQ6_K: {
      const auto* blocks = reinterpret_cast<const BlockQ6_K*>(row);
      for (std::int64_t i = 0; i < k / kQKK; ++i) {
        const BlockQ6_K& b = blocks[i];
        const float d = load_f16(b.d);
        // Within a half h: quarter r takes ql[64h + l + 32 (r % 2)], nibble r / 2,
        // and bits 2r of qh[32h + l].
        const __m256i mask = _mm256_set1_epi8(0xf);
        const __m256i three = _mm256_set1_epi8(3);
        const __m256i bias = _mm256_set1_epi8(32);
        for (int h = 0; h < 2; ++h) {
          const __m256i ql0 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(b.ql + 64 * h));
          const __m256i ql1 =
              _mm256_loadu_si256(reinterpret_cast<const __m256i*>(b.ql + 64 * h + 32));
          const __m256i qh = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(b.qh + 32 * h));
          const __m256i lows[4] = {_mm256_and_si256(ql0, mask), _mm256_and_si256(ql1, mask),
                                   _mm256_and_si256(_mm256_srli_epi16(ql0, 4), mask),
                                   _mm256_and_si256(_mm256_srli_epi16(ql1, 4), mask)};
          for (int r = 0; r < 4; ++r) {
            const __m256i high = _mm256_and_si256(_mm256_srli_epi16(qh, 2 * r), three);
            const __m256i v = _mm256_or_si256(lows[r], _mm256_slli_epi16(high, 4));
            out.put32(kQKK * i + 128 * h + 32 * r, _mm256_sub_epi8(v, bias));
          }
        }
        for (int g = 0; g < 16; ++g) out.set_scale(16 * i + g, d * static_cast<float>(b.scales[g]));
      }
      return;
    }
    case DType::kIQ4_XS: {
      const auto* blocks = reinterpret_cast<const BlockIQ4_XS*>(row);
      for (std::int64_t i = 0; i < k / kQKK; ++i) {
        const BlockIQ4_XS& b = blocks[i];
        const float d = load_f16(b.d);
        for (int g = 0; g < 8; ++g) {
          out.set_scale(8 * i + g, d * static_cast<float>(iq4xs_scale(g, b)));
          out.put32(kQKK * i + 32 * g, lookup_levels(block_nibbles(b.qs + 16 * g), kIQ4NLValues));
        }
      }
      return;
    }
    default: return;
  }
}

// The tile palette: tmm0 and tmm1 accumulate (16 x 16 int32), tmm2 and tmm3 hold
// weight bytes (16 rows x group), tmm4 and tmm5 activation bytes (group / 4 rows
// of 16 x 4). Two of each, so that one group's product runs on the tile unit
// while the vector units scale the previous group's.
void configure_tiles(std::int64_t group) {
  AmxTileConfig config;
  for (int t = 0; t < 6; ++t) {
    const bool weights = t == 2 || t == 3;
    const bool activations = t == 4 || t == 5;
    config.set(t, activations ? static_cast<int>(group / 4) : kAmxTileRows,
               weights ? static_cast<int>(group) : 64);
  }
  _tile_loadconfig(&config);
}

// The accumulators of one 16 x 16 output tile: acc[r] holds weight row r against
// the tile's 16 activation rows.
struct Acc {
  __m512 v[kAmxTileRows];
};

// Where group g of one activation tile and of a tile-major panel are.
struct GroupOperands {
  const std::int8_t* w;  // 16 weight rows x group bytes, one piece
  const std::int8_t* x;  // group / 4 rows x 64 bytes, one piece
  std::int64_t group;
};

// One group's tile product into buf (16 x 16 int32), on the first or the second
// set of tiles. GCC's tile intrinsics paste their tile numbers into the
// instruction text, so the numbers must be literals.
template <int kSet>
inline void group_product(const GroupOperands& op, std::int32_t* buf) {
  if constexpr (kSet == 0) {
    _tile_loadd(2, op.w, op.group);
    _tile_loadd(4, op.x, 64);
    _tile_zero(0);
    _tile_dpbssd(0, 2, 4);
    _tile_stored(0, buf, 64);
  } else {
    _tile_loadd(3, op.w, op.group);
    _tile_loadd(5, op.x, 64);
    _tile_zero(1);
    _tile_dpbssd(1, 3, 5);
    _tile_stored(1, buf, 64);
  }
}

// acc[r] += scale[r] * xs * buf row r (+ offset[r] * xsum): one group's product
// scaled into the accumulators. scale and offset are the group's 16 weight rows'
// (tile-major: consecutive), xs and xsum its 16 activation rows'.
template <bool kOffset>
inline void scale_group(const std::int32_t* buf, const float* scale, const float* offset,
                        const float* xs_tile, const float* xsum_tile, Acc& acc) {
  const __m512 xs = _mm512_loadu_ps(xs_tile);
  [[maybe_unused]] const __m512 xsum = kOffset ? _mm512_loadu_ps(xsum_tile) : _mm512_setzero_ps();
#pragma GCC unroll 16
  for (int r = 0; r < kAmxTileRows; ++r) {
    const __m512 dot = _mm512_mul_ps(_mm512_cvtepi32_ps(_mm512_load_si512(buf + 16 * r)), xs);
    acc.v[r] = _mm512_fmadd_ps(dot, _mm512_set1_ps(scale[r]), acc.v[r]);
    if constexpr (kOffset) acc.v[r] = _mm512_fmadd_ps(xsum, _mm512_set1_ps(offset[r]), acc.v[r]);
  }
}

// The panel (tile-major) against every activation tile. Software-pipelined: group
// g + 1's tile product is issued before group g's scaling, into the other tile
// set and the other buffer, so that the tile unit and the vector units overlap
// and no scaling waits on the tile store just before it.
template <bool kOffset>
void panel_product(const AmxPanel& panel, const AmxActivations& x, std::int64_t group,
                   std::int64_t rows, float* out, std::int64_t ldo, std::int64_t cols) {
  alignas(64) std::int32_t buf[2][kAmxTileRows * 16];
  alignas(64) float result[kAmxTileRows][16];
  const std::int64_t groups = x.groups;
  const std::int64_t w_step = kAmxTileRows * group;  // bytes per group, either operand
  for (std::int64_t t = 0; t * kAmxTileRows < rows; ++t) {
    const std::int8_t* xq = x.q + t * kAmxTileRows * x.k;
    const float* xs = x.scale + t * groups * kAmxTileRows;
    const float* xsum = x.sum + t * groups * kAmxTileRows;
    const auto operands = [&](std::int64_t g) {
      return GroupOperands{.w = panel.q + g * w_step, .x = xq + g * w_step, .group = group};
    };
    Acc acc;
    for (__m512& v : acc.v) v = _mm512_setzero_ps();
    group_product<0>(operands(0), buf[0]);
    for (std::int64_t g = 0; g < groups; ++g) {
      if (g + 1 < groups) {
        if (g % 2 == 0) {
          group_product<1>(operands(g + 1), buf[1]);
        } else {
          group_product<0>(operands(g + 1), buf[0]);
        }
      }
      const std::int64_t slot = g * kAmxTileRows;
      scale_group<kOffset>(buf[g % 2], panel.scale + slot, panel.offset + slot, xs + slot,
                           xsum + slot, acc);
    }
    // acc.v[j] holds weight row j against activation rows 16t..16t+15: written
    // back transposed.
    for (int j = 0; j < kAmxTileRows; ++j) _mm512_store_ps(result[j], acc.v[j]);
    const std::int64_t m_end = std::min<std::int64_t>(kAmxTileRows, rows - t * kAmxTileRows);
    for (std::int64_t m = 0; m < m_end; ++m) {
      float* o = out + (t * kAmxTileRows + m) * ldo;
      for (std::int64_t j = 0; j < cols; ++j) o[j] = result[j][m];
    }
  }
}

// Row m's four levels k..k+3 go to 32-bit column m of tile row k / 4.
inline void scatter_levels(__m128i levels, std::int8_t* tile_q, std::int64_t k0, std::int64_t m) {
  alignas(16) std::int32_t words[4];
  _mm_store_si128(reinterpret_cast<__m128i*>(words), levels);
  for (std::int64_t i = 0; i < 4; ++i) {
    std::memcpy(tile_q + (k0 / 4 + i) * 64 + 4 * m, &words[i], 4);
  }
}

// Whether x[0..n) (n a multiple of 16) holds no NaN and no infinity. The
// quantizers' own maximum cannot tell: vmaxps drops a NaN in its first operand.
inline bool all_finite(const float* x, std::int64_t n) {
  constexpr int kNanOrInf = 0x01 | 0x08 | 0x10 | 0x80;  // QNaN, +inf, -inf, SNaN
  __mmask16 bad = 0;
  for (std::int64_t i = 0; i < n; i += 16) {
    bad |= _mm512_fpclass_ps_mask(_mm512_loadu_ps(x + i), kNanOrInf);
  }
  return bad == 0;
}

inline int sum_levels(__m128i levels) {
  return _mm512_reduce_add_epi32(_mm512_cvtepi8_epi32(levels));
}

}  // namespace

bool amx_prepare_row(DType act, const float* row, std::int64_t k, std::int64_t group,
                     std::int8_t* tile_q, std::int64_t m, float* tile_scale, float* tile_sum) {
  if (!all_finite(row, k)) return false;
  if (act == DType::kQ8_0) {
    for (std::int64_t b = 0; b < k / kQK; ++b) {
      __m128i lo;
      __m128i hi;
      const float d = quantize_q8_0_levels(row + kQK * b, lo, hi);
      scatter_levels(lo, tile_q, kQK * b, m);
      scatter_levels(hi, tile_q, kQK * b + 16, m);
      // group is 32 for every format paired with q8_0 (amx_format).
      tile_scale[b * kAmxTileRows + m] = d;
      tile_sum[b * kAmxTileRows + m] = d * static_cast<float>(sum_levels(lo) + sum_levels(hi));
    }
    return true;
  }
  for (std::int64_t b = 0; b < k / kQKK; ++b) {
    const float* x = row + kQKK * b;
    BlockQ8_K block;
    if (!quantize_q8_k_block(x, block)) {
      // A block of zeros: the reference gives d = 0 and zero levels.
      quant::quantize_row(DType::kQ8_K, x, &block, kQKK);
    }
    const float d = load_f32(block.d);
    for (std::int64_t v = 0; v < 16; ++v) {
      scatter_levels(_mm_loadu_si128(reinterpret_cast<const __m128i*>(block.qs + 16 * v)), tile_q,
                     kQKK * b + 16 * v, m);
    }
    // bsums holds the sum of each 16 levels.
    for (std::int64_t g = 0; g < kQKK / group; ++g) {
      int total = 0;
      for (std::int64_t s = g * group / 16; s < (g + 1) * group / 16; ++s) {
        total += load_i16(block.bsums + 2 * s);
      }
      const std::int64_t slot = (b * kQKK / group + g) * kAmxTileRows + m;
      tile_scale[slot] = d;
      tile_sum[slot] = d * static_cast<float>(total);
    }
  }
  return true;
}

AmxFormat amx_format(DType w) {
  switch (w) {
    case DType::kQ4_0:
    case DType::kQ5_0:
    case DType::kQ8_0:
    case DType::kIQ4_NL:
    case DType::kMXFP4:
    case DType::kIQ4_XS: return {.group = 32, .has_offset = false};
    case DType::kQ4_1:
    case DType::kQ5_1:
    case DType::kQ4_K:
    case DType::kQ5_K: return {.group = 32, .has_offset = true};
    case DType::kQ3_K:
    case DType::kQ6_K: return {.group = 16, .has_offset = false};
    case DType::kQ2_K: return {.group = 16, .has_offset = true};
    default: return {};
  }
}

void amx_unpack_rows(DType w, const std::uint8_t* w_rows, std::int64_t row_bytes, std::int64_t rows,
                     std::int64_t k, const AmxPanel& panel) {
  const std::int64_t group = amx_format(w).group;
  const std::int64_t groups = k / group;
  const bool tiles = panel.layout == AmxPanelLayout::kTiles;
  for (std::int64_t r = 0; r < rows; ++r) {
    const std::int64_t q0 = tiles ? r * group : r * k;
    const std::int64_t s0 = tiles ? r : r * groups;
    unpack_row(w, w_rows + r * row_bytes, k,
               {.q = panel.q + q0,
                .scale = panel.scale + s0,
                .offset = panel.offset + s0,
                .group = group,
                .q_step = tiles ? kAmxTileRows * group : group,
                .s_step = tiles ? kAmxTileRows : 1});
  }
}

void amx_panel_product(const AmxPanel& panel, const AmxActivations& x, AmxFormat format,
                       std::int64_t rows, float* out, std::int64_t ldo, std::int64_t cols) {
  configure_tiles(format.group);
  if (format.has_offset) {
    panel_product<true>(panel, x, format.group, rows, out, ldo, cols);
  } else {
    panel_product<false>(panel, x, format.group, rows, out, ldo, cols);
  }
  _tile_release();
}

}  // namespace switchyard::cpu
