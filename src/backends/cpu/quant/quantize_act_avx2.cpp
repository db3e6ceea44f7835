// AVX2 activation quantizers (q8_0, q8_k) with the reference quantizer's bytes.
//
// Note [Same bytes as the reference quantizer]
// The reference computes, per block: the largest magnitude (a max, which does not
// depend on the order it is taken in), one scalar division or two for the scale,
// then per element one product and a rounding. Here the max and the per-element
// work are vectors; the scale is the same scalar expression, and each element
// sees the same single f32 product (no contraction into other operations), so
// only the rounding needs care:
//   q8_0 rounds half away from zero (std::round): t = trunc(v), and t moves one
//        away from zero when |v - t| >= 0.5 (v - t is exact for |v| < 2^23, and
//        beyond that v is already whole);
//   q8_k rounds to nearest with ties to even (nearest_int, through the float
//        adder: v + 1.5 * 2^23); vroundps in that mode gives the same integer for
//        every |v| < 2^22, which bounds |v| here (|v| <= 127 up to rounding), and
//        the same low byte for the infinities and NaN of an overflowing scale.
// The product is rounded before anything is added to it, as in the reference:
// the build turns off GCC's FMA contraction (CMakeLists.txt).
// q8_k's sign of the scale comes from the first element of largest magnitude,
// found as the first lane equal to it.
#include <immintrin.h>

#include <cstring>

#include "backends/cpu/quant/quant_packed.h"
#include "backends/cpu/quant/quantize_act.h"
#include "switchyard/quant_blocks.h"

namespace switchyard::cpu {
namespace {

inline __m256 abs_ps(__m256 v) { return _mm256_andnot_ps(_mm256_set1_ps(-0.0f), v); }

inline float hmax(__m256 v) {
  __m128 m = _mm_max_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  m = _mm_max_ps(m, _mm_movehl_ps(m, m));
  m = _mm_max_ss(m, _mm_movehdup_ps(m));
  return _mm_cvtss_f32(m);
}

// Four vectors of eight i32 as 32 bytes in element order, each the i32's low
// byte (static_cast<std::int8_t>, which q8_k's reference applies to values that
// only an overflowing scale takes out of range).
inline __m256i pack_bytes(__m256i q0, __m256i q1, __m256i q2, __m256i q3) {
  const __m256i low = _mm256_set1_epi32(0xff);
  const __m256i w01 = _mm256_packus_epi32(_mm256_and_si256(q0, low), _mm256_and_si256(q1, low));
  const __m256i w23 = _mm256_packus_epi32(_mm256_and_si256(q2, low), _mm256_and_si256(q3, low));
  const __m256i b = _mm256_packus_epi16(w01, w23);
  return _mm256_permutevar8x32_epi32(b, _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7));
}

// std::round(v) clamped to [-128, 127] as truncate_clamped does, for finite v.
inline __m256i round_away_clamped(__m256 v) {
  const __m256 t = _mm256_round_ps(v, _MM_FROUND_TO_ZERO | _MM_FROUND_NO_EXC);
  const __m256 away = _mm256_cmp_ps(abs_ps(_mm256_sub_ps(v, t)), _mm256_set1_ps(0.5f), _CMP_GE_OQ);
  const __m256 step = _mm256_or_ps(_mm256_and_ps(v, _mm256_set1_ps(-0.0f)), _mm256_set1_ps(1.0f));
  __m256 r = _mm256_add_ps(t, _mm256_and_ps(away, step));
  r = _mm256_min_ps(_mm256_max_ps(r, _mm256_set1_ps(-128.0f)), _mm256_set1_ps(127.0f));
  return _mm256_cvttps_epi32(r);
}

void quantize_q8_0_block(const float* x, quant::BlockQ8_0& b) {
  __m256 v[4];
  for (int i = 0; i < 4; ++i) v[i] = _mm256_loadu_ps(x + 8 * i);
  const float amax = hmax(_mm256_max_ps(_mm256_max_ps(abs_ps(v[0]), abs_ps(v[1])),
                                        _mm256_max_ps(abs_ps(v[2]), abs_ps(v[3]))));
  const float d = amax / 127.0f;
  const float id = d != 0.0f ? 1.0f / d : 0.0f;
  quant::store_f16(b.d, d);
  const __m256 vid = _mm256_set1_ps(id);
  __m256i q[4];
  for (int i = 0; i < 4; ++i) q[i] = round_away_clamped(_mm256_mul_ps(v[i], vid));
  _mm256_storeu_si256(reinterpret_cast<__m256i*>(b.qs), pack_bytes(q[0], q[1], q[2], q[3]));
}

// nearest_int(v) (ties to even), at most 127.
inline __m256i nearest_clamped(__m256 v) {
  const __m256 r = _mm256_round_ps(v, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  return _mm256_min_epi32(_mm256_cvtps_epi32(r), _mm256_set1_epi32(127));
}

void quantize_q8_k_block(const float* x, quant::BlockQ8_K& b) {
  constexpr int kVecs = quant::kQKK / 8;
  __m256 m = _mm256_setzero_ps();
  for (int i = 0; i < kVecs; ++i) m = _mm256_max_ps(m, abs_ps(_mm256_loadu_ps(x + 8 * i)));
  const float amax = hmax(m);
  if (amax == 0.0f) {
    std::memset(&b, 0, sizeof b);
    return;
  }
  float max = 0.0f;
  const __m256 vamax = _mm256_set1_ps(amax);
  for (int i = 0; i < kVecs; ++i) {
    const __m256 a = abs_ps(_mm256_loadu_ps(x + 8 * i));
    const int hit = _mm256_movemask_ps(_mm256_cmp_ps(a, vamax, _CMP_EQ_OQ));
    if (hit != 0) {
      max = x[8 * i + __builtin_ctz(static_cast<unsigned>(hit))];
      break;
    }
  }
  const float iscale = -127.0f / max;
  const __m256 vis = _mm256_set1_ps(iscale);
  for (int c = 0; c < quant::kQKK / 32; ++c) {
    const float* xc = x + 32 * c;
    __m256i q[4];
    for (int i = 0; i < 4; ++i) {
      q[i] = nearest_clamped(_mm256_mul_ps(vis, _mm256_loadu_ps(xc + 8 * i)));
    }
    const __m256i bytes = pack_bytes(q[0], q[1], q[2], q[3]);
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(b.qs + 32 * c), bytes);
    // Group sums of 16 levels: byte sums of the levels + 128 in 8-byte halves.
    const __m256i s =
        _mm256_sad_epu8(_mm256_xor_si256(bytes, _mm256_set1_epi8(-128)), _mm256_setzero_si256());
    const __m128i lo = _mm256_castsi256_si128(s);
    const __m128i hi = _mm256_extracti128_si256(s, 1);
    const long long g0 = _mm_cvtsi128_si64(lo) + _mm_extract_epi64(lo, 1) - 16 * 128;
    const long long g1 = _mm_cvtsi128_si64(hi) + _mm_extract_epi64(hi, 1) - 16 * 128;
    quant::store_i16(b.bsums + 4 * c, static_cast<int>(g0));
    quant::store_i16(b.bsums + 4 * c + 2, static_cast<int>(g1));
  }
  quant::store_f32(b.d, 1.0f / iscale);
}

}  // namespace

void quantize_row_q8_0_avx2(const float* x, void* dst, std::int64_t k) {
  auto* out = static_cast<quant::BlockQ8_0*>(dst);
  for (std::int64_t i = 0; i < k / quant::kQK; ++i) quantize_q8_0_block(x + i * quant::kQK, out[i]);
}

void prepare_packed_row_avx2(PackedFormat f, const float* a, std::int64_t k, std::uint8_t* x) {
  for (std::int64_t b = 0; b < k / quant::kQK; ++b) {
    quant::BlockQ8_0 block;
    quantize_q8_0_block(a + b * quant::kQK, block);
    store_packed_act_block(f, k, b, block.qs, quant::load_f16(block.d), x);
  }
}

void quantize_row_q8_k_avx2(const float* x, void* dst, std::int64_t k) {
  auto* out = static_cast<quant::BlockQ8_K*>(dst);
  for (std::int64_t i = 0; i < k / quant::kQKK; ++i) {
    quantize_q8_k_block(x + i * quant::kQKK, out[i]);
  }
}

}  // namespace switchyard::cpu
