// Quantizers and dequantizers of the GGUF block formats.
//
// The quantizers reproduce the reference quantizers of the GGUF ecosystem step for
// step (the same scale searches, the same float operations in the same order, the
// same rounding: round-half-away for q8_0 / q8_1, truncation after +0.5 for
// q4_0..q5_1, ties-to-even `nearest_int` elsewhere), so the same input gives the
// same bytes. Like every file of the project it is compiled without FMA
// contraction (-ffp-contract=off, CMakeLists.txt), as the reference builds run.
//
// Deliberate differences from the reference quantizers, all on inputs where the
// reference produces garbage:
//   - NaN or infinity in the input is refused (kInvalidArgument).
//   - A block whose f16 scales would overflow (|x| beyond what the format's f16
//     scale can express, e.g. about 5e5 for q4_0) is refused (kInvalidArgument) instead
//     of being written with an infinite scale.
//   - mxfp4: for a block maximum below 2^-125 the reference converts a negative
//     float to uint8 (undefined); here the exponent is clamped to 0.
//   - Casts the reference writes as plain float-to-integer conversions are
//     clamped first, which changes nothing for finite scales and removes undefined
//     behaviour when a scale underflows (its stored value is then zero anyway).
//
// Verified byte for byte against the `gguf` Python package (the reference's own
// port) for q4_0, q4_1, q5_0, q5_1, q8_0 and mxfp4 quantization and for every
// dequantizer it has; the k-quant and iq4 quantizers follow the reference
// algorithm step for step but have no independent byte-level check here.
#include <algorithm>
#include <array>
#include <cmath>
#include <cstring>

#include <fmt/format.h>

#include "switchyard/half.h"
#include "switchyard/quant.h"
#include "switchyard/quant_blocks.h"

namespace switchyard {
namespace quant {
namespace {

// Groups whose largest magnitude is below this are treated as all zero.
constexpr float kGroupMaxEps = 1e-15f;

// ---------------------------------------------------------------------------
// Scale searches shared by the k-quants.

// w * l^2 rounded as the reference quantizers round it, (w * l) * l in float; the
// exact integer l * l times w can differ in the last bit, which can flip a scale
// choice and so the bytes written.
float weighted_square(float w, int l) { return w * static_cast<float>(l) * static_cast<float>(l); }

// Symmetric quantization of n values to [-nmax, nmax - 1] (stored + nmax in L),
// weighted by x^2 (the reference's "rmse type 1"), trying 18 scales around
// nmax / max and keeping the best weighted least-squares fit. Returns the scale.
float search_symmetric(int n, int nmax, const float* x, std::int8_t* L) {
  float max = 0.0f;
  float amax = 0.0f;
  for (int i = 0; i < n; ++i) {
    const float ax = std::fabs(x[i]);
    if (ax > amax) {
      amax = ax;
      max = x[i];
    }
  }
  if (amax < kGroupMaxEps) {
    std::fill(L, L + n, std::int8_t{0});
    return 0.0f;
  }
  const auto clamp_l = [nmax](int l) { return std::max(-nmax, std::min(nmax - 1, l)); };
  float iscale = -static_cast<float>(nmax) / max;
  float sumlx = 0.0f;
  float suml2 = 0.0f;
  for (int i = 0; i < n; ++i) {
    const int l = clamp_l(nearest_int(iscale * x[i]));
    L[i] = static_cast<std::int8_t>(l + nmax);
    const float w = x[i] * x[i];
    sumlx += w * x[i] * static_cast<float>(l);
    suml2 += weighted_square(w, l);
  }
  float scale = suml2 != 0.0f ? sumlx / suml2 : 0.0f;
  float best = scale * sumlx;
  for (int is = -9; is <= 9; ++is) {
    if (is == 0) continue;
    iscale = -(static_cast<float>(nmax) + 0.1f * static_cast<float>(is)) / max;
    sumlx = 0.0f;
    suml2 = 0.0f;
    for (int i = 0; i < n; ++i) {
      const int l = clamp_l(nearest_int(iscale * x[i]));
      const float w = x[i] * x[i];
      sumlx += w * x[i] * static_cast<float>(l);
      suml2 += weighted_square(w, l);
    }
    if (suml2 > 0.0f && sumlx * sumlx > best * suml2) {
      for (int i = 0; i < n; ++i) {
        L[i] = static_cast<std::int8_t>(nmax + clamp_l(nearest_int(iscale * x[i])));
      }
      scale = sumlx / suml2;
      best = scale * sumlx;
    }
  }
  return scale;
}

// q3_k's group search: start from nmax / max, then move single levels while that
// improves the x^2-weighted fit (at most five sweeps). Returns the scale; L holds
// levels + nmax.
float search_q3(int n, int nmax, const float* x, std::int8_t* L) {
  float max = 0.0f;
  float amax = 0.0f;
  for (int i = 0; i < n; ++i) {
    const float ax = std::fabs(x[i]);
    if (ax > amax) {
      amax = ax;
      max = x[i];
    }
  }
  if (amax < kGroupMaxEps) {
    std::fill(L, L + n, std::int8_t{0});
    return 0.0f;
  }
  const auto clamp_l = [nmax](int l) { return std::max(-nmax, std::min(nmax - 1, l)); };
  const float iscale = -static_cast<float>(nmax) / max;
  float sumlx = 0.0f;
  float suml2 = 0.0f;
  for (int i = 0; i < n; ++i) {
    const int l = clamp_l(nearest_int(iscale * x[i]));
    L[i] = static_cast<std::int8_t>(l);
    const float w = x[i] * x[i];
    sumlx += w * x[i] * static_cast<float>(l);
    suml2 += weighted_square(w, l);
  }
  for (int sweep = 0; sweep < 5; ++sweep) {
    int changed = 0;
    for (int i = 0; i < n; ++i) {
      const float w = x[i] * x[i];
      float slx = sumlx - w * x[i] * static_cast<float>(L[i]);
      if (slx > 0.0f) {
        float sl2 = suml2 - weighted_square(w, L[i]);
        const int new_l = clamp_l(nearest_int(x[i] * sl2 / slx));
        if (new_l != L[i]) {
          slx += w * x[i] * static_cast<float>(new_l);
          sl2 += weighted_square(w, new_l);
          if (sl2 > 0.0f && slx * slx * suml2 > sumlx * sumlx * sl2) {
            L[i] = static_cast<std::int8_t>(new_l);
            sumlx = slx;
            suml2 = sl2;
            ++changed;
          }
        }
      }
    }
    if (changed == 0) break;
  }
  for (int i = 0; i < n; ++i) L[i] = static_cast<std::int8_t>(L[i] + nmax);
  return suml2 > 0.0f ? sumlx / suml2 : 0.0f;
}

// Asymmetric quantization x ~ scale * L + min (min <= 0) of n values to [0, nmax],
// with per-element weights: starts from the min/max fit, then tries nstep + 1
// scales (rmin + rdelta * step + nmax) / (max - min), each refined by a weighted
// least-squares solve for scale and min, keeping the one with the lowest weighted
// error (absolute when use_mad, squared otherwise). Returns the scale and stores
// -min in *neg_min.
float search_affine(int n, int nmax, const float* x, const float* weights, std::uint8_t* L,
                    float* neg_min, float rmin, float rdelta, int nstep, bool use_mad) {
  float min = x[0];
  float max = x[0];
  float sum_w = weights[0];
  float sum_x = sum_w * x[0];
  for (int i = 1; i < n; ++i) {
    if (x[i] < min) min = x[i];
    if (x[i] > max) max = x[i];
    const float w = weights[i];
    sum_w += w;
    sum_x += w * x[i];
  }
  if (min > 0.0f) min = 0.0f;
  if (max == min) {
    std::fill(L, L + n, std::uint8_t{0});
    *neg_min = -min;
    return 0.0f;
  }
  const auto clamp_l = [nmax](int l) { return std::max(0, std::min(nmax, l)); };
  float iscale = static_cast<float>(nmax) / (max - min);
  float scale = 1.0f / iscale;
  float best_error = 0.0f;
  for (int i = 0; i < n; ++i) {
    L[i] = static_cast<std::uint8_t>(clamp_l(nearest_int(iscale * (x[i] - min))));
    float diff = scale * static_cast<float>(L[i]) + min - x[i];
    diff = use_mad ? std::fabs(diff) : diff * diff;
    best_error += weights[i] * diff;
  }
  std::array<std::uint8_t, 32> aux{};
  for (int step = 0; step <= nstep; ++step) {
    iscale = (rmin + rdelta * static_cast<float>(step) + static_cast<float>(nmax)) / (max - min);
    float sum_l = 0.0f;
    float sum_l2 = 0.0f;
    float sum_xl = 0.0f;
    for (int i = 0; i < n; ++i) {
      const int l = clamp_l(nearest_int(iscale * (x[i] - min)));
      aux[static_cast<std::size_t>(i)] = static_cast<std::uint8_t>(l);
      const float w = weights[i];
      const auto fl = static_cast<float>(l);
      sum_l += w * fl;
      sum_l2 += w * fl * fl;
      sum_xl += w * fl * x[i];
    }
    const float det = sum_w * sum_l2 - sum_l * sum_l;
    if (det > 0.0f) {
      float this_scale = (sum_w * sum_xl - sum_x * sum_l) / det;
      float this_min = (sum_l2 * sum_x - sum_l * sum_xl) / det;
      if (this_min > 0.0f) {
        this_min = 0.0f;
        this_scale = sum_xl / sum_l2;
      }
      float error = 0.0f;
      for (int i = 0; i < n; ++i) {
        float diff =
            this_scale * static_cast<float>(aux[static_cast<std::size_t>(i)]) + this_min - x[i];
        diff = use_mad ? std::fabs(diff) : diff * diff;
        error += weights[i] * diff;
      }
      if (error < best_error) {
        std::copy(aux.begin(), aux.begin() + n, L);
        best_error = error;
        scale = this_scale;
        min = this_min;
      }
    }
  }
  *neg_min = -min;
  return scale;
}

// Float to int conversion that the reference writes as a plain cast (truncating),
// made total: NaN and values outside [lo, hi] clamp instead of being undefined.
// They only arise when a scale underflows to a value whose inverse is infinite;
// the stored scale is then zero and the level does not matter.
int truncate_clamped(float v, int lo, int hi) {
  if (!(v >= static_cast<float>(lo))) return lo;
  if (v >= static_cast<float>(hi)) return hi;
  return static_cast<int>(v);
}

// Index of the level in the ascending table `values` nearest to v (the lower one
// on a tie), by bisection.
int nearest_level(const std::int8_t* values, float v) {
  if (v <= values[0]) return 0;
  if (v >= values[15]) return 15;
  int lo = 0;
  int hi = 15;
  while (hi - lo > 1) {
    const int mid = (lo + hi) / 2;
    if (v < values[mid]) {
      hi = mid;
    } else {
      lo = mid;
    }
  }
  return v - values[hi - 1] < values[hi] - v ? hi - 1 : hi;
}

// ---------------------------------------------------------------------------
// Small-block formats.

void quantize_q4_0(const float* x, BlockQ4_0& b) {
  float amax = 0.0f;
  float max = 0.0f;
  for (int j = 0; j < kQK; ++j) {
    if (amax < std::fabs(x[j])) {
      amax = std::fabs(x[j]);
      max = x[j];
    }
  }
  // The extreme value maps to level 0 (-8 * d), so the other side reaches +7.
  const float d = max / -8.0f;
  const float id = d != 0.0f ? 1.0f / d : 0.0f;
  store_f16(b.d, d);
  for (int j = 0; j < 16; ++j) {
    const int lo = std::min(15, truncate_clamped(x[j] * id + 8.5f, -128, 127));
    const int hi = std::min(15, truncate_clamped(x[j + 16] * id + 8.5f, -128, 127));
    b.qs[j] = static_cast<std::uint8_t>(lo | (hi << 4));
  }
}

void quantize_q4_1(const float* x, BlockQ4_1& b) {
  float min = x[0];
  float max = x[0];
  for (int j = 1; j < kQK; ++j) {
    min = std::min(min, x[j]);
    max = std::max(max, x[j]);
  }
  const float d = (max - min) / 15.0f;
  const float id = d != 0.0f ? 1.0f / d : 0.0f;
  store_f16(b.d, d);
  store_f16(b.m, min);
  for (int j = 0; j < 16; ++j) {
    const int lo = std::min(15, truncate_clamped((x[j] - min) * id + 0.5f, -128, 127));
    const int hi = std::min(15, truncate_clamped((x[j + 16] - min) * id + 0.5f, -128, 127));
    b.qs[j] = static_cast<std::uint8_t>(lo | (hi << 4));
  }
}

void quantize_q5_0(const float* x, BlockQ5_0& b) {
  float amax = 0.0f;
  float max = 0.0f;
  for (int j = 0; j < kQK; ++j) {
    if (amax < std::fabs(x[j])) {
      amax = std::fabs(x[j]);
      max = x[j];
    }
  }
  const float d = max / -16.0f;
  const float id = d != 0.0f ? 1.0f / d : 0.0f;
  store_f16(b.d, d);
  std::uint32_t qh = 0;
  for (int j = 0; j < 16; ++j) {
    const int lo = std::min(31, truncate_clamped(x[j] * id + 16.5f, -128, 127));
    const int hi = std::min(31, truncate_clamped(x[j + 16] * id + 16.5f, -128, 127));
    b.qs[j] = static_cast<std::uint8_t>((lo & 0xf) | ((hi & 0xf) << 4));
    qh |= static_cast<std::uint32_t>((lo >> 4) & 1) << j;
    qh |= static_cast<std::uint32_t>((hi >> 4) & 1) << (j + 16);
  }
  for (int i = 0; i < 4; ++i) b.qh[i] = static_cast<std::uint8_t>(qh >> (8 * i));
}

void quantize_q5_1(const float* x, BlockQ5_1& b) {
  float min = x[0];
  float max = x[0];
  for (int j = 1; j < kQK; ++j) {
    min = std::min(min, x[j]);
    max = std::max(max, x[j]);
  }
  const float d = (max - min) / 31.0f;
  const float id = d != 0.0f ? 1.0f / d : 0.0f;
  store_f16(b.d, d);
  store_f16(b.m, min);
  std::uint32_t qh = 0;
  for (int j = 0; j < 16; ++j) {
    // The reference does not clamp here: (max - min) * id rounds to at most 31.
    const int lo = truncate_clamped((x[j] - min) * id + 0.5f, 0, 255);
    const int hi = truncate_clamped((x[j + 16] - min) * id + 0.5f, 0, 255);
    b.qs[j] = static_cast<std::uint8_t>((lo & 0xf) | ((hi & 0xf) << 4));
    qh |= static_cast<std::uint32_t>((lo >> 4) & 1) << j;
    qh |= static_cast<std::uint32_t>((hi >> 4) & 1) << (j + 16);
  }
  for (int i = 0; i < 4; ++i) b.qh[i] = static_cast<std::uint8_t>(qh >> (8 * i));
}

void quantize_q8_0(const float* x, BlockQ8_0& b) {
  float amax = 0.0f;
  for (int j = 0; j < kQK; ++j) amax = std::max(amax, std::fabs(x[j]));
  const float d = amax / 127.0f;
  const float id = d != 0.0f ? 1.0f / d : 0.0f;
  store_f16(b.d, d);
  for (int j = 0; j < kQK; ++j)
    b.qs[j] = static_cast<std::int8_t>(truncate_clamped(std::round(x[j] * id), -128, 127));
}

void quantize_q8_1(const float* x, BlockQ8_1& b) {
  float amax = 0.0f;
  for (int j = 0; j < kQK; ++j) amax = std::max(amax, std::fabs(x[j]));
  const float d = amax / 127.0f;
  const float id = d != 0.0f ? 1.0f / d : 0.0f;
  int sum = 0;
  for (int j = 0; j < kQK; ++j) {
    b.qs[j] = static_cast<std::int8_t>(truncate_clamped(std::round(x[j] * id), -128, 127));
    sum += b.qs[j];
  }
  store_f16(b.d, d);
  store_f16(b.s, static_cast<float>(sum) * d);
}

void quantize_mxfp4(const float* x, BlockMXFP4& b) {
  float amax = 0.0f;
  for (int j = 0; j < kQK; ++j) amax = std::max(amax, std::fabs(x[j]));
  // Scale 2^(floor(log2 amax) - 2): the largest element lands near code value 4..6.
  int e = 0;
  if (amax > 0.0f) {
    e = std::max(0, static_cast<int>(std::floor(std::log2(amax)) - 2.0f + 127.0f));
  }
  b.e = static_cast<std::uint8_t>(e);
  const float d = e8m0_half(b.e);
  const auto best = [d](float v) {
    int index = 0;
    float best_err = std::fabs(static_cast<float>(kMXFP4Values[0]) * d - v);
    for (int i = 1; i < 16; ++i) {
      const float err = std::fabs(static_cast<float>(kMXFP4Values[i]) * d - v);
      if (err < best_err) {
        index = i;
        best_err = err;
      }
    }
    return index;
  };
  for (int j = 0; j < 16; ++j) {
    b.qs[j] = static_cast<std::uint8_t>(best(x[j]) | (best(x[j + 16]) << 4));
  }
}

// ---------------------------------------------------------------------------
// k-quants.

void quantize_q2_k(const float* x, BlockQ2_K& b) {
  std::uint8_t L[kQKK];
  float weights[16];
  float mins[16];
  float scales[16];
  float max_scale = 0.0f;
  float max_min = 0.0f;
  for (int j = 0; j < 16; ++j) {
    for (int l = 0; l < 16; ++l) weights[l] = std::fabs(x[16 * j + l]);
    scales[j] =
        search_affine(16, 3, x + 16 * j, weights, L + 16 * j, &mins[j], -0.5f, 0.1f, 15, true);
    max_scale = std::max(max_scale, scales[j]);
    max_min = std::max(max_min, mins[j]);
  }
  if (max_scale > 0.0f) {
    const float iscale = 15.0f / max_scale;
    for (int j = 0; j < 16; ++j)
      b.scales[j] = static_cast<std::uint8_t>(nearest_int(iscale * scales[j]));
    store_f16(b.d, max_scale / 15.0f);
  } else {
    std::fill(b.scales, b.scales + 16, std::uint8_t{0});
    store_f16(b.d, 0.0f);
  }
  if (max_min > 0.0f) {
    const float iscale = 15.0f / max_min;
    for (int j = 0; j < 16; ++j) {
      b.scales[j] = static_cast<std::uint8_t>(b.scales[j] | (nearest_int(iscale * mins[j]) << 4));
    }
    store_f16(b.dmin, max_min / 15.0f);
  } else {
    store_f16(b.dmin, 0.0f);
  }
  // Re-quantize every element against the scales as stored (after f16 rounding).
  for (int j = 0; j < 16; ++j) {
    const float d = load_f16(b.d) * static_cast<float>(b.scales[j] & 0xf);
    if (d == 0.0f) continue;
    const float dm = load_f16(b.dmin) * static_cast<float>(b.scales[j] >> 4);
    for (int i = 0; i < 16; ++i) {
      L[16 * j + i] =
          static_cast<std::uint8_t>(std::clamp(nearest_int((x[16 * j + i] + dm) / d), 0, 3));
    }
  }
  // Byte l of each 32-byte quarter holds elements l, l + 32, l + 64, l + 96 of its
  // 128-element half, two bits each.
  for (int h = 0; h < kQKK; h += 128) {
    for (int l = 0; l < 32; ++l) {
      b.qs[h / 4 + l] = static_cast<std::uint8_t>(L[h + l] | (L[h + l + 32] << 2) |
                                                  (L[h + l + 64] << 4) | (L[h + l + 96] << 6));
    }
  }
}

void quantize_q3_k(const float* x, BlockQ3_K& b) {
  std::int8_t L[kQKK];
  float scales[16];
  float max_scale = 0.0f;
  float amax = 0.0f;
  for (int j = 0; j < 16; ++j) {
    scales[j] = search_q3(16, 4, x + 16 * j, L + 16 * j);
    const float a = std::fabs(scales[j]);
    if (a > amax) {
      amax = a;
      max_scale = scales[j];
    }
  }
  std::fill(b.scales, b.scales + 12, std::uint8_t{0});
  if (max_scale != 0.0f) {
    const float iscale = -32.0f / max_scale;
    for (int j = 0; j < 16; ++j) {
      int l = static_cast<std::int8_t>(nearest_int(iscale * scales[j]));
      l = std::clamp(l, -32, 31) + 32;
      if (j < 8) {
        b.scales[j] = static_cast<std::uint8_t>(l & 0xf);
      } else {
        b.scales[j - 8] = static_cast<std::uint8_t>(b.scales[j - 8] | ((l & 0xf) << 4));
      }
      l >>= 4;
      b.scales[j % 4 + 8] = static_cast<std::uint8_t>(b.scales[j % 4 + 8] | (l << (2 * (j / 4))));
    }
    store_f16(b.d, 1.0f / iscale);
  } else {
    store_f16(b.d, 0.0f);
  }
  for (int j = 0; j < 16; ++j) {
    const float d = load_f16(b.d) * static_cast<float>(q3k_scale(j, b.scales));
    if (d == 0.0f) continue;
    for (int i = 0; i < 16; ++i) {
      L[16 * j + i] =
          static_cast<std::int8_t>(std::clamp(nearest_int(x[16 * j + i] / d), -4, 3) + 4);
    }
  }
  // The third bit of element j goes to hmask[j % 32], bit j / 32.
  std::fill(b.hmask, b.hmask + 32, std::uint8_t{0});
  for (int j = 0; j < kQKK; ++j) {
    if (L[j] > 3) {
      b.hmask[j % 32] = static_cast<std::uint8_t>(b.hmask[j % 32] | (1 << (j / 32)));
      L[j] = static_cast<std::int8_t>(L[j] - 4);
    }
  }
  for (int h = 0; h < kQKK; h += 128) {
    for (int l = 0; l < 32; ++l) {
      b.qs[h / 4 + l] = static_cast<std::uint8_t>(L[h + l] | (L[h + l + 32] << 2) |
                                                  (L[h + l + 64] << 4) | (L[h + l + 96] << 6));
    }
  }
}

// Packs eight 6-bit scales and mins into the 12-byte layout read by k4_scale_min.
void pack_k4_scales(const int* ls, const int* lm, std::uint8_t* s) {
  for (int j = 0; j < 8; ++j) {
    if (j < 4) {
      s[j] = static_cast<std::uint8_t>(ls[j]);
      s[j + 4] = static_cast<std::uint8_t>(lm[j]);
    } else {
      s[j + 4] = static_cast<std::uint8_t>((ls[j] & 0xf) | ((lm[j] & 0xf) << 4));
      s[j - 4] = static_cast<std::uint8_t>(s[j - 4] | ((ls[j] >> 4) << 6));
      s[j] = static_cast<std::uint8_t>(s[j] | ((lm[j] >> 4) << 6));
    }
  }
}

// The shared first half of q4_k and q5_k: per-group affine searches, 6-bit scales
// and mins, then every element re-quantized against the stored scales.
void quantize_k4_levels(const float* x, int nmax, float rmin, int nstep, std::uint8_t* d_f16,
                        std::uint8_t* dmin_f16, std::uint8_t* packed_scales, std::uint8_t* L) {
  float weights[32];
  float mins[8];
  float scales[8];
  float max_scale = 0.0f;
  float max_min = 0.0f;
  for (int j = 0; j < 8; ++j) {
    float sum_x2 = 0.0f;
    for (int l = 0; l < 32; ++l) sum_x2 += x[32 * j + l] * x[32 * j + l];
    const float av_x = std::sqrt(sum_x2 / 32.0f);
    for (int l = 0; l < 32; ++l) weights[l] = av_x + std::fabs(x[32 * j + l]);
    scales[j] = search_affine(32, nmax, x + 32 * j, weights, L + 32 * j, &mins[j], rmin, 0.1f,
                              nstep, false);
    max_scale = std::max(max_scale, scales[j]);
    max_min = std::max(max_min, mins[j]);
  }
  const float inv_scale = max_scale > 0.0f ? 63.0f / max_scale : 0.0f;
  const float inv_min = max_min > 0.0f ? 63.0f / max_min : 0.0f;
  int ls[8];
  int lm[8];
  for (int j = 0; j < 8; ++j) {
    // The reference stores the rounded value in a byte before clamping to 63.
    ls[j] = std::min(
        63, static_cast<int>(static_cast<std::uint8_t>(nearest_int(inv_scale * scales[j]))));
    lm[j] =
        std::min(63, static_cast<int>(static_cast<std::uint8_t>(nearest_int(inv_min * mins[j]))));
  }
  pack_k4_scales(ls, lm, packed_scales);
  store_f16(d_f16, max_scale / 63.0f);
  store_f16(dmin_f16, max_min / 63.0f);
  for (int j = 0; j < 8; ++j) {
    int sc = 0;
    int m = 0;
    k4_scale_min(j, packed_scales, sc, m);
    const float d = load_f16(d_f16) * static_cast<float>(sc);
    if (d == 0.0f) continue;
    const float dm = load_f16(dmin_f16) * static_cast<float>(m);
    for (int i = 0; i < 32; ++i) {
      L[32 * j + i] =
          static_cast<std::uint8_t>(std::clamp(nearest_int((x[32 * j + i] + dm) / d), 0, nmax));
    }
  }
}

void quantize_q4_k(const float* x, BlockQ4_K& b) {
  std::uint8_t L[kQKK];
  quantize_k4_levels(x, 15, -1.0f, 20, b.d, b.dmin, b.scales, L);
  // Each 32-byte chunk holds two groups: the low nibbles the first, the high the second.
  for (int h = 0; h < kQKK; h += 64) {
    for (int l = 0; l < 32; ++l) {
      b.qs[h / 2 + l] = static_cast<std::uint8_t>(L[h + l] | (L[h + l + 32] << 4));
    }
  }
}

void quantize_q5_k(const float* x, BlockQ5_K& b) {
  std::uint8_t L[kQKK];
  quantize_k4_levels(x, 31, -0.5f, 15, b.d, b.dmin, b.scales, L);
  std::fill(b.qh, b.qh + 32, std::uint8_t{0});
  // Group pair p (elements 64p .. 64p + 63) puts its fifth bits in bits 2p and
  // 2p + 1 of qh[l].
  for (int p = 0; p < 4; ++p) {
    for (int l = 0; l < 32; ++l) {
      int l1 = L[64 * p + l];
      int l2 = L[64 * p + l + 32];
      if (l1 > 15) {
        l1 -= 16;
        b.qh[l] = static_cast<std::uint8_t>(b.qh[l] | (1 << (2 * p)));
      }
      if (l2 > 15) {
        l2 -= 16;
        b.qh[l] = static_cast<std::uint8_t>(b.qh[l] | (2 << (2 * p)));
      }
      b.qs[32 * p + l] = static_cast<std::uint8_t>(l1 | (l2 << 4));
    }
  }
}

void quantize_q6_k(const float* x, BlockQ6_K& b) {
  std::int8_t L[kQKK];
  float scales[16];
  float max_scale = 0.0f;
  float max_abs_scale = 0.0f;
  for (int g = 0; g < 16; ++g) {
    scales[g] = search_symmetric(16, 32, x + 16 * g, L + 16 * g);
    const float a = std::fabs(scales[g]);
    if (a > max_abs_scale) {
      max_abs_scale = a;
      max_scale = scales[g];
    }
  }
  if (max_abs_scale < kGroupMaxEps) {
    std::memset(&b, 0, sizeof b);
    return;
  }
  const float iscale = -128.0f / max_scale;
  store_f16(b.d, 1.0f / iscale);
  for (int g = 0; g < 16; ++g) {
    b.scales[g] = static_cast<std::int8_t>(std::min(127, nearest_int(iscale * scales[g])));
  }
  for (int g = 0; g < 16; ++g) {
    const float d = load_f16(b.d) * static_cast<float>(b.scales[g]);
    if (d == 0.0f) continue;
    for (int i = 0; i < 16; ++i) {
      L[16 * g + i] =
          static_cast<std::int8_t>(std::clamp(nearest_int(x[16 * g + i] / d), -32, 31) + 32);
    }
  }
  // Per 128-element half: ql[l] holds elements l (low) and l + 64 (high), ql[l + 32]
  // elements l + 32 and l + 96; qh[l] the top two bits of all four.
  for (int h = 0; h < 2; ++h) {
    const std::int8_t* Lh = L + 128 * h;
    std::uint8_t* ql = b.ql + 64 * h;
    std::uint8_t* qh = b.qh + 32 * h;
    for (int l = 0; l < 32; ++l) {
      ql[l] = static_cast<std::uint8_t>((Lh[l] & 0xf) | ((Lh[l + 64] & 0xf) << 4));
      ql[l + 32] = static_cast<std::uint8_t>((Lh[l + 32] & 0xf) | ((Lh[l + 96] & 0xf) << 4));
      qh[l] = static_cast<std::uint8_t>((Lh[l] >> 4) | ((Lh[l + 32] >> 4) << 2) |
                                        ((Lh[l + 64] >> 4) << 4) | ((Lh[l + 96] >> 4) << 6));
    }
  }
}

void quantize_q8_k(const float* x, BlockQ8_K& b) {
  float max = 0.0f;
  float amax = 0.0f;
  for (int j = 0; j < kQKK; ++j) {
    if (std::fabs(x[j]) > amax) {
      amax = std::fabs(x[j]);
      max = x[j];
    }
  }
  if (amax == 0.0f) {
    std::memset(&b, 0, sizeof b);
    return;
  }
  const float iscale = -127.0f / max;
  for (int j = 0; j < kQKK; ++j) {
    b.qs[j] = static_cast<std::int8_t>(std::min(127, nearest_int(iscale * x[j])));
  }
  for (int g = 0; g < 16; ++g) {
    int sum = 0;
    for (int i = 0; i < 16; ++i) sum += b.qs[16 * g + i];
    store_i16(b.bsums + 2 * g, sum);
  }
  store_f32(b.d, 1.0f / iscale);
}

// The search matches the reference's file-writing quantizer (the path GGUF
// quantization tools take without an importance matrix: 7 tries either side); the
// reference's row-at-a-time fast path for runtime conversion skips the search and
// can give different bytes.
//
// The iq4 search over one super-block of `groups` groups of 32 (1 for iq4_nl, 8 for
// iq4_xs): per group, 15 candidate scales around max / -127 with x^2 weights, each
// element snapped to the nearest non-linear level; iq4_xs then quantizes the
// group scales to 6 bits and re-snaps against them.
void quantize_iq4(const float* x, int groups, std::uint8_t* d_f16, std::uint8_t* qs,
                  BlockIQ4_XS* xs) {
  constexpr int kTries = 7;
  const std::int8_t* values = kIQ4NLValues;
  const int n = 32 * groups;
  std::uint8_t L[kQKK];
  float scales[8];
  float weight[32];
  std::fill(qs, qs + n / 2, std::uint8_t{0});
  store_f16(d_f16, 0.0f);
  float max_scale = 0.0f;
  float amax_scale = 0.0f;
  for (int g = 0; g < groups; ++g) {
    const float* xb = x + 32 * g;
    std::uint8_t* Lb = L + 32 * g;
    for (int j = 0; j < 32; ++j) weight[j] = xb[j] * xb[j];
    float amax = 0.0f;
    float max = 0.0f;
    for (int j = 0; j < 32; ++j) {
      if (std::fabs(xb[j]) > amax) {
        amax = std::fabs(xb[j]);
        max = xb[j];
      }
    }
    if (amax < kGroupMaxEps) {
      scales[g] = 0.0f;
      continue;
    }
    float d = -max / static_cast<float>(values[0]);
    float id = 1.0f / d;
    float sumqx = 0.0f;
    float sumq2 = 0.0f;
    for (int j = 0; j < 32; ++j) {
      const int l = nearest_level(values, id * xb[j]);
      Lb[j] = static_cast<std::uint8_t>(l);
      const auto q = static_cast<float>(values[l]);
      sumqx += weight[j] * q * xb[j];
      sumq2 += weight[j] * q * q;
    }
    d = sumqx / sumq2;
    float best = d * sumqx;
    for (int t = -kTries; t <= kTries; ++t) {
      id = (static_cast<float>(t) + static_cast<float>(values[0])) / max;
      sumqx = 0.0f;
      sumq2 = 0.0f;
      for (int j = 0; j < 32; ++j) {
        const auto q = static_cast<float>(values[nearest_level(values, id * xb[j])]);
        sumqx += weight[j] * q * xb[j];
        sumq2 += weight[j] * q * q;
      }
      if (sumq2 > 0.0f && sumqx * sumqx > best * sumq2) {
        d = sumqx / sumq2;
        best = d * sumqx;
      }
    }
    scales[g] = d;
    if (std::fabs(d) > amax_scale) {
      amax_scale = std::fabs(d);
      max_scale = d;
    }
  }
  if (xs != nullptr) {
    std::fill(xs->scales_l, xs->scales_l + 4, std::uint8_t{0});
    std::uint16_t scales_h = 0;
    const float d = -max_scale / 32.0f;
    store_f16(d_f16, d);
    const float id = d != 0.0f ? 1.0f / d : 0.0f;
    for (int g = 0; g < groups; ++g) {
      int l = std::clamp(nearest_int(id * scales[g]), -32, 31);
      const float dl = d * static_cast<float>(l);
      const float idl = dl != 0.0f ? 1.0f / dl : 0.0f;
      for (int j = 0; j < 32; ++j) {
        L[32 * g + j] = static_cast<std::uint8_t>(nearest_level(values, idl * x[32 * g + j]));
      }
      l += 32;
      xs->scales_l[g / 2] =
          static_cast<std::uint8_t>(xs->scales_l[g / 2] | ((l & 0xf) << (4 * (g % 2))));
      scales_h = static_cast<std::uint16_t>(scales_h | ((l >> 4) << (2 * g)));
    }
    xs->scales_h[0] = static_cast<std::uint8_t>(scales_h & 0xff);
    xs->scales_h[1] = static_cast<std::uint8_t>(scales_h >> 8);
  } else {
    store_f16(d_f16, scales[0]);
    const float id = scales[0] != 0.0f ? 1.0f / scales[0] : 0.0f;
    for (int j = 0; j < 32; ++j) L[j] = static_cast<std::uint8_t>(nearest_level(values, id * x[j]));
  }
  for (int g = 0; g < groups; ++g) {
    for (int j = 0; j < 16; ++j) {
      qs[16 * g + j] = static_cast<std::uint8_t>(L[32 * g + j] | (L[32 * g + 16 + j] << 4));
    }
  }
}

// ---------------------------------------------------------------------------
// Dequantizers, one block each.

// Both switches name every dtype of dtype.def, without a default: a block format
// added there does not build until it has a quantizer and a dequantizer here
// (-Wswitch, warnings are errors). The dense dtypes fall through to the check.
void dequant_block(DType t, const std::uint8_t* p, float* y) {
  switch (t) {
    case DType::kQ4_0: {
      const auto& b = *reinterpret_cast<const BlockQ4_0*>(p);
      const float d = load_f16(b.d);
      for (int j = 0; j < 16; ++j) {
        y[j] = static_cast<float>((b.qs[j] & 0xf) - 8) * d;
        y[j + 16] = static_cast<float>((b.qs[j] >> 4) - 8) * d;
      }
      return;
    }
    case DType::kQ4_1: {
      const auto& b = *reinterpret_cast<const BlockQ4_1*>(p);
      const float d = load_f16(b.d);
      const float m = load_f16(b.m);
      for (int j = 0; j < 16; ++j) {
        y[j] = static_cast<float>(b.qs[j] & 0xf) * d + m;
        y[j + 16] = static_cast<float>(b.qs[j] >> 4) * d + m;
      }
      return;
    }
    case DType::kQ5_0: {
      const auto& b = *reinterpret_cast<const BlockQ5_0*>(p);
      const float d = load_f16(b.d);
      const std::uint32_t qh = load_u32(b.qh);
      for (int j = 0; j < 16; ++j) {
        const int lo = (b.qs[j] & 0xf) | static_cast<int>(((qh >> j) & 1u) << 4);
        const int hi = (b.qs[j] >> 4) | static_cast<int>(((qh >> (j + 16)) & 1u) << 4);
        y[j] = static_cast<float>(lo - 16) * d;
        y[j + 16] = static_cast<float>(hi - 16) * d;
      }
      return;
    }
    case DType::kQ5_1: {
      const auto& b = *reinterpret_cast<const BlockQ5_1*>(p);
      const float d = load_f16(b.d);
      const float m = load_f16(b.m);
      const std::uint32_t qh = load_u32(b.qh);
      for (int j = 0; j < 16; ++j) {
        const int lo = (b.qs[j] & 0xf) | static_cast<int>(((qh >> j) & 1u) << 4);
        const int hi = (b.qs[j] >> 4) | static_cast<int>(((qh >> (j + 16)) & 1u) << 4);
        y[j] = static_cast<float>(lo) * d + m;
        y[j + 16] = static_cast<float>(hi) * d + m;
      }
      return;
    }
    case DType::kQ8_0: {
      const auto& b = *reinterpret_cast<const BlockQ8_0*>(p);
      const float d = load_f16(b.d);
      for (int j = 0; j < kQK; ++j) y[j] = static_cast<float>(b.qs[j]) * d;
      return;
    }
    case DType::kQ8_1: {
      const auto& b = *reinterpret_cast<const BlockQ8_1*>(p);
      const float d = load_f16(b.d);
      for (int j = 0; j < kQK; ++j) y[j] = static_cast<float>(b.qs[j]) * d;
      return;
    }
    case DType::kQ2_K: {
      const auto& b = *reinterpret_cast<const BlockQ2_K*>(p);
      const float d = load_f16(b.d);
      const float dmin = load_f16(b.dmin);
      for (int e = 0; e < kQKK; ++e) {
        // Element e: half e / 128, byte (e % 32) of that half, bits 2 * ((e % 128) / 32).
        const int g = e / 16;
        const int q = (b.qs[(e / 128) * 32 + e % 32] >> (2 * ((e % 128) / 32))) & 3;
        y[e] = d * static_cast<float>(b.scales[g] & 0xf) * static_cast<float>(q) -
               dmin * static_cast<float>(b.scales[g] >> 4);
      }
      return;
    }
    case DType::kQ3_K: {
      const auto& b = *reinterpret_cast<const BlockQ3_K*>(p);
      const float d = load_f16(b.d);
      for (int e = 0; e < kQKK; ++e) {
        const int low = (b.qs[(e / 128) * 32 + e % 32] >> (2 * ((e % 128) / 32))) & 3;
        const int high = (b.hmask[e % 32] >> (e / 32)) & 1;
        const float dl = d * static_cast<float>(q3k_scale(e / 16, b.scales));
        y[e] = dl * static_cast<float>(low - (high ? 0 : 4));
      }
      return;
    }
    case DType::kQ4_K: {
      const auto& b = *reinterpret_cast<const BlockQ4_K*>(p);
      const float d = load_f16(b.d);
      const float dmin = load_f16(b.dmin);
      for (int g = 0; g < 8; ++g) {
        int sc = 0;
        int m = 0;
        k4_scale_min(g, b.scales, sc, m);
        const float dl = d * static_cast<float>(sc);
        const float ml = dmin * static_cast<float>(m);
        const std::uint8_t* q = b.qs + 32 * (g / 2);
        const int shift = 4 * (g % 2);
        for (int l = 0; l < 32; ++l)
          y[32 * g + l] = dl * static_cast<float>((q[l] >> shift) & 0xf) - ml;
      }
      return;
    }
    case DType::kQ5_K: {
      const auto& b = *reinterpret_cast<const BlockQ5_K*>(p);
      const float d = load_f16(b.d);
      const float dmin = load_f16(b.dmin);
      for (int g = 0; g < 8; ++g) {
        int sc = 0;
        int m = 0;
        k4_scale_min(g, b.scales, sc, m);
        const float dl = d * static_cast<float>(sc);
        const float ml = dmin * static_cast<float>(m);
        const std::uint8_t* q = b.qs + 32 * (g / 2);
        const int shift = 4 * (g % 2);
        for (int l = 0; l < 32; ++l) {
          const int v = ((q[l] >> shift) & 0xf) | (((b.qh[l] >> g) & 1) << 4);
          y[32 * g + l] = dl * static_cast<float>(v) - ml;
        }
      }
      return;
    }
    case DType::kQ6_K: {
      const auto& b = *reinterpret_cast<const BlockQ6_K*>(p);
      const float d = load_f16(b.d);
      for (int e = 0; e < kQKK; ++e) {
        // Within a half: quarter r = (e % 128) / 32 takes ql[l + 32 * (r % 2)],
        // nibble r / 2, and bits 2r of qh[l].
        const int h = e / 128;
        const int r = (e % 128) / 32;
        const int l = e % 32;
        const int low = (b.ql[64 * h + l + 32 * (r % 2)] >> (4 * (r / 2))) & 0xf;
        const int high = (b.qh[32 * h + l] >> (2 * r)) & 3;
        y[e] =
            d * static_cast<float>(b.scales[e / 16]) * static_cast<float>((low | (high << 4)) - 32);
      }
      return;
    }
    case DType::kQ8_K: {
      const auto& b = *reinterpret_cast<const BlockQ8_K*>(p);
      const float d = load_f32(b.d);
      for (int j = 0; j < kQKK; ++j) y[j] = d * static_cast<float>(b.qs[j]);
      return;
    }
    case DType::kIQ4_NL: {
      const auto& b = *reinterpret_cast<const BlockIQ4_NL*>(p);
      const float d = load_f16(b.d);
      for (int j = 0; j < 16; ++j) {
        y[j] = d * static_cast<float>(kIQ4NLValues[b.qs[j] & 0xf]);
        y[j + 16] = d * static_cast<float>(kIQ4NLValues[b.qs[j] >> 4]);
      }
      return;
    }
    case DType::kIQ4_XS: {
      const auto& b = *reinterpret_cast<const BlockIQ4_XS*>(p);
      const float d = load_f16(b.d);
      for (int g = 0; g < 8; ++g) {
        const float dl = d * static_cast<float>(iq4xs_scale(g, b));
        const std::uint8_t* q = b.qs + 16 * g;
        for (int j = 0; j < 16; ++j) {
          y[32 * g + j] = dl * static_cast<float>(kIQ4NLValues[q[j] & 0xf]);
          y[32 * g + j + 16] = dl * static_cast<float>(kIQ4NLValues[q[j] >> 4]);
        }
      }
      return;
    }
    case DType::kMXFP4: {
      const auto& b = *reinterpret_cast<const BlockMXFP4*>(p);
      const float d = e8m0_half(b.e);
      for (int j = 0; j < 16; ++j) {
        y[j] = static_cast<float>(kMXFP4Values[b.qs[j] & 0xf]) * d;
        y[j + 16] = static_cast<float>(kMXFP4Values[b.qs[j] >> 4]) * d;
      }
      return;
    }
    case DType::kF64:
    case DType::kF32:
    case DType::kF16:
    case DType::kBF16:
    case DType::kI64:
    case DType::kI32:
    case DType::kI16:
    case DType::kI8:
    case DType::kU8:
    case DType::kBool: break;
  }
  // The callers check is_quantized first; a dense dtype here is a programmer error.
  SWITCHYARD_CHECK_MSG(false, "dequant_block: not a block-quantized dtype");
}

void quant_block(DType t, const float* x, std::uint8_t* p) {
  switch (t) {
    case DType::kQ4_0: return quantize_q4_0(x, *reinterpret_cast<BlockQ4_0*>(p));
    case DType::kQ4_1: return quantize_q4_1(x, *reinterpret_cast<BlockQ4_1*>(p));
    case DType::kQ5_0: return quantize_q5_0(x, *reinterpret_cast<BlockQ5_0*>(p));
    case DType::kQ5_1: return quantize_q5_1(x, *reinterpret_cast<BlockQ5_1*>(p));
    case DType::kQ8_0: return quantize_q8_0(x, *reinterpret_cast<BlockQ8_0*>(p));
    case DType::kQ8_1: return quantize_q8_1(x, *reinterpret_cast<BlockQ8_1*>(p));
    case DType::kQ2_K: return quantize_q2_k(x, *reinterpret_cast<BlockQ2_K*>(p));
    case DType::kQ3_K: return quantize_q3_k(x, *reinterpret_cast<BlockQ3_K*>(p));
    case DType::kQ4_K: return quantize_q4_k(x, *reinterpret_cast<BlockQ4_K*>(p));
    case DType::kQ5_K: return quantize_q5_k(x, *reinterpret_cast<BlockQ5_K*>(p));
    case DType::kQ6_K: return quantize_q6_k(x, *reinterpret_cast<BlockQ6_K*>(p));
    case DType::kQ8_K: return quantize_q8_k(x, *reinterpret_cast<BlockQ8_K*>(p));
    case DType::kIQ4_NL: {
      auto& b = *reinterpret_cast<BlockIQ4_NL*>(p);
      return quantize_iq4(x, 1, b.d, b.qs, nullptr);
    }
    case DType::kIQ4_XS: {
      auto& b = *reinterpret_cast<BlockIQ4_XS*>(p);
      return quantize_iq4(x, 8, b.d, b.qs, &b);
    }
    case DType::kMXFP4: return quantize_mxfp4(x, *reinterpret_cast<BlockMXFP4*>(p));
    case DType::kF64:
    case DType::kF32:
    case DType::kF16:
    case DType::kBF16:
    case DType::kI64:
    case DType::kI32:
    case DType::kI16:
    case DType::kI8:
    case DType::kU8:
    case DType::kBool: break;
  }
  SWITCHYARD_CHECK_MSG(false, "quant_block: not a block-quantized dtype");
}

Status check_sizes(DType t, std::int64_t elems, std::size_t bytes, std::string_view what) {
  if (!is_quantized(t)) {
    return invalid_argument_error(
        fmt::format("{}: {} is not a block-quantized dtype", what, name(t)));
  }
  const Result<std::int64_t> need = row_bytes(t, elems);
  if (!need.is_ok()) {
    return invalid_argument_error(fmt::format("{}: {} elements are not whole {} blocks of {}", what,
                                              elems, name(t), block_elems(t)));
  }
  if (*need != static_cast<std::int64_t>(bytes)) {
    return invalid_argument_error(fmt::format("{}: {} elements of {} take {} bytes, got {}", what,
                                              elems, name(t), *need, bytes));
  }
  return Status::ok();
}

}  // namespace

void dequantize_row(DType t, const void* src, float* dst, std::int64_t n) {
  const auto* p = static_cast<const std::uint8_t*>(src);
  const std::int64_t blocks = n / block_elems(t);
  for (std::int64_t i = 0; i < blocks; ++i) {
    dequant_block(t, p + i * block_bytes(t), dst + i * block_elems(t));
  }
}

void quantize_row(DType t, const float* src, void* dst, std::int64_t n) {
  auto* p = static_cast<std::uint8_t*>(dst);
  const std::int64_t blocks = n / block_elems(t);
  for (std::int64_t i = 0; i < blocks; ++i) {
    quant_block(t, src + i * block_elems(t), p + i * block_bytes(t));
  }
}

}  // namespace quant

bool can_quantize(DType t) { return is_quantized(t); }

Status quantize(DType t, std::span<const float> src, std::span<std::byte> dst) {
  SWITCHYARD_RETURN_IF_ERROR(
      quant::check_sizes(t, static_cast<std::int64_t>(src.size()), dst.size(), "quantize"));
  for (std::size_t i = 0; i < src.size(); ++i) {
    if (!std::isfinite(src[i])) {
      return invalid_argument_error(
          fmt::format("quantize to {}: element {} is {}; only finite values can be quantized",
                      name(t), i, src[i]));
    }
  }
  const std::int64_t elems = block_elems(t);
  const std::int64_t bytes = block_bytes(t);
  const std::int64_t blocks = static_cast<std::int64_t>(src.size()) / elems;
  auto* out = reinterpret_cast<std::uint8_t*>(dst.data());
  float check[quant::kQKK];
  for (std::int64_t i = 0; i < blocks; ++i) {
    quant::quant_block(t, src.data() + i * elems, out + i * bytes);
    // A scale that overflowed f16 decodes to infinity or NaN: refuse the block
    // rather than write a block no reader can use.
    quant::dequant_block(t, out + i * bytes, check);
    for (std::int64_t j = 0; j < elems; ++j) {
      if (!std::isfinite(check[j])) {
        return invalid_argument_error(
            fmt::format("quantize to {}: block {} (elements {}..{}) has values too large for the "
                        "format's scale",
                        name(t), i, i * elems, (i + 1) * elems - 1));
      }
    }
  }
  return Status::ok();
}

Status dequantize(DType t, std::span<const std::byte> src, std::span<float> dst) {
  SWITCHYARD_RETURN_IF_ERROR(
      quant::check_sizes(t, static_cast<std::int64_t>(dst.size()), src.size(), "dequantize"));
  quant::dequantize_row(t, src.data(), dst.data(), static_cast<std::int64_t>(dst.size()));
  return Status::ok();
}

namespace {

// The dense dtypes row conversion handles; the block types go through
// quantize() / dequantize(), which check their own sizes.
bool is_dense_row_dtype(DType t) {
  return t == DType::kF32 || t == DType::kF16 || t == DType::kBF16;
}

Status check_dense_row(DType t, std::size_t elems, std::size_t bytes, std::string_view what) {
  if (!is_dense_row_dtype(t)) {
    return invalid_argument_error(
        fmt::format("{}: {} is not f32, f16, bf16 or a block-quantized dtype", what, name(t)));
  }
  const std::size_t need = elems * static_cast<std::size_t>(dense_bytes(t));
  if (bytes != need) {
    return invalid_argument_error(fmt::format("{}: {} elements of {} take {} bytes, got {}", what,
                                              elems, name(t), need, bytes));
  }
  return Status::ok();
}

}  // namespace

Status row_to_f32(DType from, std::span<const std::byte> src, std::span<float> dst) {
  if (is_quantized(from)) return dequantize(from, src, dst);
  SWITCHYARD_RETURN_IF_ERROR(check_dense_row(from, dst.size(), src.size(), "row_to_f32"));
  if (dst.empty()) return Status::ok();
  if (from == DType::kF32) {
    std::memcpy(dst.data(), src.data(), dst.size_bytes());
    return Status::ok();
  }
  const bool f16 = from == DType::kF16;
  for (std::size_t i = 0; i < dst.size(); ++i) {
    std::uint16_t h;
    std::memcpy(&h, src.data() + 2 * i, 2);
    dst[i] = f16 ? f16_to_f32(h) : bf16_to_f32(h);
  }
  return Status::ok();
}

Status row_from_f32(DType to, std::span<const float> src, std::span<std::byte> dst) {
  if (is_quantized(to)) return quantize(to, src, dst);
  SWITCHYARD_RETURN_IF_ERROR(check_dense_row(to, src.size(), dst.size(), "row_from_f32"));
  if (src.empty()) return Status::ok();
  if (to == DType::kF32) {
    std::memcpy(dst.data(), src.data(), src.size_bytes());
    return Status::ok();
  }
  const bool f16 = to == DType::kF16;
  for (std::size_t i = 0; i < src.size(); ++i) {
    const std::uint16_t h = f16 ? f32_to_f16(src[i]) : f32_to_bf16(src[i]);
    std::memcpy(dst.data() + 2 * i, &h, 2);
  }
  return Status::ok();
}

}  // namespace switchyard
