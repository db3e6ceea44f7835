// The null backend is the skeleton a new backend copies: it must register its
// section and nothing else, and a table holding it must behave as the dispatch
// rules say a backend without kernels does.
#include "backends/null/registration.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "switchyard/backends.h"
#include "switchyard/example_graphs.h"
#include "switchyard/executor.h"
#include "switchyard/plan.h"

namespace switchyard {
namespace {

const DTypeList kF32x3{DType::kF32, DType::kF32, DType::kF32};

KernelBindingTable builtin_plus_null() {
  KernelBindingTable table = make_builtin_table().value();
  null::register_backend(table);
  EXPECT_TRUE(table.finalize().is_ok());
  return table;
}

TEST(NullBackend, RegistersItsSectionAndNoKernels) {
  KernelBindingTable table;
  null::register_backend(table);
  ASSERT_TRUE(table.finalize().is_ok());
  EXPECT_EQ(table.size(), 0u);
  ASSERT_NE(table.backend_memory(BackendId::kNull), nullptr);
  EXPECT_THAT(table.backends(), ::testing::ElementsAre(BackendId::kNull));
  Result<void*> block = table.backend_memory(BackendId::kNull)->allocate(256);
  ASSERT_TRUE(block.is_ok());
  table.backend_memory(BackendId::kNull)->deallocate(*block);
}

TEST(NullBackend, ALookupMissesAndNamesWhoServesTheOp) {
  const KernelBindingTable table = builtin_plus_null();
  EXPECT_FALSE(table.backend_supports(OpKind::kMatmul, kF32x3, BackendId::kNull));
  Result<const BindingEntry*> hit = table.lookup(OpKind::kMatmul, kF32x3, BackendId::kNull);
  ASSERT_FALSE(hit.is_ok());
  EXPECT_EQ(hit.status().code(), StatusCode::kNotFound);
  const auto* miss = hit.status().payload<NoBackendForOp>();
  ASSERT_NE(miss, nullptr);
  EXPECT_THAT(miss->backends_for_op, ::testing::Contains(BackendId::kCpu));
  EXPECT_THAT(hit.status().message(), ::testing::HasSubstr("null"));
}

TEST(NullBackend, AGraphSentThereRunsOnTheHostThroughItsFallback) {
  auto table = std::make_shared<const KernelBindingTable>(builtin_plus_null());
  Result<Graph> graph = mlp_graph(8, 16);
  ASSERT_TRUE(graph.is_ok());
  PlanOptions options;
  options.policy.preferred = {BackendId::kNull};
  options.policy.fallbacks = {BackendId::kCpu};
  options.buckets = {{"all", {{"tokens", 1, 16}}}};
  Result<ExecutionPlan> plan = plan_graph(*graph, table, options);
  ASSERT_TRUE(plan.is_ok()) << plan.status().to_string();
  for (const BackendTotal& t : plan->report().buckets[0].per_backend) {
    EXPECT_NE(t.backend, BackendId::kNull) << "the null backend has no kernels to run";
  }
  auto shared = std::make_shared<const ExecutionPlan>(*std::move(plan));
  EXPECT_TRUE(Executor::create(shared).is_ok());
}

TEST(NullBackend, IsWiredInOnlyWhenConfigured) {
#if SWITCHYARD_NULL_BACKEND_IN_LIST
  EXPECT_TRUE(is_compiled(BackendId::kNull));
#else
  EXPECT_FALSE(is_compiled(BackendId::kNull));
  Result<BackendId> parsed = parse_compiled_backend("null");
  ASSERT_FALSE(parsed.is_ok());
  EXPECT_THAT(parsed.status().message(), ::testing::HasSubstr("not compiled"));
  EXPECT_THAT(parsed.status().message(), ::testing::HasSubstr("cpu"));
#endif
  Result<BackendId> unknown = parse_compiled_backend("tpu");
  ASSERT_FALSE(unknown.is_ok());
  EXPECT_THAT(unknown.status().message(), ::testing::HasSubstr("unknown backend 'tpu'"));
}

}  // namespace
}  // namespace switchyard
