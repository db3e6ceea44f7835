// Kernel packs: the example pack enters the table as an ordinary sibling, wins the
// route where its cost and claim let it and loses where its claim is too weak, runs,
// and passes verification; every way a pack can misbehave is refused with its reason
// and leaves the table as it was.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <optional>
#include <string>
#include <vector>

#include "switchyard/backends.h"
#include "switchyard/dispatch.h"
#include "switchyard/executor.h"
#include "switchyard/graph.h"
#include "switchyard/kernel_mask.h"
#include "switchyard/kernel_packs.h"
#include "switchyard/plan.h"
#include "switchyard/registry.h"
#include "switchyard/verify.h"

namespace switchyard {
namespace {

using ::testing::HasSubstr;

const std::string kExamplePack = SWITCHYARD_EXAMPLE_PACK;
constexpr std::string_view kExampleKernel = "gelu_erf_f32__cpu_pack_fast";

std::string test_pack(std::string_view fault) {
  return std::string(SWITCHYARD_TEST_PACK_DIR) + "/sy_pack_" + std::string(fault) + ".so";
}

KernelBindingTable builtin() {
  Result<KernelBindingTable> t = make_builtin_table();
  EXPECT_TRUE(t.is_ok()) << t.status().to_string();
  return std::move(t).value();
}

const DTypeList kF32x3{DType::kF32, DType::kF32, DType::kF32};

const DTypeList kF32x2{DType::kF32, DType::kF32};

const BindingEntry* find_entry(const KernelBindingTable& t, OpKind op, std::string_view name) {
  for (const BindingEntry& e :
       t.lookup_alternatives(op, op == OpKind::kGeluErf ? kF32x2 : kF32x3, BackendId::kCpu)) {
    if (e.name == name) return &e;
  }
  return nullptr;
}

std::vector<std::string> names(const KernelBindingTable& t) {
  std::vector<std::string> out;
  for (const auto& ref : t.entries()) out.push_back(ref.entry.name);
  return out;
}

// One gelu_erf node; with a floor, the node asks for that relative precision.
Graph gelu_graph(std::int64_t n, std::optional<double> floor = std::nullopt) {
  GraphBuilder b;
  ValueId x = b.input("x", DType::kF32, {n});
  ValueId y = b.op(OpKind::kGeluErf, {x}, "act", {}, "ffn_act");
  if (floor) b.require_precision(y, PrecisionFloor::relative(*floor));
  b.output(y);
  return std::move(b).build().value();
}

const NodeReport& only_node(const ExecutionPlan& plan) { return plan.report().buckets[0].nodes[0]; }

TEST(KernelPacks, ThePackEntersAsASiblingWithItsSourceAndDeclarationSite) {
  KernelBindingTable t = builtin();
  const std::size_t before = t.size();
  Result<KernelPackInfo> pack = load_kernel_pack(t, kExamplePack);
  ASSERT_TRUE(pack.is_ok()) << pack.status().to_string();
  EXPECT_EQ(pack->name, "fast-gelu");
  EXPECT_EQ(pack->manifest_path, kernel_pack_manifest_path(kExamplePack));
  EXPECT_THAT(pack->kernels, ::testing::ElementsAre(std::string(kExampleKernel)));
  ASSERT_TRUE(t.finalize().is_ok());
  EXPECT_EQ(t.size(), before + 1);

  const BindingEntry* e = find_entry(t, OpKind::kGeluErf, kExampleKernel);
  ASSERT_NE(e, nullptr);
  EXPECT_EQ(e->source, "pack:fast-gelu");
  EXPECT_THAT(describe_site(*e), HasSubstr("fast_gelu.so (declared in "));
  EXPECT_THAT(describe_site(*e), HasSubstr("fast_gelu.json kernels[0]"));
  EXPECT_EQ(e->precision, PrecisionGuarantee::bounded(true, true, std::nullopt, 1e-6, 5e-7));
  ASSERT_NE(e->cost_expr, nullptr);
  EXPECT_NE(e->revision_hash, 0u);
  // The built-ins at the key are still there, ahead of it.
  EXPECT_NE(t.lookup(OpKind::kGeluErf, kF32x2, BackendId::kCpu).value()->source, "pack:fast-gelu");
}

TEST(KernelPacks, TheRouteTakesThePackWhereItsClaimSufficesAndTheBuiltinWhereItDoesNot) {
  KernelBindingTable t = builtin();
  ASSERT_TRUE(load_kernel_pack(t, kExamplePack).is_ok());
  ASSERT_TRUE(t.finalize().is_ok());
  auto table = std::make_shared<const KernelBindingTable>(std::move(t));
  PlanOptions options;
  options.record_in_registry = false;

  // No floor: the cheaper kernel, the pack's.
  Result<ExecutionPlan> fast = plan_graph(gelu_graph(4096), table, options);
  ASSERT_TRUE(fast.is_ok()) << fast.status().to_string();
  EXPECT_EQ(only_node(*fast).chosen.kernel, kExampleKernel);
  EXPECT_EQ(only_node(*fast).chosen.source, "pack:fast-gelu");
  ASSERT_FALSE(only_node(*fast).runners_up.empty());
  EXPECT_LT(only_node(*fast).chosen.total_ns, only_node(*fast).runners_up[0].total_ns);

  // A floor of 2e-7 relative: the pack's claim (1e-6) is too weak, the reference's
  // (one ulp of f32, 1.2e-7) is not.
  Result<ExecutionPlan> exact = plan_graph(gelu_graph(4096, 2e-7), table, options);
  ASSERT_TRUE(exact.is_ok()) << exact.status().to_string();
  EXPECT_EQ(only_node(*exact).chosen.kernel, "gelu_erf_f32__cpu_ref");
  bool rejected = false;
  for (const RejectedCandidate& r : only_node(*exact).rejected) {
    rejected |= r.kernel == kExampleKernel && r.reason == RejectReason::kPrecisionBelowFloor;
  }
  EXPECT_TRUE(rejected) << explain_text(exact->report());

  // Both plans run, and agree within the pack's claim.
  constexpr std::int64_t n = 4096;
  std::vector<float> x(n), a(n), b(n);
  for (std::int64_t i = 0; i < n; ++i) x[i] = -8.0f + 16.0f * static_cast<float>(i) / n;
  const TensorView in = TensorView::contiguous(x.data(), DType::kF32, {n});
  const TensorView out_a = TensorView::contiguous(a.data(), DType::kF32, {n});
  const TensorView out_b = TensorView::contiguous(b.data(), DType::kF32, {n});
  ASSERT_TRUE(Executor::create(std::make_shared<ExecutionPlan>(std::move(*fast)))
                  ->run({&in, 1}, {&out_a, 1})
                  .is_ok());
  ASSERT_TRUE(Executor::create(std::make_shared<ExecutionPlan>(std::move(*exact)))
                  ->run({&in, 1}, {&out_b, 1})
                  .is_ok());
  for (std::int64_t i = 0; i < n; ++i) {
    const double err = std::abs(static_cast<double>(a[i]) - b[i]);
    EXPECT_TRUE(err <= 5e-7 + 1e-6 * std::abs(b[i])) << "x=" << x[i] << " " << a[i] << " " << b[i];
  }
}

TEST(KernelPacks, TheHarnessVerifiesPackClaimsLikeBuiltinOnes) {
  KernelBindingTable t = builtin();
  ASSERT_TRUE(load_kernel_pack(t, kExamplePack).is_ok());
  ASSERT_TRUE(load_kernel_pack(t, test_pack("two_kernels")).is_ok());
  ASSERT_TRUE(t.finalize().is_ok());
  for (const auto& ref : t.entries()) {
    if (!ref.entry.source.starts_with("pack:")) continue;
    const VerifyEntryReport report = verify_entry(ref.slot, ref.entry);
    EXPECT_EQ(report.verdict, VerifyVerdict::kPass) << report.kernel << ": " << report.reason;
    EXPECT_FALSE(report.cases.empty()) << report.kernel;
    EXPECT_TRUE(report.thread_determinism_checked) << report.kernel;
  }
}

TEST(KernelPacks, OneFunctionWithTwoDataIsTwoKernelsAndEachGetsItsOwnData) {
  KernelBindingTable t = builtin();
  Result<KernelPackInfo> pack = load_kernel_pack(t, test_pack("two_kernels"));
  ASSERT_TRUE(pack.is_ok()) << pack.status().to_string();
  ASSERT_TRUE(t.finalize().is_ok()) << "same trampoline, different data: not a duplicate";
  const BindingEntry* first = find_entry(t, OpKind::kMul, "mul_f32__cpu_pack_first");
  const BindingEntry* second = find_entry(t, OpKind::kMul, "mul_f32__cpu_pack_second");
  ASSERT_NE(first, nullptr);
  ASSERT_NE(second, nullptr);
  EXPECT_EQ(first->fn, second->fn);
  EXPECT_NE(first->data, second->data);
  // The second declares SY_CAP_TRADES_PRECISION (its manifest, "trades_precision").
  EXPECT_FALSE(first->caps.trades_precision);
  EXPECT_TRUE(second->caps.trades_precision);
}

TEST(KernelPacks, AKernelsRefusalIsAStatusThatNamesTheKernel) {
  KernelBindingTable t = builtin();
  ASSERT_TRUE(load_kernel_pack(t, test_pack("kernel_error")).is_ok());
  ASSERT_TRUE(t.finalize().is_ok());
  const BindingEntry* e = find_entry(t, OpKind::kMul, "mul_f32__cpu_pack_first");
  ASSERT_NE(e, nullptr);
  float a[4] = {1, 2, 3, 4}, out[4] = {};
  const TensorView views[] = {TensorView::contiguous(a, DType::kF32, {4}),
                              TensorView::contiguous(a, DType::kF32, {4}),
                              TensorView::contiguous(out, DType::kF32, {4})};
  OpParams params;
  ExecContext ctx;
  const Status s = e->fn(KernelCall{std::span(views, 2), std::span(views + 2, 1), params, ctx,
                                    e->name, e->data.get()});
  ASSERT_FALSE(s.is_ok());
  EXPECT_THAT(s.message(), HasSubstr("mul_f32__cpu_pack_first"));
  EXPECT_THAT(s.message(), HasSubstr("refused: this pack takes no calls"));
}

struct Refusal {
  std::string_view fault;
  StatusCode code;
  std::string_view says;
};

class KernelPackRefusal : public ::testing::TestWithParam<Refusal> {};

TEST_P(KernelPackRefusal, IsExplainedAndLeavesTheTableAsItWas) {
  const Refusal& r = GetParam();
  KernelBindingTable t = builtin();
  const std::vector<std::string> before = names(t);
  Result<KernelPackInfo> pack = load_kernel_pack(t, test_pack(r.fault));
  ASSERT_FALSE(pack.is_ok()) << r.fault;
  EXPECT_EQ(pack.status().code(), r.code) << pack.status().to_string();
  EXPECT_THAT(pack.status().message(), HasSubstr(r.says));
  EXPECT_THAT(pack.status().message(), HasSubstr("sy_pack_" + std::string(r.fault)));
  EXPECT_EQ(names(t), before);
  EXPECT_TRUE(t.is_finalized());
}

INSTANTIATE_TEST_SUITE_P(
    Faults, KernelPackRefusal,
    ::testing::Values(
        Refusal{"wrong_abi", StatusCode::kFailedPrecondition, "built for kernel-pack ABI 42"},
        Refusal{"no_register", StatusCode::kInvalidArgument,
                "does not export switchyard_pack_register"},
        Refusal{"crash", StatusCode::kInternal, "crashed while registering its kernels"},
        Refusal{"exits", StatusCode::kInternal, "ended the process while registering"},
        Refusal{"fail_midway", StatusCode::kInvalidArgument,
                "out of scratch memory after one kernel"},
        Refusal{"null_fn", StatusCode::kInvalidArgument, "has no fn"},
        Refusal{"undeclared", StatusCode::kInvalidArgument,
                "registers kernel 'mul_f32__cpu_pack_second', which"},
        Refusal{"claim_differs", StatusCode::kInvalidArgument, "precision: manifest says"},
        Refusal{"undeclared_in_library", StatusCode::kInvalidArgument,
                "declares 'mul_f32__cpu_pack_second', which"},
        Refusal{"bad_op", StatusCode::kInvalidArgument, "op 'no_such_op' is neither"}),
    [](const ::testing::TestParamInfo<Refusal>& p) { return std::string(p.param.fault); });

TEST(KernelPacks, ANameABuiltinUsesIsRefusedAtFinalizeNamingBothSites) {
  KernelBindingTable t = builtin();
  ASSERT_TRUE(load_kernel_pack(t, test_pack("builtin_name")).is_ok());
  const Status s = t.finalize();
  ASSERT_FALSE(s.is_ok());
  EXPECT_THAT(s.message(), HasSubstr("kernel name 'mul_f32__cpu_ref' names two different kernels"));
  EXPECT_THAT(s.message(), HasSubstr("registration.cpp"));
  EXPECT_THAT(s.message(), HasSubstr("sy_pack_builtin_name.so (declared in"));
}

class KernelPackFiles : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = std::filesystem::temp_directory_path() /
           ("switchyard_pack_test_" + std::to_string(::getpid()));
    std::filesystem::create_directories(dir_);
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }
  std::filesystem::path dir_;
};

TEST_F(KernelPackFiles, AMissingLibraryOrManifestAndACorruptManifestAreClearErrors) {
  KernelBindingTable t = builtin();
  const std::vector<std::string> before = names(t);

  Result<KernelPackInfo> missing = load_kernel_pack(t, (dir_ / "nothing.so").string());
  EXPECT_EQ(missing.status().code(), StatusCode::kNotFound);
  EXPECT_THAT(missing.status().message(), HasSubstr("no such file"));

  const std::filesystem::path lib = dir_ / "fast_gelu.so";
  std::filesystem::copy_file(kExamplePack, lib);
  Result<KernelPackInfo> no_manifest = load_kernel_pack(t, lib.string());
  EXPECT_EQ(no_manifest.status().code(), StatusCode::kNotFound);
  EXPECT_THAT(no_manifest.status().message(), HasSubstr("has no manifest"));

  std::ifstream in(kernel_pack_manifest_path(kExamplePack));
  const std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  std::ofstream(dir_ / "fast_gelu.json") << text.substr(0, text.size() / 2);
  Result<KernelPackInfo> truncated = load_kernel_pack(t, lib.string());
  EXPECT_EQ(truncated.status().code(), StatusCode::kDataLoss);
  EXPECT_THAT(truncated.status().message(), HasSubstr("truncated or corrupt"));

  std::ofstream(dir_ / "fast_gelu.json", std::ios::trunc)
      << R"({"format": "switchyard-kernel-pack", "version": 7, "pack": "x", "kernels": []})";
  Result<KernelPackInfo> future = load_kernel_pack(t, lib.string());
  EXPECT_EQ(future.status().code(), StatusCode::kInvalidArgument);
  EXPECT_THAT(future.status().message(), HasSubstr("\"version\" is not 1"));

  EXPECT_EQ(names(t), before);
}

TEST(KernelPacks, EnvironmentListSkipsEmptyItems) {
  const char* old = std::getenv("SWITCHYARD_KERNEL_PACKS");
  const std::string saved = old != nullptr ? old : "";
  ::setenv("SWITCHYARD_KERNEL_PACKS", "a.so::/x/b.so:", 1);
  EXPECT_THAT(kernel_packs_from_environment(), ::testing::ElementsAre("a.so", "/x/b.so"));
  if (old != nullptr) {
    ::setenv("SWITCHYARD_KERNEL_PACKS", saved.c_str(), 1);
  } else {
    ::unsetenv("SWITCHYARD_KERNEL_PACKS");
  }
}

// The process-wide table: installing publishes once, a refused pack publishes
// nothing, the kernel mask hides pack kernels like any other, and strict mode then
// refuses a role that needs them. The built-in table is published again at the end.
TEST(KernelPacks, InstalledPacksAreMaskedAndStrictModeRefusesWhatTheMaskHides) {
  const std::uint64_t start = current_generation();
  const std::vector<std::string> bad{test_pack("claim_differs")};
  EXPECT_FALSE(install_kernel_packs(bad).is_ok());
  EXPECT_EQ(current_generation(), start);

  const std::vector<std::string> good{kExamplePack};
  Result<std::vector<KernelPackInfo>> packs = install_kernel_packs(good);
  ASSERT_TRUE(packs.is_ok()) << packs.status().to_string();
  EXPECT_EQ(current_generation(), start + 1);
  EXPECT_NE(find_entry(*current_table(), OpKind::kGeluErf, kExampleKernel), nullptr);
  bool listed = false;
  for (const KernelPackInfo& p : installed_kernel_packs()) listed |= p.name == "fast-gelu";
  EXPECT_TRUE(listed);

  ASSERT_TRUE(set_kernel_mask(KernelMask::parse("cpu:gelu_erf:f32").value()).is_ok());
  EXPECT_EQ(find_entry(*current_table(), OpKind::kGeluErf, kExampleKernel), nullptr);
  bool masked = false;
  for (const CoverageBinding& b : masked_bindings()) {
    masked |= b.kernel_name == kExampleKernel;
  }
  EXPECT_TRUE(masked);
  Registry strict({.strict = StrictPolicy::all(), .sink = [](std::string_view) {}});
  PlanOptions options;
  options.registry = &strict;
  Result<ExecutionPlan> refused = plan_graph(gelu_graph(64), current_table(), options);
  ASSERT_TRUE(clear_kernel_mask().is_ok());
  EXPECT_FALSE(refused.is_ok());

  Result<ExecutionPlan> routed = plan_graph(gelu_graph(64), current_table(), PlanOptions{});
  ASSERT_TRUE(routed.is_ok()) << routed.status().to_string();
  EXPECT_EQ(only_node(*routed).chosen.kernel, kExampleKernel);

  ASSERT_TRUE(publish_table(builtin()).is_ok());
  EXPECT_EQ(find_entry(*current_table(), OpKind::kGeluErf, kExampleKernel), nullptr);
}

}  // namespace
}  // namespace switchyard
