// The AMX-BF16 sibling's ISA half (quant_matmul_amx.h): activations and unpacked
// weights rounded to bf16 in the tiles' layouts, and the tile loop. Compiled with
// AVX-512 (BF16 included) and AMX-TILE / AMX-BF16; called only where
// cpu_features().amx_bf16 (which includes the kernel's grant of the tile state).
#include <immintrin.h>

#include <bit>
#include <cstdint>

#include "backends/cpu/avx512_diagnostics.h"
#include "backends/cpu/quant/amx_tile_config.h"
#include "backends/cpu/quant/quant_matmul_amx.h"

namespace switchyard::cpu {
namespace {

// 32 floats as 32 bf16, rounded to nearest even: element i in 16-bit lane i.
inline __m512i to_bf16(__m512 lo, __m512 hi) {
  return std::bit_cast<__m512i>(_mm512_cvtne2ps_pbh(hi, lo));
}

// The tile palette: tmm0-3 accumulate (16 x 16 f32: rows m, m + 16 against
// columns j, j + 16), tmm4 and tmm5 hold 16 activation rows x 32 k each, tmm6
// and tmm7 16 pairs of k x 16 weight rows each.
void configure_tiles() {
  AmxTileConfig config;
  for (int t = 0; t < 8; ++t) config.set(t, 16, 64);
  _tile_loadconfig(&config);
}

// Transposes 16 x 16 32-bit elements in place: element c of v[r] goes to element
// r of v[c]. Pairs of rows interleave their elements, then pairs of those their
// 64-bit halves (each 128-bit lane now holds a 4 x 4 block transposed), then the
// lanes move into place.
inline void transpose16(__m512i (&v)[16]) {
  __m512i t[16];
  for (int i = 0; i < 8; ++i) {
    t[2 * i] = _mm512_unpacklo_epi32(v[2 * i], v[2 * i + 1]);
    t[2 * i + 1] = _mm512_unpackhi_epi32(v[2 * i], v[2 * i + 1]);
  }
  // u[4i + j], lane L: element 4L + j of rows 4i .. 4i + 3.
  __m512i u[16];
  for (int i = 0; i < 4; ++i) {
    u[4 * i] = _mm512_unpacklo_epi64(t[4 * i], t[4 * i + 2]);
    u[4 * i + 1] = _mm512_unpackhi_epi64(t[4 * i], t[4 * i + 2]);
    u[4 * i + 2] = _mm512_unpacklo_epi64(t[4 * i + 1], t[4 * i + 3]);
    u[4 * i + 3] = _mm512_unpackhi_epi64(t[4 * i + 1], t[4 * i + 3]);
  }
  for (int j = 0; j < 4; ++j) {
    const __m512i p01 = _mm512_shuffle_i32x4(u[j], u[4 + j], 0x44);
    const __m512i p23 = _mm512_shuffle_i32x4(u[j], u[4 + j], 0xee);
    const __m512i q01 = _mm512_shuffle_i32x4(u[8 + j], u[12 + j], 0x44);
    const __m512i q23 = _mm512_shuffle_i32x4(u[8 + j], u[12 + j], 0xee);
    v[j] = _mm512_shuffle_i32x4(p01, q01, 0x88);
    v[4 + j] = _mm512_shuffle_i32x4(p01, q01, 0xdd);
    v[8 + j] = _mm512_shuffle_i32x4(p23, q23, 0x88);
    v[12 + j] = _mm512_shuffle_i32x4(p23, q23, 0xdd);
  }
}

}  // namespace

bool amx_bf16_convert_row(const float* x, std::int64_t k, std::uint16_t* column, std::int64_t m) {
  constexpr int kNanOrInf = 0x01 | 0x08 | 0x10 | 0x80;  // QNaN, +inf, -inf, SNaN
  __mmask16 bad = 0;
  for (std::int64_t i = 0; i < k; i += 32) {
    const __m512 lo = _mm512_loadu_ps(x + i);
    const __m512 hi = _mm512_loadu_ps(x + i + 16);
    bad |= _mm512_fpclass_ps_mask(lo, kNanOrInf) | _mm512_fpclass_ps_mask(hi, kNanOrInf);
    _mm512_storeu_si512(column + (i / 32) * 512 + 32 * m, to_bf16(lo, hi));
  }
  return bad == 0;
}

void amx_bf16_pack_rows(const AmxPanel& panel, std::int64_t group, std::int64_t kc,
                        std::uint16_t* tiles) {
  const std::int64_t groups = kc / group;
  for (std::int64_t s = 0; s < kc / 32; ++s) {
    // v[r]: row r's 32 weights of this step as 16 pairs, rounded to bf16; the
    // weight as its format's dequantization gives it, scale * q, then plus the
    // offset (two roundings, as the reference's).
    __m512i v[kAmxTileRows];
    for (std::int64_t r = 0; r < kAmxTileRows; ++r) {
      const std::int8_t* q = panel.q + r * kc + 32 * s;
      const auto weights = [&](std::int64_t e) {
        const std::int64_t g = r * groups + (32 * s + e) / group;
        const __m512 levels = _mm512_cvtepi32_ps(
            _mm512_cvtepi8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(q + e))));
        return _mm512_add_ps(_mm512_mul_ps(levels, _mm512_set1_ps(panel.scale[g])),
                             _mm512_set1_ps(panel.offset[g]));
      };
      v[r] = to_bf16(weights(0), weights(16));
    }
    transpose16(v);
    // v[p] is now pair p of every row: tile row p.
    for (std::int64_t p = 0; p < kAmxTileRows; ++p) {
      _mm512_store_si512(tiles + s * 512 + 32 * p, v[p]);
    }
  }
}

void amx_bf16_block_product(const std::uint16_t* a, std::int64_t a_column_stride,
                            const std::uint16_t* tiles, std::int64_t kc, std::int64_t nc,
                            std::int64_t m_blocks, float* c, std::int64_t ldc, bool accumulate) {
  configure_tiles();
  const std::int64_t steps = kc / 32;
  const std::int64_t c_stride = ldc * 4;
  for (std::int64_t j = 0; j < nc; j += kAmxBf16Block) {
    const std::uint16_t* w0 = tiles + (j / 16) * steps * 512;
    const std::uint16_t* w1 = w0 + steps * 512;
    for (std::int64_t mb = 0; mb < m_blocks; ++mb) {
      const std::uint16_t* a0 = a + 2 * mb * a_column_stride;
      const std::uint16_t* a1 = a0 + a_column_stride;
      float* c00 = c + mb * kAmxBf16Block * ldc + j;
      float* c01 = c00 + 16;
      float* c10 = c00 + 16 * ldc;
      float* c11 = c10 + 16;
      if (accumulate) {
        _tile_loadd(0, c00, c_stride);
        _tile_loadd(1, c01, c_stride);
        _tile_loadd(2, c10, c_stride);
        _tile_loadd(3, c11, c_stride);
      } else {
        _tile_zero(0);
        _tile_zero(1);
        _tile_zero(2);
        _tile_zero(3);
      }
      for (std::int64_t s = 0; s < steps; ++s) {
        _tile_loadd(4, a0 + 512 * s, 64);
        _tile_loadd(5, a1 + 512 * s, 64);
        _tile_loadd(6, w0 + 512 * s, 64);
        _tile_loadd(7, w1 + 512 * s, 64);
        _tile_dpbf16ps(0, 4, 6);
        _tile_dpbf16ps(1, 4, 7);
        _tile_dpbf16ps(2, 5, 6);
        _tile_dpbf16ps(3, 5, 7);
      }
      _tile_stored(0, c00, c_stride);
      _tile_stored(1, c01, c_stride);
      _tile_stored(2, c10, c_stride);
      _tile_stored(3, c11, c_stride);
    }
  }
  _tile_release();
}

}  // namespace switchyard::cpu
