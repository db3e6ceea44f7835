// The f32 attention rows, written once over simd_vec.h and compiled per
// instruction set by attention_avx2.cpp and attention_avx512.cpp. See simd_rows.h
// for the contract of one work item.
//
// A work item is a block of query positions with the heads that share one kv
// head. Keys are visited in blocks of kBlock = 32, in key order; each block's key
// and value rows are first converted into contiguous, zero-padded f32 rows (read
// once per item, then from L1 by every row of the item), except for items of at
// most 4 rows (decoding) with whole-vector heads, which read the tensors' rows
// directly. The values and the order of operations are the same either way.
// Per query row and block:
//   logits  kW keys at a time: one accumulator vector per key over the head
//           dimension, reduced to one vector of kW dot products by a fixed lane
//           tree; times `scale`, plus the mask, -inf past the causal limit;
//   softmax online: the running maximum m and sum l are rescaled by e^(m - m')
//           when a block raises the maximum, then the block's e^(logit - m') are
//           added to l and, weighted, the value rows to the f32 accumulator
//           (two rows at a time, sharing the value loads).
// That is an item of at most kNarrowRows rows (a decoding step). An item of more
// rows (a prompt) computes its logits with the rows in the vector lanes instead
// (attention_item_wide below): no horizontal sums, the online softmax kW rows at
// a time. Every row is computed by the same instruction sequence whatever rows
// share its work item, so results never depend on how items are split between
// threads.
#include <cstring>

#include "backends/cpu/q8_0_rows.h"
#include "backends/cpu/simd_rows.h"
#include "backends/cpu/simd_vec.h"
#include "backends/cpu/storage.h"

namespace switchyard::cpu::SWITCHYARD_SIMD_NS {
namespace {

constexpr float kAttnInf = __builtin_inff();
// 32 keys a block: the packed f32 key and value blocks of a 128-wide head take
// 32 KiB together and stay in L1 while every row of the item reads them.
constexpr int kBlockTiles = 32 / kW;
constexpr std::int64_t kBlock = static_cast<std::int64_t>(kBlockTiles) * kW;
// The vector width as an offset, and four vectors of it.
constexpr std::int64_t kW1 = kW;
constexpr std::int64_t kW4 = 4 * kW1;

// One vector whose lane l is the sum of the lanes of acc[l].
#if defined(SWITCHYARD_SIMD_AVX512)
inline __m256 sum8_halves(const VF (&acc)[kW], int base) {
  // Each 512-bit accumulator folded to 256 bits, then the AVX2 tree below.
  __m256 h[8];
#pragma GCC unroll 16
  for (int i = 0; i < 8; ++i) {
    const VF a = acc[base + i];
    h[i] = _mm256_add_ps(_mm512_castps512_ps256(a),
                         _mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(a), 1)));
  }
  const __m256 t0 = _mm256_hadd_ps(h[0], h[1]);
  const __m256 t1 = _mm256_hadd_ps(h[2], h[3]);
  const __m256 t2 = _mm256_hadd_ps(h[4], h[5]);
  const __m256 t3 = _mm256_hadd_ps(h[6], h[7]);
  const __m256 u0 = _mm256_hadd_ps(t0, t1);
  const __m256 u1 = _mm256_hadd_ps(t2, t3);
  return _mm256_add_ps(_mm256_permute2f128_ps(u0, u1, 0x20), _mm256_permute2f128_ps(u0, u1, 0x31));
}
inline VF lane_sums(const VF (&acc)[kW]) {
  const __m256 lo = sum8_halves(acc, 0);
  const __m256 hi = sum8_halves(acc, 8);
  return _mm512_castpd_ps(
      _mm512_insertf64x4(_mm512_castpd256_pd512(_mm256_castps_pd(lo)), _mm256_castps_pd(hi), 1));
}
#else
inline VF lane_sums(const VF (&acc)[kW]) {
  const VF t0 = _mm256_hadd_ps(acc[0], acc[1]);
  const VF t1 = _mm256_hadd_ps(acc[2], acc[3]);
  const VF t2 = _mm256_hadd_ps(acc[4], acc[5]);
  const VF t3 = _mm256_hadd_ps(acc[6], acc[7]);
  const VF u0 = _mm256_hadd_ps(t0, t1);
  const VF u1 = _mm256_hadd_ps(t2, t3);
  return _mm256_add_ps(_mm256_permute2f128_ps(u0, u1, 0x20), _mm256_permute2f128_ps(u0, u1, 0x31));
}
#endif

// Dot products of the f32 row q with kW consecutive rows of the packed key block
// k (row stride dh_pad; both zero-padded to whole vectors). Each lane accumulates
// its elements in head-dimension order; four vectors of q stay in registers while
// every key row of the tile is read against them.
template <typename KV>
inline VF dot_tile(const float* q, const KV* k, std::int64_t stride, std::int64_t dh_pad) {
  VF acc[kW];
#pragma GCC unroll 16
  for (int j = 0; j < kW; ++j) acc[j] = vset(0.0f);
  std::int64_t e = 0;
  for (; e + kW4 <= dh_pad; e += kW4) {
    const VF q0 = load(q + e), q1 = load(q + e + kW), q2 = load(q + e + 2 * kW1),
             q3 = load(q + e + 3 * kW1);
#pragma GCC unroll 16
    for (int j = 0; j < kW; ++j) {
      const KV* kr = k + j * stride + e;
      VF s = vfma(q0, load(kr), acc[j]);
      s = vfma(q1, load(kr + kW), s);
      s = vfma(q2, load(kr + 2 * kW1), s);
      acc[j] = vfma(q3, load(kr + 3 * kW1), s);
    }
  }
  for (; e < dh_pad; e += kW) {
    const VF qv = load(q + e);
#pragma GCC unroll 16
    for (int j = 0; j < kW; ++j) acc[j] = vfma(qv, load(k + j * stride + e), acc[j]);
  }
  return lane_sums(acc);
}

// acc_i += sum_{j < n} p_i[j] v_j for kRows rows, over the packed value block v
// (row stride dh_pad), four vectors of the head dimension at a time. Each row gets
// the same FMA sequence whatever kRows is.
// p_i[j] is read at p[i] + j, or with kStrided at p[i] + j * p_stride.
template <int kRows, typename KV, bool kStrided = false>
inline void add_weighted_values(float* const (&acc)[kRows], const float* const (&p)[kRows],
                                const KV* v, std::int64_t stride, std::int64_t n,
                                std::int64_t dh_pad, std::int64_t p_stride = 1) {
  if constexpr (!kStrided) p_stride = 1;
  std::int64_t e = 0;
  for (; e + kW4 <= dh_pad; e += kW4) {
    VF a[kRows][4];
#pragma GCC unroll 16
    for (int r = 0; r < kRows; ++r) {
#pragma GCC unroll 4
      for (int c = 0; c < 4; ++c) a[r][c] = load(acc[r] + e + c * kW1);
    }
    const KV* vr = v + e;
    for (std::int64_t j = 0; j < n; ++j, vr += stride) {
      const VF v0 = load(vr), v1 = load(vr + kW), v2 = load(vr + 2 * kW1), v3 = load(vr + 3 * kW1);
#pragma GCC unroll 16
      for (int r = 0; r < kRows; ++r) {
        const VF pj = vset(p[r][j * p_stride]);
        a[r][0] = vfma(pj, v0, a[r][0]);
        a[r][1] = vfma(pj, v1, a[r][1]);
        a[r][2] = vfma(pj, v2, a[r][2]);
        a[r][3] = vfma(pj, v3, a[r][3]);
      }
    }
#pragma GCC unroll 16
    for (int r = 0; r < kRows; ++r) {
#pragma GCC unroll 4
      for (int c = 0; c < 4; ++c) store(acc[r] + e + c * kW1, a[r][c]);
    }
  }
  for (; e < dh_pad; e += kW) {
    VF a[kRows];
#pragma GCC unroll 16
    for (int r = 0; r < kRows; ++r) a[r] = load(acc[r] + e);
    const KV* vr = v + e;
    for (std::int64_t j = 0; j < n; ++j, vr += stride) {
      const VF vv = load(vr);
#pragma GCC unroll 16
      for (int r = 0; r < kRows; ++r) a[r] = vfma(vset(p[r][j * p_stride]), vv, a[r]);
    }
#pragma GCC unroll 16
    for (int r = 0; r < kRows; ++r) store(acc[r] + e, a[r]);
  }
}

// Rows [j0, j0 + n) of a [Skv, Hkv, Dh] tensor's kv head (base points at key 0 of
// it, rows `stride` apart) as f32 rows of dh_pad, zero-padded; rows n..count-1
// are zeros.
template <typename KV>
inline void pack_rows(const KV* base, std::int64_t stride, std::int64_t j0, std::int64_t n,
                      std::int64_t count, std::int64_t dh, std::int64_t dh_pad, float* dst) {
  const KV zero{};
  for (std::int64_t j = 0; j < count; ++j) {
    float* d = dst + j * dh_pad;
    if (j >= n) {
      for (std::int64_t e = 0; e < dh_pad; e += kW) store(d + e, vset(0.0f));
      continue;
    }
    const KV* src = base + (j0 + j) * stride;
    std::int64_t e = 0;
    for (; e + kW <= dh; e += kW) store(d + e, load(src + e));
    if (e < dh) store(d + e, load_partial(src + e, dh - e, zero));
  }
}

// kW signed bytes as f32.
inline VF load_levels(const std::int8_t* p) {
#if defined(SWITCHYARD_SIMD_AVX512)
  return _mm512_cvtepi32_ps(
      _mm512_cvtepi8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p))));
#else
  return _mm256_cvtepi32_ps(
      _mm256_cvtepi8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(p))));
#endif
}

// The same for q8_0 rows (Note [A q8_0 KV cache] in layout/get_rows.cpp): base
// points at the block of key 0's head, `stride` counts values (whole blocks).
// Each value is its block's scale times its level, exactly. q8_0 rows are
// packed even for a few query rows: reading them in place, each row of the item
// would convert every block again (measured slower than packing: BM_CpuOp's
// attention_decode_32k).
inline void pack_rows(const Q8_0Block* base, std::int64_t stride, std::int64_t j0, std::int64_t n,
                      std::int64_t count, std::int64_t dh, std::int64_t dh_pad, float* dst) {
  static_assert(kQ8_0Values % kW == 0);
  for (std::int64_t j = 0; j < count; ++j) {
    float* d = dst + j * dh_pad;
    std::int64_t e = 0;
    if (j < n) {
      const Q8_0Block* src = base + (j0 + j) * (stride / kQ8_0Values);
      for (; e < dh; e += kQ8_0Values) {
        const Q8_0Block& block = src[e / kQ8_0Values];
        std::uint16_t bits;
        std::memcpy(&bits, block.d, sizeof bits);
        const VF scale = vset(_cvtsh_ss(bits));
#pragma GCC unroll 4
        for (int i = 0; i < kQ8_0Values; i += kW) {
          store(d + e + i, vmul(scale, load_levels(block.qs + i)));
        }
      }
    }
    for (; e < dh_pad; e += kW) store(d + e, vset(0.0f));
  }
}

// Where a kv head's key 0 starts: `offset` values into a dense tensor, or the
// block holding value `offset` of a q8_0 one.
template <typename KV>
inline const KV* kv_head_start(const void* tensor, std::int64_t offset) {
  if constexpr (std::is_same_v<KV, Q8_0Block>) {
    return static_cast<const KV*>(tensor) + offset / kQ8_0Values;
  } else {
    return static_cast<const KV*>(tensor) + offset;
  }
}

// --- Items of many rows (prefill) ---
//
// An item of more than kNarrowRows rows puts its rows in the vector lanes for
// the logits: q is transposed once per item into qt [dh][rows_pad], and each
// logit is one chain of FMAs over the head dimension in order, a lane per row,
// against each key's elements broadcast from the packed block. No horizontal
// sums; and the online softmax runs kW rows at a time down the transposed
// logits st [kBlock][rows_pad]. The values are added as in narrow items, kPvRows
// rows sharing each value load. A row's arithmetic does not depend on which rows
// share its item; it differs from a narrow item's (another order of the dot
// product's sum), as the reference's rounding does from both.
constexpr std::int64_t kNarrowRows = 4;
#if defined(SWITCHYARD_SIMD_AVX512)
constexpr int kLogitGroups = 4;  // vectors of rows per logit tile: 16 accumulators
constexpr int kPvRows = 4;
#else
constexpr int kLogitGroups = 2;  // 8 accumulators of the 16 registers
constexpr int kPvRows = 2;
#endif
constexpr int kLogitKeys = 4;

// st[j][i] = scale * (q_i . k_j) for the kBlock keys of the packed block kp and
// the kG * kW rows of qt's columns (rows rp floats apart in both qt and st).
template <int kG>
inline void logit_tile(const float* qt, std::int64_t rp, const float* kp, std::int64_t dh_pad,
                       std::int64_t dh, VF scale, float* st) {
  for (std::int64_t j0 = 0; j0 < kBlock; j0 += kLogitKeys) {
    VF acc[kLogitKeys][kG];
#pragma GCC unroll 16
    for (int j = 0; j < kLogitKeys; ++j) {
#pragma GCC unroll 16
      for (int g = 0; g < kG; ++g) acc[j][g] = vzero();
    }
    const float* kj = kp + j0 * dh_pad;
    for (std::int64_t e = 0; e < dh; ++e) {
      VF qv[kG];
#pragma GCC unroll 16
      for (int g = 0; g < kG; ++g) qv[g] = load(qt + e * rp + g * kW1);
#pragma GCC unroll 16
      for (int j = 0; j < kLogitKeys; ++j) {
        const VF kb = vset(kj[j * dh_pad + e]);
#pragma GCC unroll 16
        for (int g = 0; g < kG; ++g) acc[j][g] = vfma(qv[g], kb, acc[j][g]);
      }
    }
#pragma GCC unroll 16
    for (int j = 0; j < kLogitKeys; ++j) {
#pragma GCC unroll 16
      for (int g = 0; g < kG; ++g) store(st + (j0 + j) * rp + g * kW1, vmul(acc[j][g], scale));
    }
  }
}

// Where a work item lies: positions [s0, s1) of one batch entry's queries for
// the `group` heads that share kv head kvh. Its row r is query position
// s0 + r / group, head kvh * group + r % group.
struct ItemSpan {
  std::int64_t qblocks, group, kvh, b, s0, s1, rows;

  ItemSpan(const AttentionArgs& a, std::int64_t item)
      : qblocks((a.sq + a.positions_per_item - 1) / a.positions_per_item),
        group(a.heads / a.kv_heads),
        kvh(item / qblocks % a.kv_heads),
        b(item / (qblocks * a.kv_heads)),
        s0(item % qblocks * a.positions_per_item),
        s1(s0 + a.positions_per_item < a.sq ? s0 + a.positions_per_item : a.sq),
        rows((s1 - s0) * group) {}
  // The element offset of row r's query vector, and of its output.
  [[nodiscard]] std::int64_t q_offset(const AttentionArgs& a, std::int64_t r) const {
    return ((b * a.sq + s0 + r / group) * a.heads + kvh * group + r % group) * a.dh;
  }
  // Keys visible to query position s0 + position: those before the causal limit,
  // or before the last unmasked one (AttentionArgs::key_limit).
  [[nodiscard]] std::int64_t keys_visible(const AttentionArgs& a, std::int64_t position) const {
    if (!a.causal) return a.key_limit != nullptr ? a.key_limit[s0 + position] : a.skv;
    const std::int64_t lim = s0 + position + a.query_offset + 1;
    return lim < 0 ? std::int64_t{0} : lim > a.skv ? a.skv : lim;
  }
  // The first element of kv head kvh's rows in this batch entry's K and V.
  [[nodiscard]] std::int64_t kv_offset(const AttentionArgs& a) const {
    return (b * a.skv * a.kv_heads + kvh) * a.dh;
  }
};

// Writes each row's weighted sum (acc, rows of dh_pad) divided by its weights'
// sum (row r's at sums[r * sum_stride]). A row with every key masked has a sum
// of 0 and gives zeros, as softmax does; a NaN row has a NaN sum and stays NaN.
template <typename Q>
void write_rows(const AttentionArgs& a, const ItemSpan& span, const float* acc, std::int64_t dh_pad,
                const float* sums, std::int64_t sum_stride) {
  Q* out = static_cast<Q*>(a.out);
  for (std::int64_t r = 0; r < span.rows; ++r) {
    Q* orow = out + span.q_offset(a, r);
    const float* ar = acc + r * dh_pad;
    const float l = sums[r * sum_stride];
    const VF inv = l == 0.0f ? vset(0.0f) : vdiv(vset(1.0f), vset(l));
    std::int64_t e = 0;
    for (; e + kW <= a.dh; e += kW) store(orow + e, vmul(load(ar + e), inv));
    if (e < a.dh) store_partial(orow + e, a.dh - e, vmul(load(ar + e), inv));
  }
}

template <typename Q, typename KV>
void attention_item_wide(const AttentionArgs& a, const ItemSpan& span, float* scratch) {
  const std::int64_t group = span.group, s0 = span.s0, rows = span.rows;
  const std::int64_t rp = (rows + kW - 1) / kW * kW;
  const std::int64_t groups = rp / kW;
  const std::int64_t dh = a.dh;
  const std::int64_t dh_pad = (dh + kW - 1) / kW * kW;
  const std::int64_t kv_stride = a.kv_heads * dh;
  const Q* q = static_cast<const Q*>(a.q);
  const Q* mask = static_cast<const Q*>(a.mask);
  float* kpack = scratch;                  // [kBlock][dh_pad] keys of this block, f32
  float* vpack = kpack + kBlock * dh_pad;  // [kBlock][dh_pad] values of this block
  float* qt = vpack + kBlock * dh_pad;     // [dh][rp] q transposed, zero past `rows`
  float* acc = qt + dh_pad * rp;           // [rows][dh_pad] weighted sums
  float* st = acc + rows * dh_pad;         // [kBlock][rp] logits, then weights
  float* mv = st + kBlock * rp;            // [rp] running max (finite: see below)
  float* lv = mv + rp;                     // [rp] running sum
  float* nv = lv + rp;                     // [rp] each row's keys in the block

  // Position p's keys are those of rows p * group to p * group + group - 1.
  const std::int64_t positions = span.s1 - s0;
  std::int64_t kv_end = 0;
  for (std::int64_t position = 0; position < positions; ++position) {
    const std::int64_t valid = span.keys_visible(a, position);
    kv_end = valid > kv_end ? valid : kv_end;
  }
  for (std::int64_t r = 0; r < rp; ++r) {
    const Q* qr = r < rows ? q + span.q_offset(a, r) : nullptr;
    for (std::int64_t e = 0; e < dh; ++e) qt[e * rp + r] = qr != nullptr ? to_f32(qr[e]) : 0.0f;
    // The running max starts at the lowest finite float, not -inf: a block
    // whose keys are all masked then gives e^(-inf - m) = 0, never
    // e^(-inf + inf) = NaN, and the first unmasked block rescales by 0.
    mv[r] = -__FLT_MAX__;
    lv[r] = 0.0f;
    nv[r] = 0.0f;
    if (r < rows) {
      for (std::int64_t i = 0; i < dh_pad; i += kW) store(acc + r * dh_pad + i, vset(0.0f));
    }
  }
  const KV* kbase = kv_head_start<KV>(a.k, span.kv_offset(a));
  const KV* vbase = kv_head_start<KV>(a.v, span.kv_offset(a));
  const VF sc = vset(a.scale);
  for (std::int64_t j0 = 0; j0 < kv_end; j0 += kBlock) {
    const std::int64_t nblock = kv_end - j0 < kBlock ? kv_end - j0 : kBlock;
    pack_rows(kbase, kv_stride, j0, nblock, kBlock, dh, dh_pad, kpack);
    pack_rows(vbase, kv_stride, j0, nblock, kBlock, dh, dh_pad, vpack);
    std::int64_t g = 0;
    for (; g + kLogitGroups <= groups; g += kLogitGroups) {
      logit_tile<kLogitGroups>(qt + g * kW1, rp, kpack, dh_pad, dh, sc, st + g * kW1);
    }
    for (; g < groups; ++g) logit_tile<1>(qt + g * kW1, rp, kpack, dh_pad, dh, sc, st + g * kW1);
    // Each row's keys [j0, j0 + n) in this block (exact in a float: n <= 32),
    // and its mask (a row of zeros up to the limit adds nothing and is not read).
    for (std::int64_t position = 0; position < positions; ++position) {
      std::int64_t n = span.keys_visible(a, position) - j0;
      n = n < 0 ? 0 : n > kBlock ? kBlock : n;
      const bool masked =
          n > 0 && mask != nullptr && (a.mask_zero == nullptr || !a.mask_zero[s0 + position]);
      const Q* mrow = masked ? mask + (s0 + position) * a.skv + j0 : nullptr;
      for (std::int64_t r = position * group; r < (position + 1) * group; ++r) {
        nv[r] = static_cast<float>(n);
        if (mrow == nullptr) continue;
        for (std::int64_t j = 0; j < n; ++j) st[j * rp + r] += to_f32(mrow[j]);
      }
    }
    // The online softmax, kW rows at a time: keys past a row's count are -inf;
    // a NaN logit is dropped by vmaxps (its first operand) and makes its row's
    // weights, sum and output NaN through e^(logit - m).
    for (g = 0; g < groups; ++g) {
      float* sg = st + g * kW1;
      const VF n = load(nv + g * kW1);
      VF bmax = vset(-kAttnInf);
      for (std::int64_t j = 0; j < kBlock; ++j) {
        const VF lg = vblend_sign(vset(-kAttnInf), load(sg + j * rp),
                                  vsub(vset(static_cast<float>(j) + 0.5f), n));
        store(sg + j * rp, lg);
        bmax = vmax(lg, bmax);
      }
      const VF m_old = load(mv + g * kW1);
      const VF m_new = vmax(bmax, m_old);
      const VF d = vsub(m_old, m_new);  // <= 0; 0 where the max did not move
      const VF alpha = vblend_sign(vset(1.0f), vexp(d), d);
      VF lsum = vzero();
      for (std::int64_t j = 0; j < kBlock; ++j) {
        const VF p = vexp(vsub(load(sg + j * rp), m_new));
        store(sg + j * rp, p);
        lsum = vadd(lsum, p);
      }
      store(lv + g * kW1, vadd(vmul(load(lv + g * kW1), alpha), lsum));
      store(mv + g * kW1, m_new);
      float rescale[kW];
      store(rescale, alpha);
      for (std::int64_t i = 0; i < kW1 && g * kW1 + i < rows; ++i) {
        if (rescale[i] == 1.0f) continue;
        float* ar = acc + (g * kW1 + i) * dh_pad;
        const VF f = vset(rescale[i]);
        for (std::int64_t e = 0; e < dh_pad; e += kW) store(ar + e, vmul(load(ar + e), f));
      }
    }
    // acc += p v: kPvRows rows over the keys they all use, then each row's own
    // remaining keys; every row sees its keys in order either way.
    std::int64_t r = 0;
    for (; r + kPvRows <= rows; r += kPvRows) {
      std::int64_t n[kPvRows];
      float* rows_acc[kPvRows];
      const float* rows_p[kPvRows];
      std::int64_t both = kBlock;
      for (int i = 0; i < kPvRows; ++i) {
        n[i] = static_cast<std::int64_t>(nv[r + i]);
        both = n[i] < both ? n[i] : both;
        rows_acc[i] = acc + (r + i) * dh_pad;
        rows_p[i] = st + r + i;
      }
      if (both > 0) {
        add_weighted_values<kPvRows, float, true>(rows_acc, rows_p, vpack, dh_pad, both, dh_pad,
                                                  rp);
      }
      for (int i = 0; i < kPvRows; ++i) {
        if (n[i] <= both) continue;
        float* const acc1[1] = {rows_acc[i]};
        const float* const p1[1] = {rows_p[i] + both * rp};
        add_weighted_values<1, float, true>(acc1, p1, vpack + both * dh_pad, dh_pad, n[i] - both,
                                            dh_pad, rp);
      }
    }
    for (; r < rows; ++r) {
      const auto n = static_cast<std::int64_t>(nv[r]);
      float* const acc1[1] = {acc + r * dh_pad};
      const float* const p1[1] = {st + r};
      if (n > 0) add_weighted_values<1, float, true>(acc1, p1, vpack, dh_pad, n, dh_pad, rp);
    }
  }
  write_rows<Q>(a, span, acc, dh_pad, lv, 1);
}

template <typename Q, typename KV>
void attention_item(const AttentionArgs& a, std::int64_t item, float* scratch) {
  // q8_0 rows are always packed (pack_rows above); the direct reads take dense rows.
  constexpr bool kDenseKv = !std::is_same_v<KV, Q8_0Block>;
  const ItemSpan span(a, item);
  const std::int64_t group = span.group, s0 = span.s0, rows = span.rows;
  if (rows > kNarrowRows) return attention_item_wide<Q, KV>(a, span, scratch);
  const std::int64_t dh = a.dh;
  const std::int64_t dh_pad = (dh + kW - 1) / kW * kW;
  const std::int64_t kv_stride = a.kv_heads * dh;
  const Q* q = static_cast<const Q*>(a.q);
  const Q* mask = static_cast<const Q*>(a.mask);
  float* kpack = scratch;                  // [kBlock][dh_pad] keys of this block, f32
  float* vpack = kpack + kBlock * dh_pad;  // [kBlock][dh_pad] values of this block
  float* qf = vpack + kBlock * dh_pad;     // [rows][dh_pad] q in f32
  float* acc = qf + rows * dh_pad;         // [rows][dh_pad] weighted sums
  float* ml = acc + rows * dh_pad;         // [rows][3]: running max, running sum, keys
  float* pb = ml + 3 * rows;               // [rows][kBlock] weights of this block
  const Q qzero{};

  // Keys past a row's last visible one are skipped.
  auto valid_of = [&](std::int64_t r) { return span.keys_visible(a, r / group); };
  std::int64_t kv_end = 0;
  for (std::int64_t r = 0; r < rows; ++r) {
    const Q* qr = q + span.q_offset(a, r);
    float* qd = qf + r * dh_pad;
    std::int64_t e = 0;
    for (; e + kW <= dh; e += kW) store(qd + e, load(qr + e));
    if (e < dh) store(qd + e, load_partial(qr + e, dh - e, qzero));
    for (std::int64_t i = 0; i < dh_pad; i += kW) store(acc + r * dh_pad + i, vset(0.0f));
    ml[3 * r] = -kAttnInf;
    ml[3 * r + 1] = 0.0f;
    const std::int64_t valid = valid_of(r);
    kv_end = valid > kv_end ? valid : kv_end;
  }
  const KV* kbase = kv_head_start<KV>(a.k, span.kv_offset(a));
  const KV* vbase = kv_head_start<KV>(a.v, span.kv_offset(a));
  const VF sc = vset(a.scale);
  const bool direct = kDenseKv && rows <= 4 && dh % kW == 0;
  for (std::int64_t j0 = 0; j0 < kv_end; j0 += kBlock) {
    const std::int64_t nblock = kv_end - j0 < kBlock ? kv_end - j0 : kBlock;
    // Packed rows, or (direct) the tensor's own rows where they are whole vectors
    // and too few query rows share them to repay the copy.
    const float* vsrc_packed = vpack;
    const KV* vsrc_direct = direct ? vbase + j0 * kv_stride : vbase;
    if (!direct) {
      pack_rows(kbase, kv_stride, j0, nblock, kBlock, dh, dh_pad, kpack);
      pack_rows(vbase, kv_stride, j0, nblock, kBlock, dh, dh_pad, vpack);
    } else if (nblock % kW != 0) {
      // The block's last, partial key tile, padded with zero keys.
      const std::int64_t tail = nblock / kW * kW;
      pack_rows(kbase, kv_stride, j0 + tail, nblock - tail, kW, dh, dh_pad, kpack);
    }
    // Logits and the online softmax update of every row for keys [j0, j0 + n).
    for (std::int64_t r = 0; r < rows; ++r) {
      const std::int64_t valid = valid_of(r);
      std::int64_t n = valid - j0 < kBlock ? valid - j0 : kBlock;
      n = n < 0 ? 0 : n;
      ml[3 * r + 2] = 0.0f;
      if (n == 0) continue;
      float* pr = pb + r * kBlock;
      // A mask row of zeros up to the limit adds nothing: not read.
      const bool masked =
          mask != nullptr && (a.mask_zero == nullptr || !a.mask_zero[s0 + r / group]);
      const Q* mrow = masked ? mask + (s0 + r / group) * a.skv + j0 : nullptr;
      VF bmax = vset(-kAttnInf);
      for (int t = 0; t < kBlockTiles; ++t) {
        const std::int64_t base = static_cast<std::int64_t>(t) * kW;
        VF lg = vset(-kAttnInf);
        if (base < n) {
          const std::int64_t w = n - base < kW ? n - base : kW;
          const float* qr = qf + r * dh_pad;
          if (!direct) {
            lg = dot_tile(qr, kpack + base * dh_pad, dh_pad, dh_pad);
          } else if (base + kW <= nblock) {
            if constexpr (kDenseKv) {
              lg = dot_tile(qr, kbase + (j0 + base) * kv_stride, kv_stride, dh_pad);
            }
          } else {
            lg = dot_tile(qr, kpack, dh_pad, dh_pad);
          }
          lg = vmul(lg, sc);
          if (mrow != nullptr) {
            lg = vadd(lg, w == kW ? load(mrow + base) : load_partial(mrow + base, w, qzero));
          }
          if (w < kW) {
            float buf[kW];
            store(buf, lg);
            for (std::int64_t j = w; j < kW; ++j) buf[j] = -kAttnInf;
            lg = load(buf);
          }
        }
        store(pr + base, lg);
        bmax = vmax(bmax, lg);
      }
      const float m_old = ml[3 * r];
      // A tree of vmaxps: a NaN logit may or may not come through; either way
      // its e^(logit - m) below is NaN and so is the row.
      const float bm = vreduce_max(bmax);
      float m_new = bm > m_old ? bm : m_old;
      if (m_new == -kAttnInf) {
        // Nothing unmasked yet: the block adds nothing (and e^(-inf - -inf) is
        // NaN). Unless its logits are NaN, which vmax drops (it returns its
        // second operand): then the row is NaN from here on, as a NaN logit
        // beside finite ones makes it through the sum of exponentials.
        bool nan = false;
        for (int t = 0; t < kBlockTiles; ++t) nan |= any_lane(vnan_lanes(load(pr + t * kW1)));
        if (!nan) continue;
        m_new = __builtin_nanf("");
      }
      const VF mv = vset(m_new);
      if (m_new != m_old) {
        // e^(m_old - m_new) in [0, 1): 0 for the first unmasked block.
        const VF alpha = vexp(vsub(vset(m_old), mv));
        float* ar = acc + r * dh_pad;
        for (std::int64_t i = 0; i < dh_pad; i += kW) store(ar + i, vmul(load(ar + i), alpha));
        float tmp[kW];
        store(tmp, alpha);
        ml[3 * r + 1] *= tmp[0];
        ml[3 * r] = m_new;
      }
      VF psum = vset(0.0f);
      for (int t = 0; t < kBlockTiles; ++t) {
        const VF p = vexp(vsub(load(pr + t * kW1), mv));
        store(pr + t * kW1, p);
        psum = vadd(psum, p);
      }
      ml[3 * r + 1] += vreduce_add(psum);
      ml[3 * r + 2] = static_cast<float>(n);
    }
    // acc += p v, two rows at a time over the keys both use, then each row's own
    // remaining keys; every row sees its keys in order either way.
    std::int64_t r = 0;
    for (; r + 1 < rows; r += 2) {
      const auto n0 = static_cast<std::int64_t>(ml[3 * r + 2]);
      const auto n1 = static_cast<std::int64_t>(ml[3 * r + 5]);
      const std::int64_t both = n0 < n1 ? n0 : n1;
      float* const acc2[2] = {acc + r * dh_pad, acc + (r + 1) * dh_pad};
      const float* const p2[2] = {pb + r * kBlock, pb + (r + 1) * kBlock};
      if constexpr (kDenseKv) {
        if (both > 0 && direct) {
          add_weighted_values<2>(acc2, p2, vsrc_direct, kv_stride, both, dh_pad);
        }
      }
      if (both > 0 && !direct) add_weighted_values<2>(acc2, p2, vsrc_packed, dh_pad, both, dh_pad);
      for (int i = 0; i < 2; ++i) {
        const std::int64_t ni = i == 0 ? n0 : n1;
        if (ni <= both) continue;
        float* const acc1[1] = {acc2[i]};
        const float* const p1[1] = {p2[i] + both};
        if (direct) {
          if constexpr (kDenseKv) {
            add_weighted_values<1>(acc1, p1, vsrc_direct + both * kv_stride, kv_stride, ni - both,
                                   dh_pad);
          }
        } else {
          add_weighted_values<1>(acc1, p1, vsrc_packed + both * dh_pad, dh_pad, ni - both, dh_pad);
        }
      }
    }
    if (r < rows) {
      const auto n0 = static_cast<std::int64_t>(ml[3 * r + 2]);
      float* const acc1[1] = {acc + r * dh_pad};
      const float* const p1[1] = {pb + r * kBlock};
      if constexpr (kDenseKv) {
        if (n0 > 0 && direct) add_weighted_values<1>(acc1, p1, vsrc_direct, kv_stride, n0, dh_pad);
      }
      if (n0 > 0 && !direct) add_weighted_values<1>(acc1, p1, vsrc_packed, dh_pad, n0, dh_pad);
    }
  }
  write_rows<Q>(a, span, acc, dh_pad, ml + 1, 3);
}

template <typename Q>
constexpr void fill_attention_q(AttentionSimd& t, int qs) {
  t.item[qs][0] = &attention_item<Q, float>;
  t.item[qs][1] = &attention_item<Q, F16>;
  t.item[qs][2] = &attention_item<Q, BF16>;
  t.item_q8_0[qs] = &attention_item<Q, Q8_0Block>;
}

constexpr AttentionSimd make_attention_table() {
  AttentionSimd t{};
  t.width = kW;
  t.block = kBlock;
  fill_attention_q<float>(t, 0);
  fill_attention_q<F16>(t, 1);
  fill_attention_q<BF16>(t, 2);
  return t;
}

constexpr AttentionSimd kAttentionTable = make_attention_table();

}  // namespace
}  // namespace switchyard::cpu::SWITCHYARD_SIMD_NS
