#include "switchyard/kernel_mask.h"

#include <string>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "switchyard/dispatch.h"
#include "switchyard/registry.h"

namespace switchyard {
namespace {

using ::testing::HasSubstr;

const DTypeList kF32x3{DType::kF32, DType::kF32, DType::kF32};
const DTypeList kQ4Weights{DType::kF32, DType::kQ4_K, DType::kF32};

Status fake_kernel(const KernelCall&) { return Status::ok(); }
Status other_fake_kernel(const KernelCall&) { return Status::ok(); }

std::string error_of(std::string_view spec) {
  Result<KernelMask> mask = KernelMask::parse(spec);
  EXPECT_FALSE(mask.is_ok()) << spec;
  if (mask.is_ok()) return {};
  EXPECT_EQ(mask.status().code(), StatusCode::kInvalidArgument);
  return std::string(mask.status().message());
}

// Restores the process-wide table and mask when a test that edits them ends, so
// that no other test sees its edits.
class PublishedTableGuard {
 public:
  PublishedTableGuard() {
    base_ = *current_table();
    was_empty_ = current_kernel_mask().empty();
  }
  ~PublishedTableGuard() {
    EXPECT_TRUE(clear_kernel_mask().is_ok());
    EXPECT_TRUE(publish_table(base_).is_ok());
  }
  [[nodiscard]] bool started_unmasked() const { return was_empty_; }

 private:
  KernelBindingTable base_;
  bool was_empty_ = true;
};

TEST(KernelMaskTest, ParsesFieldsWildcardsAndLists) {
  Result<KernelMask> mask = KernelMask::parse(" CPU:MatMul:F32 , *:*:q4_k,cuda:*:*,cpu:matmul:f32");
  ASSERT_TRUE(mask.is_ok()) << mask.status().to_string();
  ASSERT_EQ(mask->patterns().size(), 3u);  // the duplicate is dropped
  const KernelMaskPattern& first = mask->patterns()[0];
  EXPECT_EQ(first.backend, BackendId::kCpu);
  EXPECT_EQ(first.op, OpKind::kMatmul);
  EXPECT_EQ(first.dtype, DType::kF32);
  EXPECT_FALSE(mask->patterns()[1].backend.has_value());
  EXPECT_FALSE(mask->patterns()[1].op.has_value());
  EXPECT_EQ(mask->to_string(), "cpu:matmul:f32,*:*:q4_k,cuda:*:*");
  Result<KernelMask> again = KernelMask::parse(mask->to_string());
  ASSERT_TRUE(again.is_ok());
  EXPECT_EQ(*again, *mask);
  EXPECT_TRUE(KernelMask::parse("").value().empty());
  EXPECT_TRUE(KernelMask::parse("   ").value().empty());
}

TEST(KernelMaskTest, MalformedPatternsAreRefusedWithTheValidNames) {
  EXPECT_THAT(error_of("cpu:matmul"), HasSubstr("expected backend:op:dtype"));
  EXPECT_THAT(error_of("cpu:matmul:f32:x"), HasSubstr("got 4 field(s)"));
  EXPECT_THAT(error_of("gpu:matmul:f32"), HasSubstr("unknown backend 'gpu'; valid: cpu, cuda"));
  EXPECT_THAT(error_of("cpu:matmull:f32"), HasSubstr("unknown op 'matmull'"));
  EXPECT_THAT(error_of("cpu:matmul:q4k"), HasSubstr("valid: f64, f32"));
  EXPECT_THAT(error_of("cpu::f32"), HasSubstr("the op field is empty"));
  EXPECT_THAT(error_of("cpu:add:f32,,cpu:sub:f32"), HasSubstr("empty pattern"));
  // The offending pattern is named, even inside a list of good ones.
  EXPECT_THAT(error_of("cpu:add:f32, cuda:matmul:q9"), HasSubstr("'cuda:matmul:q9'"));
}

TEST(KernelMaskTest, DtypeFieldMatchesAnyOperand) {
  const KernelMask mask = *KernelMask::parse("cuda:matmul:q4_k");
  EXPECT_TRUE(mask.matches(OpKind::kMatmul, kQ4Weights, BackendId::kCuda));
  EXPECT_FALSE(mask.matches(OpKind::kMatmul, kQ4Weights, BackendId::kCpu));
  EXPECT_FALSE(mask.matches(OpKind::kMatmul, kF32x3, BackendId::kCuda));
  EXPECT_FALSE(mask.matches(OpKind::kLinear, kQ4Weights, BackendId::kCuda));

  const KernelMask f32_anywhere = *KernelMask::parse("*:*:f32");
  EXPECT_TRUE(f32_anywhere.matches(OpKind::kMatmul, kQ4Weights, BackendId::kCuda));
  EXPECT_FALSE(
      f32_anywhere.matches(OpKind::kAdd, {DType::kF16, DType::kF16, DType::kF16}, BackendId::kCpu));
}

TEST(KernelMaskTest, RuntimeFusedKeysMatchOnlyTheOpWildcard) {
  const BindingKey fused = FusedOpId{kFirstFusedOpId};
  EXPECT_TRUE(KernelMask::parse("cpu:*:f32")->matches(fused, kF32x3, BackendId::kCpu));
  EXPECT_FALSE(KernelMask::parse("cpu:add:f32")->matches(fused, kF32x3, BackendId::kCpu));
}

TEST(KernelMaskTest, ApplyRemovesMatchingSiblingsAndReportsThem) {
  KernelBindingTable table;
  table.register_kernel(OpKind::kAdd, kF32x3, BackendId::kCpu, &fake_kernel,
                        {.name = "add_f32__cpu_fast"});
  table.register_kernel(OpKind::kAdd, kF32x3, BackendId::kCpu, &other_fake_kernel,
                        {.name = "add_f32__cpu_ref"});
  table.register_kernel(OpKind::kMatmul, kQ4Weights, BackendId::kCuda, &fake_kernel,
                        {.name = "matmul_q4_k__cuda"});
  ASSERT_TRUE(table.finalize().is_ok());

  const std::vector<CoverageBinding> removed =
      apply_kernel_mask(*KernelMask::parse("cpu:add:*"), table);
  ASSERT_EQ(removed.size(), 2u);
  EXPECT_EQ(removed[0].kernel_name, "add_f32__cpu_fast");
  EXPECT_EQ(removed[1].kernel_name, "add_f32__cpu_ref");
  EXPECT_FALSE(table.backend_supports(OpKind::kAdd, kF32x3, BackendId::kCpu));
  EXPECT_TRUE(table.backend_supports(OpKind::kMatmul, kQ4Weights, BackendId::kCuda));
  EXPECT_EQ(table.key_count(), 1u);
  EXPECT_TRUE(table.finalize().is_ok());
  EXPECT_TRUE(apply_kernel_mask(KernelMask(), table).empty());
}

TEST(KernelMaskTest, MaskingTurnsAProbeIntoAMissThatStrictRefusesAndUnmaskingRestoresIt) {
  PublishedTableGuard guard;
  if (!guard.started_unmasked()) GTEST_SKIP() << "SWITCHYARD_MASK_KERNELS is set";
  ASSERT_TRUE(current_table()->backend_supports(OpKind::kMatmul, kF32x3, BackendId::kCpu));
  const std::uint64_t before = current_generation();

  ASSERT_TRUE(set_kernel_mask(*KernelMask::parse("cpu:matmul:f32")).is_ok());
  EXPECT_GT(current_generation(), before);
  EXPECT_EQ(current_kernel_mask().to_string(), "cpu:matmul:f32");
  const std::vector<CoverageBinding> masked = masked_bindings();
  ASSERT_FALSE(masked.empty());
  for (const CoverageBinding& b : masked) {
    EXPECT_EQ(b.backend, BackendId::kCpu);
    EXPECT_EQ(b.key, BindingKey(OpKind::kMatmul));
  }

  const ProbeRequest request{.key = OpKind::kMatmul,
                             .dtypes = kF32x3,
                             .backend = BackendId::kCpu,
                             .role = "attn_q",
                             .fallback = "none (masked)"};
  {
    Registry r({.strict = StrictPolicy::all(),
                .selected_backends = std::vector<BackendId>{BackendId::kCpu},
                .sink = [](std::string_view) {}});
    Result<const BindingEntry*> probe = probe_kernel(r, *current_table(), request);
    EXPECT_FALSE(probe.is_ok());
    Result<SealReport> sealed = r.seal_or_error(masked_bindings());
    ASSERT_FALSE(sealed.is_ok());
    EXPECT_EQ(sealed.status().code(), StatusCode::kFailedPrecondition);
    const std::string message(sealed.status().message());
    EXPECT_THAT(message, HasSubstr("NO KERNEL for cpu matmul f32 (attn_q)"));
    EXPECT_THAT(message, HasSubstr("kernel mask hid"));
    EXPECT_THAT(message, HasSubstr(masked.front().kernel_name));
    const auto* failure = sealed.status().payload<StrictKernelFailure>();
    ASSERT_NE(failure, nullptr);
    EXPECT_EQ(failure->report.masked.size(), masked.size());
  }

  ASSERT_TRUE(clear_kernel_mask().is_ok());
  EXPECT_TRUE(masked_bindings().empty());
  EXPECT_TRUE(current_kernel_mask().empty());
  {
    Registry r({.strict = StrictPolicy::all(),
                .selected_backends = std::vector<BackendId>{BackendId::kCpu}});
    EXPECT_TRUE(probe_kernel(r, *current_table(), request).is_ok());
    EXPECT_TRUE(r.seal_or_error(masked_bindings()).is_ok());
  }
}

TEST(KernelMaskTest, UpdatesLandInTheBaseAndStayMasked) {
  PublishedTableGuard guard;
  if (!guard.started_unmasked()) GTEST_SKIP() << "SWITCHYARD_MASK_KERNELS is set";
  // q8_k (an activation format) weights: a key no built-in cuda kernel binds, so
  // the mask hides the new binding alone in a build with the CUDA backend too.
  const DTypeList q8k_weights{DType::kF32, DType::kQ8_K, DType::kF32};
  ASSERT_TRUE(set_kernel_mask(*KernelMask::parse("cuda:matmul:q8_k")).is_ok());
  Result<std::uint64_t> updated = update_table([&](KernelBindingTable& t) {
    t.register_kernel(OpKind::kMatmul, q8k_weights, BackendId::kCuda, &fake_kernel,
                      {.name = "matmul_q8_k__cuda_mask_test"});
    return Status::ok();
  });
  ASSERT_TRUE(updated.is_ok()) << updated.status().to_string();
  // The new binding went into the base and was masked before publication.
  EXPECT_FALSE(current_table()->backend_supports(OpKind::kMatmul, q8k_weights, BackendId::kCuda));
  const std::vector<CoverageBinding> masked = masked_bindings();
  ASSERT_EQ(masked.size(), 1u);
  EXPECT_EQ(masked[0].kernel_name, "matmul_q8_k__cuda_mask_test");

  ASSERT_TRUE(clear_kernel_mask().is_ok());
  EXPECT_TRUE(current_table()->backend_supports(OpKind::kMatmul, q8k_weights, BackendId::kCuda));
}

TEST(KernelMaskTest, AFailedUpdateKeepsTheMaskAndTheTable) {
  PublishedTableGuard guard;
  if (!guard.started_unmasked()) GTEST_SKIP() << "SWITCHYARD_MASK_KERNELS is set";
  ASSERT_TRUE(set_kernel_mask(*KernelMask::parse("cpu:matmul:f32")).is_ok());
  const std::uint64_t generation = current_generation();
  Result<std::uint64_t> failed = update_table([](KernelBindingTable& t) {
    // A null kernel fails finalize(): nothing may be published.
    t.register_kernel(OpKind::kAdd, kQ4Weights, BackendId::kCuda, nullptr,
                      {.name = "broken__cuda"});
    return Status::ok();
  });
  EXPECT_FALSE(failed.is_ok());
  EXPECT_EQ(current_generation(), generation);
  EXPECT_FALSE(current_table()->backend_supports(OpKind::kMatmul, kF32x3, BackendId::kCpu));
  ASSERT_TRUE(clear_kernel_mask().is_ok());
  EXPECT_TRUE(current_table()->backend_supports(OpKind::kMatmul, kF32x3, BackendId::kCpu));
  EXPECT_FALSE(current_table()->backend_supports(OpKind::kAdd, kQ4Weights, BackendId::kCuda));
}

}  // namespace
}  // namespace switchyard
