// AVX2 matmul with block-quantized weights: activations are quantized once per row
// to the format's activation type, then every weight block meets its activation
// block in an integer dot product.
//
// The integer core is the byte multiply-add (vpmaddubsw: unsigned x signed bytes,
// adjacent pairs summed to i16), then vpmaddwd against the group scales (or ones)
// to i32. Signed weights use the sign trick: |w| times a with w's sign applied.
// No i16 sum can saturate: |w| <= 128 and |a| <= 127 give at most 2 * 128 * 127.
//
// Per format (x = activation, s_g = group scale, m_g = group min):
//   32-element blocks: dot = d_w * d_x * sum(q_w * q_x)            (q4_0, q5_0,
//                      q8_0, iq4_nl, mxfp4; q4_1 / q5_1 add m_w * d_x * sum(q_x))
//   k-quants (q8_k):   dot = d_w * d_x * sum_g s_g * sum(q_w * q_x)
//                            - dmin_w * d_x * sum_g m_g * bsum_g
//   where an offset level (q6_k's q - 32, q3_k's q - 4) is applied through the
//   q8_k group sums instead of per element.
#include <fmt/format.h>
#include <immintrin.h>

#include <cstring>
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

// The 16 bytes at q as 32 nibbles: low nibbles in bytes 0..15, high in 16..31.
inline __m256i nibbles(const std::uint8_t* q) {
  const __m128i b = _mm_loadu_si128(reinterpret_cast<const __m128i*>(q));
  const __m256i v = _mm256_set_m128i(_mm_srli_epi16(b, 4), b);
  return _mm256_and_si256(v, _mm256_set1_epi8(0x0f));
}

// Byte i is 0xff where bit i of `bits` is set.
inline __m256i bits_to_bytes(std::uint32_t bits) {
  const __m256i spread = _mm256_shuffle_epi8(
      _mm256_set1_epi32(static_cast<int>(bits)),
      _mm256_set_epi64x(0x0303030303030303, 0x0202020202020202, 0x0101010101010101, 0));
  const __m256i others = _mm256_or_si256(spread, _mm256_set1_epi64x(0x7fbfdfeff7fbfdfe));
  return _mm256_cmpeq_epi8(others, _mm256_set1_epi64x(-1));
}

inline __m256i table_lookup(const std::int8_t* table, __m256i idx) {
  const __m128i t = _mm_loadu_si128(reinterpret_cast<const __m128i*>(table));
  return _mm256_shuffle_epi8(_mm256_set_m128i(t, t), idx);
}

// Pairwise i16 sums of signed w times signed x.
inline __m256i mul_signed(__m256i w, __m256i x) {
  return _mm256_maddubs_epi16(_mm256_sign_epi8(w, w), _mm256_sign_epi8(x, w));
}

inline __m256i sum_i16_to_i32(__m256i v) { return _mm256_madd_epi16(v, _mm256_set1_epi16(1)); }

inline float hsum(__m256 v) {
  __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  s = _mm_add_ps(s, _mm_movehl_ps(s, s));
  s = _mm_add_ss(s, _mm_movehdup_ps(s));
  return _mm_cvtss_f32(s);
}

// A vector of i16 scales: `lo` for the first 16 bytes' pairs, `hi` for the rest.
inline __m256i group_scales(int lo, int hi) {
  return _mm256_set_m128i(_mm_set1_epi16(static_cast<short>(hi)),
                          _mm_set1_epi16(static_cast<short>(lo)));
}

// ---------------------------------------------------------------------------
// 32-element formats against q8_0 (or q8_1 for the ones with a min).

// A block with a min adds m * d_x * sum(q_x). The sum is taken exactly from the
// quantized activations (q8_1 would carry it as an f16-rounded d * sum, which costs
// about 2^-11 of the term).
inline __m256 add_min_term(__m256 acc, float m_dx, __m256i xq) {
  const __m256i sums = sum_i16_to_i32(_mm256_maddubs_epi16(_mm256_set1_epi8(1), xq));
  return _mm256_fmadd_ps(_mm256_set1_ps(m_dx), _mm256_cvtepi32_ps(sums), acc);
}

template <DType W>
float dot_small(const std::uint8_t* w, const std::uint8_t* x, std::int64_t blocks) {
  constexpr bool kHasMin = W == DType::kQ4_1 || W == DType::kQ5_1;
  constexpr std::int64_t kWBytes = block_bytes(W);
  constexpr std::int64_t kXBytes = sizeof(BlockQ8_0);
  __m256 acc = _mm256_setzero_ps();
  __m256 acc_min = _mm256_setzero_ps();
  for (std::int64_t i = 0; i < blocks; ++i) {
    const std::uint8_t* wb = w + i * kWBytes;
    const std::uint8_t* xb = x + i * kXBytes;
    const __m256i xq = load256(xb + 2);
    const float dx = f16_at(xb);
    float dw = 0.0f;
    __m256i p16;
    if constexpr (W == DType::kQ4_0) {
      const auto& b = *reinterpret_cast<const detail::BlockQ4_0*>(wb);
      dw = f16_at(b.d);
      p16 = mul_signed(_mm256_sub_epi8(nibbles(b.qs), _mm256_set1_epi8(8)), xq);
    } else if constexpr (W == DType::kQ4_1) {
      const auto& b = *reinterpret_cast<const detail::BlockQ4_1*>(wb);
      dw = f16_at(b.d);
      acc_min = add_min_term(acc_min, f16_at(b.m) * dx, xq);
      p16 = _mm256_maddubs_epi16(nibbles(b.qs), xq);
    } else if constexpr (W == DType::kQ5_0) {
      const auto& b = *reinterpret_cast<const detail::BlockQ5_0*>(wb);
      dw = f16_at(b.d);
      const __m256i high =
          _mm256_and_si256(bits_to_bytes(detail::load_u32(b.qh)), _mm256_set1_epi8(0x10));
      const __m256i q = _mm256_sub_epi8(_mm256_or_si256(nibbles(b.qs), high), _mm256_set1_epi8(16));
      p16 = mul_signed(q, xq);
    } else if constexpr (W == DType::kQ5_1) {
      const auto& b = *reinterpret_cast<const detail::BlockQ5_1*>(wb);
      dw = f16_at(b.d);
      acc_min = add_min_term(acc_min, f16_at(b.m) * dx, xq);
      const __m256i high =
          _mm256_and_si256(bits_to_bytes(detail::load_u32(b.qh)), _mm256_set1_epi8(0x10));
      p16 = _mm256_maddubs_epi16(_mm256_or_si256(nibbles(b.qs), high), xq);
    } else if constexpr (W == DType::kQ8_0) {
      dw = f16_at(wb);
      p16 = mul_signed(load256(wb + 2), xq);
    } else if constexpr (W == DType::kIQ4_NL) {
      const auto& b = *reinterpret_cast<const detail::BlockIQ4_NL*>(wb);
      dw = f16_at(b.d);
      p16 = mul_signed(table_lookup(detail::kIQ4NLValues, nibbles(b.qs)), xq);
    } else {
      static_assert(W == DType::kMXFP4);
      const auto& b = *reinterpret_cast<const detail::BlockMXFP4*>(wb);
      dw = detail::e8m0_half(b.e);
      p16 = mul_signed(table_lookup(detail::kMXFP4Values, nibbles(b.qs)), xq);
    }
    acc = _mm256_fmadd_ps(_mm256_set1_ps(dw * dx), _mm256_cvtepi32_ps(sum_i16_to_i32(p16)), acc);
  }
  if constexpr (kHasMin) acc = _mm256_add_ps(acc, acc_min);
  return hsum(acc);
}

// ---------------------------------------------------------------------------
// k-quants against q8_k.

inline int bsum(const BlockQ8_K& x, int g) { return detail::load_i16(x.bsums + 2 * g); }

inline __m256i mask_bits(__m256i v, int bit) {
  const __m256i m = _mm256_set1_epi8(static_cast<char>(1 << bit));
  return _mm256_cmpeq_epi8(_mm256_and_si256(v, m), m);
}

template <DType W>
float dot_k(const std::uint8_t* w, const std::uint8_t* xr, std::int64_t blocks) {
  constexpr std::int64_t kWBytes = block_bytes(W);
  const __m256i low4 = _mm256_set1_epi8(0x0f);
  const __m256i low2 = _mm256_set1_epi8(0x03);
  __m256 acc = _mm256_setzero_ps();
  float acc_scalar = 0.0f;
  for (std::int64_t i = 0; i < blocks; ++i) {
    const std::uint8_t* wb = w + i * kWBytes;
    const auto& x = *reinterpret_cast<const BlockQ8_K*>(xr + i * sizeof(BlockQ8_K));
    const float dx = detail::load_f32(x.d);
    __m256i sumi = _mm256_setzero_si256();
    float d = 0.0f;
    if constexpr (W == DType::kQ4_K || W == DType::kQ5_K) {
      const std::uint8_t* scales;
      const std::uint8_t* qs;
      const std::uint8_t* qh = nullptr;
      if constexpr (W == DType::kQ4_K) {
        const auto& b = *reinterpret_cast<const detail::BlockQ4_K*>(wb);
        d = f16_at(b.d);
        scales = b.scales;
        qs = b.qs;
      } else {
        const auto& b = *reinterpret_cast<const detail::BlockQ5_K*>(wb);
        d = f16_at(b.d);
        scales = b.scales;
        qs = b.qs;
        qh = b.qh;
      }
      const float dmin = f16_at(wb + 2);
      int sc[8];
      int mn[8];
      int min_sum = 0;
      for (int g = 0; g < 8; ++g) {
        detail::k4_scale_min(g, scales, sc[g], mn[g]);
        min_sum += mn[g] * (bsum(x, 2 * g) + bsum(x, 2 * g + 1));
      }
      const __m256i hbits = qh != nullptr ? load256(qh) : _mm256_setzero_si256();
      for (int c = 0; c < 4; ++c) {
        const __m256i q = load256(qs + 32 * c);
        __m256i lo = _mm256_and_si256(q, low4);
        __m256i hi = _mm256_and_si256(_mm256_srli_epi16(q, 4), low4);
        if constexpr (W == DType::kQ5_K) {
          const __m256i b16 = _mm256_set1_epi8(0x10);
          lo = _mm256_or_si256(lo, _mm256_and_si256(mask_bits(hbits, 2 * c), b16));
          hi = _mm256_or_si256(hi, _mm256_and_si256(mask_bits(hbits, 2 * c + 1), b16));
        }
        const __m256i p0 = _mm256_maddubs_epi16(lo, load256(x.qs + 64 * c));
        const __m256i p1 = _mm256_maddubs_epi16(hi, load256(x.qs + 64 * c + 32));
        sumi = _mm256_add_epi32(
            sumi, _mm256_madd_epi16(p0, _mm256_set1_epi16(static_cast<short>(sc[2 * c]))));
        sumi = _mm256_add_epi32(
            sumi, _mm256_madd_epi16(p1, _mm256_set1_epi16(static_cast<short>(sc[2 * c + 1]))));
      }
      acc_scalar -= dmin * dx * static_cast<float>(min_sum);
    } else if constexpr (W == DType::kQ6_K) {
      const auto& b = *reinterpret_cast<const detail::BlockQ6_K*>(wb);
      d = f16_at(b.d);
      int offset_sum = 0;
      for (int g = 0; g < 16; ++g) offset_sum += b.scales[g] * bsum(x, g);
      for (int h = 0; h < 2; ++h) {
        const __m256i qh = load256(b.qh + 32 * h);
        const __m256i ql0 = load256(b.ql + 64 * h);
        const __m256i ql1 = load256(b.ql + 64 * h + 32);
        for (int r = 0; r < 4; ++r) {
          const __m256i ql = (r % 2) == 0 ? ql0 : ql1;
          const __m256i low =
              r < 2 ? _mm256_and_si256(ql, low4) : _mm256_and_si256(_mm256_srli_epi16(ql, 4), low4);
          const __m256i high = _mm256_slli_epi16(
              _mm256_and_si256(_mm256_srl_epi16(qh, _mm_cvtsi32_si128(2 * r)), low2), 4);
          const __m256i q = _mm256_or_si256(low, high);
          const int g = 8 * h + 2 * r;
          const __m256i p = _mm256_maddubs_epi16(q, load256(x.qs + 128 * h + 32 * r));
          sumi = _mm256_add_epi32(sumi,
                                  _mm256_madd_epi16(p, group_scales(b.scales[g], b.scales[g + 1])));
        }
      }
      // Levels are stored + 32: remove 32 * s_g * bsum_g.
      acc_scalar -= d * dx * static_cast<float>(32 * offset_sum);
    } else if constexpr (W == DType::kQ3_K) {
      const auto& b = *reinterpret_cast<const detail::BlockQ3_K*>(wb);
      d = f16_at(b.d);
      int sc[16];
      int offset_sum = 0;
      for (int g = 0; g < 16; ++g) {
        sc[g] = detail::q3k_scale(g, b.scales);
        offset_sum += sc[g] * bsum(x, g);
      }
      const __m256i hm = load256(b.hmask);
      for (int h = 0; h < 2; ++h) {
        const __m256i qs = load256(b.qs + 32 * h);
        for (int r = 0; r < 4; ++r) {
          const __m256i low =
              _mm256_and_si256(_mm256_srl_epi16(qs, _mm_cvtsi32_si128(2 * r)), low2);
          const __m256i high = _mm256_and_si256(mask_bits(hm, 4 * h + r), _mm256_set1_epi8(4));
          const __m256i q = _mm256_or_si256(low, high);
          const int g = 8 * h + 2 * r;
          const __m256i p = _mm256_maddubs_epi16(q, load256(x.qs + 128 * h + 32 * r));
          sumi = _mm256_add_epi32(sumi, _mm256_madd_epi16(p, group_scales(sc[g], sc[g + 1])));
        }
      }
      // Levels are stored + 4: remove 4 * s_g * bsum_g.
      acc_scalar -= d * dx * static_cast<float>(4 * offset_sum);
    } else if constexpr (W == DType::kQ2_K) {
      const auto& b = *reinterpret_cast<const detail::BlockQ2_K*>(wb);
      d = f16_at(b.d);
      int min_sum = 0;
      for (int g = 0; g < 16; ++g) min_sum += (b.scales[g] >> 4) * bsum(x, g);
      for (int h = 0; h < 2; ++h) {
        const __m256i qs = load256(b.qs + 32 * h);
        for (int r = 0; r < 4; ++r) {
          const __m256i q = _mm256_and_si256(_mm256_srl_epi16(qs, _mm_cvtsi32_si128(2 * r)), low2);
          const int g = 8 * h + 2 * r;
          const __m256i p = _mm256_maddubs_epi16(q, load256(x.qs + 128 * h + 32 * r));
          sumi = _mm256_add_epi32(
              sumi, _mm256_madd_epi16(p, group_scales(b.scales[g] & 0xf, b.scales[g + 1] & 0xf)));
        }
      }
      acc_scalar -= f16_at(b.dmin) * dx * static_cast<float>(min_sum);
    } else {
      static_assert(W == DType::kIQ4_XS);
      const auto& b = *reinterpret_cast<const detail::BlockIQ4_XS*>(wb);
      d = f16_at(b.d);
      for (int g = 0; g < 8; ++g) {
        const __m256i q = table_lookup(detail::kIQ4NLValues, nibbles(b.qs + 16 * g));
        const __m256i p = mul_signed(q, load256(x.qs + 32 * g));
        sumi = _mm256_add_epi32(
            sumi,
            _mm256_madd_epi16(p, _mm256_set1_epi16(static_cast<short>(detail::iq4xs_scale(g, b)))));
      }
    }
    acc = _mm256_fmadd_ps(_mm256_set1_ps(d * dx), _mm256_cvtepi32_ps(sumi), acc);
  }
  return hsum(acc) + acc_scalar;
}

using DotFn = float (*)(const std::uint8_t* w, const std::uint8_t* x, std::int64_t blocks);

DotFn dot_for(DType w) {
  switch (w) {
    case DType::kQ4_0: return &dot_small<DType::kQ4_0>;
    case DType::kQ4_1: return &dot_small<DType::kQ4_1>;
    case DType::kQ5_0: return &dot_small<DType::kQ5_0>;
    case DType::kQ5_1: return &dot_small<DType::kQ5_1>;
    case DType::kQ8_0: return &dot_small<DType::kQ8_0>;
    case DType::kIQ4_NL: return &dot_small<DType::kIQ4_NL>;
    case DType::kMXFP4: return &dot_small<DType::kMXFP4>;
    case DType::kQ2_K: return &dot_k<DType::kQ2_K>;
    case DType::kQ3_K: return &dot_k<DType::kQ3_K>;
    case DType::kQ4_K: return &dot_k<DType::kQ4_K>;
    case DType::kQ5_K: return &dot_k<DType::kQ5_K>;
    case DType::kQ6_K: return &dot_k<DType::kQ6_K>;
    case DType::kIQ4_XS: return &dot_k<DType::kIQ4_XS>;
    default: return nullptr;
  }
}

// Weight rows per parallel task, and per tile inside a task: a tile's rows meet
// one activation row while it is in L1.
constexpr std::int64_t kRowGrain = 8;
constexpr std::int64_t kTileRows = 16;

}  // namespace

Status matmul_quant_avx2(const KernelCall& call, DType w_dtype) {
  const std::string kernel = fmt::format("matmul_f32_{}_f32__cpu_avx2", name(w_dtype));
  const DotFn dot = dot_for(w_dtype);
  if (dot == nullptr) {
    return invalid_argument_error(
        fmt::format("{}: no AVX2 dot product for {}", kernel, name(w_dtype)));
  }
  SWITCHYARD_ASSIGN_OR_RETURN(QuantMatmulArgs args, check_quant_matmul(call, w_dtype, kernel));
  const DType act = activation_format(w_dtype);
  if (args.k % block_elems(act) != 0) {
    return invalid_argument_error(
        fmt::format("{}: K = {} is not a whole number of {} blocks", kernel, args.k, name(act)));
  }
  const std::int64_t act_row_bytes = args.k / block_elems(act) * block_bytes(act);
  std::vector<std::uint8_t> xq(static_cast<std::size_t>(act_row_bytes * args.rows));
  call.ctx.parallel_for(args.rows, 1, [&](std::int64_t begin, std::int64_t end) {
    for (std::int64_t r = begin; r < end; ++r) {
      detail::quantize_row(act, args.a + r * args.k, xq.data() + r * act_row_bytes, args.k);
    }
  });
  const std::int64_t blocks = args.k / block_elems(w_dtype);
  const auto* w = reinterpret_cast<const std::uint8_t*>(args.w);
  call.ctx.parallel_for(args.n, kRowGrain, [&](std::int64_t begin, std::int64_t end) {
    for (std::int64_t t0 = begin; t0 < end; t0 += kTileRows) {
      const std::int64_t t1 = std::min(end, t0 + kTileRows);
      for (std::int64_t r = 0; r < args.rows; ++r) {
        const std::uint8_t* x = xq.data() + r * act_row_bytes;
        float* out = args.out + r * args.n;
        for (std::int64_t j = t0; j < t1; ++j) out[j] = dot(w + j * args.row_bytes, x, blocks);
      }
    }
  });
  return Status::ok();
}

}  // namespace switchyard::cpu
