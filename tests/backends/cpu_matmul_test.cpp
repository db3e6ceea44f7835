// The CPU backend's dense matmul family: every registered sibling of matmul, linear
// and ffn_swiglu against a float64 expectation on odd shapes, the f16/bf16 keys,
// determinism across thread counts, shape admission of the matvec siblings, and the
// error paths.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "backends/cpu/cpu_features.h"
#include "backends/cpu/gemm/dense_kernels.h"
#include "switchyard/backends.h"
#include "switchyard/binding_table.h"
#include "switchyard/half.h"
#include "switchyard/thread_pool.h"

namespace switchyard {
namespace {

constexpr DType kF32 = DType::kF32;
constexpr DType kF16 = DType::kF16;
constexpr DType kBF16 = DType::kBF16;

const KernelBindingTable& table() {
  static const KernelBindingTable kTable = [] {
    Result<KernelBindingTable> t = make_builtin_table();
    SWITCHYARD_CHECK(t.is_ok());
    return std::move(t).value();
  }();
  return kTable;
}

std::int64_t elem_bytes(DType t) { return t == kF32 ? 4 : 2; }

// A tensor's storage in one of the float types, filled with values that are exact
// in that type so the float64 expectation sees what the kernel sees.
struct Buffer {
  DType dtype = kF32;
  Shape shape;
  std::vector<std::byte> bytes;

  Buffer(DType t, Shape s)
      : dtype(t), shape(s), bytes(static_cast<std::size_t>(s.numel() * elem_bytes(t))) {}

  [[nodiscard]] double get(std::int64_t i) const {
    if (dtype == kF32) return reinterpret_cast<const float*>(bytes.data())[i];
    const std::uint16_t h = reinterpret_cast<const std::uint16_t*>(bytes.data())[i];
    return dtype == kF16 ? f16_to_f32(h) : bf16_to_f32(h);
  }
  void set(std::int64_t i, float v) {
    if (dtype == kF32) {
      reinterpret_cast<float*>(bytes.data())[i] = v;
    } else {
      reinterpret_cast<std::uint16_t*>(bytes.data())[i] =
          dtype == kF16 ? f32_to_f16(v) : f32_to_bf16(v);
    }
  }
  void fill(std::uint32_t seed) {
    std::mt19937 rng(seed);
    std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
    for (std::int64_t i = 0; i < shape.numel(); ++i) set(i, dist(rng));
  }
  [[nodiscard]] TensorView view() { return TensorView::contiguous(bytes.data(), dtype, shape); }
};

struct Expectation {
  std::vector<double> value;
  std::vector<double> magnitude;  // Σ |a·w| per element, the scale of the bound
};

// a [batch.., M, K] x w [N, K] or [batch.., N, K] in float64.
Expectation expect_matmul(const Buffer& a, const Buffer& w, std::int64_t m, std::int64_t n,
                          std::int64_t k, const std::vector<double>* bias = nullptr) {
  const std::int64_t rows = k > 0 ? a.shape.numel() / k : a.shape.outer();
  const bool shared = w.shape.rank() == 2;
  Expectation e;
  e.value.resize(static_cast<std::size_t>(rows * n));
  e.magnitude.resize(e.value.size());
  for (std::int64_t r = 0; r < rows; ++r) {
    const std::int64_t wb = shared ? 0 : (r / std::max<std::int64_t>(m, 1)) * n * k;
    for (std::int64_t j = 0; j < n; ++j) {
      double s = 0, mag = 0;
      for (std::int64_t p = 0; p < k; ++p) {
        const double prod = a.get(r * k + p) * w.get(wb + j * k + p);
        s += prod;
        mag += std::fabs(prod);
      }
      if (bias != nullptr) {
        s += (*bias)[static_cast<std::size_t>(j)];
        mag += std::fabs((*bias)[static_cast<std::size_t>(j)]);
      }
      e.value[static_cast<std::size_t>(r * n + j)] = s;
      e.magnitude[static_cast<std::size_t>(r * n + j)] = mag;
    }
  }
  return e;
}

// Every element within the entry's declared bound: max_rel relative to Σ|a·w|, or
// max_abs when the claim has one.
void expect_within_claim(const BindingEntry& entry, const Buffer& out, const Expectation& e,
                         const std::string& what) {
  ASSERT_TRUE(entry.precision.max_rel.has_value()) << entry.name;
  const double rel = *entry.precision.max_rel;
  int reported = 0;
  for (std::int64_t i = 0; i < out.shape.numel(); ++i) {
    const double got = out.get(i);
    const double want = e.value[static_cast<std::size_t>(i)];
    // The claim's bounds apply jointly: within any one of them passes.
    const double tol = std::max(rel * e.magnitude[static_cast<std::size_t>(i)] + 1e-30,
                                entry.precision.max_abs.value_or(0.0));
    if (!(std::fabs(got - want) <= tol) && reported++ < 3) {
      ADD_FAILURE() << entry.name << " " << what << " element " << i << ": got " << got << ", want "
                    << want << " (tol " << tol << ")";
    }
  }
}

Status call_kernel(const BindingEntry& entry, std::vector<TensorView> inputs, TensorView out,
                   ParallelRunner* runner) {
  OpParams params;
  ExecContext ctx{.runner = runner};
  const KernelCall call{inputs, std::span<const TensorView>(&out, 1), params, ctx, entry.name};
  return entry.fn(call);
}

// The key by value: the span points into the table, never into the key.
std::span<const BindingEntry> siblings(OpKind op, DTypeList key) {
  return table().lookup_alternatives(op, key, BackendId::kCpu);
}

ThreadPool& pool2() {
  static ThreadPool pool(2);
  return pool;
}

struct MatmulKey {
  DType a, w, out;
};

class CpuMatmulTest : public ::testing::TestWithParam<MatmulKey> {};

TEST_P(CpuMatmulTest, EverySiblingMatchesFloat64OnOddShapes) {
  const MatmulKey key = GetParam();
  const auto alts = siblings(OpKind::kMatmul, {key.a, key.w, key.out});
  ASSERT_FALSE(alts.empty());
  EXPECT_EQ(alts.back().source, "portable") << "the reference is registered last";
  const std::int64_t dims[] = {1, 3, 17, 64, 65, 129};
  std::uint32_t seed = 1;
  for (std::int64_t m : dims) {
    for (std::int64_t n : dims) {
      for (std::int64_t k : dims) {
        Buffer a(key.a, {m, k});
        Buffer w(key.w, {n, k});
        a.fill(seed++);
        w.fill(seed++);
        const Expectation e = expect_matmul(a, w, m, n, k);
        for (const BindingEntry& entry : alts) {
          Buffer out(key.out, {m, n});
          ASSERT_TRUE(call_kernel(entry, {a.view(), w.view()}, out.view(), &pool2()).is_ok())
              << entry.name;
          expect_within_claim(entry, out, e, fmt::format("M={} N={} K={}", m, n, k));
        }
      }
    }
  }
}

TEST_P(CpuMatmulTest, BatchedSharedAndPerBatchWeights) {
  const MatmulKey key = GetParam();
  for (const BindingEntry& entry : siblings(OpKind::kMatmul, {key.a, key.w, key.out})) {
    for (bool shared : {true, false}) {
      for (std::int64_t m : {1, 5}) {
        Buffer a(key.a, {2, 3, m, 33});
        Buffer w(key.w, shared ? Shape{19, 33} : Shape{2, 3, 19, 33});
        a.fill(7);
        w.fill(8);
        Buffer out(key.out, {2, 3, m, 19});
        ASSERT_TRUE(call_kernel(entry, {a.view(), w.view()}, out.view(), &pool2()).is_ok())
            << entry.name;
        expect_within_claim(entry, out, expect_matmul(a, w, m, 19, 33),
                            shared ? "shared weights" : "per-batch weights");
      }
    }
  }
}

// Spans several K blocks, column blocks and row blocks of every kernel set, with
// ragged edges everywhere.
TEST_P(CpuMatmulTest, LargeShapeAcrossBlocks) {
  const MatmulKey key = GetParam();
  const std::int64_t m = 131, n = 2085, k = 803;
  Buffer a(key.a, {m, k});
  Buffer w(key.w, {n, k});
  a.fill(11);
  w.fill(12);
  const Expectation e = expect_matmul(a, w, m, n, k);
  for (const BindingEntry& entry : siblings(OpKind::kMatmul, {key.a, key.w, key.out})) {
    if (entry.source == "portable" || entry.admits != nullptr) continue;  // slow, covered above
    Buffer out(key.out, {m, n});
    ASSERT_TRUE(call_kernel(entry, {a.view(), w.view()}, out.view(), &pool2()).is_ok())
        << entry.name;
    expect_within_claim(entry, out, e, "large");
  }
}

TEST_P(CpuMatmulTest, DeterministicAcrossThreadsConcurrent) {
  const MatmulKey key = GetParam();
  ThreadPool one(1);
  ThreadPool three(3);
  for (const BindingEntry& entry : siblings(OpKind::kMatmul, {key.a, key.w, key.out})) {
    if (!entry.precision.deterministic_across_threads) continue;
    for (std::int64_t m : {1, 37, 250}) {
      Buffer a(key.a, {m, 531});
      Buffer w(key.w, {301, 531});
      a.fill(21);
      w.fill(22);
      Buffer out1(key.out, {m, 301});
      Buffer out3(key.out, {m, 301});
      ASSERT_TRUE(call_kernel(entry, {a.view(), w.view()}, out1.view(), &one).is_ok());
      ASSERT_TRUE(call_kernel(entry, {a.view(), w.view()}, out3.view(), &three).is_ok());
      EXPECT_EQ(out1.bytes, out3.bytes) << entry.name << " M=" << m;
    }
  }
}

#if defined(SWITCHYARD_HAVE_OPENBLAS)
// Note [OpenBLAS on the backend's threads]: the OpenBLAS sibling cuts a product
// into one piece per pool thread, by activation rows, by weight rows or by
// matrix. Every cut, including pieces left empty (more threads than rows), gives
// the right product, the same bits on every run at one thread count, and calls
// from two threads at once (each with its own pool) do not disturb each other.
TEST(CpuOpenBlasSibling, EveryCutOfTheProductIsRightAndRepeatable) {
  const BindingEntry* blas = nullptr;
  for (const BindingEntry& e :
       table().lookup_alternatives(OpKind::kMatmul, {kF32, kF32, kF32}, BackendId::kCpu)) {
    if (e.source == "openblas") blas = &e;
  }
  ASSERT_NE(blas, nullptr);
  struct Case {
    Shape a, w, out;
    std::int64_t m, n, k;
  };
  const Case cases[] = {
      {{300, 65}, {40, 65}, {300, 40}, 300, 40, 65},     // by activation rows
      {{3, 65}, {257, 65}, {3, 257}, 3, 257, 65},        // by weight rows
      {{1, 9}, {2, 9}, {1, 2}, 1, 2, 9},                 // empty pieces
      {{2, 5, 33}, {2, 19, 33}, {2, 5, 19}, 5, 19, 33},  // two matrices
      {{7, 4, 33}, {7, 19, 33}, {7, 4, 19}, 4, 19, 33},  // a matrix per thread
  };
  auto run = [&](const Case& c, ThreadPool& pool, std::vector<std::byte>* bits) {
    Buffer a(kF32, c.a);
    Buffer w(kF32, c.w);
    a.fill(41);
    w.fill(42);
    Buffer out(kF32, c.out);
    ASSERT_TRUE(call_kernel(*blas, {a.view(), w.view()}, out.view(), &pool).is_ok());
    expect_within_claim(*blas, out, expect_matmul(a, w, c.m, c.n, c.k),
                        fmt::format("{} threads, out {}", pool.num_threads(), c.out.numel()));
    *bits = out.bytes;
  };
  for (int threads : {1, 2, 3, 5}) {
    ThreadPool pool(threads);
    for (const Case& c : cases) {
      std::vector<std::byte> first, again;
      run(c, pool, &first);
      run(c, pool, &again);
      EXPECT_EQ(first, again) << threads << " threads";
    }
  }
  std::vector<std::byte> alone, beside;
  ThreadPool pool_a(2), pool_b(2);
  run(cases[0], pool_a, &alone);
  std::thread other([&] {
    std::vector<std::byte> ignored;
    for (int i = 0; i < 20; ++i) run(cases[1], pool_b, &ignored);
  });
  for (int i = 0; i < 20; ++i) {
    run(cases[0], pool_a, &beside);
    EXPECT_EQ(alone, beside);
  }
  other.join();
}
#endif

// A row's result does not depend on how many other rows share the call: the
// AVX-512 GEMM takes a narrower tile for products of at most 8 rows, and both
// tiles must sum every output in the same order (K spans several K blocks here).
TEST_P(CpuMatmulTest, RowsDoNotDependOnTheRowCount) {
  const MatmulKey key = GetParam();
  const std::int64_t n = 70, k = 611;
  Buffer a(key.a, {20, k});
  Buffer w(key.w, {n, k});
  a.fill(31);
  w.fill(32);
  for (const BindingEntry& entry : siblings(OpKind::kMatmul, {key.a, key.w, key.out})) {
    // Matvec siblings take one row; OpenBLAS picks its kernels by shape and makes
    // no such promise.
    if (entry.admits != nullptr || entry.source == "openblas") continue;
    Buffer all(key.out, {20, n});
    ASSERT_TRUE(call_kernel(entry, {a.view(), w.view()}, all.view(), &pool2()).is_ok());
    for (std::int64_t m : {2, 8, 9, 14}) {
      const TensorView prefix = TensorView::contiguous(a.bytes.data(), key.a, {m, k});
      Buffer out(key.out, {m, n});
      ASSERT_TRUE(call_kernel(entry, {prefix, w.view()}, out.view(), &pool2()).is_ok());
      EXPECT_TRUE(std::equal(out.bytes.begin(), out.bytes.end(), all.bytes.begin()))
          << entry.name << " M=" << m;
    }
  }
}

TEST_P(CpuMatmulTest, RefusesMalformedCalls) {
  const MatmulKey key = GetParam();
  const DType other = key.w == kF32 ? kF16 : kF32;
  for (const BindingEntry& entry : siblings(OpKind::kMatmul, {key.a, key.w, key.out})) {
    Buffer a(key.a, {4, 8});
    Buffer w(key.w, {5, 8});
    Buffer w_bad_k(key.w, {5, 9});
    Buffer w_bad_type(other, {5, 8});
    Buffer out(key.out, {4, 5});
    Buffer out_bad(key.out, {4, 6});
    auto code = [&](std::vector<TensorView> in, TensorView o) {
      return call_kernel(entry, std::move(in), o, nullptr).code();
    };
    EXPECT_EQ(code({a.view(), w_bad_k.view()}, out.view()), StatusCode::kInvalidArgument)
        << entry.name << " mismatched K";
    EXPECT_EQ(code({a.view(), w_bad_type.view()}, out.view()), StatusCode::kInvalidArgument)
        << entry.name << " wrong dtype";
    EXPECT_EQ(code({a.view(), w.view()}, out_bad.view()), StatusCode::kInvalidArgument)
        << entry.name << " wrong output shape";
    EXPECT_EQ(code({a.view()}, out.view()), StatusCode::kInvalidArgument) << entry.name << " arity";
    // a [4, 8] viewed with its columns strided by 2 over a [4, 16] buffer.
    Buffer wide(key.a, {4, 16});
    const std::int64_t strides[] = {16, 2};
    const TensorView strided = TensorView::strided(wide.bytes.data(), key.a, Shape{4, 8}, strides);
    EXPECT_EQ(code({strided, w.view()}, out.view()), StatusCode::kInvalidArgument)
        << entry.name << " non-contiguous";
  }
}

INSTANTIATE_TEST_SUITE_P(Keys, CpuMatmulTest,
                         ::testing::Values(MatmulKey{kF32, kF32, kF32}, MatmulKey{kF32, kF16, kF32},
                                           MatmulKey{kF32, kBF16, kF32},
                                           MatmulKey{kF16, kF16, kF16},
                                           MatmulKey{kBF16, kBF16, kBF16}),
                         [](const auto& param_info) {
                           return fmt::format("{}_{}_{}", name(param_info.param.a),
                                              name(param_info.param.w), name(param_info.param.out));
                         });

// A kernel names itself in its errors by the registered name the call carries
// (KernelCall::name), never by a name it formats on its own.
TEST(CpuMatmulSiblings, ErrorsNameTheRegisteredEntry) {
  const auto expect_named = [](const BindingEntry& entry, const Status& s) {
    ASSERT_EQ(s.code(), StatusCode::kInvalidArgument) << entry.name;
    const std::string prefix = std::string(entry.name) + ": ";
    EXPECT_EQ(std::string(s.message()).rfind(prefix, 0), 0u) << s.message();
  };
  for (const DType w : {kF32, kF16, kBF16}) {
    Buffer x(kF32, {2, 8});
    Buffer weights(w, {5, 8});
    Buffer out(kF32, {2, 5});
    int checked = 0;
    for (const BindingEntry& e : siblings(OpKind::kMatmul, {kF32, w, kF32})) {
      expect_named(e, call_kernel(e, {x.view()}, out.view(), nullptr));
      ++checked;
    }
    for (const BindingEntry& e : siblings(OpKind::kLinear, {kF32, w, kF32, kF32})) {
      expect_named(e, call_kernel(e, {x.view(), weights.view()}, out.view(), nullptr));
      ++checked;
    }
    for (const BindingEntry& e : siblings(OpKind::kFfnSwiglu, {kF32, w, w, w, kF32})) {
      expect_named(e, call_kernel(e, {x.view(), weights.view()}, out.view(), nullptr));
      ++checked;
    }
    EXPECT_GE(checked, 3) << name(w);
  }
}

TEST(CpuMatmulSiblings, SimdAndOpenBlasRegisteredWhereTheCpuRunsThem) {
  const auto alts = siblings(OpKind::kMatmul, {kF32, kF32, kF32});
  std::vector<std::string> names;
  for (const BindingEntry& e : alts) names.push_back(e.name);
  // cpu_features() (which SWITCHYARD_CPU_DISABLE narrows) decides what is registered.
  const cpu::CpuFeatures& cpu = cpu::cpu_features();
  if (cpu.avx2 && cpu.f16c) {
    EXPECT_NE(std::find(names.begin(), names.end(), "matmul_f32__cpu_avx2"), names.end());
    EXPECT_NE(std::find(names.begin(), names.end(), "matmul_f32__cpu_avx2_matvec"), names.end());
  }
  if (!cpu.avx512) {
    for (const std::string& n : names) EXPECT_EQ(n.find("avx512"), std::string::npos) << n;
  }
#if defined(SWITCHYARD_HAVE_OPENBLAS)
  EXPECT_NE(std::find(names.begin(), names.end(), "matmul_f32__cpu_openblas"), names.end());
#endif
  EXPECT_EQ(names.back(), "matmul_f32__cpu_ref");
}

TEST(CpuMatmulSiblings, MatvecAdmitsOneRowPerWeightMatrix) {
  const Shape one_row[] = {Shape{1, 64}, Shape{32, 64}, Shape{1, 32}};
  const Shape batch_rows[] = {Shape{4, 1, 64}, Shape{32, 64}, Shape{4, 1, 32}};
  const Shape per_batch[] = {Shape{4, 1, 64}, Shape{4, 32, 64}, Shape{4, 1, 32}};
  const Shape many[] = {Shape{8, 64}, Shape{32, 64}, Shape{8, 32}};
  EXPECT_TRUE(cpu::admits_single_row(one_row));
  EXPECT_FALSE(cpu::admits_single_row(batch_rows));
  EXPECT_TRUE(cpu::admits_single_row(per_batch));
  EXPECT_FALSE(cpu::admits_single_row(many));
  bool saw_matvec = false;
  for (const BindingEntry& e : siblings(OpKind::kMatmul, {kF32, kF16, kF32})) {
    if (e.name.find("matvec") == std::string::npos) continue;
    saw_matvec = true;
    EXPECT_TRUE(e.admits_shapes(one_row)) << e.name;
    EXPECT_FALSE(e.admits_shapes(many)) << e.name;
  }
  EXPECT_EQ(saw_matvec, cpu::cpu_features().avx2 && cpu::cpu_features().f16c);
  // A shape-blind lookup never hands out a shape-restricted sibling.
  Result<const BindingEntry*> general =
      table().lookup_with_caps(OpKind::kMatmul, {kF32, kF16, kF32}, BackendId::kCpu);
  ASSERT_TRUE(general.is_ok());
  EXPECT_EQ((*general)->admits, nullptr);
}

TEST(CpuMatmulSiblings, CostsAreRealAndMatvecIsCheaperForOneRow) {
  const Shape shapes_one[] = {Shape{1, 4096}, Shape{14336, 4096}, Shape{1, 14336}};
  const DType dtypes[] = {kF32, kF16, kF32};
  const CostInputs one{.op = OpKind::kMatmul, .shapes = shapes_one, .dtypes = dtypes};
  const CostEstimate gemm = cpu::gemm_cost(one);
  const CostEstimate matvec = cpu::matvec_cost(one);
  EXPECT_DOUBLE_EQ(gemm.flops, 2.0 * 4096 * 14336);
  EXPECT_DOUBLE_EQ(matvec.flops, gemm.flops);
  EXPECT_GE(matvec.bytes, 14336.0 * 4096 * 2);
  const BackendCaps caps;
  EXPECT_LT(matvec.time_ns(caps), gemm.time_ns(caps));
  const Shape shapes_many[] = {Shape{512, 4096}, Shape{14336, 4096}, Shape{512, 14336}};
  const CostInputs many{.op = OpKind::kMatmul, .shapes = shapes_many, .dtypes = dtypes};
  EXPECT_GT(cpu::matvec_cost(many).time_ns(caps), cpu::gemm_cost(many).time_ns(caps));
  for (const auto& slot : table().slots()) {
    for (const BindingEntry& e : slot.alternatives) EXPECT_TRUE(e.has_known_cost()) << e.name;
  }
}

// --- linear -------------------------------------------------------------------

class CpuLinearTest : public ::testing::TestWithParam<DType> {};

TEST_P(CpuLinearTest, EverySiblingIsMatmulPlusBias) {
  const DType wt = GetParam();
  const auto alts = siblings(OpKind::kLinear, {kF32, wt, kF32, kF32});
  ASSERT_FALSE(alts.empty());
  const auto matmul_ref =
      siblings(OpKind::kMatmul, {kF32, wt, kF32});  // composing reference: matmul then add
  for (std::int64_t rows : {1, 3, 70}) {
    for (std::int64_t n : {1, 17, 65}) {
      const std::int64_t k = 129;
      Buffer x(kF32, {rows, k});
      Buffer w(wt, {n, k});
      Buffer bias(kF32, {n});
      x.fill(31);
      w.fill(32);
      bias.fill(33);
      std::vector<double> b(static_cast<std::size_t>(n));
      for (std::int64_t j = 0; j < n; ++j) b[static_cast<std::size_t>(j)] = bias.get(j);
      const Expectation e = expect_matmul(x, w, rows, n, k, &b);
      // matmul through the reference, then the bias added in f32: the composition.
      Buffer composed(kF32, {rows, n});
      ASSERT_TRUE(
          call_kernel(matmul_ref.back(), {x.view(), w.view()}, composed.view(), nullptr).is_ok());
      for (std::int64_t i = 0; i < rows * n; ++i) {
        composed.set(i, static_cast<float>(composed.get(i)) + static_cast<float>(b[i % n]));
      }
      for (const BindingEntry& entry : alts) {
        Buffer out(kF32, {rows, n});
        ASSERT_TRUE(
            call_kernel(entry, {x.view(), w.view(), bias.view()}, out.view(), &pool2()).is_ok())
            << entry.name;
        expect_within_claim(entry, out, e, fmt::format("rows={} N={}", rows, n));
        for (std::int64_t i = 0; i < rows * n; ++i) {
          ASSERT_NEAR(out.get(i), composed.get(i), 2e-4 * e.magnitude[static_cast<std::size_t>(i)])
              << entry.name;
        }
      }
    }
  }
}

TEST_P(CpuLinearTest, RefusesMalformedCalls) {
  const DType wt = GetParam();
  for (const BindingEntry& entry : siblings(OpKind::kLinear, {kF32, wt, kF32, kF32})) {
    Buffer x(kF32, {2, 8});
    Buffer w(wt, {5, 8});
    Buffer bias_bad(kF32, {4});
    Buffer w_bad(wt, {5, 7});
    Buffer bias(kF32, {5});
    Buffer out(kF32, {2, 5});
    EXPECT_EQ(call_kernel(entry, {x.view(), w.view(), bias_bad.view()}, out.view(), nullptr).code(),
              StatusCode::kInvalidArgument)
        << entry.name;
    EXPECT_EQ(call_kernel(entry, {x.view(), w_bad.view(), bias.view()}, out.view(), nullptr).code(),
              StatusCode::kInvalidArgument)
        << entry.name;
    EXPECT_EQ(call_kernel(entry, {x.view(), w.view()}, out.view(), nullptr).code(),
              StatusCode::kInvalidArgument)
        << entry.name;
  }
}

INSTANTIATE_TEST_SUITE_P(Weights, CpuLinearTest, ::testing::Values(kF32, kF16, kBF16),
                         [](const auto& param_info) {
                           return std::string(name(param_info.param));
                         });

// --- ffn_swiglu ------------------------------------------------------------------

double silu(double v) { return v / (1.0 + std::exp(-v)); }

class CpuFfnTest : public ::testing::TestWithParam<DType> {};

TEST_P(CpuFfnTest, EverySiblingMatchesTheComposition) {
  const DType wt = GetParam();
  const auto alts = siblings(OpKind::kFfnSwiglu, {kF32, wt, wt, wt, kF32});
  ASSERT_FALSE(alts.empty());
  EXPECT_EQ(alts.back().source, "portable");
  const auto matmul_ref = siblings(OpKind::kMatmul, {kF32, wt, kF32}).back();
  for (std::int64_t rows : {1, 3, 300}) {
    for (auto [d, f] : {std::pair<std::int64_t, std::int64_t>{17, 65}, {64, 129}, {33, 1100}}) {
      Buffer x(kF32, {rows, d});
      Buffer gate(wt, {f, d});
      Buffer up(wt, {f, d});
      Buffer down(wt, {d, f});
      x.fill(41);
      gate.fill(42);
      up.fill(43);
      down.fill(44);
      // Float64 expectation of the recipe, with the scale Σ_f |h_f · down_f|.
      Expectation e;
      std::vector<double> h(static_cast<std::size_t>(f));
      for (std::int64_t r = 0; r < rows; ++r) {
        for (std::int64_t j = 0; j < f; ++j) {
          double g = 0, u = 0;
          for (std::int64_t p = 0; p < d; ++p) {
            g += x.get(r * d + p) * gate.get(j * d + p);
            u += x.get(r * d + p) * up.get(j * d + p);
          }
          h[static_cast<std::size_t>(j)] = silu(g) * u;
        }
        for (std::int64_t i = 0; i < d; ++i) {
          double s = 0, mag = 0;
          for (std::int64_t j = 0; j < f; ++j) {
            s += h[static_cast<std::size_t>(j)] * down.get(i * f + j);
            mag += std::fabs(h[static_cast<std::size_t>(j)] * down.get(i * f + j));
          }
          e.value.push_back(s);
          e.magnitude.push_back(mag);
        }
      }
      // The composition of reference ops: three matmuls, silu and a multiply.
      Buffer g(kF32, {rows, f});
      Buffer u(kF32, {rows, f});
      ASSERT_TRUE(call_kernel(matmul_ref, {x.view(), gate.view()}, g.view(), nullptr).is_ok());
      ASSERT_TRUE(call_kernel(matmul_ref, {x.view(), up.view()}, u.view(), nullptr).is_ok());
      for (std::int64_t i = 0; i < rows * f; ++i) {
        const float gv = static_cast<float>(g.get(i));
        g.set(i, gv / (1.0f + std::exp(-gv)) * static_cast<float>(u.get(i)));
      }
      Buffer composed(kF32, {rows, d});
      ASSERT_TRUE(
          call_kernel(matmul_ref, {g.view(), down.view()}, composed.view(), nullptr).is_ok());

      for (const BindingEntry& entry : alts) {
        if (entry.source == "portable" && rows * f * d > 200000)
          continue;  // slow, small shapes cover it
        Buffer out(kF32, {rows, d});
        ASSERT_TRUE(call_kernel(entry, {x.view(), gate.view(), up.view(), down.view()}, out.view(),
                                &pool2())
                        .is_ok())
            << entry.name;
        for (std::int64_t i = 0; i < rows * d; ++i) {
          const double tol = 1e-4 * e.magnitude[static_cast<std::size_t>(i)] + 1e-6;
          ASSERT_NEAR(out.get(i), e.value[static_cast<std::size_t>(i)], tol)
              << entry.name << " rows=" << rows << " D=" << d << " F=" << f << " i=" << i;
          ASSERT_NEAR(out.get(i), composed.get(i), tol) << entry.name;
        }
      }
    }
  }
}

TEST_P(CpuFfnTest, DeterministicAcrossThreadsConcurrent) {
  const DType wt = GetParam();
  ThreadPool one(1);
  ThreadPool three(3);
  Buffer x(kF32, {90, 70});
  Buffer gate(wt, {300, 70});
  Buffer up(wt, {300, 70});
  Buffer down(wt, {70, 300});
  x.fill(51);
  gate.fill(52);
  up.fill(53);
  down.fill(54);
  for (const BindingEntry& entry : siblings(OpKind::kFfnSwiglu, {kF32, wt, wt, wt, kF32})) {
    Buffer out1(kF32, {90, 70});
    Buffer out3(kF32, {90, 70});
    const std::vector<TensorView> in = {x.view(), gate.view(), up.view(), down.view()};
    ASSERT_TRUE(call_kernel(entry, in, out1.view(), &one).is_ok());
    ASSERT_TRUE(call_kernel(entry, in, out3.view(), &three).is_ok());
    EXPECT_EQ(out1.bytes, out3.bytes) << entry.name;
  }
}

TEST_P(CpuFfnTest, RefusesMalformedCalls) {
  const DType wt = GetParam();
  for (const BindingEntry& entry : siblings(OpKind::kFfnSwiglu, {kF32, wt, wt, wt, kF32})) {
    Buffer x(kF32, {2, 8});
    Buffer gate(wt, {6, 8});
    Buffer up_bad(wt, {5, 8});
    Buffer down(wt, {8, 6});
    Buffer down_bad(wt, {6, 8});
    Buffer out(kF32, {2, 8});
    EXPECT_EQ(
        call_kernel(entry, {x.view(), gate.view(), up_bad.view(), down.view()}, out.view(), nullptr)
            .code(),
        StatusCode::kInvalidArgument)
        << entry.name;
    EXPECT_EQ(call_kernel(entry, {x.view(), gate.view(), gate.view(), down_bad.view()}, out.view(),
                          nullptr)
                  .code(),
              StatusCode::kInvalidArgument)
        << entry.name;
  }
}

INSTANTIATE_TEST_SUITE_P(Weights, CpuFfnTest, ::testing::Values(kF32, kF16, kBF16),
                         [](const auto& param_info) {
                           return std::string(name(param_info.param));
                         });

}  // namespace
}  // namespace switchyard
