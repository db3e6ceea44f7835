// The activation quantizers of the AVX-512 integer-dot siblings (the VNNI files
// and the AMX file): the reference quantizers' operations in vector form, so the
// same bytes. In an anonymous namespace: each ISA file that includes this compiles
// its own private copy with its own flags (quant_tile_inl.h says why). Needs
// AVX-512 F/BW/VL/DQ and F16C.
#pragma once

#include <immintrin.h>

#include <cmath>
#include <cstdint>

#include "switchyard/quant_blocks.h"

namespace switchyard::cpu {
namespace {

// One q8_0 block of 32 activations: d = amax / 127, levels round-half-away(x / d)
// clamped to [-128, 127], d stored as f16. Sets lo and hi to levels 0-15 and
// 16-31 and returns d as the f16 gives it back. A block holding NaN or infinity
// gets meaningless levels: callers find such rows themselves (vmaxps drops a NaN
// in its first operand, so amax cannot tell).
inline float quantize_q8_0_levels(const float* x, __m128i& lo, __m128i& hi) {
  const __m512 magnitude = _mm512_castsi512_ps(_mm512_set1_epi32(0x7fffffff));
  const __m512 sign = _mm512_set1_ps(-0.0f);
  const __m512 one = _mm512_set1_ps(1.0f);
  const __m512 half = _mm512_set1_ps(0.5f);
  const __m512 x0 = _mm512_loadu_ps(x);
  const __m512 x1 = _mm512_loadu_ps(x + 16);
  const float amax = _mm512_reduce_max_ps(
      _mm512_max_ps(_mm512_and_ps(x0, magnitude), _mm512_and_ps(x1, magnitude)));
  const float d = amax / 127.0f;
  const float id = d != 0.0f ? 1.0f / d : 0.0f;
  std::uint8_t dh[2];
  quant::store_f16(dh, d);
  // round-half-away: truncate, then step away from zero when the dropped
  // fraction (exact) is at least one half; then clamp as truncate_clamped.
  const auto levels = [&](__m512 v) {
    const __m512 t = _mm512_mul_ps(v, _mm512_set1_ps(id));
    __m512 r = _mm512_roundscale_ps(t, _MM_FROUND_TO_ZERO | _MM_FROUND_NO_EXC);
    const __mmask16 up =
        _mm512_cmp_ps_mask(_mm512_and_ps(_mm512_sub_ps(t, r), magnitude), half, _CMP_GE_OQ);
    r = _mm512_mask_add_ps(r, up, r, _mm512_or_ps(_mm512_and_ps(t, sign), one));
    r = _mm512_min_ps(_mm512_max_ps(r, _mm512_set1_ps(-128.0f)), _mm512_set1_ps(127.0f));
    return _mm512_cvtepi32_epi8(_mm512_cvttps_epi32(r));
  };
  lo = levels(x0);
  hi = levels(x1);
  return quant::load_f16(dh);
}

// One q8_k super-block with the reference's operations in vector form, so the
// same bytes: the first element of the largest magnitude sets the scale, and
// vcvtps2dq rounds to nearest even as nearest_int does. Returns false, leaving b
// alone, for a block of zeros or with a non-finite value (the reference
// quantizer handles those).
inline bool quantize_q8_k_block(const float* x, quant::BlockQ8_K& b) {
  // NaN and infinity found by class: vmaxps below drops a NaN in its first
  // operand, and a NaN's level (INT_MIN) would overflow the sums.
  constexpr int kNanOrInf = 0x01 | 0x08 | 0x10 | 0x80;  // QNaN, +inf, -inf, SNaN
  __mmask16 bad = 0;
  __m512 amax = _mm512_setzero_ps();
  for (int v = 0; v < 16; ++v) {
    const __m512 xv = _mm512_loadu_ps(x + 16 * v);
    bad |= _mm512_fpclass_ps_mask(xv, kNanOrInf);
    amax = _mm512_max_ps(amax, _mm512_abs_ps(xv));
  }
  if (bad != 0) return false;
  const float m = _mm512_reduce_max_ps(amax);
  if (!(m > 0.0f)) return false;
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

}  // namespace
}  // namespace switchyard::cpu
