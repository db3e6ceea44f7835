// The packed GEMM sibling (Note [Prepacked weights]): the layout gives every
// weight back exactly, malformed blocks and unpacked bytes are refused, results
// do not depend on tiles or threads, and the planner packs a constant weight for
// prefill only (decode keeps the file's layout), once per executor.
#include "backends/cpu/quant/quant_packed.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include "backends/cpu/cpu_features.h"
#include "switchyard/backends.h"
#include "switchyard/executor.h"
#include "switchyard/graph.h"
#include "switchyard/half.h"
#include "switchyard/plan.h"
#include "switchyard/quant.h"
#include "switchyard/quant_blocks.h"
#include "switchyard/thread_pool.h"

namespace switchyard::cpu {
namespace {

using ::testing::HasSubstr;

bool has_vnni() {
  return cpu_features().avx512 && cpu_features().avx512_vnni && cpu_features().f16c;
}

std::vector<std::byte> quantized(DType t, std::int64_t n, std::int64_t k, unsigned seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> normal(0.0f, 0.05f);
  std::vector<float> w(static_cast<std::size_t>(n * k));
  for (float& v : w) v = normal(rng);
  std::vector<std::byte> bytes(static_cast<std::size_t>(*row_bytes(t, n * k)));
  SWITCHYARD_CHECK(quantize(t, w, bytes).is_ok());
  return bytes;
}

std::vector<DType> packable() {
  std::vector<DType> out;
  for (DType t : kQuantizedWeightDTypes) {
    if (packed_format(t).sub != 0) out.push_back(t);
  }
  return out;
}

// Element (row, e) read back from the packed layout.
float unpacked(const std::byte* packed, DType t, std::int64_t k, std::int64_t row, std::int64_t e) {
  const PackedFormat f = packed_format(t);
  const std::int64_t panel_bytes = k / f.sub * packed_tile_bytes(f);
  const auto* tile = reinterpret_cast<const std::uint8_t*>(packed) + sizeof(PackedHeader) +
                     row / kPanelRows * panel_bytes + e / f.sub * packed_tile_bytes(f);
  const std::int64_t r = row % kPanelRows, i = e % f.sub;
  const int u = tile[(i / 4) * 64 + r * 4 + i % 4];
  float d, m = 0;
  std::memcpy(&d, tile + kPanelRows * f.sub + 4 * r, sizeof d);
  if (f.affine) std::memcpy(&m, tile + kPanelRows * f.sub + 64 + 4 * r, sizeof m);
  return f.affine ? d * static_cast<float>(u) + m : d * static_cast<float>(u - f.zero);
}

TEST(PackedWeights, EveryFormatPacksExactly) {
  ASSERT_EQ(packable().size(), kQuantizedWeightDTypes.size()) << "a weight format cannot pack";
  constexpr std::int64_t kN = 37, kK = 512;  // a partial last panel
  for (DType t : packable()) {
    const std::vector<std::byte> w = quantized(t, kN, kK, 3);
    TensorView src = TensorView::contiguous(const_cast<std::byte*>(w.data()), t, {kN, kK});
    ExecContext ctx;
    Result<std::shared_ptr<void>> packed =
        pack_operand({.packed_bytes = &packed_weight_bytes, .pack = &pack_weight}, src, ctx);
    ASSERT_TRUE(packed.is_ok()) << name(t) << ": " << packed.status().to_string();
    std::vector<float> row(kK);
    for (std::int64_t r = 0; r < kN; ++r) {
      quant::dequantize_row(t, w.data() + r * *row_bytes(t, kK), row.data(), kK);
      for (std::int64_t e = 0; e < kK; ++e) {
        ASSERT_EQ(unpacked(static_cast<const std::byte*>(packed->get()), t, kK, r, e),
                  row[static_cast<std::size_t>(e)])
            << name(t) << " row " << r << " element " << e;
      }
    }
  }
}

TEST(PackedWeights, RefusesWhatItCannotPack) {
  EXPECT_EQ(packed_weight_bytes(DType::kF32, {16, 64}), -1);
  EXPECT_EQ(packed_weight_bytes(DType::kQ8_1, {16, 64}), -1);  // an activation format
  EXPECT_EQ(packed_weight_bytes(DType::kQ4_0, {2, 16, 64}), -1);
  EXPECT_EQ(packed_weight_bytes(DType::kQ4_K, {16, 128}), -1);  // half a super-block

  // A block whose scale is infinite gives its elements back as NaN or
  // infinity: no level reproduces them, and the pack names the row.
  std::vector<std::byte> w = quantized(DType::kQ4_0, 16, 64, 5);
  auto* block = reinterpret_cast<quant::BlockQ4_0*>(w.data() + 36 + 18);  // row 1, block 1
  quant::store_f16(block->d, INFINITY);
  std::vector<std::byte> out(static_cast<std::size_t>(packed_weight_bytes(DType::kQ4_0, {16, 64})));
  ExecContext ctx;
  const Status s =
      pack_weight(TensorView::contiguous(w.data(), DType::kQ4_0, {16, 64}), out.data(), ctx);
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(s.message()), HasSubstr("row 1"));
}

// The packed siblings as the table has them: the 512-bit tiles first where
// the CPU has them, then the 256-bit ones.
std::vector<const BindingEntry*> packed_siblings(DType t) {
  std::vector<const BindingEntry*> out;
  for (const BindingEntry& e : current_table()->lookup_alternatives(
           OpKind::kMatmul, {DType::kF32, t, DType::kF32}, BackendId::kCpu)) {
    if (e.packing != nullptr) out.push_back(&e);
  }
  return out;
}

// A CPU without AVX-512 VNNI may still have AVX-VNNI and so the 256-bit tiles.
bool has_any_packed() { return !packed_siblings(DType::kQ4_0).empty(); }

struct Call {
  std::vector<float> a, out;
  std::vector<std::byte> w;
};

Status run(const BindingEntry& e, DType t, Call& c, std::int64_t m, std::int64_t n, std::int64_t k,
           ParallelRunner* runner, bool pack = true) {
  ExecContext ctx{.runner = runner};
  TensorView views[] = {TensorView::contiguous(c.a.data(), DType::kF32, {m, k}),
                        TensorView::contiguous(c.w.data(), t, {n, k}),
                        TensorView::contiguous(c.out.data(), DType::kF32, {m, n})};
  std::shared_ptr<void> packed;
  if (pack) {
    SWITCHYARD_ASSIGN_OR_RETURN(packed, pack_operand(*e.packing, views[1], ctx));
  }
  const OpParams params;
  return e.fn({std::span(views, 2), std::span(views + 2, 1), params, ctx, e.name});
}

TEST(PackedMatmul, RefusesUnpackedBytes) {
  if (!has_any_packed()) GTEST_SKIP() << "no VNNI on this CPU";
  for (const BindingEntry* e : packed_siblings(DType::kQ4_0)) {
    Call c{std::vector<float>(64, 1.0f), std::vector<float>(16),
           quantized(DType::kQ4_0, 16, 64, 1)};
    const Status s = run(*e, DType::kQ4_0, c, 1, 16, 64, nullptr, false);
    EXPECT_EQ(s.code(), StatusCode::kFailedPrecondition) << e->name;
    EXPECT_THAT(std::string(s.message()), HasSubstr("not packed"));
  }
}

// Every output computed by the same operations whatever tile or thread computes
// it: rows alone equal rows in a batch, and thread counts agree, bit for bit;
// and the 256-bit tiles give the 512-bit ones' bits. 7 rows fill neither tile
// height (6 and 4) evenly, 50 weight rows end in a partial panel, and K = 768
// takes two spans of K (512 and 256).
TEST(PackedMatmul, IndependentOfTilesAndThreads) {
  if (!has_any_packed()) GTEST_SKIP() << "no VNNI on this CPU";
  constexpr std::int64_t kM = 7, kN = 50, kK = 768;
  ThreadPool pool(3);
  for (DType t : packable()) {
    std::mt19937 rng(9);
    std::normal_distribution<float> normal(0.0f, 1.0f);
    Call first{std::vector<float>(kM * kK), std::vector<float>(kM * kN), quantized(t, kN, kK, 4)};
    for (float& v : first.a) v = normal(rng);
    first.a[3 * kK + 5] = NAN;  // row 3 gives NaN, the others are unaffected
    for (const BindingEntry* e : packed_siblings(t)) {
      Call all = first;
      ASSERT_TRUE(run(*e, t, all, kM, kN, kK, nullptr).is_ok()) << e->name;
      Call threaded = first;
      ASSERT_TRUE(run(*e, t, threaded, kM, kN, kK, &pool).is_ok());
      EXPECT_EQ(std::memcmp(threaded.out.data(), all.out.data(), all.out.size() * 4), 0) << e->name;
      for (std::int64_t r = 0; r < kM; ++r) {
        Call one{std::vector<float>(all.a.begin() + r * kK, all.a.begin() + (r + 1) * kK),
                 std::vector<float>(kN), all.w};
        ASSERT_TRUE(run(*e, t, one, 1, kN, kK, nullptr).is_ok());
        for (std::int64_t j = 0; j < kN; ++j) {
          const float batch = all.out[static_cast<std::size_t>(r * kN + j)];
          if (r == 3) {
            EXPECT_TRUE(std::isnan(batch));
          } else {
            EXPECT_EQ(one.out[static_cast<std::size_t>(j)], batch)
                << e->name << " " << r << " " << j;
          }
        }
      }
      if (e == packed_siblings(t).front()) {
        first.out = all.out;
      } else {
        EXPECT_EQ(std::memcmp(first.out.data(), all.out.data(), all.out.size() * 4), 0)
            << e->name << " against " << packed_siblings(t).front()->name;
      }
    }
  }
}

// The siblings' registrations: where the CPU has AVX-512 VNNI both tile widths
// are there, the 256-bit ones in their EVEX form and ranked behind; with AVX-VNNI
// alone the 256-bit tiles are the packed sibling, in the VEX form. Neither is
// lookup's first sibling, which must admit every row count without packing.
TEST(PackedMatmul, TheTileWidthsTheCpuHasAreRegistered) {
  const std::vector<const BindingEntry*> all = packed_siblings(DType::kQ4_K);
  const std::vector<BindingEntry> alternatives = [] {
    std::vector<BindingEntry> out;
    for (const BindingEntry& e : current_table()->lookup_alternatives(
             OpKind::kMatmul, {DType::kF32, DType::kQ4_K, DType::kF32}, BackendId::kCpu)) {
      out.push_back(e);
    }
    return out;
  }();
  ASSERT_FALSE(alternatives.empty());
  EXPECT_EQ(alternatives.front().packing, nullptr);
  if (has_vnni()) {
    ASSERT_EQ(all.size(), 2u);
    EXPECT_THAT(all[0]->name, HasSubstr("avx512_packed"));
    EXPECT_THAT(all[1]->name, HasSubstr("packed256"));
    EXPECT_EQ(all[1]->source, "avx512_vnni");
  } else if (cpu_features().avx_vnni && cpu_features().f16c) {
    ASSERT_EQ(all.size(), 1u);
    EXPECT_THAT(all[0]->name, HasSubstr("packed256"));
    EXPECT_EQ(all[0]->source, "avx_vnni");
  } else {
    EXPECT_TRUE(all.empty());
  }
}

// x [tokens, 256] times a constant q4_k weight [64, 256].
Graph projection(const std::vector<std::byte>& w, bool weight_is_input) {
  GraphBuilder b;
  const std::int64_t t = b.symbol("tokens");
  ValueId x = b.input("x", DType::kF32, {t, 256});
  ValueId wv = weight_is_input ? b.input("w", DType::kQ4_K, {64, 256})
                               : b.constant_borrowed("w", DType::kQ4_K, {64, 256}, w.data());
  b.output(b.matmul(x, wv, "proj"));
  return std::move(b).build().value();
}

const NodeReport& proj_in(const ExecutionPlan& plan, std::string_view bucket) {
  for (const BucketReport& b : plan.report().buckets) {
    if (b.name == bucket) return b.nodes.front();
  }
  SWITCHYARD_CHECK(false);
  std::abort();
}

TEST(PackedMatmul, PlannedForPrefillOnlyAndPackedOncePerExecutor) {
  if (!has_vnni()) GTEST_SKIP() << "no AVX-512 VNNI on this CPU";
  const std::vector<std::byte> w = quantized(DType::kQ4_K, 64, 256, 6);
  PlanOptions options;
  options.buckets = {{"decode", {{"tokens", 1, 1}}}, {"prefill", {{"tokens", 2, 512}}}};
  Result<ExecutionPlan> planned = plan_graph(projection(w, false), current_table(), options);
  ASSERT_TRUE(planned.is_ok()) << planned.status().to_string();
  const auto plan = std::make_shared<const ExecutionPlan>(*std::move(planned));
  const NodeReport& decode = proj_in(*plan, "decode");
  const NodeReport& prefill = proj_in(*plan, "prefill");
  EXPECT_THAT(prefill.chosen.kernel, HasSubstr("avx512_packed"));
  EXPECT_EQ(prefill.chosen.packed_bytes, packed_weight_bytes(DType::kQ4_K, {64, 256}));
  EXPECT_THAT(decode.chosen.kernel, ::testing::Not(HasSubstr("packed")));
  EXPECT_EQ(decode.chosen.packed_bytes, 0);

  Result<Executor> exec = Executor::create(plan);
  ASSERT_TRUE(exec.is_ok()) << exec.status().to_string();
  EXPECT_EQ(exec->stats().packed_weights, 1u);
  EXPECT_EQ(exec->stats().packed_bytes, prefill.chosen.packed_bytes);

  // The prefill run (packed) and the decode runs (file layout) of the same rows
  // agree within the integer siblings' claim.
  constexpr std::int64_t kTokens = 6;
  std::mt19937 rng(2);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::vector<float> x(kTokens * 256), y(kTokens * 64), y1(64);
  for (float& v : x) v = normal(rng);
  const TensorView in = TensorView::contiguous(x.data(), DType::kF32, {kTokens, 256});
  const TensorView out = TensorView::contiguous(y.data(), DType::kF32, {kTokens, 64});
  ASSERT_TRUE(exec->run({&in, 1}, {&out, 1}).is_ok());
  EXPECT_EQ(exec->stats().last_bucket, "prefill");
  for (std::int64_t r = 0; r < kTokens; ++r) {
    const TensorView in1 = TensorView::contiguous(x.data() + r * 256, DType::kF32, {1, 256});
    const TensorView out1 = TensorView::contiguous(y1.data(), DType::kF32, {1, 64});
    ASSERT_TRUE(exec->run({&in1, 1}, {&out1, 1}).is_ok());
    for (std::int64_t j = 0; j < 64; ++j) {
      EXPECT_NEAR(y[static_cast<std::size_t>(r * 64 + j)], y1[static_cast<std::size_t>(j)],
                  0.02f * (1.0f + std::abs(y1[static_cast<std::size_t>(j)])));
    }
  }
}

// A weight that cannot pack fails the executor's creation, naming the constant,
// instead of running on bytes that are not the layout.
TEST(PackedMatmul, AWeightThatCannotPackFailsTheExecutorByName) {
  if (!has_vnni()) GTEST_SKIP() << "no AVX-512 VNNI on this CPU";
  std::vector<std::byte> w = quantized(DType::kQ4_K, 64, 256, 6);
  quant::store_f16(reinterpret_cast<quant::BlockQ4_K*>(w.data() + 5 * 144)->d, NAN);
  PlanOptions options;
  options.buckets = {{"prefill", {{"tokens", 2, 512}}}};
  Result<ExecutionPlan> plan = plan_graph(projection(w, false), current_table(), options);
  ASSERT_TRUE(plan.is_ok()) << plan.status().to_string();
  Result<Executor> exec = Executor::create(std::make_shared<const ExecutionPlan>(*std::move(plan)));
  ASSERT_FALSE(exec.is_ok());
  EXPECT_EQ(exec.status().code(), StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(exec.status().message()), HasSubstr("packing constant 'w'"));
  EXPECT_THAT(std::string(exec.status().message()), HasSubstr("row 5"));
}

TEST(PackedMatmul, RejectedWhereThePlanDoesNotPack) {
  if (!has_vnni()) GTEST_SKIP() << "no AVX-512 VNNI on this CPU";
  const std::vector<std::byte> w = quantized(DType::kQ4_K, 64, 256, 6);
  PlanOptions options;
  options.buckets = {{"prefill", {{"tokens", 2, 512}}}};
  options.pack_weights = false;
  Result<ExecutionPlan> plan = plan_graph(projection(w, false), current_table(), options);
  ASSERT_TRUE(plan.is_ok()) << plan.status().to_string();
  const NodeReport& n = proj_in(*plan, "prefill");
  EXPECT_THAT(n.chosen.kernel, ::testing::Not(HasSubstr("packed")));
  EXPECT_EQ(n.chosen.packed_bytes, 0);
  EXPECT_TRUE(std::any_of(n.rejected.begin(), n.rejected.end(), [](const RejectedCandidate& r) {
    return r.reason == RejectReason::kPackingOff;
  }));
  Result<Executor> exec = Executor::create(std::make_shared<const ExecutionPlan>(*std::move(plan)));
  ASSERT_TRUE(exec.is_ok());
  EXPECT_EQ(exec->stats().packed_bytes, 0);
}

TEST(PackedMatmul, RejectedForAWeightComputedAtRunTime) {
  if (!has_vnni()) GTEST_SKIP() << "no AVX-512 VNNI on this CPU";
  PlanOptions options;
  options.buckets = {{"prefill", {{"tokens", 2, 512}}}};
  Result<ExecutionPlan> plan = plan_graph(projection({}, true), current_table(), options);
  ASSERT_TRUE(plan.is_ok()) << plan.status().to_string();
  const NodeReport& n = proj_in(*plan, "prefill");
  EXPECT_THAT(n.chosen.kernel, ::testing::Not(HasSubstr("packed")));
  bool rejected = false;
  for (const RejectedCandidate& r : n.rejected) {
    if (r.reason == RejectReason::kOperandNotConstant) {
      rejected = true;
      EXPECT_THAT(r.detail, HasSubstr("'w' is computed at run time"));
    }
  }
  EXPECT_TRUE(rejected);
}

}  // namespace
}  // namespace switchyard::cpu
