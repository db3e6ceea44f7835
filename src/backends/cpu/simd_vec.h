// A thin vector layer over AVX2 (8 floats) or AVX-512 (16 floats) for the CPU
// backend's SIMD rows, plus the vector math they share (exp, expm1-based tanh).
//
// Include only from an instruction-set file, after defining exactly one of
// SWITCHYARD_SIMD_AVX2 or SWITCHYARD_SIMD_AVX512. Everything here has internal
// linkage (an unnamed namespace inside a per-ISA namespace), so the AVX-512 and the
// AVX2 versions can never be merged by the linker, and no function here calls
// inline code of another header (that code would be compiled for the wide ISA and
// could be picked for the whole program). Scalar conversions are done through
// vector loads for the same reason.
//
// Numerics (f32, round to nearest, no FTZ/DAZ assumed):
//   vexp   Cody-Waite reduction x = n ln2 + r, |r| <= ln2/2, and a degree-6
//          polynomial for e^r (1 + r + r^2 Q(r), Q interpolated at Chebyshev
//          nodes; within 1.1 f32 ulp of e^r including its own rounding). Where
//          every lane has |x| <= 86 the result is normal and 2^n is applied by an
//          integer add to the exponent field; otherwise the whole vector takes the
//          wide path: inputs clamped to [-104, 88.8] (constant first, so NaN passes
//          through) and an exact two-step scaling by 2^n, so subnormal results are
//          rounded once. Both paths compute n, r and the polynomial with the same
//          instructions, so a lane gets the same bits whichever path its vector
//          takes (row results never depend on their neighbours). Rows that store
//          f16 use a shorter polynomial (Note [Exponentials for f16 results]).
//   vtanh  expm1(2|x|) / (expm1(2|x|) + 2) with expm1 rebuilt from the same
//          polynomial, accurate near zero; |x| is clamped at 9, where tanh rounds
//          to 1 in f32.
//   vrecip 1/d for normal d from the hardware estimate and one Newton step
//          (within 1.5 ulp for the AVX-512 estimate, 3 ulp for the AVX2 one).
//   vdiv_one_plus_exp  x / (1 + e^w), the sigmoid family: one exponential, one
//          rounded sum and one quotient (a division on AVX2, x times vrecip on
//          AVX-512).
#pragma once

#include <immintrin.h>

#include <cstdint>

#include "backends/cpu/storage.h"

#if defined(SWITCHYARD_SIMD_AVX512) == defined(SWITCHYARD_SIMD_AVX2)
#error "define exactly one of SWITCHYARD_SIMD_AVX2 and SWITCHYARD_SIMD_AVX512"
#endif

#if defined(SWITCHYARD_SIMD_AVX512)
#define SWITCHYARD_SIMD_NS avx512
// GCC 12's AVX-512 intrinsics start from _mm512_undefined_*() values, which its
// -Wmaybe-uninitialized / -Wuninitialized report at every use; they are wrong there.
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"
#endif
#else
#define SWITCHYARD_SIMD_NS avx2
#endif

namespace switchyard::cpu::SWITCHYARD_SIMD_NS {
namespace {

#if defined(SWITCHYARD_SIMD_AVX512)
using VF = __m512;
using VI = __m512i;
constexpr int kW = 16;
inline VF vset(float v) { return _mm512_set1_ps(v); }
inline VF vzero() { return _mm512_setzero_ps(); }
inline VF vadd(VF a, VF b) { return _mm512_add_ps(a, b); }
inline VF vsub(VF a, VF b) { return _mm512_sub_ps(a, b); }
inline VF vmul(VF a, VF b) { return _mm512_mul_ps(a, b); }
inline VF vdiv(VF a, VF b) { return _mm512_div_ps(a, b); }
inline VF vfma(VF a, VF b, VF c) { return _mm512_fmadd_ps(a, b, c); }
inline VF vfnma(VF a, VF b, VF c) { return _mm512_fnmadd_ps(a, b, c); }
inline VF vmax(VF a, VF b) { return _mm512_max_ps(a, b); }
inline VF vmin(VF a, VF b) { return _mm512_min_ps(a, b); }
inline VF vsqrt(VF a) { return _mm512_sqrt_ps(a); }
inline VF vround(VF a) {
  return _mm512_roundscale_ps(a, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
}
inline VI vcvt_i(VF a) { return _mm512_cvtps_epi32(a); }
inline VF vxor(VF a, VF b) {
  return _mm512_castsi512_ps(_mm512_xor_si512(_mm512_castps_si512(a), _mm512_castps_si512(b)));
}
inline VF vand(VF a, VF b) {
  return _mm512_castsi512_ps(_mm512_and_si512(_mm512_castps_si512(a), _mm512_castps_si512(b)));
}
inline VF vor(VF a, VF b) {
  return _mm512_castsi512_ps(_mm512_or_si512(_mm512_castps_si512(a), _mm512_castps_si512(b)));
}
inline VI iset(int v) { return _mm512_set1_epi32(v); }
inline VI iadd(VI a, VI b) { return _mm512_add_epi32(a, b); }
inline VI isub(VI a, VI b) { return _mm512_sub_epi32(a, b); }
inline VI israi1(VI a) { return _mm512_srai_epi32(a, 1); }
inline VI ishl23(VI a) { return _mm512_slli_epi32(a, 23); }
inline VF as_f(VI a) { return _mm512_castsi512_ps(a); }
inline VI as_i(VF a) { return _mm512_castps_si512(a); }
inline VF vabs(VF a) { return _mm512_abs_ps(a); }
// Whether any lane is not within [-limit, limit] (NaN counts as outside).
inline bool any_outside(VF a, float limit) {
  return _mm512_cmp_ps_mask(vabs(a), vset(limit), _CMP_NLE_UQ) != 0;
}
inline VF vrcp_estimate(VF a) { return _mm512_rcp14_ps(a); }
// Lanes (0, 1), (2, 3), ... swapped.
inline VF vswap_pairs(VF a) { return _mm512_permute_ps(a, 0xB1); }
// All-ones lanes where a is NaN.
inline VF vnan_lanes(VF a) {
  return _mm512_castsi512_ps(_mm512_movm_epi32(_mm512_cmp_ps_mask(a, a, _CMP_UNORD_Q)));
}
// b where the sign bit of `sel` is set, else a.
inline VF vblend_sign(VF a, VF b, VF sel) {
  return _mm512_mask_blend_ps(_mm512_movepi32_mask(_mm512_castps_si512(sel)), a, b);
}
inline bool any_lane(VF a) {
  return _mm512_test_epi32_mask(_mm512_castps_si512(a), _mm512_castps_si512(a)) != 0;
}
inline float hsum_lanes(VF a, float* tmp) {
  _mm512_storeu_ps(tmp, a);
  float s = 0.0f;
  for (int i = 0; i < kW; ++i) s += tmp[i];
  return s;
}
// The sum of the lanes as a tree: the halves added lane by lane down to one
// lane (GCC's _mm512_reduce_add_ps). The AVX2 form adds in the same tree.
inline float vreduce_add(VF a) { return _mm512_reduce_add_ps(a); }
// The largest lane, by a tree of vmaxps (exact for finite lanes; a NaN lane may
// or may not come through, as vmaxps drops a NaN in its first operand).
inline float vreduce_max(VF a) { return _mm512_reduce_max_ps(a); }

inline VF load(const float* p) { return _mm512_loadu_ps(p); }
// p 64-byte aligned.
inline VF load_aligned(const float* p) { return _mm512_load_ps(p); }
// p[0] in every lane (one vbroadcastss from memory).
inline VF broadcast(const float* p) { return _mm512_set1_ps(*p); }
inline VF load(const F16* p) {
  return _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)));
}
inline VF load(const BF16* p) {
  const __m512i w = _mm512_cvtepu16_epi32(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)));
  return _mm512_castsi512_ps(_mm512_slli_epi32(w, 16));
}
inline void store(float* p, VF v) { _mm512_storeu_ps(p, v); }
inline void store(F16* p, VF v) {
  _mm256_storeu_si256(reinterpret_cast<__m256i*>(p), _mm512_cvtps_ph(v, _MM_FROUND_TO_NEAREST_INT));
}
inline void store(BF16* p, VF v) {
  // Round to nearest even on the bit pattern; a NaN is quieted instead (rounding
  // could carry it into infinity), as f32_to_bf16 does.
  const __m512i bits = _mm512_castps_si512(v);
  const __m512i lsb = _mm512_and_si512(_mm512_srli_epi32(bits, 16), _mm512_set1_epi32(1));
  const __m512i rounded = _mm512_srli_epi32(
      _mm512_add_epi32(bits, _mm512_add_epi32(lsb, _mm512_set1_epi32(0x7fff))), 16);
  const __m512i quiet = _mm512_or_si512(_mm512_srli_epi32(bits, 16), _mm512_set1_epi32(0x40));
  const __mmask16 nan = _mm512_cmpgt_epi32_mask(
      _mm512_and_si512(bits, _mm512_set1_epi32(0x7fffffff)), _mm512_set1_epi32(0x7f800000));
  const __m512i r = _mm512_mask_blend_epi32(nan, rounded, quiet);
  _mm256_storeu_si256(reinterpret_cast<__m256i*>(p), _mm512_cvtepi32_epi16(r));
}
// The first n < kW floats, by a masked load or store (lanes past n are neither
// read nor written, so they cannot fault): the generic forms below go through a
// buffer, which costs a store-forwarding stall on every call and made rows of
// half a vector (rope on 16-wide heads) slower than AVX2's full vectors.
inline __mmask16 first_lanes(std::int64_t n) {
  return static_cast<__mmask16>((1u << static_cast<unsigned>(n)) - 1u);
}
inline VF load_partial(const float* p, std::int64_t n, const float& fill) {
  return _mm512_mask_loadu_ps(_mm512_set1_ps(fill), first_lanes(n), p);
}
inline void store_partial(float* p, std::int64_t n, VF v) {
  _mm512_mask_storeu_ps(p, first_lanes(n), v);
}
#else
using VF = __m256;
using VI = __m256i;
constexpr int kW = 8;
inline VF vset(float v) { return _mm256_set1_ps(v); }
inline VF vzero() { return _mm256_setzero_ps(); }
inline VF vadd(VF a, VF b) { return _mm256_add_ps(a, b); }
inline VF vsub(VF a, VF b) { return _mm256_sub_ps(a, b); }
inline VF vmul(VF a, VF b) { return _mm256_mul_ps(a, b); }
inline VF vdiv(VF a, VF b) { return _mm256_div_ps(a, b); }
inline VF vfma(VF a, VF b, VF c) { return _mm256_fmadd_ps(a, b, c); }
inline VF vfnma(VF a, VF b, VF c) { return _mm256_fnmadd_ps(a, b, c); }
inline VF vmax(VF a, VF b) { return _mm256_max_ps(a, b); }
inline VF vmin(VF a, VF b) { return _mm256_min_ps(a, b); }
inline VF vsqrt(VF a) { return _mm256_sqrt_ps(a); }
inline VF vround(VF a) { return _mm256_round_ps(a, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC); }
inline VI vcvt_i(VF a) { return _mm256_cvtps_epi32(a); }
inline VF vxor(VF a, VF b) { return _mm256_xor_ps(a, b); }
inline VF vand(VF a, VF b) { return _mm256_and_ps(a, b); }
inline VF vor(VF a, VF b) { return _mm256_or_ps(a, b); }
inline VI iset(int v) { return _mm256_set1_epi32(v); }
inline VI iadd(VI a, VI b) { return _mm256_add_epi32(a, b); }
inline VI isub(VI a, VI b) { return _mm256_sub_epi32(a, b); }
inline VI israi1(VI a) { return _mm256_srai_epi32(a, 1); }
inline VI ishl23(VI a) { return _mm256_slli_epi32(a, 23); }
inline VF as_f(VI a) { return _mm256_castsi256_ps(a); }
inline VI as_i(VF a) { return _mm256_castps_si256(a); }
inline VF vabs(VF a) { return _mm256_andnot_ps(vset(-0.0f), a); }
// Whether any lane is not within [-limit, limit] (NaN counts as outside).
inline bool any_outside(VF a, float limit) {
  return _mm256_movemask_ps(_mm256_cmp_ps(vabs(a), vset(limit), _CMP_NLE_UQ)) != 0;
}
inline VF vrcp_estimate(VF a) { return _mm256_rcp_ps(a); }
// Lanes (0, 1), (2, 3), ... swapped.
inline VF vswap_pairs(VF a) { return _mm256_permute_ps(a, 0xB1); }
inline VF vnan_lanes(VF a) { return _mm256_cmp_ps(a, a, _CMP_UNORD_Q); }
// b where the sign bit of `sel` is set, else a.
inline VF vblend_sign(VF a, VF b, VF sel) { return _mm256_blendv_ps(a, b, sel); }
inline bool any_lane(VF a) { return _mm256_movemask_ps(a) != 0; }
inline float hsum_lanes(VF a, float* tmp) {
  _mm256_storeu_ps(tmp, a);
  float s = 0.0f;
  for (int i = 0; i < kW; ++i) s += tmp[i];
  return s;
}
// The sum of the lanes as a tree: the 128-bit halves added lane by lane, then
// lanes (0, 2) and (1, 3), then those two.
inline float vreduce_add(VF a) {
  const __m128 lo = _mm256_castps256_ps128(a);
  const __m128 hi = _mm256_extractf128_ps(a, 1);
  __m128 s = _mm_add_ps(lo, hi);
  s = _mm_add_ps(s, _mm_movehl_ps(s, s));
  s = _mm_add_ss(s, _mm_movehdup_ps(s));
  return _mm_cvtss_f32(s);
}
// The largest lane, by the same tree of vmaxps (exact for finite lanes; a NaN
// lane may or may not come through).
inline float vreduce_max(VF a) {
  __m128 m = _mm_max_ps(_mm256_castps256_ps128(a), _mm256_extractf128_ps(a, 1));
  m = _mm_max_ps(m, _mm_movehl_ps(m, m));
  m = _mm_max_ss(m, _mm_movehdup_ps(m));
  return _mm_cvtss_f32(m);
}

inline VF load(const float* p) { return _mm256_loadu_ps(p); }
// p 32-byte aligned.
inline VF load_aligned(const float* p) { return _mm256_load_ps(p); }
// p[0] in every lane (one vbroadcastss from memory).
inline VF broadcast(const float* p) { return _mm256_broadcast_ss(p); }
inline VF load(const F16* p) {
  return _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
}
inline VF load(const BF16* p) {
  const __m256i w = _mm256_cvtepu16_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
  return _mm256_castsi256_ps(_mm256_slli_epi32(w, 16));
}
inline void store(float* p, VF v) { _mm256_storeu_ps(p, v); }
inline void store(F16* p, VF v) {
  _mm_storeu_si128(reinterpret_cast<__m128i*>(p), _mm256_cvtps_ph(v, _MM_FROUND_TO_NEAREST_INT));
}
inline void store(BF16* p, VF v) {
  // Round to nearest even on the bit pattern; a NaN is quieted instead (rounding
  // could carry it into infinity), as f32_to_bf16 does.
  const __m256i bits = _mm256_castps_si256(v);
  const __m256i lsb = _mm256_and_si256(_mm256_srli_epi32(bits, 16), _mm256_set1_epi32(1));
  const __m256i rounded = _mm256_srli_epi32(
      _mm256_add_epi32(bits, _mm256_add_epi32(lsb, _mm256_set1_epi32(0x7fff))), 16);
  const __m256i quiet = _mm256_or_si256(_mm256_srli_epi32(bits, 16), _mm256_set1_epi32(0x40));
  const __m256i nan = _mm256_cmpgt_epi32(_mm256_and_si256(bits, _mm256_set1_epi32(0x7fffffff)),
                                         _mm256_set1_epi32(0x7f800000));
  const __m256i r = _mm256_blendv_epi8(rounded, quiet, nan);
  // Every lane is <= 0xffff, so the saturating pack is exact; it interleaves the
  // 128-bit halves, which the permute undoes.
  const __m256i packed = _mm256_permute4x64_epi64(_mm256_packus_epi32(r, r), 0x08);
  _mm_storeu_si128(reinterpret_cast<__m128i*>(p), _mm256_castsi256_si128(packed));
}
#endif

// A hint to bring the cache line of p into L1. Never faults, so it may point past
// the end of a buffer.
inline void prefetch(const void* p) { _mm_prefetch(static_cast<const char*>(p), _MM_HINT_T0); }

// Element-by-element copies (no library calls, see the banner).
template <typename S>
inline void copy_elems(const S* src, S* dst, std::int64_t n) {
  for (std::int64_t i = 0; i < n; ++i) dst[i] = src[i];
}

// A vector holding p[0] in every lane, converted as a vector load converts.
template <typename S>
inline VF splat(const S* p) {
  S buf[kW];
  for (int i = 0; i < kW; ++i) buf[i] = p[0];
  return load(buf);
}

// Loads the first n < kW elements of p, filling the other lanes with `fill`.
template <typename S>
inline VF load_partial(const S* p, std::int64_t n, const S& fill) {
  S buf[kW];
  for (int i = 0; i < kW; ++i) buf[i] = i < n ? p[i] : fill;
  return load(buf);
}
template <typename S>
inline void store_partial(S* p, std::int64_t n, VF v) {
  S buf[kW];
  store(buf, v);
  copy_elems(buf, p, n);
}

// 2^n for lanes with n in [-126, 127].
inline VF pow2i(VI n) { return as_f(ishl23(iadd(n, iset(127)))); }

// Q(r) = (e^r - 1 - r) / r^2 for |r| <= ln2/2, a degree-4 interpolant at the
// Chebyshev nodes of that interval (coefficients rounded to f32, error measured in
// f32 arithmetic).
inline VF exp_q(VF r) {
  VF p = vset(0.00139261759f);
  p = vfma(p, r, vset(0.00836317334f));
  p = vfma(p, r, vset(0.0416665561f));
  p = vfma(p, r, vset(0.166665778f));
  return vfma(p, r, vset(0.5f));
}
// e^r - 1 for |r| <= ln2/2, accurate relative to itself near zero.
inline VF expm1_poly(VF r) { return vfma(vmul(r, r), exp_q(r), r); }

constexpr float kLog2e = 1.44269504088896341f;
// ln 2 split so that n * kLn2Hi is exact for |n| < 2^9.
constexpr float kLn2Hi = 0.693145751953125f;
constexpr float kLn2Lo = 1.42860682030941723212e-6f;
// 1.5 * 2^23: adding it rounds a float below 2^22 in magnitude to an integer,
// which then sits in the low mantissa bits.
constexpr float kRoundShifter = 12582912.0f;

// How accurately the exponential of a row is evaluated. See Note [Exponentials
// for f16 results].
enum class ExpAccuracy : std::uint8_t { kF32, kF16 };

// Note [Exponentials for f16 results]
// kF32 is the exponential described in the banner: within about 1 f32 ulp. A
// result stored in f16 keeps 11 significant bits, so the rows that store f16
// (exp, sigmoid, silu, gelu) use kF16: ln 2 as one f32 constant in the reduction
// (its error, under 2e-9 per unit of |n| <= 150, moves r by at most 3e-7) and
// e^r = 1 + r (c1 + r (c2 + r (c3 + r c4))) interpolated at the Chebyshev nodes of
// [-ln2/2, ln2/2], within 7.1e-6 of e^r in f32 arithmetic. That is 1.5-3% of the
// half ulp the f16 rounding adds, for three fewer FMAs per vector; the
// registration states the f16 rows' bound with 1e-5 more relative error (see
// simd_unary_rel), and cpu_elementwise_test checks it on every f16 input.

// n = round(x / ln2) (in the shifted form t and as a float) and e^r for the
// reduced argument, as both exp paths compute them.
struct ExpParts {
  VF t;
  VF p;
};
template <ExpAccuracy kAcc>
inline ExpParts exp_parts(VF x) {
  const VF t = vfma(x, vset(kLog2e), vset(kRoundShifter));
  const VF nf = vsub(t, vset(kRoundShifter));
  if constexpr (kAcc == ExpAccuracy::kF16) {
    const VF r = vfnma(nf, vset(0.693147182f), x);
    VF q = vfma(vset(0.0418339707f), r, vset(0.167671129f));
    q = vfma(q, r, vset(0.499997497f));
    q = vfma(q, r, vset(0.99998492f));
    return {t, vfma(q, r, vset(1.0f))};
  } else {
    VF r = vfnma(nf, vset(kLn2Hi), x);
    r = vfnma(nf, vset(kLn2Lo), r);
    return {t, vfma(vfma(exp_q(r), r, vset(1.0f)), r, vset(1.0f))};
  }
}

// The whole f32 range: results that overflow, underflow or are subnormal.
template <ExpAccuracy kAcc = ExpAccuracy::kF32>
inline VF vexp_wide(VF x) {
  x = vmin(vset(88.8f), vmax(vset(-104.0f), x));
  const ExpParts e = exp_parts<kAcc>(x);
  // n in [-150, 128]: scale in two exact steps, each factor a normal power of two.
  const VI n = isub(as_i(e.t), as_i(vset(kRoundShifter)));
  const VI k1 = israi1(n);
  const VI k2 = isub(n, k1);
  return vmul(vmul(e.p, pow2i(k1)), pow2i(k2));
}

// e^x for lanes with |x| <= 86 only: |n| <= 125 and p in [0.70, 1.42], so p * 2^n
// is normal and adding n to the exponent field is exact. The low bits of t hold n
// (mod 2^9), and the shift drops everything above them.
template <ExpAccuracy kAcc = ExpAccuracy::kF32>
inline VF vexp_fast(VF x) {
  const ExpParts e = exp_parts<kAcc>(x);
  return as_f(iadd(as_i(e.p), ishl23(as_i(e.t))));
}

template <ExpAccuracy kAcc = ExpAccuracy::kF32>
inline VF vexp(VF x) {
  if (any_outside(x, 86.0f)) return vexp_wide<kAcc>(x);
  return vexp_fast<kAcc>(x);
}

// 1 / d for normal, finite d: the estimate refined by one Newton step.
inline VF vrecip(VF d) {
  const VF r0 = vrcp_estimate(d);
  return vfma(r0, vfnma(d, r0, vset(1.0f)), r0);
}

// x / d for normal, finite d. See Note [Quotients per instruction set].
inline VF vquot(VF x, VF d) {
#if defined(SWITCHYARD_SIMD_AVX512)
  return vmul(x, vrecip(d));
#else
  return vdiv(x, d);
#endif
}

// Note [Quotients per instruction set]
// The sigmoid family divides once per element. A 256-bit division issues as one
// uop and occupies the divider for about five cycles, which runs beside the two
// FMA ports; the rows spend more than that on the exponential per vector, so on
// AVX2 the division costs one uop and rounds once. The reciprocal estimate and
// its Newton step would cost three uops on the FMA ports, the ports the AVX2 rows
// are bound by. A 512-bit division occupies the divider about twice as long for
// two uops more and would bound the AVX-512 rows, so they multiply by the refined
// reciprocal (within 1.5 ulp, see vrecip) instead.

inline VF vtanh(VF x) {
  const VF sign_bit = vset(-0.0f);
  const VF sign = vand(x, sign_bit);
  const VF a = vmin(vset(9.0f), vxor(x, sign));
  const VF y = vadd(a, a);
  const VF t = vfma(y, vset(kLog2e), vset(kRoundShifter));
  const VF nf = vsub(t, vset(kRoundShifter));
  VF r = vfnma(nf, vset(kLn2Hi), y);
  r = vfnma(nf, vset(kLn2Lo), r);
  const VF q = expm1_poly(r);
  // expm1(y) = 2^n q + (2^n - 1); n in [0, 26] here, 2^n - 1 exact while it matters.
  const VF two_n = as_f(iadd(as_i(vset(1.0f)), ishl23(as_i(t))));
  const VF em1 = vfma(two_n, q, vsub(two_n, vset(1.0f)));
  // A NaN input stays NaN through the clamp and every step after it.
  return vor(vmul(em1, vrecip(vadd(em1, vset(2.0f)))), sign);
}

// x / (1 + e^w) on the wide path of vdiv_one_plus_exp: lanes with w > 86, where
// e^w would overflow, compute x e^-w / (1 + e^-w); every other lane computes the
// fast path's instructions on the same bits (vexp_wide agrees with vexp_fast where
// both apply), so a lane's result never depends on its neighbours. Kept out of
// line: inlined into the rows, its code made GCC call the whole function per
// vector.
template <ExpAccuracy kAcc>
[[gnu::noinline]] VF vdiv_one_plus_exp_wide(VF x, VF w) {
  const VF one = vset(1.0f);
  const VF q = vquot(x, vadd(one, vexp_wide<kAcc>(w)));
  const VF e = vexp_wide<kAcc>(vxor(w, vset(-0.0f)));
  // The sign of 86 - w selects the lanes with w > 86 (and w = +inf).
  return vblend_sign(q, vquot(vmul(x, e), vadd(one, e)), vsub(vset(86.0f), w));
}

// x / (1 + e^w), which is x sigmoid(-w): silu (w = -x), sigmoid (x = 1, w = -x)
// and gelu (w = -2y). Where every lane has |w| <= 86, e^w takes the fast path and
// 1 + e^w is finite, so relative accuracy holds on both sides of zero; otherwise
// the vector takes the wide path.
template <ExpAccuracy kAcc>
[[gnu::always_inline]] inline VF vdiv_one_plus_exp(VF x, VF w) {
  if (any_outside(w, 86.0f)) [[unlikely]]
    return vdiv_one_plus_exp_wide<kAcc>(x, w);
  return vquot(x, vadd(vset(1.0f), vexp_fast<kAcc>(w)));
}

}  // namespace
}  // namespace switchyard::cpu::SWITCHYARD_SIMD_NS
