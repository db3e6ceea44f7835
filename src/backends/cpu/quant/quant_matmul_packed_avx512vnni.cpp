// AVX-512 VNNI tiles of the packed GEMM sibling (quant_packed.h): activation rows
// quantized to q8_0 with the reference rounding (the same levels and scales as
// every integer-dot sibling, so the same precision claim), then register tiles of
// two 16-row panels x up to six activation rows.
//
// Per sub-block of 32 (16) elements and tile that is 8 (4) groups, each one
// 512-bit load per panel and one vpdpbusd per panel and activation row (the
// activation dword broadcast from memory); then, per panel and row, one
// conversion, one multiply (panel scales x activation scale) and one FMA, and
// for the affine formats a second FMA (panel offsets x d_x * sum(q_x)). The
// symmetric formats' zero point costs nothing per block: the i32 accumulator
// starts at -z * sum(q_x) of the sub-block, prepared with the activations.
#include <immintrin.h>

#include <cstring>

#include "backends/cpu/avx512_diagnostics.h"
#include "backends/cpu/quant/quant_act_avx512_inl.h"
#include "backends/cpu/quant/quant_packed.h"
#include "backends/cpu/quant/quant_packed_act_inl.h"

namespace switchyard::cpu {
namespace {

template <int kSub, bool kAffine, int kPanels, int kRows>
void tile(const std::uint8_t* w, std::int64_t panel_bytes, const std::uint8_t* x,
          std::int64_t x_stride, std::int64_t k, PackedSpan span, float* out, std::int64_t n,
          __mmask16 store) {
  constexpr std::int64_t kTile = std::int64_t{16} * kSub + (kAffine ? 128 : 64);
  ActRow act[kRows];
#pragma GCC unroll 8
  for (int r = 0; r < kRows; ++r) act[r] = act_row(x + r * x_stride, k);
  __m512 acc[kPanels][kRows];
#pragma GCC unroll 8
  for (int r = 0; r < kRows; ++r) {
#pragma GCC unroll 8
    for (int p = 0; p < kPanels; ++p) {
      const float* o = out + r * n + 16 * p;
      acc[p][r] = !span.accumulate  ? _mm512_setzero_ps()
                  : p + 1 < kPanels ? _mm512_loadu_ps(o)
                                    : _mm512_maskz_loadu_ps(store, o);
    }
  }
  const std::int64_t s_end = span.end / kSub;
  for (std::int64_t s = span.begin / kSub; s < s_end; ++s) {
    const std::uint8_t* t = w + s * kTile;
    __m512i dot[kPanels][kRows];
#pragma GCC unroll 8
    for (int r = 0; r < kRows; ++r) {
      const __m512i start = kAffine ? _mm512_setzero_si512() : _mm512_set1_epi32(act[r].sums[s]);
#pragma GCC unroll 8
      for (int p = 0; p < kPanels; ++p) dot[p][r] = start;
    }
#pragma GCC unroll 8
    for (int g = 0; g < kSub / 4; ++g) {
      __m512i wv[kPanels];
#pragma GCC unroll 8
      for (int p = 0; p < kPanels; ++p) wv[p] = _mm512_loadu_si512(t + p * panel_bytes + g * 64);
#pragma GCC unroll 8
      for (int r = 0; r < kRows; ++r) {
        std::int32_t four;
        std::memcpy(&four, act[r].levels + s * kSub + 4 * g, sizeof four);
        const __m512i xv = _mm512_set1_epi32(four);
#pragma GCC unroll 8
        for (int p = 0; p < kPanels; ++p) dot[p][r] = _mm512_dpbusd_epi32(dot[p][r], wv[p], xv);
      }
    }
#pragma GCC unroll 8
    for (int p = 0; p < kPanels; ++p) {
      const std::uint8_t* scales = t + p * panel_bytes + 16 * kSub;
      const __m512 d = _mm512_loadu_ps(scales);
#pragma GCC unroll 8
      for (int r = 0; r < kRows; ++r) {
        const __m512 dd = _mm512_mul_ps(d, _mm512_set1_ps(act[r].scales[s * kSub / 32]));
        acc[p][r] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(dot[p][r]), dd, acc[p][r]);
        if constexpr (kAffine) {
          float sum;
          std::memcpy(&sum, act[r].sums + s, sizeof sum);
          acc[p][r] = _mm512_fmadd_ps(_mm512_loadu_ps(scales + 64), _mm512_set1_ps(sum), acc[p][r]);
        }
      }
    }
  }
#pragma GCC unroll 8
  for (int r = 0; r < kRows; ++r) {
#pragma GCC unroll 8
    for (int p = 0; p < kPanels; ++p) {
      float* o = out + r * n + 16 * p;
      if (p + 1 < kPanels || store == 0xffff) {
        _mm512_storeu_ps(o, acc[p][r]);
      } else {
        _mm512_mask_storeu_ps(o, store, acc[p][r]);
      }
    }
  }
}

template <int kSub, bool kAffine, int kPanels>
void tiles_for_rows(const std::uint8_t* w, std::int64_t panel_bytes, const std::uint8_t* x,
                    std::int64_t x_stride, int rows, std::int64_t k, PackedSpan span, float* out,
                    std::int64_t n, __mmask16 store) {
  switch (rows) {
    case 1:
      return tile<kSub, kAffine, kPanels, 1>(w, panel_bytes, x, x_stride, k, span, out, n, store);
    case 2:
      return tile<kSub, kAffine, kPanels, 2>(w, panel_bytes, x, x_stride, k, span, out, n, store);
    case 3:
      return tile<kSub, kAffine, kPanels, 3>(w, panel_bytes, x, x_stride, k, span, out, n, store);
    case 4:
      return tile<kSub, kAffine, kPanels, 4>(w, panel_bytes, x, x_stride, k, span, out, n, store);
    case 5:
      return tile<kSub, kAffine, kPanels, 5>(w, panel_bytes, x, x_stride, k, span, out, n, store);
    default:
      return tile<kSub, kAffine, kPanels, 6>(w, panel_bytes, x, x_stride, k, span, out, n, store);
  }
}

template <int kSub, bool kAffine>
void tiles_for_panels(const std::uint8_t* w, std::int64_t panel_bytes, int panels,
                      const std::uint8_t* x, std::int64_t x_stride, int rows, std::int64_t k,
                      PackedSpan span, float* out, std::int64_t n, __mmask16 store) {
  if (panels == 2) {
    tiles_for_rows<kSub, kAffine, 2>(w, panel_bytes, x, x_stride, rows, k, span, out, n, store);
  } else {
    tiles_for_rows<kSub, kAffine, 1>(w, panel_bytes, x, x_stride, rows, k, span, out, n, store);
  }
}

}  // namespace

void prepare_packed_row_avx512(PackedFormat f, const float* a, std::int64_t k, std::uint8_t* x) {
  for (std::int64_t b = 0; b < k / 32; ++b) {
    __m128i lo, hi;
    const float d = quantize_q8_0_levels(a + 32 * b, lo, hi);
    alignas(16) std::int8_t levels[32];
    _mm_store_si128(reinterpret_cast<__m128i*>(levels), lo);
    _mm_store_si128(reinterpret_cast<__m128i*>(levels + 16), hi);
    store_packed_act_block(f, k, b, levels, d, x);
  }
}

void packed_tiles_avx512(PackedFormat f, const std::uint8_t* w, std::int64_t panel_bytes,
                         int panels, const std::uint8_t* x, std::int64_t x_stride, int rows,
                         std::int64_t k, PackedSpan span, float* out, std::int64_t n,
                         int last_panel_rows) {
  const auto store = static_cast<__mmask16>((1u << last_panel_rows) - 1u);
  const auto run = [&]<int kSub, bool kAffine>() {
    tiles_for_panels<kSub, kAffine>(w, panel_bytes, panels, x, x_stride, rows, k, span, out, n,
                                    store);
  };
  if (f.sub == 16) {
    f.affine ? run.operator()<16, true>() : run.operator()<16, false>();
  } else {
    f.affine ? run.operator()<32, true>() : run.operator()<32, false>();
  }
}

}  // namespace switchyard::cpu
