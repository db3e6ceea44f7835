#include "switchyard/binding_table.h"

#include <string>

#include <gtest/gtest.h>

namespace switchyard {
namespace {

// Distinct functions, so the table can tell them apart by identity.
Status kernel_a(const KernelCall&) { return Status::ok(); }
Status kernel_b(const KernelCall&) { return Status::ok(); }
Status kernel_c(const KernelCall&) { return Status::ok(); }

const DTypeList kF32x3{DType::kF32, DType::kF32, DType::kF32};
const DTypeList kF16x3{DType::kF16, DType::kF16, DType::kF16};

KernelOptions named(std::string name) { return {.name = std::move(name)}; }

bool contains(std::string_view haystack, std::string_view needle) {
  return haystack.find(needle) != std::string_view::npos;
}

TEST(BindingTableTest, RegistersAndLooksUpTheFirstSibling) {
  KernelBindingTable table;
  table.register_kernel(OpKind::kAdd, kF32x3, BackendId::kCpu, &kernel_a, named("add_a"));
  table.register_kernel(OpKind::kAdd, kF32x3, BackendId::kCpu, &kernel_b, named("add_b"));
  ASSERT_TRUE(table.finalize().is_ok());
  EXPECT_TRUE(table.is_finalized());
  EXPECT_EQ(table.size(), 2u);
  EXPECT_EQ(table.key_count(), 1u);

  Result<const BindingEntry*> hit = table.lookup(OpKind::kAdd, kF32x3, BackendId::kCpu);
  ASSERT_TRUE(hit.is_ok());
  EXPECT_EQ((*hit)->fn, &kernel_a);
  EXPECT_EQ((*hit)->name, "add_a");
}

TEST(KernelNameTest, CollapsesOneDtypeAndListsMixedOnes) {
  EXPECT_EQ(kernel_name(OpKind::kMatmul, kF32x3, BackendId::kCpu, "ref"), "matmul_f32__cpu_ref");
  EXPECT_EQ(kernel_name(OpKind::kMatmul, {DType::kF32, DType::kQ4_K, DType::kF32}, BackendId::kCpu,
                        "avx2"),
            "matmul_f32_q4_k_f32__cpu_avx2");
  EXPECT_EQ(kernel_name(OpKind::kGetRows, {DType::kF16, DType::kI32, DType::kF32}, BackendId::kCpu,
                        "avx2"),
            "get_rows_f16_i32_f32__cpu_avx2");
  // The variant carries what the collapsed dtypes do not say.
  EXPECT_EQ(kernel_name(OpKind::kMatmul, kF16x3, BackendId::kCpu, "avx512_matvec"),
            "matmul_f16__cpu_avx512_matvec");
  EXPECT_EQ(kernel_name(OpKind::kSoftmax, kF32x3, BackendId::kCuda, "ref_mask"),
            "softmax_f32__cuda_ref_mask");
  // No variant: the name ends with the backend.
  EXPECT_EQ(kernel_name(OpKind::kAdd, kF32x3, BackendId::kCpu, ""), "add_f32__cpu");
  EXPECT_EQ(kernel_name(FusedOpId{kFirstFusedOpId}, kF32x3, BackendId::kCpu, "ref"),
            "fused16384_f32__cpu_ref");
}

TEST(BindingTableTest, SiblingsKeepRegistrationOrder) {
  KernelBindingTable table;
  table.register_kernel(OpKind::kMul, kF32x3, BackendId::kCpu, &kernel_c, named("c"));
  table.register_kernel(OpKind::kMul, kF32x3, BackendId::kCpu, &kernel_a, named("a"));
  table.register_kernel(OpKind::kMul, kF32x3, BackendId::kCpu, &kernel_b, named("b"));
  auto alts = table.lookup_alternatives(OpKind::kMul, kF32x3, BackendId::kCpu);
  ASSERT_EQ(alts.size(), 3u);
  EXPECT_EQ(alts[0].name, "c");
  EXPECT_EQ(alts[1].name, "a");
  EXPECT_EQ(alts[2].name, "b");
  EXPECT_TRUE(table.lookup_alternatives(OpKind::kMul, kF16x3, BackendId::kCpu).empty());
}

TEST(BindingTableTest, DuplicateKernelUnderOneKeyNamesBothSites) {
  KernelBindingTable table;
  const int first_line = __LINE__ + 1;
  table.register_kernel(OpKind::kAdd, kF32x3, BackendId::kCpu, &kernel_a, named("add_a"));
  const int second_line = __LINE__ + 1;
  table.register_kernel(OpKind::kAdd, kF32x3, BackendId::kCpu, &kernel_a, named("add_a"));
  Status s = table.finalize();
  ASSERT_FALSE(s.is_ok());
  EXPECT_EQ(s.code(), StatusCode::kAlreadyExists);
  EXPECT_FALSE(table.is_finalized());
  const auto* problems = s.payload<RegistrationProblems>();
  ASSERT_NE(problems, nullptr);
  ASSERT_EQ(problems->problems.size(), 1u);
  const auto& p = problems->problems[0];
  EXPECT_EQ(p.first_site.line(), static_cast<unsigned>(first_line));
  ASSERT_TRUE(p.second_site.has_value());
  EXPECT_EQ(p.second_site->line(), static_cast<unsigned>(second_line));
  EXPECT_TRUE(contains(s.message(), "binding_table_test.cpp:" + std::to_string(first_line)));
  EXPECT_TRUE(contains(s.message(), "binding_table_test.cpp:" + std::to_string(second_line)));
}

TEST(BindingTableTest, SameKernelUnderDifferentKeysIsFine) {
  KernelBindingTable table;
  table.register_kernel(OpKind::kAdd, kF32x3, BackendId::kCpu, &kernel_a, named("a"));
  table.register_kernel(OpKind::kAdd, kF16x3, BackendId::kCpu, &kernel_a, named("a"));
  EXPECT_TRUE(table.finalize().is_ok());
}

TEST(BindingTableTest, FinalizeReportsEveryMalformedRegistration) {
  KernelBindingTable table;
  table.register_kernel(OpKind::kAdd, kF32x3, BackendId::kCpu, nullptr, named("null_fn"));
  table.register_kernel(OpKind::kSub, kF32x3, BackendId::kCpu, &kernel_a, named(""));
  table.register_kernel(OpKind::kMul, kF32x3, BackendId::kCpu, &kernel_b, named("shared"));
  table.register_kernel(OpKind::kDiv, kF32x3, BackendId::kCpu, &kernel_c, named("shared"));
  const std::vector<DType> nine(9, DType::kF32);
  table.register_kernel(OpKind::kConcat, DTypeList(nine), BackendId::kCpu, &kernel_a,
                        named("too_many"));
  Status s = table.finalize();
  ASSERT_FALSE(s.is_ok());
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  const auto* problems = s.payload<RegistrationProblems>();
  ASSERT_NE(problems, nullptr);
  EXPECT_EQ(problems->problems.size(), 4u) << s.message();
  EXPECT_TRUE(contains(s.message(), "null kernel function"));
  EXPECT_TRUE(contains(s.message(), "no name"));
  EXPECT_TRUE(contains(s.message(), "'shared' names two different kernels"));
  EXPECT_TRUE(contains(s.message(), "more than 8 operands"));
}

TEST(BindingTableTest, LookupWithCapsSkipsBroadcastBakedSiblingsInAnyOrder) {
  const KernelCaps baked{.requires_broadcast = true};
  for (bool baked_first : {true, false}) {
    KernelBindingTable table;
    if (baked_first) {
      table.register_kernel(OpKind::kAdd, kF32x3, BackendId::kCpu, &kernel_a,
                            {.name = "baked", .caps = baked});
    }
    table.register_kernel(OpKind::kAdd, kF32x3, BackendId::kCpu, &kernel_b, named("dense"));
    if (!baked_first) {
      table.register_kernel(OpKind::kAdd, kF32x3, BackendId::kCpu, &kernel_a,
                            {.name = "baked", .caps = baked});
    }
    Result<const BindingEntry*> r = table.lookup_with_caps(OpKind::kAdd, kF32x3, BackendId::kCpu);
    ASSERT_TRUE(r.is_ok());
    EXPECT_EQ((*r)->name, "dense") << "baked_first=" << baked_first;
    EXPECT_TRUE(table.backend_supports(OpKind::kAdd, kF32x3, BackendId::kCpu));
  }
}

TEST(BindingTableTest, OnlyBroadcastBakedSiblingsIsAMissWithTheReason) {
  KernelBindingTable table;
  table.register_kernel(OpKind::kAdd, kF32x3, BackendId::kCpu, &kernel_a,
                        {.name = "baked", .caps = {.requires_broadcast = true}});
  EXPECT_TRUE(table.lookup(OpKind::kAdd, kF32x3, BackendId::kCpu).is_ok());
  Result<const BindingEntry*> r = table.lookup_with_caps(OpKind::kAdd, kF32x3, BackendId::kCpu);
  ASSERT_FALSE(r.is_ok());
  EXPECT_EQ(r.status().code(), StatusCode::kNotFound);
  EXPECT_FALSE(table.backend_supports(OpKind::kAdd, kF32x3, BackendId::kCpu));
  const auto* miss = r.status().payload<NoBackendForOp>();
  ASSERT_NE(miss, nullptr);
  ASSERT_EQ(miss->rejected.size(), 1u);
  EXPECT_TRUE(contains(miss->rejected[0], "baked"));
}

TEST(BindingTableTest, MissListsTheRealBackendsAndCombinations) {
  KernelBindingTable table;
  const int cpu_line = __LINE__ + 1;
  table.register_kernel(OpKind::kMatmul, kF32x3, BackendId::kCpu, &kernel_a, named("mm_cpu"));
  table.register_kernel(OpKind::kMatmul, {DType::kF32, DType::kQ4_K, DType::kF32}, BackendId::kCuda,
                        &kernel_b, named("mm_cuda_q4k"));
  table.register_kernel(OpKind::kAdd, kF32x3, BackendId::kCpu, &kernel_c, named("add"));
  ASSERT_TRUE(table.finalize().is_ok());

  const DTypeList asked{DType::kF32, DType::kQ4_K, DType::kF32};
  Result<const BindingEntry*> r = table.lookup(OpKind::kMatmul, asked, BackendId::kCpu);
  ASSERT_FALSE(r.is_ok());
  const auto* miss = r.status().payload<NoBackendForOp>();
  ASSERT_NE(miss, nullptr);
  EXPECT_EQ(miss->key, BindingKey(OpKind::kMatmul));
  EXPECT_EQ(miss->dtypes, asked);
  EXPECT_EQ(miss->backend, BackendId::kCpu);
  EXPECT_EQ(miss->backends_for_op, (std::vector<BackendId>{BackendId::kCpu, BackendId::kCuda}));
  ASSERT_EQ(miss->available.size(), 2u);  // only matmul combinations
  EXPECT_EQ(miss->available[0].kernel_name, "mm_cpu");
  EXPECT_EQ(miss->available[0].site.line(), static_cast<unsigned>(cpu_line));
  EXPECT_EQ(miss->available[1].backend, BackendId::kCuda);
  const std::string_view msg = r.status().message();
  EXPECT_TRUE(contains(msg, "no kernel for matmul(f32,q4_k,f32)@cpu")) << msg;
  EXPECT_TRUE(contains(msg, "backends serving matmul: cpu, cuda")) << msg;
  EXPECT_TRUE(contains(msg, "matmul(f32,q4_k,f32)@cuda (mm_cuda_q4k")) << msg;
}

TEST(BindingTableTest, MissOnAnUnregisteredOpStillShowsWhatExists) {
  KernelBindingTable table;
  table.register_kernel(OpKind::kAdd, kF32x3, BackendId::kCpu, &kernel_a, named("add"));
  Result<const BindingEntry*> r = table.lookup(OpKind::kRope, kF32x3, BackendId::kCpu);
  const auto* miss = r.status().payload<NoBackendForOp>();
  ASSERT_NE(miss, nullptr);
  EXPECT_TRUE(miss->backends_for_op.empty());
  ASSERT_EQ(miss->available.size(), 1u);  // never empty when the table is not
  EXPECT_EQ(miss->available[0].kernel_name, "add");
  EXPECT_TRUE(contains(r.status().message(), "no backend registers rope"));

  KernelBindingTable empty;
  Result<const BindingEntry*> e = empty.lookup(OpKind::kRope, kF32x3, BackendId::kCpu);
  EXPECT_TRUE(contains(e.status().message(), "the binding table is empty"));
}

TEST(BindingTableTest, LookupRefusesOverlongDtypeLists) {
  KernelBindingTable table;
  const std::vector<DType> nine(9, DType::kF32);
  Result<const BindingEntry*> r = table.lookup(OpKind::kConcat, DTypeList(nine), BackendId::kCpu);
  ASSERT_FALSE(r.is_ok());
  EXPECT_TRUE(contains(r.status().message(), "more than 8 operands"));
}

TEST(BindingTableTest, FillPassesNeverOverwriteExplicitClaims) {
  const PrecisionGuarantee bounded = PrecisionGuarantee::bounded(true, true, 1.0, {}, {});
  const PrecisionGuarantee no_bound = PrecisionGuarantee::no_bound(false, false);
  const PrecisionGuarantee fallback = PrecisionGuarantee::bounded(true, false, {}, 1e-3, {});
  auto explicit_cost = [](const CostInputs&) { return CostEstimate{1, 2, 3, true}; };

  KernelBindingTable table;
  table.register_kernel(OpKind::kAdd, kF32x3, BackendId::kCpu, &kernel_a,
                        {.name = "explicit", .precision = bounded, .cost = +explicit_cost});
  table.register_kernel(OpKind::kAdd, kF32x3, BackendId::kCpu, &kernel_b,
                        {.name = "nobound", .precision = no_bound});
  table.register_kernel(OpKind::kAdd, kF32x3, BackendId::kCpu, &kernel_c, named("unset"));
  table.register_kernel(OpKind::kAdd, kF32x3, BackendId::kCuda, &kernel_c, named("cuda_unset"));
  table.fill_unset_precision(BackendId::kCpu, fallback);
  table.fill_unset_cost(BackendId::kCpu, &default_cost_for);

  auto alts = table.lookup_alternatives(OpKind::kAdd, kF32x3, BackendId::kCpu);
  EXPECT_EQ(alts[0].precision, bounded);
  EXPECT_EQ(alts[1].precision, no_bound);  // audited-with-no-bound survives the fill
  EXPECT_EQ(alts[2].precision, fallback);
  EXPECT_EQ(alts[0].cost, +explicit_cost);
  EXPECT_EQ(alts[1].cost, default_cost_for(OpKind::kAdd));
  EXPECT_EQ(alts[2].cost, default_cost_for(OpKind::kAdd));
  // Another backend's entries are untouched.
  auto cuda = table.lookup_alternatives(OpKind::kAdd, kF32x3, BackendId::kCuda);
  EXPECT_TRUE(cuda[0].precision.is_unaudited());
  EXPECT_FALSE(cuda[0].has_known_cost());
  EXPECT_EQ(table.lookup_precision(OpKind::kAdd, kF32x3, BackendId::kCpu), bounded);
  EXPECT_TRUE(table.lookup_precision(OpKind::kSub, kF32x3, BackendId::kCpu).is_unaudited());
  EXPECT_EQ(table.lookup_cost(OpKind::kSub, kF32x3, BackendId::kCpu), &unknown_cost);
}

TEST(BindingTableTest, FillCostLeavesEntriesWithACostExpression) {
  auto expr = std::make_shared<const CostExpr>(*CostExpr::compile("2*m*n*k", "bytes(a)"));
  KernelBindingTable table;
  table.register_kernel(OpKind::kMatmul, kF32x3, BackendId::kCpu, &kernel_a,
                        {.name = "mm", .cost_expr = expr});
  table.fill_unset_cost(BackendId::kCpu, &default_cost_for);
  const BindingEntry& e = table.lookup_alternatives(OpKind::kMatmul, kF32x3, BackendId::kCpu)[0];
  EXPECT_EQ(e.cost, &unknown_cost);
  EXPECT_TRUE(e.has_known_cost());
  const Shape shapes[] = {Shape{4, 8}, Shape{16, 8}, Shape{4, 16}};
  const DType dtypes[] = {DType::kF32, DType::kF32, DType::kF32};
  CostEstimate c = e.estimate({.op = OpKind::kMatmul, .shapes = shapes, .dtypes = dtypes});
  EXPECT_DOUBLE_EQ(c.flops, 2.0 * 4 * 16 * 8);
  EXPECT_DOUBLE_EQ(c.bytes, 4.0 * 8 * 4);
}

TEST(BindingTableTest, RevisionHashIsStableAndTracksRevision) {
  KernelBindingTable table;
  table.register_kernel(OpKind::kAdd, kF32x3, BackendId::kCpu, &kernel_a,
                        {.name = "add_f32__cpu_ref", .source = "portable", .revision = 1});
  table.register_kernel(OpKind::kAdd, kF16x3, BackendId::kCpu, &kernel_b,
                        {.name = "add_f32__cpu_ref", .source = "portable", .revision = 2});
  const auto& r1 = table.lookup_alternatives(OpKind::kAdd, kF32x3, BackendId::kCpu)[0];
  const auto& r2 = table.lookup_alternatives(OpKind::kAdd, kF16x3, BackendId::kCpu)[0];
  // A fixed value: the hash must not change between runs, builds or platforms.
  EXPECT_EQ(r1.revision_hash, 0x965b4adbae0de359ull) << std::hex << r1.revision_hash;
  EXPECT_NE(r1.revision_hash, r2.revision_hash);
}

TEST(BindingTableTest, IteratorsVisitEveryAlternativeAndEveryKey) {
  KernelBindingTable table;
  table.register_kernel(OpKind::kAdd, kF32x3, BackendId::kCpu, &kernel_a, named("a1"));
  table.register_kernel(OpKind::kMul, kF32x3, BackendId::kCpu, &kernel_b, named("m1"));
  table.register_kernel(OpKind::kAdd, kF32x3, BackendId::kCpu, &kernel_b, named("a2"));
  std::vector<std::string> names;
  for (const auto& ref : table.entries()) names.push_back(ref.entry.name);
  EXPECT_EQ(names, (std::vector<std::string>{"a1", "a2", "m1"}));
  ASSERT_EQ(table.slots().size(), 2u);
  EXPECT_EQ(table.slots()[0].key, BindingKey(OpKind::kAdd));
  EXPECT_EQ(table.size(), 3u);
  EXPECT_EQ(table.key_count(), 2u);
  KernelBindingTable empty;
  EXPECT_EQ(empty.entries().begin(), empty.entries().end());
}

TEST(BindingTableTest, RemoveIfHidesBindingsAndDropsEmptyKeys) {
  KernelBindingTable table;
  table.register_kernel(OpKind::kAdd, kF32x3, BackendId::kCpu, &kernel_a, named("a1"));
  table.register_kernel(OpKind::kAdd, kF32x3, BackendId::kCpu, &kernel_b, named("a2"));
  table.register_kernel(OpKind::kMul, kF32x3, BackendId::kCpu, &kernel_c, named("m1"));
  auto removed = table.remove_if([](const KernelBindingTable::Slot& s, const BindingEntry& e) {
    return s.key == BindingKey(OpKind::kMul) || e.name == "a1";
  });
  ASSERT_EQ(removed.size(), 2u);
  EXPECT_EQ(table.size(), 1u);
  EXPECT_EQ(table.key_count(), 1u);
  EXPECT_FALSE(table.lookup(OpKind::kMul, kF32x3, BackendId::kCpu).is_ok());
  EXPECT_EQ((*table.lookup(OpKind::kAdd, kF32x3, BackendId::kCpu))->name, "a2");
}

// --- runtime-fused ops ----------------------------------------------------------

FusedRegion silu_mul_region() {
  // silu(in0) * in1
  return {
      .num_inputs = 2, .nodes = {{OpKind::kSilu, {-1}}, {OpKind::kMul, {0, -2}}}, .outputs = {1}};
}

TEST(RuntimeFusedTest, StructurallyIdenticalRegionsShareOneId) {
  KernelBindingTable table;
  Result<FusedOpId> a = table.register_runtime_fused("silu_mul", silu_mul_region());
  Result<FusedOpId> b = table.register_runtime_fused("another_name", silu_mul_region());
  ASSERT_TRUE(a.is_ok());
  ASSERT_TRUE(b.is_ok());
  EXPECT_EQ(*a, *b);
  EXPECT_GE(a->value, kFirstFusedOpId);
  EXPECT_EQ(table.runtime_fused(*a)->name, "silu_mul");

  FusedRegion other = silu_mul_region();
  other.nodes[0].op = OpKind::kGelu;
  Result<FusedOpId> c = table.register_runtime_fused("gelu_mul", other);
  ASSERT_TRUE(c.is_ok());
  EXPECT_NE(*c, *a);
  EXPECT_EQ(table.runtime_fused_ops().size(), 2u);
}

TEST(RuntimeFusedTest, InvalidRegionsAreRefused) {
  KernelBindingTable table;
  FusedRegion forward_ref = silu_mul_region();
  forward_ref.nodes[0].inputs = {1};  // reads a later node
  EXPECT_EQ(table.register_runtime_fused("bad", forward_ref).status().code(),
            StatusCode::kInvalidArgument);
  FusedRegion bad_input = silu_mul_region();
  bad_input.nodes[0].inputs = {-3};  // only two region inputs
  EXPECT_FALSE(table.register_runtime_fused("bad", bad_input).is_ok());
  FusedRegion no_output = silu_mul_region();
  no_output.outputs.clear();
  EXPECT_FALSE(table.register_runtime_fused("bad", no_output).is_ok());
  EXPECT_TRUE(table.runtime_fused_ops().empty());
}

TEST(RuntimeFusedTest, UniqueLookupHasThreeDistinctOutcomes) {
  KernelBindingTable table;
  const FusedOpId id = *table.register_runtime_fused("silu_mul", silu_mul_region());
  RuntimeFusedLookup none = table.unique_runtime_fused(id, BackendId::kCpu);
  EXPECT_EQ(none.kind, RuntimeFusedLookup::Kind::kNotBound);
  EXPECT_FALSE(table.has_runtime_fused(id, BackendId::kCpu));

  table.register_kernel(id, kF32x3, BackendId::kCpu, &kernel_a, named("silu_mul_f32"));
  RuntimeFusedLookup one = table.unique_runtime_fused(id, BackendId::kCpu);
  EXPECT_EQ(one.kind, RuntimeFusedLookup::Kind::kUnique);
  ASSERT_NE(one.entry, nullptr);
  EXPECT_EQ(one.entry->name, "silu_mul_f32");
  EXPECT_TRUE(table.has_runtime_fused(id, BackendId::kCpu));
  EXPECT_FALSE(table.has_runtime_fused(id, BackendId::kCuda));

  table.register_kernel(id, kF16x3, BackendId::kCpu, &kernel_b, named("silu_mul_f16"));
  RuntimeFusedLookup two = table.unique_runtime_fused(id, BackendId::kCpu);
  EXPECT_EQ(two.kind, RuntimeFusedLookup::Kind::kAmbiguous);
  EXPECT_EQ(two.entry, nullptr);
  ASSERT_EQ(two.dtypes.size(), 2u);
  EXPECT_EQ(two.dtypes[0], kF32x3);  // registration order, never hash order
  EXPECT_EQ(two.dtypes[1], kF16x3);
  ASSERT_TRUE(table.finalize().is_ok());
  // Exact-key dispatch is never ambiguous.
  EXPECT_EQ((*table.lookup(id, kF16x3, BackendId::kCpu))->name, "silu_mul_f16");
}

TEST(RuntimeFusedTest, KernelsForUnregisteredFusedIdsFailFinalize) {
  KernelBindingTable table;
  table.register_kernel(FusedOpId{kFirstFusedOpId + 7}, kF32x3, BackendId::kCpu, &kernel_a,
                        named("orphan"));
  Status s = table.finalize();
  ASSERT_FALSE(s.is_ok());
  EXPECT_TRUE(contains(s.message(), "never registered"));
}

}  // namespace
}  // namespace switchyard
