#include "switchyard/registry.h"

#include <atomic>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include <fmt/format.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "switchyard/backends.h"
#include "switchyard/dispatch.h"

namespace switchyard {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

// Collects everything a registry prints, so tests can count warnings.
struct CapturedOutput {
  std::mutex mu;
  std::vector<std::string> messages;

  WarningSink sink() {
    return [this](std::string_view text) {
      std::lock_guard lock(mu);
      messages.emplace_back(text);
    };
  }
  std::size_t count_containing(std::string_view needle) {
    std::lock_guard lock(mu);
    std::size_t n = 0;
    for (const std::string& m : messages) n += m.find(needle) != std::string::npos ? 1 : 0;
    return n;
  }
  std::string all() {
    std::lock_guard lock(mu);
    std::string out;
    for (const std::string& m : messages) out += m;
    return out;
  }
};

Lookup ffn_down(BackendId backend, DType dtype, OpKind op = OpKind::kMatmul) {
  return {.backend = backend, .op = op, .dtype = dtype, .role = "ffn_down"};
}

Status fake_kernel(const KernelCall&) { return Status::ok(); }
Status other_fake_kernel(const KernelCall&) { return Status::ok(); }

TEST(RegistryTest, RepeatedBuildRecordIsOneRowWithACount) {
  Registry r;
  for (int i = 0; i < 5; ++i) {
    r.record_build(ffn_down(BackendId::kCuda, DType::kQ4_K), Outcome::make_hit());
  }
  const SealReport report = r.seal();
  ASSERT_EQ(report.entries.size(), 1u);
  EXPECT_EQ(report.entries[0].count, 5u);
  EXPECT_TRUE(report.entries[0].hit);
  EXPECT_EQ(report.entries[0].phase, Phase::kBuild);
  EXPECT_TRUE(report.misses.empty());
  EXPECT_TRUE(report.violations.empty());
}

TEST(RegistryTest, DistinctRolesAndSitesAreDistinctRows) {
  Registry r;
  r.record_build(ffn_down(BackendId::kCuda, DType::kQ4_K), Outcome::make_hit());
  r.record_build(
      {.backend = BackendId::kCuda, .op = OpKind::kMatmul, .dtype = DType::kQ4_K, .role = "attn_q"},
      Outcome::make_hit());
  r.record_build(ffn_down(BackendId::kCuda, DType::kQ4_K), Outcome::make_hit());
  EXPECT_EQ(r.seal().entries.size(), 3u);
}

TEST(RegistryTest, RuntimeRoleStringsAreCopied) {
  Registry r;
  {
    std::string role = "blk.7.ffn_down.weight";
    r.record_build(
        {.backend = BackendId::kCuda, .op = OpKind::kMatmul, .dtype = DType::kQ6_K, .role = role},
        Outcome::slow_path("cpu"));
    role.assign(role.size(), 'x');  // the caller's buffer changes; the row must not
  }
  const SealReport report = r.seal();
  ASSERT_EQ(report.entries.size(), 1u);
  EXPECT_EQ(report.entries[0].role, "blk.7.ffn_down.weight");
}

TEST(RegistryTest, SlowPathMissOnAcceleratorIsAViolation) {
  CapturedOutput out;
  Registry r({.sink = out.sink()});
  r.record_build(ffn_down(BackendId::kCuda, DType::kIQ4_NL), Outcome::slow_path("matmul__cpu"));
  const SealReport report = r.seal();
  ASSERT_EQ(report.violations.size(), 1u);
  EXPECT_EQ(report.violations[0].dtype, DType::kIQ4_NL);
  EXPECT_EQ(report.misses.size(), 1u);
  // Printed loudly even though the registry is not verbose.
  EXPECT_EQ(out.count_containing("NO KERNEL for cuda matmul iq4_nl (ffn_down)"), 1u);
  EXPECT_THAT(report.render_violations(), HasSubstr("matmul__cpu"));
}

TEST(RegistryTest, ByDesignMissIsReportedButIsNotAViolation) {
  CapturedOutput out;
  Registry r({.sink = out.sink()});
  r.record_build({.backend = BackendId::kCuda,
                  .op = OpKind::kMatmul,
                  .dtype = DType::kF32,
                  .role = "moe_router"},
                 Outcome::by_design("host matvec"));
  const SealReport report = r.seal();
  EXPECT_EQ(report.misses.size(), 1u);
  EXPECT_TRUE(report.violations.empty());
  EXPECT_TRUE(out.messages.empty()) << out.all();
}

TEST(RegistryTest, CpuMissIsInformationalUnlessCpuIsSelected) {
  Registry r;
  r.record_build(ffn_down(BackendId::kCpu, DType::kQ2_K), Outcome::slow_path("f32 dequant"));
  EXPECT_TRUE(r.seal().violations.empty());
  r.set_selected_backends(std::vector<BackendId>{BackendId::kCpu});
  EXPECT_EQ(r.seal().violations.size(), 1u);
  // Selecting only the CPU also means a CUDA row is not the process's concern.
  r.record_build(ffn_down(BackendId::kCuda, DType::kQ2_K), Outcome::slow_path("cpu"));
  const SealReport report = r.seal();
  ASSERT_EQ(report.violations.size(), 1u);
  EXPECT_EQ(report.violations[0].backend, BackendId::kCpu);
}

TEST(RegistryTest, PostSealMissOnPredictedShapeIsNotASurprise) {
  CapturedOutput out;
  Registry r({.sink = out.sink()});
  // The probe (one call site, a role) predicts the shape ...
  r.record_build(ffn_down(BackendId::kCuda, DType::kQ5_K), Outcome::slow_path("cpu"));
  r.seal();
  // ... so the dispatch site (another call site, no role) is not surprised.
  r.note_fallback({.backend = BackendId::kCuda, .op = OpKind::kMatmul, .dtype = DType::kQ5_K},
                  "cpu");
  EXPECT_TRUE(r.surprises().empty());
  EXPECT_EQ(out.count_containing("SILENT SLOW PATH"), 0u);
}

TEST(RegistryTest, PostSealMissOnUnpredictedShapeIsASurpriseWarnedOnce) {
  CapturedOutput out;
  Registry r({.sink = out.sink()});
  r.record_build(ffn_down(BackendId::kCuda, DType::kQ4_K), Outcome::make_hit());
  r.seal();
  for (int i = 0; i < 3; ++i) {
    r.note_fallback({.backend = BackendId::kCuda, .op = OpKind::kMatmul, .dtype = DType::kQ2_K},
                    "matmul_q2_k__cpu");
  }
  const std::vector<RegistryEntry> surprises = r.surprises();
  ASSERT_EQ(surprises.size(), 1u);
  EXPECT_EQ(surprises[0].dtype, DType::kQ2_K);
  EXPECT_EQ(surprises[0].phase, Phase::kRun);
  EXPECT_EQ(surprises[0].role, kDispatchRole);
  EXPECT_EQ(surprises[0].count, 3u);
  EXPECT_THAT(surprises[0].site.file_name(), HasSubstr("registry_test.cpp"));
  ASSERT_EQ(out.count_containing("SILENT SLOW PATH"), 1u);
  const std::string warning = out.all();
  EXPECT_THAT(warning, HasSubstr("registry_test.cpp:"));
  EXPECT_THAT(warning, HasSubstr("q2_k"));
  EXPECT_THAT(warning, HasSubstr("(dispatch)"));
  EXPECT_THAT(warning, HasSubstr("matmul_q2_k__cpu"));
  // Run-phase rows are not build rows: the next seal lists the surprise apart.
  const SealReport report = r.seal();
  EXPECT_EQ(report.entries.size(), 1u);
  EXPECT_EQ(report.surprises.size(), 1u);
}

TEST(RegistryTest, PostSealHitsAndByDesignMissesAreNeverSurprises) {
  CapturedOutput out;
  Registry r({.sink = out.sink()});
  r.seal();
  r.record_dispatch(ffn_down(BackendId::kCuda, DType::kQ4_K), Outcome::make_hit());
  r.note_fallback(ffn_down(BackendId::kCuda, DType::kF32), "host", Severity::kByDesign);
  EXPECT_TRUE(r.surprises().empty());
  EXPECT_TRUE(out.messages.empty()) << out.all();
  EXPECT_EQ(r.entries().size(), 2u);
}

TEST(RegistryTest, DispatchRecordsBeforeSealArePredictions) {
  Registry r;
  r.note_fallback(ffn_down(BackendId::kCuda, DType::kQ3_K), "cpu");
  r.seal();
  r.note_fallback({.backend = BackendId::kCuda, .op = OpKind::kMatmul, .dtype = DType::kQ3_K},
                  "cpu");
  EXPECT_TRUE(r.surprises().empty());
}

TEST(RegistryTest, BuildRecordsAfterSealExtendThePredictedSet) {
  Registry r;
  r.seal();
  // A second model is loaded and probed after the first was sealed.
  r.record_build(ffn_down(BackendId::kCuda, DType::kQ6_K), Outcome::slow_path("cpu"));
  r.note_fallback(ffn_down(BackendId::kCuda, DType::kQ6_K), "cpu");
  EXPECT_TRUE(r.surprises().empty());
  const SealReport report = r.seal();
  ASSERT_EQ(report.entries.size(), 1u);
  EXPECT_EQ(report.entries[0].phase, Phase::kBuild);
}

TEST(RegistryTest, SurpriseNeedsTheWholeShapeToBeNew) {
  Registry r({.sink = [](std::string_view) {}});
  r.record_build(ffn_down(BackendId::kCuda, DType::kQ4_K), Outcome::slow_path("cpu"));
  r.seal();
  // Same dtype, other op; same op, other backend: both unpredicted.
  r.note_fallback(ffn_down(BackendId::kCuda, DType::kQ4_K, OpKind::kLinear), "cpu");
  r.note_fallback(ffn_down(BackendId::kVulkan, DType::kQ4_K), "cpu");
  EXPECT_EQ(r.surprises().size(), 2u);
}

TEST(RegistryTest, ConcurrentMissesAfterSealWarnOnceAndCountAll) {
  CapturedOutput out;
  Registry r({.sink = out.sink()});
  r.seal();
  std::vector<std::thread> threads;
  for (int t = 0; t < 8; ++t) {
    threads.emplace_back([&r] {
      for (int i = 0; i < 250; ++i) {
        r.note_fallback({.backend = BackendId::kCuda, .op = OpKind::kMatmul, .dtype = DType::kQ8_0},
                        "matmul_q8_0__cpu");
      }
    });
  }
  for (std::thread& t : threads) t.join();
  EXPECT_EQ(out.count_containing("SILENT SLOW PATH"), 1u);
  ASSERT_EQ(r.surprises().size(), 1u);
  std::uint64_t counted = 0;
  for (const RegistryEntry& e : r.entries()) {
    if (e.dtype == DType::kQ8_0) counted += e.count;
  }
  EXPECT_EQ(counted, 2000u);
  EXPECT_EQ(r.surprises()[0].count, 2000u);
}

TEST(RegistryTest, ConcurrentBuildAndDispatchRecordsOfManyKeysAreAllCounted) {
  Registry r({.sink = [](std::string_view) {}});
  constexpr int kThreads = 4;
  constexpr int kRounds = 200;
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&r, t] {
      for (int i = 0; i < kRounds; ++i) {
        const DType dtype = (i % 2) ? DType::kQ4_0 : DType::kQ8_0;
        const std::string role = "blk." + std::to_string(i % 7);
        r.record_build(
            {.backend = BackendId::kCuda, .op = OpKind::kMatmul, .dtype = dtype, .role = role},
            Outcome::slow_path("cpu"));
        r.note_fallback({.backend = BackendId::kCuda, .op = OpKind::kMatmul, .dtype = dtype},
                        "cpu");
        if (t == 0 && i == kRounds / 2) r.seal();
      }
    });
  }
  for (std::thread& t : threads) t.join();
  std::uint64_t total = 0;
  for (const RegistryEntry& e : r.entries()) total += e.count;
  EXPECT_EQ(total, 2u * kThreads * kRounds);
}

TEST(RegistryTest, DisabledRegistryRecordsNothing) {
  CapturedOutput out;
  Registry r(
      {.enabled = false, .verbose = true, .strict = StrictPolicy::all(), .sink = out.sink()});
  EXPECT_FALSE(r.enabled());
  r.record_build(ffn_down(BackendId::kCuda, DType::kQ4_K), Outcome::slow_path("cpu"));
  EXPECT_TRUE(r.seal_or_error().is_ok());
  r.note_fallback(ffn_down(BackendId::kCuda, DType::kQ2_K), "cpu");
  r.record_dispatch(ffn_down(BackendId::kCuda, DType::kQ2_K), Outcome::make_hit());
  EXPECT_TRUE(r.entries().empty());
  EXPECT_TRUE(r.surprises().empty());
  EXPECT_TRUE(out.messages.empty()) << out.all();

  // A probe still answers exactly what the table says.
  KernelBindingTable table;
  table.register_kernel(OpKind::kAdd, {DType::kF32, DType::kF32, DType::kF32}, BackendId::kCpu,
                        &fake_kernel, {.name = "add_f32__cpu_test"});
  ASSERT_TRUE(table.finalize().is_ok());
  EXPECT_TRUE(probe_kernel(r, table,
                           {.key = OpKind::kAdd, .dtypes = {DType::kF32, DType::kF32, DType::kF32}})
                  .is_ok());
  EXPECT_FALSE(
      probe_kernel(r, table,
                   {.key = OpKind::kSub, .dtypes = {DType::kF32, DType::kF32, DType::kF32}})
          .is_ok());
  EXPECT_TRUE(r.entries().empty());
}

TEST(RegistryTest, SealReportIsSortedByBackendOpDtypeRole) {
  Registry r({.sink = [](std::string_view) {}});
  r.record_build(
      {.backend = BackendId::kVulkan, .op = OpKind::kAdd, .dtype = DType::kF32, .role = "b"},
      Outcome::make_hit());
  r.record_build(
      {.backend = BackendId::kCuda, .op = OpKind::kMatmul, .dtype = DType::kQ4_K, .role = "a"},
      Outcome::slow_path("cpu"));
  r.record_build(
      {.backend = BackendId::kCuda, .op = OpKind::kAdd, .dtype = DType::kF32, .role = "z"},
      Outcome::make_hit());
  r.record_build(
      {.backend = BackendId::kCuda, .op = OpKind::kAdd, .dtype = DType::kF32, .role = "c"},
      Outcome::make_hit());
  r.record_build(
      {.backend = BackendId::kCpu, .op = OpKind::kMatmul, .dtype = DType::kF32, .role = "q"},
      Outcome::make_hit());
  const SealReport report = r.seal();
  std::vector<std::string> order;
  for (const RegistryEntry& e : report.entries) {
    order.push_back(fmt::format("{}/{}/{}", name(e.backend), e.op_name(), e.role));
  }
  EXPECT_EQ(order, (std::vector<std::string>{"cpu/matmul/q", "cuda/add/c", "cuda/add/z",
                                             "cuda/matmul/a", "vulkan/add/b"}));
}

TEST(RegistryTest, VerboseSealPrintsTheWholeTable) {
  CapturedOutput quiet;
  Registry silent({.sink = quiet.sink()});
  silent.record_build(ffn_down(BackendId::kCuda, DType::kQ4_K), Outcome::make_hit());
  silent.seal();
  EXPECT_TRUE(quiet.messages.empty()) << quiet.all();

  CapturedOutput loud;
  Registry verbose({.verbose = true, .sink = loud.sink()});
  verbose.record_build(ffn_down(BackendId::kCuda, DType::kQ4_K), Outcome::make_hit());
  verbose.seal();
  EXPECT_THAT(loud.all(), HasSubstr("hit   cuda matmul q4_k (ffn_down)"));
}

TEST(RegistryTest, TextReportNamesCallSiteRoleDtypeAndFallback) {
  Registry r({.sink = [](std::string_view) {}});
  r.record_build(ffn_down(BackendId::kCuda, DType::kQ5_K), Outcome::slow_path("cpu apply"));
  const std::string text = r.seal().render();
  EXPECT_THAT(text, HasSubstr("MISS  cuda matmul q5_k (ffn_down) -> cpu apply [slow_path]"));
  EXPECT_THAT(text, HasSubstr("tests/registry/registry_test.cpp:"));
  EXPECT_THAT(text, HasSubstr("x1"));
}

TEST(RegistryTest, JsonReportCarriesEveryFieldAndEscapesStrings) {
  Registry r({.sink = [](std::string_view) {}});
  r.record_build({.backend = BackendId::kCuda,
                  .op = OpKind::kMatmul,
                  .dtype = DType::kQ4_K,
                  .role = "odd \"role\"\n"},
                 Outcome::slow_path("cpu\\fallback"));
  r.record_build(ffn_down(BackendId::kCuda, DType::kF16), Outcome::make_hit());
  const std::string json = r.seal().to_json();
  EXPECT_THAT(json, HasSubstr(R"("backend":"cuda","op":"matmul","role":"odd \"role\"\n",)"
                              R"("dtype":"q4_k","outcome":"miss","fallback":"cpu\\fallback",)"
                              R"("severity":"slow_path","phase":"build","count":1,)"
                              R"("call_site":"tests/registry/registry_test.cpp:)"));
  EXPECT_THAT(json, HasSubstr(R"("role":"ffn_down","dtype":"f16","outcome":"hit",)"
                              R"("fallback":null,"severity":null)"));
  EXPECT_THAT(json, HasSubstr(R"("violations":[{"backend":"cuda")"));
  EXPECT_THAT(json, HasSubstr(R"("masked":[],"strict":"off"})"));
  EXPECT_EQ(json.front(), '{');
}

TEST(RegistryTest, StrictAllRefusesWithTheFullReport) {
  Registry r({.strict = StrictPolicy::all(), .sink = [](std::string_view) {}});
  r.record_build(ffn_down(BackendId::kCuda, DType::kQ4_K), Outcome::slow_path("matmul__cpu"));
  r.record_build(ffn_down(BackendId::kCuda, DType::kF16), Outcome::make_hit());
  Result<SealReport> sealed = r.seal_or_error();
  ASSERT_FALSE(sealed.is_ok());
  EXPECT_EQ(sealed.status().code(), StatusCode::kFailedPrecondition);
  EXPECT_THAT(std::string(sealed.status().message()),
              HasSubstr("NO KERNEL for cuda matmul q4_k (ffn_down) -> falls back to matmul__cpu"));
  const auto* failure = sealed.status().payload<StrictKernelFailure>();
  ASSERT_NE(failure, nullptr);
  EXPECT_EQ(failure->report.entries.size(), 2u);
  EXPECT_EQ(failure->report.violations.size(), 1u);
  // Sealing anyway happened: post-seal checking is on.
  EXPECT_TRUE(r.is_sealed());
}

TEST(RegistryTest, StrictOffOrNoViolationsSealsCleanly) {
  Registry lax({.sink = [](std::string_view) {}});
  lax.record_build(ffn_down(BackendId::kCuda, DType::kQ4_K), Outcome::slow_path("cpu"));
  EXPECT_TRUE(lax.seal_or_error().is_ok());

  Registry strict({.strict = StrictPolicy::all()});
  strict.record_build(ffn_down(BackendId::kCuda, DType::kQ4_K), Outcome::make_hit());
  strict.record_build(ffn_down(BackendId::kCpu, DType::kQ4_K), Outcome::slow_path("dequant"));
  strict.record_build(ffn_down(BackendId::kCuda, DType::kF32), Outcome::by_design("host"));
  EXPECT_TRUE(strict.seal_or_error().is_ok());
}

TEST(RegistryTest, StrictFamilyListFailsOnlyForThoseFamilies) {
  Registry r({.sink = [](std::string_view) {}});
  r.record_build(ffn_down(BackendId::kCuda, DType::kQ4_K), Outcome::slow_path("cpu"));
  r.record_build({.backend = BackendId::kCuda,
                  .op = OpKind::kRmsNorm,
                  .dtype = DType::kF32,
                  .role = "attn_norm"},
                 Outcome::slow_path("cpu"));

  r.set_strict_policy(StrictPolicy::only({OpFamily::kAttention, OpFamily::kSoftmax}));
  EXPECT_TRUE(r.seal_or_error().is_ok());

  r.set_strict_policy(parse_strict_policy("matmul,attention").value());
  Result<SealReport> matmul = r.seal_or_error();
  ASSERT_FALSE(matmul.is_ok());
  const auto* failure = matmul.status().payload<StrictKernelFailure>();
  ASSERT_NE(failure, nullptr);
  const std::vector<RegistryEntry> refused = failure->report.strict_violations();
  ASSERT_EQ(refused.size(), 1u);
  EXPECT_EQ(refused[0].op, BindingKey(OpKind::kMatmul));
  EXPECT_EQ(failure->report.violations.size(), 2u);
  EXPECT_THAT(std::string(matmul.status().message()), HasSubstr("family matmul"));
  EXPECT_THAT(std::string(matmul.status().message()), Not(HasSubstr("rms_norm")));

  r.set_strict_policy(parse_strict_policy("role:attn_norm").value());
  Result<SealReport> by_role = r.seal_or_error();
  ASSERT_FALSE(by_role.is_ok());
  ASSERT_EQ(by_role.status().payload<StrictKernelFailure>()->report.strict_violations().size(), 1u);
  EXPECT_THAT(std::string(by_role.status().message()), HasSubstr("rms_norm"));

  r.set_strict_policy(parse_strict_policy("rms_norm").value());
  EXPECT_FALSE(r.seal_or_error().is_ok());
}

TEST(RegistryTest, RuntimeFusedOpsBelongToTheFusedFamily) {
  Registry r({.sink = [](std::string_view) {}});
  r.record_build({.backend = BackendId::kCuda,
                  .op = FusedOpId{kFirstFusedOpId},
                  .dtype = DType::kF16,
                  .role = "mlp"},
                 Outcome::slow_path("unfused nodes"));
  const SealReport report = r.seal();
  ASSERT_EQ(report.violations.size(), 1u);
  EXPECT_EQ(report.violations[0].op_name(), fmt::format("fused#{}", kFirstFusedOpId));
  r.set_strict_policy(parse_strict_policy("fused").value());
  EXPECT_FALSE(r.seal_or_error().is_ok());
  r.set_strict_policy(parse_strict_policy("matmul").value());
  EXPECT_TRUE(r.seal_or_error().is_ok());
}

TEST(RegistryTest, ParseStrictPolicy) {
  for (const char* off : {"", "0", "false", "off", " OFF ", ",,"}) {
    EXPECT_EQ(parse_strict_policy(off).value().mode, StrictPolicy::Mode::kOff) << off;
  }
  for (const char* all : {"1", "true", "on", "True"}) {
    EXPECT_EQ(parse_strict_policy(all).value().mode, StrictPolicy::Mode::kAll) << all;
  }
  const StrictPolicy p =
      parse_strict_policy(" matmul , Attention,rms_norm,role:attn_q,matmul,").value();
  EXPECT_EQ(p.mode, StrictPolicy::Mode::kSelected);
  EXPECT_EQ(p.families, (std::vector<OpFamily>{OpFamily::kMatmul, OpFamily::kAttention}));
  EXPECT_EQ(p.ops, (std::vector<OpKind>{OpKind::kRmsNorm}));
  EXPECT_EQ(p.roles, (std::vector<std::string>{"attn_q"}));
  EXPECT_EQ(p.to_string(), "family matmul, family attention, op rms_norm, role attn_q");
}

// Note [A misspelt strict policy is strict]: a word that is neither a family, an op
// nor a role: item is refused, never read as "strict about nothing".
TEST(RegistryTest, ParseStrictPolicyRefusesWhatItCannotRead) {
  for (const char* typo : {"ture", "matmull", "matmul,atention", "attn_q", "role:", "yes"}) {
    Result<StrictPolicy> p = parse_strict_policy(typo);
    ASSERT_FALSE(p.is_ok()) << typo;
    EXPECT_EQ(p.status().code(), StatusCode::kInvalidArgument);
    EXPECT_THAT(p.status().message(), HasSubstr("matmul")) << "lists the families";
    EXPECT_THAT(p.status().message(), Not(HasSubstr("\n")));
  }
  Result<StrictPolicy> two = parse_strict_policy("matmull,atention,rms_norm");
  ASSERT_FALSE(two.is_ok());
  EXPECT_THAT(two.status().message(), HasSubstr("'matmull', 'atention' are not"));
  // Control bytes from the environment are escaped: the message stays one line.
  Result<StrictPolicy> hostile = parse_strict_policy("ma\ntmul\x1b[31m");
  ASSERT_FALSE(hostile.is_ok());
  EXPECT_EQ(hostile.status().message().find('\n'), std::string::npos);
  EXPECT_EQ(hostile.status().message().find('\x1b'), std::string::npos);
}

TEST(RegistryTest, RepresentativeDtypeIsTheQuantizedWeight) {
  EXPECT_EQ(representative_dtype({DType::kF32, DType::kQ4_K, DType::kF32}), DType::kQ4_K);
  EXPECT_EQ(representative_dtype({DType::kF16, DType::kF16, DType::kF16}), DType::kF16);
  EXPECT_EQ(representative_dtype({}), DType::kF32);
}

TEST(RegistryTest, ProbeAnswersWhatDispatchWouldAndRecordsIt) {
  KernelBindingTable table;
  const DTypeList q4{DType::kF32, DType::kQ4_K, DType::kF32};
  const DTypeList f32{DType::kF32, DType::kF32, DType::kF32};
  table.register_kernel(OpKind::kMatmul, q4, BackendId::kCuda, &fake_kernel,
                        {.name = "matmul_f32_q4_k_f32__cuda_test"});
  // A sibling that is only correct for broadcast operands is no answer for dense
  // dispatch: lookup_with_caps skips it, and so must the probe.
  table.register_kernel(OpKind::kAdd, f32, BackendId::kCuda, &other_fake_kernel,
                        {.name = "add_f32__cuda_bcast_test", .caps = {.requires_broadcast = true}});
  ASSERT_TRUE(table.finalize().is_ok());

  CapturedOutput out;
  Registry r({.sink = out.sink()});
  Result<const BindingEntry*> hit = probe_kernel(r, table,
                                                 {.key = OpKind::kMatmul,
                                                  .dtypes = q4,
                                                  .backend = BackendId::kCuda,
                                                  .role = "ffn_down",
                                                  .fallback = "matmul__cpu"});
  ASSERT_TRUE(hit.is_ok());
  EXPECT_EQ((*hit)->name, "matmul_f32_q4_k_f32__cuda_test");

  Result<const BindingEntry*> bcast = probe_kernel(r, table,
                                                   {.key = OpKind::kAdd,
                                                    .dtypes = f32,
                                                    .backend = BackendId::kCuda,
                                                    .role = "residual",
                                                    .fallback = "add__cpu"});
  EXPECT_FALSE(bcast.is_ok());
  EXPECT_EQ(bcast.is_ok(), table.backend_supports(OpKind::kAdd, f32, BackendId::kCuda));

  Result<const BindingEntry*> miss =
      probe_kernel(r, table,
                   {.key = OpKind::kMatmul,
                    .dtypes = {DType::kF32, DType::kF16, DType::kF32},
                    .backend = BackendId::kCuda,
                    .role = "attn_q",
                    .fallback = "matmul__cpu",
                    .dtype = DType::kF16});
  ASSERT_FALSE(miss.is_ok());
  EXPECT_EQ(miss.status().code(), StatusCode::kNotFound);
  EXPECT_NE(miss.status().payload<NoBackendForOp>(), nullptr);

  const SealReport report = r.seal();
  ASSERT_EQ(report.entries.size(), 3u);
  EXPECT_EQ(report.violations.size(), 2u);
  const RegistryEntry& first = report.entries[0];  // add < matmul
  EXPECT_EQ(first.role, "residual");
  EXPECT_FALSE(first.hit);
  std::vector<std::string> dtypes;
  for (const RegistryEntry& e : report.entries) dtypes.emplace_back(name(e.dtype));
  EXPECT_EQ(dtypes, (std::vector<std::string>{"f32", "f16", "q4_k"}));
  EXPECT_THAT(report.entries[0].site.file_name(), HasSubstr("registry_test.cpp"));
}

TEST(RegistryTest, ResetForgetsRowsAndSealing) {
  Registry r({.sink = [](std::string_view) {}});
  r.record_build(ffn_down(BackendId::kCuda, DType::kQ4_K), Outcome::slow_path("cpu"));
  r.seal();
  r.note_fallback(ffn_down(BackendId::kCuda, DType::kQ2_K), "cpu");
  r.reset();
  EXPECT_FALSE(r.is_sealed());
  EXPECT_TRUE(r.entries().empty());
  EXPECT_TRUE(r.surprises().empty());
}

TEST(RegistryTest, GlobalSealListsTheMaskedBindings) {
  if (!registry_enabled()) GTEST_SKIP() << "SWITCHYARD_KERNEL_REGISTRY disables the registry";
  global_registry().reset();
  const StrictPolicy before = global_registry().strict_policy();
  global_registry().set_strict_policy(StrictPolicy::off());
  ASSERT_TRUE(set_kernel_mask(*KernelMask::parse("cpu:matmul:f32")).is_ok());

  const DTypeList f32{DType::kF32, DType::kF32, DType::kF32};
  EXPECT_FALSE(
      probe_kernel(*current_table(),
                   {.key = OpKind::kMatmul, .dtypes = f32, .role = "attn_q", .fallback = "none"})
          .is_ok());
  record_build({.backend = BackendId::kCpu, .op = OpKind::kAdd, .role = "residual"},
               Outcome::make_hit());
  const SealReport report = seal();
  EXPECT_FALSE(report.masked.empty());
  EXPECT_EQ(report.entries.size(), 2u);
  EXPECT_THAT(report.render(), HasSubstr("kernel mask hid"));
  EXPECT_TRUE(seal_or_error().is_ok());

  ASSERT_TRUE(clear_kernel_mask().is_ok());
  EXPECT_TRUE(seal().masked.empty());
  global_registry().set_strict_policy(before);
  global_registry().reset();
}

}  // namespace
}  // namespace switchyard

namespace switchyard {
namespace {

TEST(RegistryConfigTest, VariablesSwitchRecordingVerbosityAndStrictness) {
  const RegistryConfig unset = RegistryConfig::from_variables(nullptr, nullptr).value();
  EXPECT_TRUE(unset.enabled);
  EXPECT_FALSE(unset.verbose);
  EXPECT_FALSE(unset.strict.enabled());
  for (const char* off : {"0", "false", "OFF"}) {
    EXPECT_FALSE(RegistryConfig::from_variables(off, nullptr).value().enabled) << off;
  }
  for (const char* verbose : {"1", "true", "on", "verbose"}) {
    const RegistryConfig c = RegistryConfig::from_variables(verbose, nullptr).value();
    EXPECT_TRUE(c.enabled && c.verbose) << verbose;
  }
  const RegistryConfig strict = RegistryConfig::from_variables("", "matmul,attention").value();
  EXPECT_TRUE(strict.enabled);
  EXPECT_FALSE(strict.verbose);
  EXPECT_EQ(strict.strict.families,
            (std::vector<OpFamily>{OpFamily::kMatmul, OpFamily::kAttention}));
  EXPECT_EQ(RegistryConfig::from_variables(nullptr, "on").value().strict.mode,
            StrictPolicy::Mode::kAll);
  EXPECT_FALSE(RegistryConfig::from_variables("maybe", nullptr).is_ok());
  EXPECT_FALSE(RegistryConfig::from_variables(nullptr, "strict").is_ok());
}

// These run in a fresh process (the threadsafe death-test style re-executes the
// binary), so the environment they set is the one the process reads, once.
TEST(RegistryEnvironmentDeathTest, KernelRegistryZeroDisablesTheGlobalEntryPoints) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_EXIT(
      {
        setenv("SWITCHYARD_KERNEL_REGISTRY", "0", 1);
        note_fallback({.backend = BackendId::kCuda, .op = OpKind::kMatmul, .dtype = DType::kQ4_K},
                      "cpu");
        record_build({.backend = BackendId::kCuda, .op = OpKind::kMatmul, .dtype = DType::kQ4_K},
                     Outcome::slow_path("cpu"));
        const bool quiet =
            !registry_enabled() && global_registry().entries().empty() && seal().entries.empty();
        std::exit(quiet ? 0 : 1);
      },
      ::testing::ExitedWithCode(0), "");
}

TEST(RegistryEnvironmentDeathTest, StrictFamilyListAndMaskComeFromTheEnvironment) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_EXIT(
      {
        setenv("SWITCHYARD_KERNEL_REGISTRY", "1", 1);
        setenv("SWITCHYARD_STRICT_KERNELS", "matmul", 1);
        setenv("SWITCHYARD_MASK_KERNELS", "cpu:matmul:f32", 1);
        if (!install_builtin_table().is_ok()) std::exit(2);
        record_build({.backend = BackendId::kCuda, .op = OpKind::kRmsNorm, .dtype = DType::kF32},
                     Outcome::slow_path("cpu"));
        const bool lax_for_norm = seal_or_error().is_ok();
        record_build({.backend = BackendId::kCuda, .op = OpKind::kMatmul, .dtype = DType::kQ4_K},
                     Outcome::slow_path("cpu"));
        const Result<SealReport> refused = seal_or_error();
        const bool ok =
            lax_for_norm && !refused.is_ok() &&
            refused.status().code() == StatusCode::kFailedPrecondition &&
            current_kernel_mask().to_string() == "cpu:matmul:f32" &&
            !current_table()->backend_supports(
                OpKind::kMatmul, {DType::kF32, DType::kF32, DType::kF32}, BackendId::kCpu) &&
            refused.status().payload<StrictKernelFailure>() != nullptr &&
            !refused.status().payload<StrictKernelFailure>()->report.masked.empty();
        std::exit(ok ? 0 : 1);
      },
      ::testing::ExitedWithCode(0), "NO KERNEL for cuda matmul q4_k");
}

}  // namespace
}  // namespace switchyard
