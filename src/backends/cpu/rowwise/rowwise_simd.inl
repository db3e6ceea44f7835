// The row-reduction SIMD rows (rms_norm, layer_norm, softmax, sum, max), written
// once over simd_vec.h and compiled per instruction set by rowwise_avx2.cpp and
// rowwise_avx512.cpp. See simd_rows.h for the contracts.
//
// Summation order: four vector accumulators over blocks of 4 vectors, the
// remaining whole vectors into the first, a zero-padded tail into the second, then
// the accumulators pairwise and the lanes in index order. The order depends only on
// the row length, so a row's result is the same bytes on every run and at every
// thread count (threads split rows, never a row).
#include "backends/cpu/simd_rows.h"
#include "backends/cpu/simd_vec.h"

namespace switchyard::cpu::SWITCHYARD_SIMD_NS {
namespace {

constexpr float kInf = __builtin_inff();

// Lanes from `n` on replaced by `fill`.
inline VF keep_first(VF v, std::int64_t n, float fill) {
  float buf[kW];
  store(buf, v);
  for (int i = 0; i < kW; ++i) {
    if (i >= n) buf[i] = fill;
  }
  return load(buf);
}

// Elements of storage S per step of a sweep that prefetches: whole vectors
// covering at least one 64-byte cache line, so a step issues one hint per line.
template <typename S>
constexpr std::int64_t kLineStep = 64 / static_cast<std::int64_t>(sizeof(S)) > kW
                                       ? 64 / static_cast<std::int64_t>(sizeof(S))
                                       : kW;

// Prefetch hints for the n elements from p, one per 64-byte cache line.
template <typename S>
inline void prefetch_elems(const S* p, std::int64_t n) {
  const char* bytes = reinterpret_cast<const char*>(p);
  for (std::int64_t j = 0; j < n * static_cast<std::int64_t>(sizeof(S)); j += 64) {
    prefetch(bytes + j);
  }
}

// Note [Norm sweeps and the next row]
// A norm reads its row from memory once: the first sweep (the sum, or the sum of
// squares) streams it in, and the later sweeps run from L1. Those later sweeps
// leave the memory idle apart from writing out, so they fetch the next row of a
// contiguous tensor meanwhile (prefetch hints, one per cache line, which never
// fault past the end): rms_norm in its one scaling sweep, layer_norm half in the
// variance sweep and half in the scaling sweep. The next row's first sweep then
// reads from cache, and the memory is kept busy through every other sweep.

// Sum over the row of the terms of load(x + i): `f(acc, v)` adds v's terms to
// acc (vadd, or an FMA of a square). The tail's padded lanes are zeroed. With
// `fetch`, the sweep also prefetches fetch[0, n / 2), one half of the next row.
template <typename S, typename F>
inline float row_sum(const S* x, std::int64_t n, F f, const S* fetch = nullptr) {
  VF acc0 = vset(0.0f), acc1 = vset(0.0f), acc2 = vset(0.0f), acc3 = vset(0.0f);
  std::int64_t i = 0;
  for (; i + 4 * kW <= n; i += 4 * kW) {
    if (fetch != nullptr) prefetch_elems(fetch + i / 2, 2 * kW);
    acc0 = f(acc0, load(x + i));
    acc1 = f(acc1, load(x + i + kW));
    acc2 = f(acc2, load(x + i + 2 * kW));
    acc3 = f(acc3, load(x + i + 3 * kW));
  }
  for (; i + kW <= n; i += kW) acc0 = f(acc0, load(x + i));
  if (i < n) {
    const S zero{};
    acc1 = vadd(acc1, keep_first(f(vset(0.0f), load_partial(x + i, n - i, zero)), n - i, 0.0f));
  }
  float tmp[kW];
  return hsum_lanes(vadd(vadd(acc0, acc1), vadd(acc2, acc3)), tmp);
}

template <typename S>
float sum_row(const void* xv, std::int64_t n) {
  return row_sum(static_cast<const S*>(xv), n, [](VF acc, VF v) { return vadd(acc, v); });
}

template <typename S>
float max_row(const void* xv, std::int64_t n) {
  const S* x = static_cast<const S*>(xv);
  VF acc = vset(-kInf);
  VF nan = vset(0.0f);
  std::int64_t i = 0;
  for (; i + kW <= n; i += kW) {
    const VF v = load(x + i);
    nan = vor(nan, vnan_lanes(v));
    acc = vmax(acc, v);
  }
  if (i < n) {
    const S zero{};
    const VF v = keep_first(load_partial(x + i, n - i, zero), n - i, -kInf);
    nan = vor(nan, vnan_lanes(v));
    acc = vmax(acc, v);
  }
  if (any_lane(nan)) return __builtin_nanf("");
  float tmp[kW];
  store(tmp, acc);
  float m = tmp[0];
  for (int l = 1; l < kW; ++l) m = tmp[l] > m ? tmp[l] : m;
  return m;
}

// (x [- shift]) * inv [* w] [+ b] over the row (one FMA for * w + b), prefetching
// fetch[0, d >> kFetchShift): the whole next row, or one half of it.
template <bool kCentre, int kFetchShift, typename S>
inline void scale_row(const S* x, const S* w, const S* b, S* out, std::int64_t d, VF shift, VF inv,
                      const S* fetch) {
  const S zero{};
  auto one = [&](std::int64_t i, std::int64_t n) {
    const bool full = n == kW;
    const VF v = full ? load(x + i) : load_partial(x + i, n, zero);
    const VF t = vmul(kCentre ? vsub(v, shift) : v, inv);
    const VF wv = w == nullptr ? t : full ? load(w + i) : load_partial(w + i, n, zero);
    const VF bv = b == nullptr ? t : full ? load(b + i) : load_partial(b + i, n, zero);
    if (w != nullptr && b != nullptr) return vfma(t, wv, bv);
    if (w != nullptr) return vmul(t, wv);
    if (b != nullptr) return vadd(t, bv);
    return t;
  };
  constexpr std::int64_t kStep = kLineStep<S>;
  std::int64_t i = 0;
  for (; i + kStep <= d; i += kStep) {
    prefetch_elems(fetch + (i >> kFetchShift), kStep >> kFetchShift);
    for (std::int64_t j = i; j < i + kStep; j += kW) store(out + j, one(j, kW));
  }
  for (; i + kW <= d; i += kW) store(out + i, one(i, kW));
  if (i < d) store_partial(out + i, d - i, one(i, d - i));
}

// 1 / sqrt(v + eps), computed in a vector so no scalar library call is needed.
inline VF inv_sqrt(float v, float eps) { return vdiv(vset(1.0f), vsqrt(vadd(vset(v), vset(eps)))); }

template <typename S>
void rms_norm_row(const void* xv, const void* wv, void* ov, std::int64_t d, float eps) {
  const S* x = static_cast<const S*>(xv);
  const float sumsq = row_sum(x, d, [](VF acc, VF v) { return vfma(v, v, acc); });
  const float mean = d > 0 ? sumsq / static_cast<float>(d) : 0.0f;
  // See Note [Norm sweeps and the next row].
  scale_row<false, 0>(x, static_cast<const S*>(wv), static_cast<const S*>(nullptr),
                      static_cast<S*>(ov), d, vset(0.0f), inv_sqrt(mean, eps), x + d);
}

template <typename S>
void layer_norm_row(const void* xv, const void* wv, const void* bv, void* ov, std::int64_t d,
                    float eps) {
  const S* x = static_cast<const S*>(xv);
  const float fd = d > 0 ? static_cast<float>(d) : 1.0f;
  const float mean = row_sum(x, d, [](VF acc, VF v) { return vadd(acc, v); }) / fd;
  const VF m = vset(mean);
  // Two passes: the variance of the centred values does not cancel. See Note
  // [Norm sweeps and the next row] for the prefetches.
  const float var = row_sum(
                        x, d,
                        [&](VF acc, VF v) {
                          const VF c = vsub(v, m);
                          return vfma(c, c, acc);
                        },
                        x + d) /
                    fd;
  scale_row<true, 1>(x, static_cast<const S*>(wv), static_cast<const S*>(bv), static_cast<S*>(ov),
                     d, m, inv_sqrt(var, eps), x + d + d / 2);
}

// Three sweeps over the row, one exponential per element: the maximum, then the
// exponentials (stored in `buf`, f32) and their sum, then the scaling, which reads
// `buf` back from cache.
template <typename S>
void softmax_row(const void* xv, const void* maskv, void* ov, std::int64_t cols, std::int64_t valid,
                 float scale, float* scratch) {
  const S* x = static_cast<const S*>(xv);
  const S* mask = static_cast<const S*>(maskv);
  S* out = static_cast<S*>(ov);
  float* buf = scratch;
  if constexpr (sizeof(S) == sizeof(float)) {
    if (buf == nullptr) buf = reinterpret_cast<float*>(out);
  }
  const S zero{};
  const VF sc = vset(scale);
  // x * scale + (mask, or `c` where there is no mask) for the vector at i (n lanes
  // valid) in one FMA, padded with -inf.
  auto scaled = [&](std::int64_t i, std::int64_t n, VF c) {
    const bool full = n == kW;
    const VF v = full ? load(x + i) : load_partial(x + i, n, zero);
    if (mask != nullptr) c = full ? load(mask + i) : load_partial(mask + i, n, zero);
    const VF l = vfma(v, sc, c);
    return full ? l : keep_first(l, n, -kInf);
  };
  auto logits = [&](std::int64_t i, std::int64_t n) { return scaled(i, n, vset(-0.0f)); };
  auto width = [&](std::int64_t i) { return valid - i < kW ? valid - i : kW; };
  // Four independent maxima: one chain of vmax would take its latency per vector.
  VF mx = vset(-kInf), mx1 = vset(-kInf), mx2 = vset(-kInf), mx3 = vset(-kInf);
  std::int64_t i0 = 0;
  for (; i0 + 4 * kW <= valid; i0 += 4 * kW) {
    mx = vmax(mx, logits(i0, kW));
    mx1 = vmax(mx1, logits(i0 + kW, kW));
    mx2 = vmax(mx2, logits(i0 + 2 * kW, kW));
    mx3 = vmax(mx3, logits(i0 + 3 * kW, kW));
  }
  for (; i0 < valid; i0 += kW) mx = vmax(mx, logits(i0, width(i0)));
  mx = vmax(vmax(mx, mx1), vmax(mx2, mx3));
  float tmp[kW];
  store(tmp, mx);
  float m = tmp[0];
  for (int l = 1; l < kW; ++l) m = tmp[l] > m ? tmp[l] : m;
  // vmax returns its second operand when either is NaN, so the maximum of a row
  // whose unmasked logits are all NaN can come out -inf: such a row is NaN, not
  // masked (docs/ops.md). Only a row that looks masked pays for the check; in any
  // other row a NaN logit makes the sum of exponentials, and so the row, NaN.
  if (m == -kInf) {
    for (std::int64_t i = 0; i < valid; i += kW) {
      if (any_lane(vnan_lanes(logits(i, width(i))))) m = __builtin_nanf("");
    }
  }
  std::int64_t written = 0;
  if (valid > 0 && m != -kInf) {
    const VF mv = vset(m);
    // The logits less the maximum. Without a mask, and while |m| < 2^20, the FMA
    // subtracts it, so x * scale - m rounds once: the maximum's own lane then gets
    // the product's rounding error instead of 0, at most 2^-24 |m| < 1/16, and no
    // lane's exponential can overflow. A larger |m| (or an infinite or NaN one)
    // subtracts it from the rounded logit, where the maximum's lane gets 0. The
    // choice depends on the row's values only.
    const bool fused = mask == nullptr && m > -0x1p20f && m < 0x1p20f;
    // The exponentials and their sum, for one way of computing the shifted logits
    // (a loop per way, so the choice is not made per vector).
    auto exp_sweep = [&](auto shifted) {
      VF acc0 = vset(0.0f), acc1 = vset(0.0f);
      std::int64_t i = 0;
      for (; i + 2 * kW <= valid; i += 2 * kW) {
        // This sweep writes out (from memory) and the next runs from cache: they
        // fetch the next row's two halves meanwhile (rows of a contiguous tensor
        // follow each other), so the first sweep of the next row runs from cache.
        // Here i / 2 advances one vector per step, at most a cache line.
        prefetch(x + cols + i / 2);
        const VF e0 = vexp(shifted(i, kW));
        const VF e1 = vexp(shifted(i + kW, kW));
        store(buf + i, e0);
        store(buf + i + kW, e1);
        acc0 = vadd(acc0, e0);
        acc1 = vadd(acc1, e1);
      }
      for (; i < valid; i += kW) {
        // exp(-inf - m) is 0, so padded lanes add nothing.
        const std::int64_t n = width(i);
        const VF e = vexp(shifted(i, n));
        if (n == kW) {
          store(buf + i, e);
        } else {
          store_partial(buf + i, n, e);
        }
        acc0 = vadd(acc0, e);
      }
      return hsum_lanes(vadd(acc0, acc1), tmp);
    };
    const VF neg_m = vset(-m);
    const float sum =
        fused ? exp_sweep([&](std::int64_t i, std::int64_t n) { return scaled(i, n, neg_m); })
              : exp_sweep([&](std::int64_t i, std::int64_t n) {
                  return vsub(scaled(i, n, vset(-0.0f)), mv);
                });
    const VF inv = vdiv(vset(1.0f), vset(sum));
    constexpr std::int64_t kStep = kLineStep<S>;
    std::int64_t i = 0;
    for (; i + kStep <= valid; i += kStep) {
      prefetch_elems(x + cols + valid / 2 + i / 2, kStep / 2);
      for (std::int64_t j = i; j < i + kStep; j += kW) store(out + j, vmul(load(buf + j), inv));
    }
    for (; i + kW <= valid; i += kW) store(out + i, vmul(load(buf + i), inv));
    if (i < valid) {
      store_partial(out + i, valid - i, vmul(load_partial(buf + i, valid - i, 0.0f), inv));
    }
    written = valid;
  }
  for (std::int64_t j = written; j < cols; ++j) out[j] = zero;
}

// One FMA per output after one rounded product: u c - v s and u s + v c.
template <typename S>
void rope_row(const void* xv, void* ov, const float* cs, std::int64_t heads, std::int64_t d,
              std::int64_t dims, bool neox) {
  const S* x = static_cast<const S*>(xv);
  S* out = static_cast<S*>(ov);
  const S zero{};
  const std::int64_t half = dims / 2;
  for (std::int64_t h = 0; h < heads; ++h) {
    const S* xh = x + h * d;
    S* oh = out + h * d;
    if (!neox) {
      const float* c = cs;
      const float* sn = cs + dims;
      std::int64_t j = 0;
      for (; j + kW <= dims; j += kW) {
        const VF v = load(xh + j);
        store(oh + j, vfma(v, load(c + j), vmul(vswap_pairs(v), load(sn + j))));
      }
      if (j < dims) {
        // dims and j are even: the partial vector holds whole pairs.
        const std::int64_t n = dims - j;
        const VF v = load_partial(xh + j, n, zero);
        store_partial(oh + j, n,
                      vfma(v, load_partial(c + j, n, 0.0f),
                           vmul(vswap_pairs(v), load_partial(sn + j, n, 0.0f))));
      }
    } else {
      const float* c = cs;
      const float* sn = cs + half;
      for (std::int64_t i = 0; i < half; i += kW) {
        const std::int64_t n = half - i < kW ? half - i : kW;
        const bool full = n == kW;
        const VF u = full ? load(xh + i) : load_partial(xh + i, n, zero);
        const VF v = full ? load(xh + half + i) : load_partial(xh + half + i, n, zero);
        const VF cv = full ? load(c + i) : load_partial(c + i, n, 0.0f);
        const VF sv = full ? load(sn + i) : load_partial(sn + i, n, 0.0f);
        const VF lo = vfma(u, cv, vxor(vmul(v, sv), vset(-0.0f)));
        const VF hi = vfma(v, cv, vmul(u, sv));
        if (full) {
          store(oh + i, lo);
          store(oh + half + i, hi);
        } else {
          store_partial(oh + i, n, lo);
          store_partial(oh + half + i, n, hi);
        }
      }
    }
    copy_elems(xh + dims, oh + dims, d - dims);
  }
}

template <typename S>
constexpr void fill_storage(RowwiseSimd& t, int s) {
  t.rope[s] = &rope_row<S>;
  t.rms_norm[s] = &rms_norm_row<S>;
  t.layer_norm[s] = &layer_norm_row<S>;
  t.softmax[s] = &softmax_row<S>;
  t.sum[s] = &sum_row<S>;
  t.max[s] = &max_row<S>;
}

constexpr RowwiseSimd make_table() {
  RowwiseSimd t{};
  fill_storage<float>(t, 0);
  fill_storage<F16>(t, 1);
  fill_storage<BF16>(t, 2);
  return t;
}

constexpr RowwiseSimd kTable = make_table();

}  // namespace
}  // namespace switchyard::cpu::SWITCHYARD_SIMD_NS
