// CPU kernels on quantized operands: matmul (portable and AVX2) against a float64
// reference on the dequantized weights, get_rows, casts, thread-count
// determinism, refusal of malformed calls, and the binding-table rows.
#include "backends/cpu/quant/quant_kernels.h"

#include <fmt/format.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <vector>

#include <sys/mman.h>
#include <unistd.h>

#include "backends/cpu/cpu_features.h"
#include "switchyard/backends.h"
#include "switchyard/half.h"
#include "switchyard/quant.h"
#include "switchyard/quant_blocks.h"
#include "switchyard/thread_pool.h"

namespace switchyard::cpu {
namespace {

// Every block-quantized dtype in dtype.def.
constexpr auto kAllQuant = kQuantizedDTypes;
// The weight formats, which the integer-dot siblings serve.
constexpr auto kAvx2Quant = kQuantizedWeightDTypes;

bool has_avx2() { return cpu_features().avx2 && cpu_features().f16c; }
bool has_avx512_vnni() {
  return cpu_features().avx512 && cpu_features().avx512_vnni && cpu_features().f16c;
}
bool has_amx() { return cpu_features().amx_int8 && cpu_features().f16c; }
bool has_amx_bf16() { return has_amx() && cpu_features().amx_bf16; }

struct Problem {
  std::int64_t batch, m, n, k;
  std::vector<float> a;
  std::vector<std::byte> w;
  std::vector<float> w_deq;
};

// Activations N(0, 1) and weights N(0, 0.05); `uniform` draws both from
// U(-1, 1) instead (the conformance harness's inputs).
Problem make_problem(DType t, std::int64_t batch, std::int64_t m, std::int64_t n, std::int64_t k,
                     unsigned seed, bool uniform = false) {
  Problem p{batch, m, n, k, {}, {}, {}};
  std::mt19937 rng(seed);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::uniform_real_distribution<float> flat(-1.0f, 1.0f);
  p.a.resize(static_cast<std::size_t>(batch * m * k));
  for (float& v : p.a) v = uniform ? flat(rng) : normal(rng);
  std::vector<float> w(static_cast<std::size_t>(n * k));
  for (float& v : w) v = uniform ? flat(rng) : normal(rng) * 0.05f;
  p.w.resize(static_cast<std::size_t>(*row_bytes(t, n * k)));
  EXPECT_TRUE(quantize(t, w, p.w).is_ok());
  p.w_deq.resize(w.size());
  EXPECT_TRUE(dequantize(t, p.w, p.w_deq).is_ok());
  return p;
}

Status run_matmul(KernelFn fn, DType t, Problem& p, std::vector<float>& out,
                  ParallelRunner* runner = nullptr) {
  out.assign(static_cast<std::size_t>(p.batch * p.m * p.n), -1.0f);
  const TensorView views[] = {TensorView::contiguous(p.a.data(), DType::kF32, {p.batch, p.m, p.k}),
                              TensorView::contiguous(p.w.data(), t, {p.n, p.k}),
                              TensorView::contiguous(out.data(), DType::kF32, {p.batch, p.m, p.n})};
  OpParams params;
  ExecContext ctx;
  ctx.runner = runner;
  return fn({std::span(views, 2), std::span(views + 2, 1), params, ctx});
}

// The kernel that `pick` (a lambda templated on the dtype) gives for dtype t,
// among `dtypes`; null for a dtype outside them.
template <auto kDTypes, typename Pick, std::size_t... I>
KernelFn kernel_among(DType t, Pick pick, std::index_sequence<I...>) {
  KernelFn fn = nullptr;
  ((t == kDTypes[I] ? (fn = pick.template operator()<kDTypes[I]>(), true) : false) || ...);
  return fn;
}
template <auto kDTypes, typename Pick>
KernelFn kernel_among(DType t, Pick pick) {
  return kernel_among<kDTypes>(t, pick, std::make_index_sequence<kDTypes.size()>{});
}

KernelFn ref_fn(DType t) {
  return kernel_among<kAllQuant>(t, []<DType W>() -> KernelFn { return &matmul_quant_ref_for<W>; });
}
KernelFn avx2_fn(DType t) {
  return kernel_among<kAvx2Quant>(t,
                                  []<DType W>() -> KernelFn { return &matmul_quant_avx2_for<W>; });
}
KernelFn avx512_fn(DType t) {
  return kernel_among<kAvx2Quant>(
      t, []<DType W>() -> KernelFn { return &matmul_quant_avx512_for<W>; });
}
KernelFn amx_fn(DType t) {
  return kernel_among<kAvx2Quant>(t,
                                  []<DType W>() -> KernelFn { return &matmul_quant_amx_for<W>; });
}
KernelFn amx_bf16_fn(DType t) {
  return kernel_among<kAvx2Quant>(
      t, []<DType W>() -> KernelFn { return &matmul_quant_amx_bf16_for<W>; });
}

// The SIMD siblings this CPU runs, each with its kernel per format.
struct Simd {
  const char* name;
  KernelFn (*fn)(DType);
};
std::vector<Simd> runnable_simd() {
  std::vector<Simd> v;
  if (has_avx512_vnni()) v.push_back({"avx512", &avx512_fn});
  if (has_amx()) v.push_back({"amx", &amx_fn});
  if (has_avx2()) v.push_back({"avx2", &avx2_fn});
  return v;
}

// Checks out against a float64 product of `a` and the dequantized weights:
// |out - exact| <= rel * sum |a * w| for every element.
void expect_within(const Problem& p, const std::vector<float>& a, const std::vector<float>& out,
                   double rel, const std::string& what) {
  for (std::int64_t r = 0; r < p.batch * p.m; ++r) {
    for (std::int64_t j = 0; j < p.n; ++j) {
      double exact = 0.0;
      double mag = 0.0;
      for (std::int64_t q = 0; q < p.k; ++q) {
        const double prod = double{a[static_cast<std::size_t>(r * p.k + q)]} *
                            p.w_deq[static_cast<std::size_t>(j * p.k + q)];
        exact += prod;
        mag += std::fabs(prod);
      }
      const double got = out[static_cast<std::size_t>(r * p.n + j)];
      ASSERT_LE(std::fabs(got - exact), rel * mag + 1e-30)
          << what << " row " << r << " col " << j << " got " << got << " exact " << exact;
    }
  }
}

std::int64_t k_for(DType t) { return block_elems(t) == 32 ? 96 : 512; }

TEST(QuantMatmulRef, MatchesFloat64ReferenceForEveryFormat) {
  for (DType t : kAllQuant) {
    Problem p = make_problem(t, 2, 3, 5, k_for(t), 11);
    std::vector<float> out;
    ASSERT_TRUE(run_matmul(ref_fn(t), t, p, out).is_ok()) << name(t);
    expect_within(p, p.a, out, 1e-5, std::string(name(t)));
  }
}

TEST(QuantMatmulAvx2, WithinDeclaredBoundForEveryFormat) {
  if (!has_avx2()) GTEST_SKIP() << "CPU lacks AVX2/F16C";
  for (DType t : kAvx2Quant) {
    for (std::int64_t n : {1, 7, 33}) {
      Problem p = make_problem(t, 1, 4, n, 2 * k_for(t), 5);
      std::vector<float> out;
      ASSERT_TRUE(run_matmul(avx2_fn(t), t, p, out).is_ok()) << name(t);
      expect_within(p, p.a, out, 1.0 / 64.0, std::string(name(t)));
    }
  }
}

// Against the exact product of the q8-quantized activations and the weights the
// integer path is only off by f32 rounding: this pins every format's unpacking.
TEST(QuantMatmulAvx2, ExactOnQuantizedActivations) {
  if (!has_avx2()) GTEST_SKIP() << "CPU lacks AVX2/F16C";
  for (DType t : kAvx2Quant) {
    Problem p = make_problem(t, 1, 5, 9, 2 * k_for(t), 21);  // 4 rows together + 1
    const DType act = activation_format(t);
    std::vector<float> a_q(p.a.size());
    std::vector<std::byte> tmp(static_cast<std::size_t>(*row_bytes(act, p.k)));
    for (std::int64_t r = 0; r < p.m; ++r) {
      const std::span<const float> row(p.a.data() + r * p.k, static_cast<std::size_t>(p.k));
      ASSERT_TRUE(quantize(act, row, tmp).is_ok());
      ASSERT_TRUE(
          dequantize(act, tmp, std::span(a_q.data() + r * p.k, static_cast<std::size_t>(p.k)))
              .is_ok());
    }
    std::vector<float> out;
    ASSERT_TRUE(run_matmul(avx2_fn(t), t, p, out).is_ok()) << name(t);
    expect_within(p, a_q, out, 1e-5, std::string(name(t)) + " vs q8 activations");
  }
}

// The q8 activations a SIMD sibling works from, dequantized: against these the
// integer paths are exact up to f32 rounding.
std::vector<float> quantized_activations(DType t, const Problem& p) {
  const DType act = activation_format(t);
  std::vector<float> a_q(p.a.size());
  std::vector<std::byte> tmp(static_cast<std::size_t>(*row_bytes(act, p.k)));
  for (std::int64_t r = 0; r < p.batch * p.m; ++r) {
    const std::span<const float> row(p.a.data() + r * p.k, static_cast<std::size_t>(p.k));
    EXPECT_TRUE(quantize(act, row, tmp).is_ok());
    EXPECT_TRUE(dequantize(act, tmp, std::span(a_q.data() + r * p.k, static_cast<std::size_t>(p.k)))
                    .is_ok());
  }
  return a_q;
}

// Odd shapes through every tile path: 1, 3 and 17 activation rows (4-row groups
// plus leftovers), 1, 3 and 17 weight rows (2- and 4-row tiles plus leftovers),
// K of one block and of several (the AVX-512 sibling takes 32-element blocks 16
// at a time: 1, 3 and 8 blocks are all a padded last group, 19 one whole group
// and a padded one).
TEST(QuantMatmulSimd, OddShapesExactOnQuantizedActivations) {
  const std::vector<Simd> simd = runnable_simd();
  if (simd.empty()) GTEST_SKIP() << "CPU runs no SIMD sibling";
  for (const Simd& s : simd) {
    for (DType t : kAvx2Quant) {
      const std::int64_t be = block_elems(t);
      for (std::int64_t k : {be, 3 * be, 8 * be, 19 * be}) {
        for (std::int64_t m : {1, 3, 17}) {
          for (std::int64_t n : {1, 3, 17}) {
            Problem p = make_problem(t, 1, m, n, k, static_cast<unsigned>(m * 100 + n + k),
                                     /*uniform=*/(m + n) % 2 == 0);
            const std::vector<float> a_q = quantized_activations(t, p);
            std::vector<float> out;
            ASSERT_TRUE(run_matmul(s.fn(t), t, p, out).is_ok()) << s.name << " " << name(t);
            const std::string what = fmt::format("{} {} m={} n={} k={}", s.name, name(t), m, n, k);
            expect_within(p, a_q, out, 1e-5, what);
            if (HasFatalFailure()) return;
          }
        }
      }
    }
  }
}

// Bytes that end exactly where an inaccessible page begins: a kernel reading one
// byte past them faults (vector loads that run past a row's last block).
class GuardedBytes {
 public:
  explicit GuardedBytes(std::size_t size) : size_(size) {
    page_ = static_cast<std::size_t>(sysconf(_SC_PAGESIZE));
    span_ = (size + page_ - 1) / page_ * page_ + page_;
    void* m = mmap(nullptr, span_, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    EXPECT_NE(m, MAP_FAILED);
    base_ = static_cast<std::byte*>(m);
    EXPECT_EQ(mprotect(base_ + span_ - page_, page_, PROT_NONE), 0);
  }
  ~GuardedBytes() { munmap(base_, span_); }
  GuardedBytes(const GuardedBytes&) = delete;
  GuardedBytes& operator=(const GuardedBytes&) = delete;
  [[nodiscard]] std::byte* data() { return base_ + span_ - page_ - size_; }

 private:
  std::size_t size_;
  std::size_t page_ = 0;
  std::size_t span_ = 0;
  std::byte* base_ = nullptr;
};

// Weights and activations placed flush against a guard page: no SIMD sibling
// reads past the last weight block or the last activation element.
TEST(QuantMatmulSimd, NoReadPastTheOperands) {
  const std::vector<Simd> simd = runnable_simd();
  if (simd.empty()) GTEST_SKIP() << "CPU runs no SIMD sibling";
  for (const Simd& s : simd) {
    for (DType t : kAvx2Quant) {
      for (std::int64_t blocks : {1, 3, 16, 19}) {
        for (std::int64_t n : {1, 5}) {
          const std::int64_t k = blocks * block_elems(t);
          Problem p = make_problem(t, 1, 1, n, k, 77);
          GuardedBytes w(p.w.size());
          GuardedBytes a(p.a.size() * sizeof(float));
          std::memcpy(w.data(), p.w.data(), p.w.size());
          std::memcpy(a.data(), p.a.data(), p.a.size() * sizeof(float));
          std::vector<float> out(static_cast<std::size_t>(n));
          std::vector<float> expect;
          ASSERT_TRUE(run_matmul(s.fn(t), t, p, expect).is_ok());
          const TensorView views[] = {TensorView::contiguous(a.data(), DType::kF32, {1, k}),
                                      TensorView::contiguous(w.data(), t, {n, k}),
                                      TensorView::contiguous(out.data(), DType::kF32, {1, n})};
          OpParams params;
          ExecContext ctx;
          ASSERT_TRUE(s.fn(t)({std::span(views, 2), std::span(views + 2, 1), params, ctx}).is_ok());
          EXPECT_EQ(out, expect) << s.name << " " << name(t) << " blocks " << blocks << " n " << n;
        }
      }
    }
  }
}

TEST(QuantMatmulAvx512, WithinDeclaredBoundForEveryFormat) {
  if (!has_avx512_vnni()) GTEST_SKIP() << "CPU lacks AVX-512 VNNI";
  for (DType t : kAvx2Quant) {
    for (std::int64_t n : {1, 7, 33}) {
      Problem p = make_problem(t, 1, 5, n, 2 * k_for(t), 5);
      std::vector<float> out;
      ASSERT_TRUE(run_matmul(avx512_fn(t), t, p, out).is_ok()) << name(t);
      expect_within(p, p.a, out, 1.0 / 64.0, std::string(name(t)));
    }
  }
}

// Whichever tile computes an output element (decode tiles of one or four weight
// rows, the prefill tiles, the leftover tiles), it gets the same bytes: a
// matmul's rows equal the matvecs of each activation row alone.
TEST(QuantMatmulSimd, EveryTilePathGivesTheSameBytes) {
  const std::vector<Simd> simd = runnable_simd();
  if (simd.empty()) GTEST_SKIP() << "CPU runs no SIMD sibling";
  for (const Simd& s : simd) {
    for (DType t : kAvx2Quant) {
      // 13 activation rows: the AVX2 k-quant tiles of eight and four rows plus one
      // decode row; three 4-row groups plus one elsewhere. 35 blocks: two whole
      // AVX-512 decode groups of 16 and a partial one.
      for (std::int64_t blocks : {3, 35}) {
        Problem p = make_problem(t, 1, 13, 11, blocks * block_elems(t), 31);
        std::vector<float> all;
        ASSERT_TRUE(run_matmul(s.fn(t), t, p, all).is_ok()) << name(t);
        for (std::int64_t r = 0; r < p.m; ++r) {
          Problem one = p;
          one.m = 1;
          one.a.assign(p.a.begin() + r * p.k, p.a.begin() + (r + 1) * p.k);
          std::vector<float> single;
          ASSERT_TRUE(run_matmul(s.fn(t), t, one, single).is_ok()) << name(t);
          for (std::int64_t j = 0; j < p.n; ++j) {
            ASSERT_EQ(single[static_cast<std::size_t>(j)],
                      all[static_cast<std::size_t>(r * p.n + j)])
                << s.name << " " << name(t) << " blocks " << blocks << " row " << r << " col " << j;
          }
        }
      }
    }
  }
}

// The tiles using an instruction-set extension give the same bytes as those
// without it, in every tile path: decode tiles of four and one weight rows, the
// prefill tiles and their leftovers, whole 16-block groups and the padded rest.
// GFNI: the q2_k level indices (Note [GFNI level bits]); AVX512_VBMI: the q5_0 /
// q5_1 fifth bits (Note [Fifth bits]); both: q3_k's levels and scales (Note
// [q3_k with GFNI and VBMI]). q4_0 has one form; it rides along as a check that
// the choice leaves other formats alone.
TEST(QuantMatmulAvx512, ExtensionTilesGiveTheSameBytes) {
  if (!has_avx512_vnni()) GTEST_SKIP() << "CPU lacks AVX-512 VNNI";
  struct Case {
    DType t;
    bool gfni;
    bool vbmi;
  };
  for (const Case& c : {Case{DType::kQ2_K, true, false}, Case{DType::kQ3_K, true, true},
                        Case{DType::kQ5_0, false, true}, Case{DType::kQ5_1, false, true},
                        Case{DType::kQ4_0, true, true}}) {
    if ((c.gfni && !cpu_features().gfni) || (c.vbmi && !cpu_features().avx512_vbmi)) continue;
    // 32-element formats: one whole group of 16 blocks and one block more.
    const std::int64_t k = block_elems(c.t) == 32 ? 17 * 32 : 3 * block_elems(c.t);
    for (std::int64_t m : {1, 6}) {
      Problem p = make_problem(c.t, 1, m, 11, k, 41);
      const auto run = [&](bool extras, std::vector<float>& out) {
        out.assign(static_cast<std::size_t>(p.m * p.n), -1.0f);
        const TensorView views[] = {TensorView::contiguous(p.a.data(), DType::kF32, {p.m, p.k}),
                                    TensorView::contiguous(p.w.data(), c.t, {p.n, p.k}),
                                    TensorView::contiguous(out.data(), DType::kF32, {p.m, p.n})};
        OpParams params;
        ExecContext ctx;
        return matmul_quant_avx512({std::span(views, 2), std::span(views + 2, 1), params, ctx}, c.t,
                                   {.gfni = extras && c.gfni, .avx512_vbmi = extras && c.vbmi});
      };
      std::vector<float> with;
      std::vector<float> without;
      ASSERT_TRUE(run(true, with).is_ok()) << name(c.t);
      ASSERT_TRUE(run(false, without).is_ok()) << name(c.t);
      for (std::size_t i = 0; i < with.size(); ++i) {
        ASSERT_EQ(std::bit_cast<std::uint32_t>(with[i]), std::bit_cast<std::uint32_t>(without[i]))
            << name(c.t) << " rows " << m << " element " << i;
      }
    }
  }
}

// Activation rows of rounding ties: in every block all elements but the first
// (the largest) scale to exactly L + 0.5 in f32, while their exact product with
// the scale lies just off the tie. The reference quantizers round the f32
// product (q8_0: half away from zero; q8_k: to even), so a sibling that rounds
// ties another way, or fuses the multiply into the rounding step, gets other
// levels and misses the reference-quantized result.
std::vector<float> rounding_ties(DType act, std::int64_t count, unsigned seed,
                                 std::int64_t& off_tie) {
  const std::int64_t be = block_elems(act);
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> magnitude(0.01f, 4.0f);
  std::uniform_int_distribution<int> level(-120, 119);
  std::vector<float> a(static_cast<std::size_t>(count));
  off_tie = 0;
  for (std::int64_t b = 0; b < count / be; ++b) {
    float* x = a.data() + b * be;
    x[0] = (b % 2 == 0 ? 127.0f : -127.0f) * magnitude(rng);
    // The scale each reference quantizer multiplies by.
    const float scale = act == DType::kQ8_0 ? 1.0f / (std::fabs(x[0]) / 127.0f) : -127.0f / x[0];
    for (std::int64_t i = 1; i < be; ++i) {
      const float tie = static_cast<float>(level(rng)) + 0.5f;
      float c = tie / scale;
      for (int s = 0; s < 4; ++s) c = std::nextafter(c, -std::numeric_limits<float>::infinity());
      float pick = tie / scale;
      for (int s = 0; s < 9; ++s, c = std::nextafter(c, std::numeric_limits<float>::infinity())) {
        if (c * scale != tie) continue;
        pick = c;
        if (std::fma(c, scale, -tie) != 0.0f) break;
      }
      off_tie += std::fma(pick, scale, -tie) != 0.0f ? 1 : 0;
      x[i] = pick;
    }
  }
  return a;
}

TEST(QuantMatmulSimd, ActivationRoundingTiesMatchTheReferenceQuantizer) {
  const std::vector<Simd> simd = runnable_simd();
  if (simd.empty()) GTEST_SKIP() << "CPU runs no SIMD sibling";
  for (const Simd& s : simd) {
    for (DType t : kAvx2Quant) {
      // Five rows: the prefill tiles and a decode row; two AVX-512 decode groups.
      Problem p = make_problem(t, 1, 5, 7, 2 * block_elems(t) * (block_elems(t) == 32 ? 16 : 1), 9);
      std::int64_t off_tie = 0;
      p.a = rounding_ties(activation_format(t), p.m * p.k, 3, off_tie);
      // The inputs are adversarial: most elements sit just off a tie.
      ASSERT_GT(off_tie, p.m * p.k / 2) << name(t);
      const std::vector<float> a_q = quantized_activations(t, p);
      std::vector<float> out;
      ASSERT_TRUE(run_matmul(s.fn(t), t, p, out).is_ok()) << s.name << " " << name(t);
      expect_within(p, a_q, out, 1e-5, fmt::format("{} {} rounding ties", s.name, name(t)));
      if (HasFatalFailure()) return;
    }
  }
}

TEST(QuantMatmulSimd, NonFiniteActivationRowGivesNaN) {
  for (const Simd& s : runnable_simd()) {
    // q4_k pairs with q8_k activations, q4_0 with q8_0: both quantizers.
    for (DType t : {DType::kQ4_K, DType::kQ4_0}) {
      for (float bad :
           {std::numeric_limits<float>::infinity(), std::numeric_limits<float>::quiet_NaN()}) {
        // 18 rows: the bad row in the second AMX tile of 16 rows as well.
        for (std::int64_t bad_row : {2, 17}) {
          Problem p = make_problem(t, 1, 18, 3, 256, 2);
          p.a[static_cast<std::size_t>(bad_row * p.k + 17)] = bad;
          std::vector<float> out;
          ASSERT_TRUE(run_matmul(s.fn(t), t, p, out).is_ok());
          for (std::int64_t r = 0; r < p.m; ++r) {
            for (std::int64_t j = 0; j < 3; ++j) {
              EXPECT_EQ(std::isnan(out[static_cast<std::size_t>(r * 3 + j)]), r == bad_row)
                  << s.name << " " << name(t) << " " << bad << " " << r << "," << j;
            }
          }
        }
      }
    }
  }
}

TEST(QuantMatmulAvx2, NonFiniteActivationRowGivesNaN) {
  if (!has_avx2()) GTEST_SKIP() << "CPU lacks AVX2/F16C";
  for (DType t : {DType::kQ4_K, DType::kQ2_K, DType::kQ3_K, DType::kQ4_0}) {
    for (float bad :
         {std::numeric_limits<float>::infinity(), -std::numeric_limits<float>::infinity(),
          std::numeric_limits<float>::quiet_NaN()}) {
      Problem p = make_problem(t, 1, 5, 3, 256, 2);
      p.a[static_cast<std::size_t>(2 * p.k + 17)] = bad;
      std::vector<float> out;
      ASSERT_TRUE(run_matmul(avx2_fn(t), t, p, out).is_ok());
      for (std::int64_t r = 0; r < 5; ++r) {
        for (std::int64_t j = 0; j < 3; ++j) {
          EXPECT_EQ(std::isnan(out[static_cast<std::size_t>(r * 3 + j)]), r == 2)
              << name(t) << " " << bad << " " << r << "," << j;
        }
      }
    }
  }
}

TEST(QuantMatmulConcurrent, SameBytesAtAnyThreadCount) {
  ThreadPool pool(4);
  for (DType t : kAvx2Quant) {
    Problem p = make_problem(t, 1, 5, 37, 512, 9);
    std::vector<KernelFn> fns = {ref_fn(t)};
    for (const Simd& s : runnable_simd()) fns.push_back(s.fn(t));
    for (KernelFn fn : fns) {
      std::vector<float> serial;
      std::vector<float> threaded;
      ASSERT_TRUE(run_matmul(fn, t, p, serial).is_ok());
      ASSERT_TRUE(run_matmul(fn, t, p, threaded, &pool).is_ok());
      EXPECT_EQ(serial, threaded) << name(t);
    }
  }
}

TEST(QuantMatmulRef, RefusesMalformedCalls) {
  Problem p = make_problem(DType::kQ4_0, 1, 2, 3, 64, 1);
  std::vector<float> out(6);
  OpParams params;
  ExecContext ctx;
  // Weights of another dtype than the kernel's.
  {
    const TensorView v[] = {TensorView::contiguous(p.a.data(), DType::kF32, {2, 64}),
                            TensorView::contiguous(p.w.data(), DType::kQ8_0, {3, 64}),
                            TensorView::contiguous(out.data(), DType::kF32, {2, 3})};
    EXPECT_EQ(
        matmul_quant_ref_for<DType::kQ4_0>({std::span(v, 2), std::span(v + 2, 1), params, ctx})
            .code(),
        StatusCode::kInvalidArgument);
  }
  // K that is not a whole number of blocks.
  {
    const TensorView v[] = {TensorView::contiguous(p.a.data(), DType::kF32, {2, 48}),
                            TensorView::contiguous(p.w.data(), DType::kQ4_0, {3, 48}),
                            TensorView::contiguous(out.data(), DType::kF32, {2, 3})};
    EXPECT_EQ(
        matmul_quant_ref_for<DType::kQ4_0>({std::span(v, 2), std::span(v + 2, 1), params, ctx})
            .code(),
        StatusCode::kInvalidArgument);
  }
  // Output shape that does not match.
  {
    const TensorView v[] = {TensorView::contiguous(p.a.data(), DType::kF32, {2, 64}),
                            TensorView::contiguous(p.w.data(), DType::kQ4_0, {3, 64}),
                            TensorView::contiguous(out.data(), DType::kF32, {3, 2})};
    EXPECT_EQ(
        matmul_quant_ref_for<DType::kQ4_0>({std::span(v, 2), std::span(v + 2, 1), params, ctx})
            .code(),
        StatusCode::kInvalidArgument);
    for (const Simd& s : runnable_simd()) {
      EXPECT_EQ(s.fn(DType::kQ4_0)({std::span(v, 2), std::span(v + 2, 1), params, ctx}).code(),
                StatusCode::kInvalidArgument)
          << s.name;
    }
  }
}

TEST(QuantGetRows, DequantizesSelectedRows) {
  const DType t = DType::kQ5_K;
  Problem p = make_problem(t, 1, 1, 6, 256, 4);
  std::int32_t idx[] = {5, 0, 5, 2};
  std::vector<float> out32(4 * 256);
  std::vector<std::uint16_t> out16(4 * 256);
  OpParams params;
  ExecContext ctx;
  const TensorView table = TensorView::contiguous(p.w.data(), t, {6, 256});
  const TensorView ids = TensorView::contiguous(idx, DType::kI32, {4});
  {
    const TensorView v[] = {table, ids,
                            TensorView::contiguous(out32.data(), DType::kF32, {4, 256})};
    ASSERT_TRUE((get_rows_quant_ref_for<DType::kQ5_K, DType::kF32>(
                     {std::span(v, 2), std::span(v + 2, 1), params, ctx}))
                    .is_ok());
  }
  {
    const TensorView v[] = {table, ids,
                            TensorView::contiguous(out16.data(), DType::kF16, {4, 256})};
    ASSERT_TRUE((get_rows_quant_ref_for<DType::kQ5_K, DType::kF16>(
                     {std::span(v, 2), std::span(v + 2, 1), params, ctx}))
                    .is_ok());
  }
  for (int i = 0; i < 4; ++i) {
    for (int c = 0; c < 256; ++c) {
      const float expect = p.w_deq[static_cast<std::size_t>(idx[i] * 256 + c)];
      ASSERT_EQ(out32[static_cast<std::size_t>(i * 256 + c)], expect);
      ASSERT_EQ(out16[static_cast<std::size_t>(i * 256 + c)], f32_to_f16(expect));
    }
  }
  idx[3] = 6;
  const TensorView v[] = {table, ids, TensorView::contiguous(out32.data(), DType::kF32, {4, 256})};
  EXPECT_EQ((get_rows_quant_ref_for<DType::kQ5_K, DType::kF32>(
                 {std::span(v, 2), std::span(v + 2, 1), params, ctx}))
                .code(),
            StatusCode::kOutOfRange);
}

TEST(QuantCast, EveryFormatToEveryFloatType) {
  OpParams params;
  ExecContext ctx;
  for (DType t : kAllQuant) {
    Problem p = make_problem(t, 1, 1, 2, 512, 8);
    std::vector<float> f32(1024);
    std::vector<std::uint16_t> bf16(1024);
    const TensorView in = TensorView::contiguous(p.w.data(), t, {2, 512});
    const TensorView v1[] = {in, TensorView::contiguous(f32.data(), DType::kF32, {2, 512})};
    const TensorView v2[] = {in, TensorView::contiguous(bf16.data(), DType::kBF16, {2, 512})};
    ASSERT_TRUE(cast_quant_ref(KernelCall{std::span(v1, 1), std::span(v1 + 1, 1), params, ctx}, t,
                               DType::kF32)
                    .is_ok());
    ASSERT_TRUE(cast_quant_ref(KernelCall{std::span(v2, 1), std::span(v2 + 1, 1), params, ctx}, t,
                               DType::kBF16)
                    .is_ok());
    for (std::size_t i = 0; i < f32.size(); ++i) {
      ASSERT_EQ(f32[i], p.w_deq[i]) << name(t);
      ASSERT_EQ(bf16[i], f32_to_bf16(p.w_deq[i])) << name(t);
    }
  }
}

TEST(QuantRegistration, EveryFormatHasMatmulGetRowsAndCasts) {
  Result<KernelBindingTable> table = make_builtin_table();
  ASSERT_TRUE(table.is_ok()) << table.status().to_string();
  for (DType t : kAllQuant) {
    const auto alts =
        table->lookup_alternatives(OpKind::kMatmul, {DType::kF32, t, DType::kF32}, BackendId::kCpu);
    ASSERT_FALSE(alts.empty()) << name(t);
    EXPECT_EQ(alts.back().source, "portable") << name(t);
    // cpu_features() (narrowed by SWITCHYARD_CPU_DISABLE; ctest also runs this
    // suite with avx512_vnni disabled) decides which siblings exist, best first.
    const bool simd =
        std::find(std::begin(kAvx2Quant), std::end(kAvx2Quant), t) != std::end(kAvx2Quant);
    std::vector<std::string> expect;
    if (simd && has_avx512_vnni()) {
      expect.push_back("avx512");
      expect.push_back("avx512+packed");  // Note [Prepacked weights]
    }
    if (simd && has_amx()) expect.push_back("amx");
    if (simd && has_amx_bf16()) expect.push_back("amx_bf16");
    if (simd && has_avx2()) expect.push_back("avx2");
    // The 256-bit packed tiles: EVEX with AVX-512 VNNI, else AVX-VNNI's VEX form.
    if (simd && has_avx512_vnni()) {
      expect.push_back("avx512_vnni+packed");
    } else if (simd && cpu_features().avx_vnni && cpu_features().f16c) {
      expect.push_back("avx_vnni+packed");
    }
    expect.push_back("portable");
    std::vector<std::string> got;
    for (const BindingEntry& e : alts) got.push_back(e.source + (e.packing ? "+packed" : ""));
    EXPECT_EQ(got, expect) << name(t);
    for (DType to : {DType::kF32, DType::kF16, DType::kBF16}) {
      EXPECT_TRUE(table->lookup(OpKind::kCast, {t, to}, BackendId::kCpu).is_ok()) << name(t);
      EXPECT_TRUE(table->lookup(OpKind::kGetRows, {t, DType::kI32, to}, BackendId::kCpu).is_ok())
          << name(t);
    }
  }
}

// Every quantized kernel names itself in its errors by the registered name the
// call carries (KernelCall::name).
TEST(QuantRegistration, ErrorsNameTheRegisteredEntry) {
  Result<KernelBindingTable> table = make_builtin_table();
  ASSERT_TRUE(table.is_ok()) << table.status().to_string();
  std::vector<float> a(64);
  std::vector<float> out(2);
  OpParams params;
  ExecContext ctx;
  const auto expect_named = [](const BindingEntry& e, const Status& s) {
    ASSERT_EQ(s.code(), StatusCode::kInvalidArgument) << e.name;
    const std::string prefix = std::string(e.name) + ": ";
    EXPECT_EQ(std::string(s.message()).rfind(prefix, 0), 0u) << s.message();
  };
  for (DType t : kAllQuant) {
    // Activations [1, 64] against weights [2, 64] in another format than t: a
    // well-formed call but for the weight dtype.
    const DType other = t == DType::kQ8_0 ? DType::kQ4_0 : DType::kQ8_0;
    std::vector<std::byte> w(static_cast<std::size_t>(2 * *row_bytes(other, 64)));
    const TensorView v[] = {TensorView::contiguous(a.data(), DType::kF32, {1, 64}),
                            TensorView::contiguous(w.data(), other, {2, 64}),
                            TensorView::contiguous(out.data(), DType::kF32, {1, 2})};
    for (const BindingEntry& e : table->lookup_alternatives(
             OpKind::kMatmul, {DType::kF32, t, DType::kF32}, BackendId::kCpu)) {
      expect_named(e, e.fn({std::span(v, 2), std::span(v + 2, 1), params, ctx, e.name}));
    }
    for (DType to : {DType::kF32, DType::kF16, DType::kBF16}) {
      // cast gets a table of another format, get_rows no indices.
      const TensorView io[] = {TensorView::contiguous(w.data(), other, {2, 64}),
                               TensorView::contiguous(out.data(), to, {1, 2})};
      for (const auto& [op, key] : {std::pair{OpKind::kCast, DTypeList{t, to}},
                                    std::pair{OpKind::kGetRows, DTypeList{t, DType::kI32, to}}}) {
        for (const BindingEntry& e : table->lookup_alternatives(op, key, BackendId::kCpu)) {
          expect_named(e, e.fn({std::span(io, 1), std::span(io + 1, 1), params, ctx, e.name}));
        }
      }
    }
  }
}

// The planner ranks siblings by estimated time first: wherever a faster sibling
// is registered its estimate must not exceed a slower one's, for decode and
// prefill shapes alike, so the order it falls back on is never what decides
// against the faster kernel.
TEST(QuantRegistration, CostsRankFasterSiblingsFirst) {
  Result<KernelBindingTable> table = make_builtin_table();
  ASSERT_TRUE(table.is_ok()) << table.status().to_string();
  const BackendCaps caps;
  for (DType t : kAvx2Quant) {
    const DType dtypes[] = {DType::kF32, t, DType::kF32};
    const auto alts =
        table->lookup_alternatives(OpKind::kMatmul, {DType::kF32, t, DType::kF32}, BackendId::kCpu);
    // The AMX siblings are ranked by their own crossovers (below), and so is
    // the packed one: slower than the plain AVX-512 sibling for decode (it reads
    // more bytes), faster for prefill.
    std::vector<const BindingEntry*> chain;
    const BindingEntry* packed = nullptr;
    for (const BindingEntry& e : alts) {
      if (e.packing != nullptr) {
        packed = &e;
      } else if (!e.source.starts_with("amx")) {
        chain.push_back(&e);
      }
    }
    for (std::int64_t m : {1, 512}) {
      const Shape shapes[] = {Shape{m, 4096}, Shape{14336, 4096}, Shape{m, 14336}};
      const CostInputs in{.op = OpKind::kMatmul, .shapes = shapes, .dtypes = dtypes};
      for (std::size_t i = 1; i < chain.size(); ++i) {
        const double faster = chain[i - 1]->cost(in).time_ns(caps);
        const double slower = chain[i]->cost(in).time_ns(caps);
        EXPECT_LT(faster, slower) << name(t) << " m=" << m << ": " << chain[i - 1]->name << " vs "
                                  << chain[i]->name;
      }
      if (packed != nullptr) {
        const double plain = chain.front()->cost(in).time_ns(caps);
        const double packed_ns = packed->cost(in).time_ns(caps);
        if (m == 1) {
          EXPECT_GT(packed_ns, plain) << name(t) << ": decode must keep the file's layout";
        } else {
          EXPECT_LT(packed_ns, plain) << name(t) << ": prefill must take the packed sibling";
        }
      }
    }
    // Admitted from four activation rows, the measured crossover (table 6).
    if (packed != nullptr) {
      for (std::int64_t m : {1, 2, 3, 4, 512}) {
        const Shape shapes[] = {Shape{m, 4096}, Shape{14336, 4096}, Shape{m, 14336}};
        EXPECT_EQ(packed->admits_shapes(shapes), m >= 4) << name(t) << " m=" << m;
      }
    }
  }
}

// The AMX siblings unpack the weights once per call: the cost functions send a
// handful of activation rows to the AVX-512 sibling, a few dozen to AMX-INT8 and
// long prompts to AMX-BF16, as BM_QuantMatmulRows measures (crossovers near 18
// and 55 rows).
TEST(QuantRegistration, AmxTakesPrefillAndLeavesDecode) {
  if (!has_amx() || !has_avx512_vnni()) GTEST_SKIP() << "CPU lacks AMX-INT8 or AVX-512 VNNI";
  Result<KernelBindingTable> table = make_builtin_table();
  ASSERT_TRUE(table.is_ok()) << table.status().to_string();
  const BackendCaps caps;
  for (DType t : kAvx2Quant) {
    const DType dtypes[] = {DType::kF32, t, DType::kF32};
    const auto alts =
        table->lookup_alternatives(OpKind::kMatmul, {DType::kF32, t, DType::kF32}, BackendId::kCpu);
    for (std::int64_t m : {1, 2, 4, 8, 32, 512}) {
      const Shape shapes[] = {Shape{m, 4096}, Shape{14336, 4096}, Shape{m, 14336}};
      const CostInputs in{.op = OpKind::kMatmul, .shapes = shapes, .dtypes = dtypes};
      std::string cheapest;
      double best = 0.0;
      for (const BindingEntry& e : alts) {
        // The packed sibling's crossover with the plain one is checked above.
        if (e.packing != nullptr) continue;
        const double time = e.cost(in).time_ns(caps);
        if (cheapest.empty() || time < best) {
          cheapest = e.source;
          best = time;
        }
      }
      const std::string expect = m <= 8                       ? "avx512"
                                 : m == 32 || !has_amx_bf16() ? "amx"
                                                              : "amx_bf16";
      EXPECT_EQ(cheapest, expect) << name(t) << " m=" << m;
    }
  }
}

// The AMX-BF16 sibling against the float64 product, within its claim (1/128 of
// sum |a w|), over partial tiles on both sides (1, 17 and 33 activation rows, 1,
// 17 and 40 weight rows) and K in one pass and in two (K past 1024).
TEST(QuantMatmulAmxBf16, OddShapesWithinItsBound) {
  if (!has_amx_bf16()) GTEST_SKIP() << "CPU lacks AMX-BF16";
  for (DType t : kAvx2Quant) {
    const std::int64_t be = block_elems(t);
    for (std::int64_t k : {be, 5 * be, 1024 + 2 * be}) {
      for (std::int64_t m : {1, 17, 33}) {
        for (std::int64_t n : {1, 17, 40}) {
          Problem p = make_problem(t, 1, m, n, k, static_cast<unsigned>(m * 7 + n + k));
          std::vector<float> out;
          ASSERT_TRUE(run_matmul(amx_bf16_fn(t), t, p, out).is_ok()) << name(t);
          expect_within(p, p.a, out, 1.0 / 128.0,
                        fmt::format("amx_bf16 {} m={} n={} k={}", name(t), m, n, k));
          if (HasFatalFailure()) return;
        }
      }
    }
  }
}

// A row's outputs do not depend on the rows beside it, nor on the thread count,
// and a row holding NaN or infinity gives NaN outputs and leaves the others.
TEST(QuantMatmulAmxBf16, RowsStandAloneAndNonFiniteRowsGiveNaN) {
  if (!has_amx_bf16()) GTEST_SKIP() << "CPU lacks AMX-BF16";
  ThreadPool pool(3);
  for (DType t : {DType::kQ4_K, DType::kQ8_0, DType::kQ6_K}) {
    Problem p = make_problem(t, 1, 35, 70, 1280, 5);
    p.a[static_cast<std::size_t>(33 * p.k + 9)] = std::numeric_limits<float>::infinity();
    std::vector<float> all;
    std::vector<float> threaded;
    ASSERT_TRUE(run_matmul(amx_bf16_fn(t), t, p, all).is_ok());
    ASSERT_TRUE(run_matmul(amx_bf16_fn(t), t, p, threaded, &pool).is_ok());
    EXPECT_EQ(std::memcmp(all.data(), threaded.data(), all.size() * sizeof(float)), 0) << name(t);
    for (std::int64_t r : {0, 16, 33, 34}) {
      Problem one = p;
      one.m = 1;
      one.a.assign(p.a.begin() + r * p.k, p.a.begin() + (r + 1) * p.k);
      std::vector<float> single;
      ASSERT_TRUE(run_matmul(amx_bf16_fn(t), t, one, single).is_ok());
      for (std::int64_t j = 0; j < p.n; ++j) {
        const float got = all[static_cast<std::size_t>(r * p.n + j)];
        EXPECT_EQ(std::isnan(got), r == 33) << name(t) << " row " << r;
        if (r != 33) {
          EXPECT_EQ(got, single[static_cast<std::size_t>(j)]) << name(t) << " " << r;
        }
      }
    }
  }
}

}  // namespace
}  // namespace switchyard::cpu
