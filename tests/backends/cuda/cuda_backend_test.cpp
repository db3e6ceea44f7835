// The CUDA backend: its bindings (present in every build with CUDA, device or
// not), its behaviour without a device (errors, never aborts), and on a GPU its
// memory, every kernel against the float64 references, whole graphs against the
// CPU, a device-side index error and NaN propagation. The tests that need a GPU
// skip, saying so, where there is none (CI); they are labelled `cuda` in ctest.
#include <algorithm>
#include <array>
#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "backends/cuda/cuda_test_util.h"
#include "switchyard/backends.h"
#include "switchyard/bucket_plan.h"
#include "switchyard/calibrate.h"
#include "switchyard/collective.h"
#include "switchyard/dispatch.h"
#include "switchyard/example_graphs.h"
#include "switchyard/executor.h"
#include "switchyard/half.h"
#include "switchyard/kernel_mask.h"
#include "switchyard/plan.h"
#include "switchyard/registry.h"
#include "switchyard/regret.h"
#include "switchyard/verify.h"

namespace switchyard {
namespace {

using ::testing::HasSubstr;

const DTypeList kF32x3{DType::kF32, DType::kF32, DType::kF32};

using cuda_test::cuda_memory;
using cuda_test::DeviceBuffer;
using cuda_test::random_floats;
using cuda_test::run_entry;
using cuda_test::run_kernel;
using cuda_test::Stream;

// --- without a device (CI) as with one -----------------------------------------

// The example MLP planned for the GPU, one bucket of 1 to 4 tokens (planning
// needs no device).
Result<ExecutionPlan> mlp_plan_on_cuda() {
  SWITCHYARD_ASSIGN_OR_RETURN(Graph graph, mlp_graph(8, 16));
  PlanOptions options;
  options.policy.preferred = {BackendId::kCuda};
  options.buckets = {{"all", {{"tokens", 1, 4}}}};
  options.record_in_registry = false;
  return plan_graph(graph, current_table(), options);
}

TEST(CudaBackendTest, TheBindingsAreInTheTableWithOrWithoutADevice) {
  const TableSnapshot table = current_table();
  EXPECT_TRUE(is_compiled(BackendId::kCuda));
  ASSERT_NE(table->backend_memory(BackendId::kCuda), nullptr);
  EXPECT_FALSE(table->backend_memory(BackendId::kCuda)->host_addressable());
  for (DType t : {DType::kF32, DType::kF16, DType::kBF16}) {
    const DTypeList same{t, t, t};
    EXPECT_TRUE(table->backend_supports(OpKind::kMatmul, same, BackendId::kCuda)) << name(t);
    EXPECT_TRUE(table->backend_supports(OpKind::kAdd, same, BackendId::kCuda)) << name(t);
    EXPECT_TRUE(table->backend_supports(OpKind::kRope, {t, DType::kI32, t}, BackendId::kCuda));
    EXPECT_TRUE(table->backend_supports(OpKind::kAttention, {t, t, t, t, t}, BackendId::kCuda));
  }
  // cuBLASLt first, its TF32 sibling next, the tiled kernel last.
  const auto alts = table->lookup_alternatives(OpKind::kMatmul, kF32x3, BackendId::kCuda);
  ASSERT_EQ(alts.size(), 3u);
  EXPECT_EQ(alts[0].name, "matmul_f32__cuda_cublaslt");
  EXPECT_EQ(alts[1].name, "matmul_f32__cuda_cublaslt_tf32");
  EXPECT_EQ(alts[2].name, "matmul_f32__cuda_simt");
  ASSERT_TRUE(alts[1].precision.max_rel.has_value());
  EXPECT_GT(*alts[1].precision.max_rel, *alts[0].precision.max_rel);
  // Every op the CPU binds in f32 is bound here too, at the same key, the fused
  // linear and ffn_swiglu included.
  for (const KernelBindingTable::Slot& slot : table->slots()) {
    if (slot.backend != BackendId::kCpu || !slot.key.is_static()) continue;
    bool f32_only = true;
    for (std::size_t i = 0; i < slot.dtypes.size(); ++i) {
      f32_only = f32_only && (slot.dtypes[i] == DType::kF32 || slot.dtypes[i] == DType::kI32);
    }
    if (!f32_only) continue;
    EXPECT_TRUE(table->backend_supports(slot.key, slot.dtypes, BackendId::kCuda))
        << describe_key(slot.key, slot.dtypes, BackendId::kCuda);
  }
}

TEST(CudaBackendTest, WithoutADeviceEveryCallIsUnavailableAndNothingAborts) {
  BackendMemory& memory = cuda_memory();
  if (memory.ready().is_ok()) GTEST_SKIP() << "a CUDA device is present";
  EXPECT_EQ(memory.ready().code(), StatusCode::kUnavailable);
  EXPECT_THAT(memory.ready().message(), HasSubstr("cuda"));
  EXPECT_EQ(memory.allocate(1024).status().code(), StatusCode::kUnavailable);
  EXPECT_EQ(memory.create_stream().status().code(), StatusCode::kUnavailable);
  // The default backend stays the CPU; an executor of a plan on cuda fails to
  // start with the reason.
  EXPECT_EQ(default_backend(*current_table()), BackendId::kCpu);
  Result<ExecutionPlan> plan = mlp_plan_on_cuda();
  ASSERT_TRUE(plan.is_ok()) << plan.status().to_string();
  Result<Executor> exec = Executor::create(std::make_shared<const ExecutionPlan>(std::move(*plan)));
  ASSERT_FALSE(exec.is_ok());
  EXPECT_EQ(exec.status().code(), StatusCode::kUnavailable);
}

TEST(CudaBackendTest, AKernelCalledWithoutItsStreamIsRefusedByName) {
  const TableSnapshot table = current_table();
  Result<const BindingEntry*> add = table->lookup(OpKind::kAdd, kF32x3, BackendId::kCuda);
  ASSERT_TRUE(add.is_ok());
  float a[4] = {}, out[4] = {};
  const TensorView va = TensorView::contiguous(a, DType::kF32, Shape{4}, BackendId::kCuda);
  const TensorView vo = TensorView::contiguous(out, DType::kF32, Shape{4}, BackendId::kCuda);
  const TensorView inputs[] = {va, va};
  ExecContext ctx;
  const OpParams params;
  const Status st = (*add)->fn({.inputs = inputs,
                                .outputs = std::span<const TensorView>(&vo, 1),
                                .params = params,
                                .ctx = ctx,
                                .name = (*add)->name});
  EXPECT_EQ(st.code(), StatusCode::kFailedPrecondition);
  EXPECT_THAT(st.message(), HasSubstr("add_f32__cuda_simt"));
}

// SWITCHYARD_MASK_KERNELS=cuda:matmul:* hides every CUDA matmul: a lookup misses,
// and a graph sent to cuda falls back to the CPU for its matmuls, which the
// registry reports as violations (strict mode would refuse). Planning needs no
// device.
TEST(CudaBackendTest, AMaskedMatmulIsAMissAndAViolation) {
  Result<KernelMask> mask = KernelMask::parse("cuda:matmul:*");
  ASSERT_TRUE(mask.is_ok());
  ASSERT_TRUE(set_kernel_mask(*mask).is_ok());
  const TableSnapshot table = current_table();
  EXPECT_FALSE(table->backend_supports(OpKind::kMatmul, kF32x3, BackendId::kCuda));
  EXPECT_TRUE(table->backend_supports(OpKind::kAdd, kF32x3, BackendId::kCuda));
  Result<const BindingEntry*> miss = table->lookup(OpKind::kMatmul, kF32x3, BackendId::kCuda);
  ASSERT_FALSE(miss.is_ok());
  EXPECT_EQ(miss.status().code(), StatusCode::kNotFound);

  Result<Graph> graph = mlp_graph(8, 16);
  ASSERT_TRUE(graph.is_ok());
  Registry registry({.sink = [](std::string_view) {}});
  PlanOptions options;
  options.policy.preferred = {BackendId::kCuda};
  options.policy.fallbacks = {BackendId::kCpu};
  options.buckets = {{"all", {{"tokens", 1, 4}}}};
  options.registry = &registry;
  Result<ExecutionPlan> plan = plan_graph(*graph, table, options);
  ASSERT_TRUE(plan.is_ok()) << plan.status().to_string();
  const SealReport report = registry.seal();
  EXPECT_FALSE(report.violations.empty());
  for (const auto& v : report.violations) EXPECT_EQ(v.backend, BackendId::kCuda);

  Registry strict({.strict = StrictPolicy::all(), .sink = [](std::string_view) {}});
  options.registry = &strict;
  EXPECT_EQ(plan_graph(*graph, table, options).status().code(), StatusCode::kFailedPrecondition);
  ASSERT_TRUE(clear_kernel_mask().is_ok());
  EXPECT_TRUE(current_table()->backend_supports(OpKind::kMatmul, kF32x3, BackendId::kCuda));
}

// Calibration and the routing regret time the GPU's kernels on their streams:
// a profile with the device's fingerprint, and the GPU plan of an MLP judged
// node by node.
TEST(CudaBackendTest, CalibrationAndRegretTimeTheGpusKernels) {
  REQUIRE_CUDA_DEVICE();
  CalibrateOptions calibrate_options;
  calibrate_options.backend = BackendId::kCuda;
  calibrate_options.op = OpKind::kAdd;
  calibrate_options.budget_s = 0.5;
  Result<CalibrateReport> report = calibrate(*current_table(), calibrate_options);
  ASSERT_TRUE(report.is_ok()) << report.status().to_string();
  EXPECT_GT(report->calibrated, 0u);
  ASSERT_EQ(report->profile.fingerprints().size(), 1u);
  EXPECT_EQ(report->profile.fingerprints()[0].backend, BackendId::kCuda);
  EXPECT_FALSE(report->profile.fingerprints()[0].text.empty());

  Result<ExecutionPlan> plan = mlp_plan_on_cuda();
  ASSERT_TRUE(plan.is_ok()) << plan.status().to_string();
  RegretTimings timings;
  Result<RegretReport> regret = measure_regret(*plan, {.budget_s = 0.005}, timings);
  ASSERT_TRUE(regret.is_ok()) << regret.status().to_string();
  ASSERT_FALSE(regret->nodes.empty());
  for (const RegretNode& n : regret->nodes) {
    EXPECT_EQ(n.backend, BackendId::kCuda) << n.node;
    for (const RegretCandidate& c : n.candidates) EXPECT_GT(c.measured_ns, 0.0) << c.kernel;
  }
}

// x [tokens, k] f32 times a bf16 weight [n, k]: the key of every projection of a
// model with bf16 weights. `w` holds the weight's bits and must outlive the graph.
Result<Graph> bf16_projection_graph(std::int64_t n, std::int64_t k,
                                    const std::vector<std::uint16_t>& w) {
  GraphBuilder b;
  const std::int64_t t = b.symbol("tokens");
  const ValueId x = b.input("x", DType::kF32, {t, k});
  const ValueId weight = b.constant_borrowed("w", DType::kBF16, {n, k}, w.data());
  b.output(b.op(OpKind::kMatmul, {x, weight}, "proj"));
  return std::move(b).build();
}

Result<ExecutionPlan> plan_on_cuda(const Graph& graph, bool admit_precision_trades = false) {
  PlanOptions options;
  options.policy.preferred = {BackendId::kCuda};
  options.admit_precision_trades = admit_precision_trades;
  options.buckets = {{"decode", {{"tokens", 1, 1}}}, {"prompt", {{"tokens", 2, 64}}}};
  options.record_in_registry = false;
  return plan_graph(graph, current_table(), options);
}

// Planning needs no device: a prompt bucket takes the split tensor-core product
// (Note [Exact f32 products on bf16 tensor cores]) and decoding the tiled
// kernel's matrix-vector path, through the split sibling's shape admission.
TEST(CudaBackendTest, PromptsTakeTheSplitProductAndDecodingTheTiledKernel) {
  const std::vector<std::uint16_t> w(32 * 64, f32_to_bf16(0.5f));
  Result<Graph> graph = bf16_projection_graph(32, 64, w);
  ASSERT_TRUE(graph.is_ok()) << graph.status().to_string();
  Result<ExecutionPlan> plan = plan_on_cuda(*graph);
  ASSERT_TRUE(plan.is_ok()) << plan.status().to_string();
  ASSERT_EQ(plan->bucket_count(), 2u);
  std::vector<std::string> kernels;
  for (std::size_t i = 0; i < plan->bucket_count(); ++i) {
    for (const PlannedStep& step : plan->bucket(i).steps) {
      if (step.kind == StepKind::kKernel) kernels.push_back(step.entry->name);
    }
  }
  EXPECT_THAT(kernels, ::testing::ElementsAre("matmul_f32_bf16_f32__cuda_simt",
                                              "matmul_f32_bf16_f32__cuda_cublaslt_split"));
}

// Note [One bf16 pass is a precision trade]: the prompt bucket's f32 x bf16
// product rejects the rounded sibling by name unless the plan admits trades, and
// then takes it on cost; decoding keeps the tiled kernel either way. Planning
// needs no device.
TEST(CudaBackendTest, TheRoundedBf16ProductIsTakenOnlyWhereThePlanAdmitsPrecisionTrades) {
  const std::vector<std::uint16_t> w(32 * 64, f32_to_bf16(0.5f));
  Result<Graph> graph = bf16_projection_graph(32, 64, w);
  ASSERT_TRUE(graph.is_ok()) << graph.status().to_string();
  const auto reports = [&](bool admit) {
    std::vector<NodeReport> nodes;
    Result<ExecutionPlan> plan = plan_on_cuda(*graph, admit);
    EXPECT_TRUE(plan.is_ok()) << plan.status().to_string();
    if (!plan.is_ok()) return nodes;
    for (const BucketReport& b : plan->report().buckets) nodes.push_back(b.nodes.at(0));
    return nodes;
  };
  constexpr std::string_view kRounded = "matmul_f32_bf16_f32__cuda_cublaslt_rounded";
  std::vector<NodeReport> exact = reports(false);
  ASSERT_EQ(exact.size(), 2u);
  EXPECT_EQ(exact[0].chosen.kernel, "matmul_f32_bf16_f32__cuda_simt");
  EXPECT_EQ(exact[1].chosen.kernel, "matmul_f32_bf16_f32__cuda_cublaslt_split");
  const auto rounded = std::find_if(exact[1].rejected.begin(), exact[1].rejected.end(),
                                    [&](const auto& r) { return r.kernel == kRounded; });
  ASSERT_NE(rounded, exact[1].rejected.end());
  EXPECT_EQ(rounded->reason, RejectReason::kPrecisionTrade);
  std::vector<NodeReport> traded = reports(true);
  ASSERT_EQ(traded.size(), 2u);
  EXPECT_EQ(traded[0].chosen.kernel, "matmul_f32_bf16_f32__cuda_simt");
  EXPECT_EQ(traded[1].chosen.kernel, kRounded);
}

// Note [TF32 is a precision trade]: a 512 x 1024 x 1024 f32 product plans onto
// the exact cuBLASLt sibling with TF32 rejected by name, measured or not; a plan
// that admits precision trades ranks TF32 first by its cost. Planning needs no
// device.
TEST(CudaBackendTest, Tf32IsTakenOnlyWhereThePlanAdmitsPrecisionTrades) {
  GraphBuilder b;
  const ValueId x = b.input("x", DType::kF32, {512, 1024});
  const ValueId w = b.input("w", DType::kF32, {1024, 1024});
  b.output(b.matmul(x, w, "fc", "ffn_up"));
  Result<Graph> graph = std::move(b).build();
  ASSERT_TRUE(graph.is_ok()) << graph.status().to_string();
  PlanOptions options;
  options.policy.preferred = {BackendId::kCuda};
  options.record_in_registry = false;
  const auto fc = [&]() -> NodeReport {
    Result<ExecutionPlan> plan = plan_graph(*graph, current_table(), options);
    EXPECT_TRUE(plan.is_ok()) << plan.status().to_string();
    return plan.is_ok() ? plan->report().buckets[0].nodes[0] : NodeReport{};
  };
  NodeReport n = fc();
  EXPECT_EQ(n.chosen.kernel, "matmul_f32__cuda_cublaslt");
  const auto tf32 = std::find_if(n.rejected.begin(), n.rejected.end(), [](const auto& r) {
    return r.kernel == "matmul_f32__cuda_cublaslt_tf32";
  });
  ASSERT_NE(tf32, n.rejected.end());
  EXPECT_EQ(tf32->reason, RejectReason::kPrecisionTrade);
  options.admit_precision_trades = true;
  EXPECT_EQ(fc().chosen.kernel, "matmul_f32__cuda_cublaslt_tf32");
}

// q [tokens, 8, 64] f32 against an f16 cache of 256 keys [256, 2, 64], causal: the
// llama graph's attention node.
Result<Graph> prompt_attention_graph() {
  GraphBuilder b;
  const std::int64_t t = b.symbol("tokens");
  const ValueId q = b.input("q", DType::kF32, {t, 8, 64});
  const ValueId k = b.input("k", DType::kF16, {256, 2, 64});
  const ValueId v = b.input("v", DType::kF16, {256, 2, 64});
  OpParams params;
  params.scale = 0.125f;
  params.causal = true;
  params.query_offset = 0;
  b.output(b.op(OpKind::kAttention, {q, k, v}, "attention", params));
  return std::move(b).build();
}

// Planning needs no device: a prompt's attention takes the tensor cores (Note
// [Prompt attention on the tensor cores]) and a decode step the SIMT kernels,
// by the tensor-core sibling's cost.
TEST(CudaBackendTest, PromptAttentionTakesTheTensorCoresAndDecodingTheSimtKernel) {
  Result<Graph> graph = prompt_attention_graph();
  ASSERT_TRUE(graph.is_ok()) << graph.status().to_string();
  Result<ExecutionPlan> plan = plan_on_cuda(*graph);
  ASSERT_TRUE(plan.is_ok()) << plan.status().to_string();
  std::vector<std::string> kernels;
  for (std::size_t i = 0; i < plan->bucket_count(); ++i) {
    for (const PlannedStep& step : plan->bucket(i).steps) {
      if (step.kind == StepKind::kKernel) kernels.push_back(step.entry->name);
    }
  }
  EXPECT_THAT(kernels, ::testing::ElementsAre("attention_f32_f16_f16_f32__cuda_simt",
                                              "attention_f32_f16_f16_f32__cuda_tc"));
  // A head dimension above the tensor-core kernel's is not admitted there.
  const DTypeList key{DType::kF32, DType::kF16, DType::kF16, DType::kF32};
  const TableSnapshot table = current_table();
  const std::span<const BindingEntry> alts =
      table->lookup_alternatives(OpKind::kAttention, key, BackendId::kCuda);
  const auto tc = std::find_if(alts.begin(), alts.end(), [](const BindingEntry& e) {
    return e.name == "attention_f32_f16_f16_f32__cuda_tc";
  });
  ASSERT_NE(tc, alts.end());
  const Shape wide{64, 4, 256};
  EXPECT_FALSE(tc->admits_shapes(std::array{wide, wide, wide, wide}));
  const Shape narrow{64, 4, 128};
  EXPECT_TRUE(tc->admits_shapes(std::array{narrow, narrow, narrow, narrow}));
}

// --- on a device -----------------------------------------------------------------

TEST(CudaBackendTest, DeviceMemoryRoundTrip) {
  REQUIRE_CUDA_DEVICE();
  BackendMemory& memory = cuda_memory();
  const std::vector<float> host = random_floats(1000, 1);
  DeviceBuffer a(4000), b(4000);
  Result<void*> block = memory.allocate(100);
  ASSERT_TRUE(block.is_ok());
  EXPECT_EQ(reinterpret_cast<std::uintptr_t>(*block) % 64, 0u);
  memory.deallocate(*block);
  const Shape shape{1000};
  const TensorView h = TensorView::contiguous(const_cast<float*>(host.data()), DType::kF32, shape);
  const TensorView da = TensorView::contiguous(a.get(), DType::kF32, shape, BackendId::kCuda);
  const TensorView db = TensorView::contiguous(b.get(), DType::kF32, shape, BackendId::kCuda);
  for (bool with_stream : {false, true}) {
    Stream stream;
    void* s = with_stream ? stream.get() : nullptr;
    std::vector<float> back(1000, -1.0f);
    const TensorView hb = TensorView::contiguous(back.data(), DType::kF32, shape);
    ASSERT_TRUE(memory.copy(h, da, s).is_ok());
    ASSERT_TRUE(memory.copy(da, db, s).is_ok());
    ASSERT_TRUE(memory.copy(db, hb, s).is_ok());
    ASSERT_TRUE(memory.synchronize(s).is_ok());
    EXPECT_EQ(std::memcmp(back.data(), host.data(), 4000), 0) << "stream " << with_stream;
  }
  // Mismatched views are refused, not copied.
  const TensorView small =
      TensorView::contiguous(a.get(), DType::kF32, Shape{10}, BackendId::kCuda);
  EXPECT_EQ(memory.copy(h, small, nullptr).code(), StatusCode::kInvalidArgument);
  // Out of memory is a Status.
  EXPECT_EQ(memory.allocate(std::int64_t{1} << 50).status().code(), StatusCode::kResourceExhausted);
}

// Note [Staged uploads]: an upload large enough to go through the stream's pinned
// buffers (several pieces, the last one partial, from a source that is not
// 16-byte aligned) arrives whole, twice in a row on one stream, and again after
// another stream has used its own buffers.
TEST(CudaBackendTest, ALargeUploadGoesThroughThePinnedBuffersIntact) {
  REQUIRE_CUDA_DEVICE();
  BackendMemory& memory = cuda_memory();
  constexpr std::int64_t kCount = (std::int64_t{41} << 20) / 2 + 3;  // 41 MiB + 6 bytes of bf16
  std::vector<std::uint16_t> backing(static_cast<std::size_t>(kCount) + 1);
  for (std::size_t i = 0; i < backing.size(); ++i) {
    backing[i] = static_cast<std::uint16_t>(i * 2654435761u >> 7);
  }
  const TensorView h =
      TensorView::contiguous(backing.data() + 1, DType::kBF16, Shape{kCount});  // 2-byte aligned
  DeviceBuffer d(kCount * 2);
  const TensorView dv =
      TensorView::contiguous(d.get(), DType::kBF16, Shape{kCount}, BackendId::kCuda);
  for (int round = 0; round < 3; ++round) {
    Stream stream;
    for (int again = 0; again < 2; ++again) {
      std::vector<std::uint16_t> back(static_cast<std::size_t>(kCount), 0);
      const TensorView hb = TensorView::contiguous(back.data(), DType::kBF16, Shape{kCount});
      ASSERT_TRUE(memory.copy(h, dv, stream.get()).is_ok());
      ASSERT_TRUE(memory.copy(dv, hb, stream.get()).is_ok());
      EXPECT_EQ(std::memcmp(back.data(), backing.data() + 1, back.size() * 2), 0)
          << "round " << round << ", upload " << again;
    }
  }
}

// Every CUDA alternative against the float64 references, by its own claim, with
// poisoned outputs, guards and input checks (Note [Verifying on a device]).
TEST(CudaBackendTest, EveryKernelPassesTheConformanceHarness) {
  REQUIRE_CUDA_DEVICE();
  const std::vector<VerifyEntryReport> reports =
      verify_table(*current_table(), {.backend = BackendId::kCuda});
  ASSERT_FALSE(reports.empty());
  int passed = 0;
  for (const VerifyEntryReport& r : reports) {
    EXPECT_EQ(r.verdict, VerifyVerdict::kPass) << r.kernel << ": " << r.reason;
    passed += r.verdict == VerifyVerdict::kPass;
  }
  EXPECT_EQ(passed, static_cast<int>(reports.size()));
}

// A kernel that writes one element too many or leaves one unwritten fails the
// harness on the device as on the host: the harness's guards and poison work
// through device memory. The CUDA add is called on a view one element short.
TEST(CudaBackendTest, TheHarnessCatchesAnUnwrittenDeviceOutput) {
  REQUIRE_CUDA_DEVICE();
  KernelBindingTable table;
  table.add_backend(BackendId::kCuda, cuda_memory());
  const TableSnapshot builtin = current_table();
  const BindingEntry* add = *builtin->lookup(OpKind::kAdd, kF32x3, BackendId::kCuda);
  static KernelFn real = nullptr;
  real = add->fn;
  // Writes all but the last element of a dense output: it calls the real kernel on
  // every operand flattened and one element short.
  KernelFn short_add = [](const KernelCall& call) -> Status {
    const TensorView& o = call.outputs[0];
    bool dense = o.is_contiguous() && o.numel() >= 2;
    for (const TensorView& t : call.inputs) dense = dense && t.is_contiguous();
    if (!dense) return real(call);
    auto shorter = [](const TensorView& t) {
      return TensorView::contiguous(t.first(), t.dtype(), Shape{t.numel() - 1}, t.backend());
    };
    const TensorView in[] = {shorter(call.inputs[0]), shorter(call.inputs[1])};
    const TensorView out = shorter(o);
    return real({in, std::span<const TensorView>(&out, 1), call.params, call.ctx, call.name});
  };
  table.register_kernel(OpKind::kAdd, kF32x3, BackendId::kCuda, short_add,
                        {.name = "add_f32__cuda_short", .precision = add->precision});
  ASSERT_TRUE(table.finalize().is_ok());
  const std::vector<VerifyEntryReport> r = verify_table(table);
  ASSERT_EQ(r.size(), 1u);
  EXPECT_EQ(r[0].verdict, VerifyVerdict::kFail) << r[0].reason;
}

// Runs `graph` on `backend` (and the CPU for what it cannot) and returns output 0.
Result<std::vector<float>> run_graph(const Graph& graph, BackendId backend,
                                     std::span<const TensorView> inputs, const Shape& out_shape) {
  PlanOptions options;
  options.policy.preferred = {backend};
  options.buckets = example_buckets(16);
  options.record_in_registry = false;
  SWITCHYARD_ASSIGN_OR_RETURN(ExecutionPlan plan, plan_graph(graph, current_table(), options));
  SWITCHYARD_ASSIGN_OR_RETURN(
      Executor exec, Executor::create(std::make_shared<const ExecutionPlan>(std::move(plan))));
  std::vector<float> out(static_cast<std::size_t>(out_shape.numel()), std::nanf(""));
  const TensorView o = TensorView::contiguous(out.data(), DType::kF32, out_shape);
  SWITCHYARD_RETURN_IF_ERROR(exec.run(inputs, std::span<const TensorView>(&o, 1)));
  // A second run through the same executor and stream gives the same bytes.
  std::vector<float> again(out.size(), std::nanf(""));
  const TensorView o2 = TensorView::contiguous(again.data(), DType::kF32, out_shape);
  SWITCHYARD_RETURN_IF_ERROR(exec.run(inputs, std::span<const TensorView>(&o2, 1)));
  if (std::memcmp(out.data(), again.data(), out.size() * sizeof(float)) != 0) {
    return internal_error("two runs of one executor differ");
  }
  return out;
}

void expect_close(std::span<const float> got, std::span<const float> want, double rel) {
  ASSERT_EQ(got.size(), want.size());
  double err2 = 0, ref2 = 0;
  for (std::size_t i = 0; i < got.size(); ++i) {
    ASSERT_TRUE(std::isfinite(got[i])) << "element " << i;
    err2 += (got[i] - want[i]) * double(got[i] - want[i]);
    ref2 += double(want[i]) * want[i];
  }
  EXPECT_LE(std::sqrt(err2 / ref2), rel);
}

// A llama decoder block (rms_norm, projections, rope, causal grouped-query
// attention, SwiGLU, residuals) planned on cuda and run by the executor on its
// stream, against the same graph on the CPU, at a decode and a prefill size.
TEST(CudaBackendTest, ATransformerBlockMatchesTheCpu) {
  REQUIRE_CUDA_DEVICE();
  TransformerBlockShape shape;
  Result<Graph> graph = transformer_block_graph(shape);
  ASSERT_TRUE(graph.is_ok()) << graph.status().to_string();
  for (std::int64_t tokens : {1, 7}) {
    std::vector<float> x = random_floats(static_cast<std::size_t>(tokens * shape.model_dim), 7);
    std::vector<std::int32_t> pos(static_cast<std::size_t>(tokens));
    for (std::int64_t t = 0; t < tokens; ++t)
      pos[static_cast<std::size_t>(t)] = std::int32_t(t + 3);
    const TensorView inputs[] = {
        TensorView::contiguous(x.data(), DType::kF32, Shape{tokens, shape.model_dim}),
        TensorView::contiguous(pos.data(), DType::kI32, Shape{tokens})};
    const Shape out{tokens, shape.model_dim};
    Result<std::vector<float>> cpu = run_graph(*graph, BackendId::kCpu, inputs, out);
    ASSERT_TRUE(cpu.is_ok()) << cpu.status().to_string();
    Result<std::vector<float>> gpu = run_graph(*graph, BackendId::kCuda, inputs, out);
    ASSERT_TRUE(gpu.is_ok()) << gpu.status().to_string();
    expect_close(*gpu, *cpu, 1e-5);
  }
}

TEST(CudaBackendTest, AnIndexOutOfRangeFoundOnTheDeviceIsAnError) {
  REQUIRE_CUDA_DEVICE();
  std::vector<float> table = random_floats(12, 3);
  std::vector<std::int32_t> idx = {1, 5};  // the table has 3 rows
  std::vector<float> out(8);
  const TensorView inputs[] = {TensorView::contiguous(table.data(), DType::kF32, Shape{3, 4}),
                               TensorView::contiguous(idx.data(), DType::kI32, Shape{2})};
  const Status st =
      run_kernel(OpKind::kGetRows, {DType::kF32, DType::kI32, DType::kF32}, inputs,
                 TensorView::contiguous(out.data(), DType::kF32, Shape{2, 4}), OpParams{});
  EXPECT_EQ(st.code(), StatusCode::kOutOfRange) << st.to_string();
  EXPECT_THAT(st.message(), HasSubstr("get_rows"));
  // The stream's error word was cleared: an in-range call succeeds afterwards.
  idx = {2, 0};
  EXPECT_TRUE(run_kernel(OpKind::kGetRows, {DType::kF32, DType::kI32, DType::kF32}, inputs,
                         TensorView::contiguous(out.data(), DType::kF32, Shape{2, 4}), OpParams{})
                  .is_ok());
  EXPECT_EQ(out[0], table[8]);
}

// Note [NaN-propagating max]: a NaN logit makes its softmax row and its attention
// output NaN instead of disappearing into a max.
TEST(CudaBackendTest, NaNPropagatesThroughSoftmaxAndAttention) {
  REQUIRE_CUDA_DEVICE();
  std::vector<float> x = random_floats(2 * 8, 5);
  x[3] = std::nanf("");
  std::vector<float> out(16, 0.0f);
  const TensorView in = TensorView::contiguous(x.data(), DType::kF32, Shape{2, 8});
  ASSERT_TRUE(run_kernel(OpKind::kSoftmax, {DType::kF32, DType::kF32}, std::span(&in, 1),
                         TensorView::contiguous(out.data(), DType::kF32, Shape{2, 8}), OpParams{})
                  .is_ok());
  for (int j = 0; j < 8; ++j) EXPECT_TRUE(std::isnan(out[j])) << j;
  for (int j = 8; j < 16; ++j) EXPECT_TRUE(std::isfinite(out[j])) << j;

  // q [1, 1, 32], k and v [4, 1, 32]: a NaN in one key's vector.
  std::vector<float> q = random_floats(32, 6), k = random_floats(128, 7), v = random_floats(128, 8);
  k[2 * 32 + 5] = std::nanf("");
  std::vector<float> o(32, 0.0f);
  const TensorView qkv[] = {TensorView::contiguous(q.data(), DType::kF32, Shape{1, 1, 32}),
                            TensorView::contiguous(k.data(), DType::kF32, Shape{4, 1, 32}),
                            TensorView::contiguous(v.data(), DType::kF32, Shape{4, 1, 32})};
  OpParams params;
  params.scale = 0.125f;
  ASSERT_TRUE(run_kernel(OpKind::kAttention, {DType::kF32, DType::kF32, DType::kF32, DType::kF32},
                         qkv, TensorView::contiguous(o.data(), DType::kF32, Shape{1, 1, 32}),
                         params)
                  .is_ok());
  for (float e : o) EXPECT_TRUE(std::isnan(e));
}

// Many keys split across blocks and merged (Note [Splitting the keys across
// blocks]), with grouped-query heads, a mask with masked entries, and causal rows
// whose later splits hold no visible key at all, against the CPU's kernel. The
// shapes take both kernels: the grouped decode kernel for groups of 1, 2, 4 and 8
// query heads per kv head (Note [Grouped decode attention]), the simple one for a
// group of 3 and for many query rows.
struct ManyKeysCase {
  std::int64_t sq, heads, kv_heads, dh;
};

TEST(CudaBackendTest, AttentionOverManyKeysMatchesTheCpu) {
  REQUIRE_CUDA_DEVICE();
  constexpr std::int64_t kBatch = 2, kSkv = 1000;
  const ManyKeysCase cases[] = {{3, 8, 2, 64},   {1, 8, 8, 128}, {1, 16, 8, 128},
                                {2, 16, 2, 128}, {1, 6, 2, 64},  {9, 8, 2, 64}};
  for (const ManyKeysCase& c : cases) {
    SCOPED_TRACE(::testing::Message() << "sq " << c.sq << ", heads " << c.heads << "/" << c.kv_heads
                                      << ", head_dim " << c.dh);
    const std::vector<float> q = random_floats(kBatch * c.sq * c.heads * c.dh, 11);
    const std::vector<float> k = random_floats(kBatch * kSkv * c.kv_heads * c.dh, 12);
    const std::vector<float> v = random_floats(kBatch * kSkv * c.kv_heads * c.dh, 13);
    std::vector<float> mask = random_floats(c.sq * kSkv, 14);
    for (std::size_t j = 0; j < mask.size(); j += 7) mask[j] = -INFINITY;
    const Shape q_shape{kBatch, c.sq, c.heads, c.dh};
    const Shape kv_shape{kBatch, kSkv, c.kv_heads, c.dh};
    const TensorView inputs[] = {
        TensorView::contiguous(const_cast<float*>(q.data()), DType::kF32, q_shape),
        TensorView::contiguous(const_cast<float*>(k.data()), DType::kF32, kv_shape),
        TensorView::contiguous(const_cast<float*>(v.data()), DType::kF32, kv_shape),
        TensorView::contiguous(mask.data(), DType::kF32, Shape{c.sq, kSkv})};
    const DTypeList key{DType::kF32, DType::kF32, DType::kF32, DType::kF32, DType::kF32};
    const BindingEntry* cpu = *current_table()->lookup(OpKind::kAttention, key, BackendId::kCpu);
    for (std::int64_t offset : {std::int64_t{100}, std::int64_t{997}}) {
      OpParams params;
      params.scale = 0.125f;
      params.causal = true;
      params.query_offset = offset;
      const std::size_t n = q.size();
      std::vector<float> want(n, std::nanf("")), got(n, std::nanf(""));
      const TensorView w = TensorView::contiguous(want.data(), DType::kF32, q_shape);
      ExecContext ctx;
      ASSERT_TRUE(
          cpu->fn({inputs, std::span<const TensorView>(&w, 1), params, ctx, cpu->name}).is_ok());
      const Status st =
          run_kernel(OpKind::kAttention, key, inputs,
                     TensorView::contiguous(got.data(), DType::kF32, q_shape), params);
      ASSERT_TRUE(st.is_ok()) << st.to_string();
      expect_close(got, want, 1e-5);
    }
  }
}

// The tensor-core attention against the CPU's kernel on prompt shapes: several
// 64-row blocks and a partial one, grouped-query heads, head dimensions that fill
// the tile (64, 128) and one padded (40), causal rows with and without an offset,
// and a mask whose masked tail of keys holds NaN in K and V (Note [Masked keys]):
// within the sibling's claim of sum p |v|, taken as 1 (|v| below ~4 here, the
// weights summing to one), and the same bits on a second run.
struct TensorCoreCase {
  DType q, kv;
  std::int64_t sq, heads, kv_heads, dh, offset;
  bool mask;
};

std::vector<std::uint16_t> to_half_bits(const std::vector<float>& x, DType t) {
  std::vector<std::uint16_t> bits(x.size());
  for (std::size_t i = 0; i < x.size(); ++i) {
    bits[i] = t == DType::kF16 ? f32_to_f16(x[i]) : f32_to_bf16(x[i]);
  }
  return bits;
}

TEST(CudaBackendTest, TensorCoreAttentionMatchesTheCpuOnPrompts) {
  REQUIRE_CUDA_DEVICE();
  constexpr std::int64_t kBatch = 2;
  const TensorCoreCase cases[] = {
      {DType::kF32, DType::kF16, 130, 8, 2, 128, 0, false},
      {DType::kF32, DType::kF16, 70, 4, 4, 64, 37, true},
      {DType::kF32, DType::kF16, 64, 4, 1, 40, 0, false},
      {DType::kF32, DType::kBF16, 100, 8, 2, 128, 5, true},
      {DType::kF16, DType::kF16, 65, 4, 2, 64, 0, true},
  };
  for (const TensorCoreCase& c : cases) {
    SCOPED_TRACE(::testing::Message()
                 << name(c.q) << "/" << name(c.kv) << " sq " << c.sq << ", heads " << c.heads << "/"
                 << c.kv_heads << ", head_dim " << c.dh << ", offset " << c.offset
                 << (c.mask ? ", mask" : ""));
    const std::int64_t skv = c.sq + c.offset + (c.mask ? 12 : 0);
    // Entries of about 0.5 keep scale * sum |q k| within the claim's 4.
    std::vector<float> q = random_floats(kBatch * c.sq * c.heads * c.dh, 21, 0.5f);
    std::vector<float> k = random_floats(kBatch * skv * c.kv_heads * c.dh, 22, 0.5f);
    std::vector<float> v = random_floats(kBatch * skv * c.kv_heads * c.dh, 23);
    std::vector<float> mask;
    if (c.mask) {
      mask = random_floats(c.sq * skv, 24, 0.5f);
      for (std::size_t j = 0; j < mask.size(); j += 5) mask[j] = -INFINITY;
      // The last 12 keys: masked for every row, NaN in the cache.
      for (std::int64_t i = 0; i < c.sq; ++i) {
        for (std::int64_t j = skv - 12; j < skv; ++j) mask[i * skv + j] = -INFINITY;
      }
      for (std::int64_t b = 0; b < kBatch; ++b) {
        for (std::int64_t j = skv - 12; j < skv; ++j) {
          for (std::int64_t e = 0; e < c.kv_heads * c.dh; ++e) {
            const std::size_t at = static_cast<std::size_t>((b * skv + j) * c.kv_heads * c.dh + e);
            k[at] = std::nanf("");
            v[at] = std::nanf("");
          }
        }
      }
    }
    // The stored inputs, in their dtypes; the CPU reads the same bits.
    const std::vector<std::uint16_t> k_bits = to_half_bits(k, c.kv), v_bits = to_half_bits(v, c.kv);
    std::vector<std::uint16_t> q_bits, mask_bits;
    if (c.q != DType::kF32) {
      q_bits = to_half_bits(q, c.q);
      mask_bits = to_half_bits(mask, c.q);
    }
    const Shape q_shape{kBatch, c.sq, c.heads, c.dh};
    const Shape kv_shape{kBatch, skv, c.kv_heads, c.dh};
    const auto view = [&](std::vector<float>& f, std::vector<std::uint16_t>& h, DType t,
                          const Shape& shape) {
      return t == DType::kF32 ? TensorView::contiguous(f.data(), t, shape)
                              : TensorView::contiguous(h.data(), t, shape);
    };
    std::vector<std::uint16_t> k_store = k_bits, v_store = v_bits;
    std::vector<TensorView> inputs = {view(q, q_bits, c.q, q_shape),
                                      TensorView::contiguous(k_store.data(), c.kv, kv_shape),
                                      TensorView::contiguous(v_store.data(), c.kv, kv_shape)};
    DTypeList key{c.q, c.kv, c.kv, c.q};
    if (c.mask) {
      inputs.push_back(view(mask, mask_bits, c.q, Shape{c.sq, skv}));
      key = DTypeList{c.q, c.kv, c.kv, c.q, c.q};
    }
    OpParams params;
    params.scale = static_cast<float>(1.0 / std::sqrt(static_cast<double>(c.dh)));
    params.causal = true;
    params.query_offset = c.offset;
    const std::size_t n = static_cast<std::size_t>(q_shape.numel());
    const std::size_t out_bytes = n * (c.q == DType::kF32 ? 4 : 2);
    std::vector<std::byte> want(out_bytes), got(out_bytes), again(out_bytes);
    const auto out_view = [&](std::vector<std::byte>& o) {
      return TensorView::contiguous(o.data(), c.q, q_shape);
    };
    const BindingEntry* cpu = *current_table()->lookup(OpKind::kAttention, key, BackendId::kCpu);
    const TensorView w = out_view(want);
    ExecContext ctx;
    ASSERT_TRUE(
        cpu->fn({inputs, std::span<const TensorView>(&w, 1), params, ctx, cpu->name}).is_ok());
    const TableSnapshot table = current_table();
    const BindingEntry* tc = nullptr;
    for (const BindingEntry& e :
         table->lookup_alternatives(OpKind::kAttention, key, BackendId::kCuda)) {
      if (e.name.find("__cuda_tc") != std::string::npos) tc = &e;
    }
    ASSERT_NE(tc, nullptr);
    Status st = run_entry(*tc, inputs, out_view(got), params);
    ASSERT_TRUE(st.is_ok()) << st.to_string();
    st = run_entry(*tc, inputs, out_view(again), params);
    ASSERT_TRUE(st.is_ok()) << st.to_string();
    EXPECT_EQ(got, again) << "two runs gave different bytes";
    const auto value = [&](const std::vector<std::byte>& o, std::size_t i) -> double {
      if (c.q == DType::kF32) return reinterpret_cast<const float*>(o.data())[i];
      const std::uint16_t bits = reinterpret_cast<const std::uint16_t*>(o.data())[i];
      return c.q == DType::kF16 ? f16_to_f32(bits) : bf16_to_f32(bits);
    };
    const double claim = *tc->precision.max_rel;
    double worst = 0;
    for (std::size_t i = 0; i < n; ++i) {
      const double a = value(got, i), b = value(want, i);
      ASSERT_TRUE(std::isfinite(a)) << "element " << i << ": the masked NaN tail leaked";
      worst = std::max(worst, std::abs(a - b));
    }
    // |v| stays below 4.5 (normal draws), so sum p |v| is at most that.
    EXPECT_LE(worst, claim * 4.5) << "worst " << worst;
  }
}

// The split product keeps the f32 claim where rounding the activations to bf16
// would not: activations of the form 1 + small, whose low bits a bf16 drops, are
// multiplied on the GPU and checked against a float64 product of the same stored
// values. The bf16-rounded product's error is computed too, to show the bound
// would catch a kernel that lost the low half. An infinity and a NaN in the
// activations come out non-finite in their rows.
TEST(CudaBackendTest, TheSplitProductKeepsTheF32Claim) {
  REQUIRE_CUDA_DEVICE();
  constexpr std::int64_t kRows = 40, kN = 48, kK = 320;
  std::vector<std::uint16_t> w(static_cast<std::size_t>(kN * kK));
  const std::vector<float> w_values = random_floats(w.size(), 3);
  for (std::size_t i = 0; i < w.size(); ++i) w[i] = f32_to_bf16(w_values[i]);
  std::vector<float> x = random_floats(static_cast<std::size_t>(kRows * kK), 4, 0x1p-10f);
  for (float& v : x) v += 1.0f;
  x[5 * kK + 7] = std::numeric_limits<float>::infinity();
  x[9 * kK + 1] = std::nanf("");
  Result<Graph> graph = bf16_projection_graph(kN, kK, w);
  ASSERT_TRUE(graph.is_ok()) << graph.status().to_string();
  Result<ExecutionPlan> plan = plan_on_cuda(*graph);
  ASSERT_TRUE(plan.is_ok()) << plan.status().to_string();
  Result<Executor> exec = Executor::create(std::make_shared<const ExecutionPlan>(std::move(*plan)));
  ASSERT_TRUE(exec.is_ok()) << exec.status().to_string();
  std::vector<float> out(static_cast<std::size_t>(kRows * kN), 0.0f);
  const TensorView in = TensorView::contiguous(x.data(), DType::kF32, Shape{kRows, kK});
  const TensorView o = TensorView::contiguous(out.data(), DType::kF32, Shape{kRows, kN});
  ASSERT_TRUE(exec->run(std::span(&in, 1), std::span(&o, 1)).is_ok());
  EXPECT_EQ(exec->stats().last_bucket, "prompt");
  double worst = 0, worst_rounded = 0;  // error / sum |a w|
  for (std::int64_t r = 0; r < kRows; ++r) {
    for (std::int64_t c = 0; c < kN; ++c) {
      const float got = out[static_cast<std::size_t>(r * kN + c)];
      if (r == 5 || r == 9) {
        EXPECT_FALSE(std::isfinite(got)) << "row " << r;
        continue;
      }
      double exact = 0, rounded = 0, scale = 0;
      for (std::int64_t i = 0; i < kK; ++i) {
        const double a = x[static_cast<std::size_t>(r * kK + i)];
        const double b = bf16_to_f32(w[static_cast<std::size_t>(c * kK + i)]);
        exact += a * b;
        rounded += double(bf16_to_f32(f32_to_bf16(static_cast<float>(a)))) * b;
        scale += std::abs(a * b);
      }
      worst = std::max(worst, std::abs(got - exact) / scale);
      worst_rounded = std::max(worst_rounded, std::abs(rounded - exact) / scale);
    }
  }
  EXPECT_LE(worst, 1e-5);          // the claim is 1e-4
  EXPECT_GT(worst_rounded, 1e-4);  // bf16 activations alone would fail it
}

void check_fused_ffn_bits(std::int64_t rows, std::int64_t d, std::int64_t f);

// Note [Fused decode feed-forward]: ffn_swiglu on few rows of bf16 weights runs
// gate, up and the activation as one matrix-vector kernel, and gives the bits of
// the composition done by separate kernels (matmuls, silu, mul).
TEST(CudaBackendTest, TheFusedDecodeFeedForwardHasTheUnfusedBits) {
  REQUIRE_CUDA_DEVICE();
  // The second and third shapes split gate and up across warps (Note [Splitting a
  // row across warps]).
  struct Shape3 {
    std::int64_t rows, d, f;
  };
  for (const Shape3 shape : {Shape3{3, 256, 640}, Shape3{1, 2048, 512}, Shape3{2, 4096, 1000}}) {
    SCOPED_TRACE(::testing::Message() << shape.rows << " x " << shape.d << " -> " << shape.f);
    check_fused_ffn_bits(shape.rows, shape.d, shape.f);
  }
}

// Note [Splitting a row across warps]: a matrix of few rows is read by several
// warps per row, and keeps the tiled kernel's claim (1e-4 of sum |a w|), with
// rows that fill no whole block and a row length that no slice divides.
TEST(CudaBackendTest, MatvecSplitAcrossWarpsKeepsTheClaim) {
  REQUIRE_CUDA_DEVICE();
  for (const auto [m, n, k] :
       {std::array<std::int64_t, 3>{1, 1024, 4096}, std::array<std::int64_t, 3>{5, 1000, 4000},
        std::array<std::int64_t, 3>{2, 300, 14336}}) {
    std::vector<std::uint16_t> w(static_cast<std::size_t>(n * k));
    const std::vector<float> w_values = random_floats(w.size(), 21, 0.1f);
    for (std::size_t i = 0; i < w.size(); ++i) w[i] = f32_to_bf16(w_values[i]);
    const std::vector<float> x = random_floats(static_cast<std::size_t>(m * k), 22);
    std::vector<float> out(static_cast<std::size_t>(m * n), std::nanf(""));
    const TensorView xv =
        TensorView::contiguous(const_cast<float*>(x.data()), DType::kF32, Shape{m, k});
    const TensorView wv = TensorView::contiguous(w.data(), DType::kBF16, Shape{n, k});
    const TensorView ov = TensorView::contiguous(out.data(), DType::kF32, Shape{m, n});
    const TensorView in[] = {xv, wv};
    ASSERT_TRUE(
        run_kernel(OpKind::kMatmul, {DType::kF32, DType::kBF16, DType::kF32}, in, ov, {}).is_ok());
    double worst = 0;
    for (std::int64_t r = 0; r < m; ++r) {
      for (std::int64_t c = 0; c < n; ++c) {
        double exact = 0, scale = 0;
        for (std::int64_t i = 0; i < k; ++i) {
          const double p = double(x[static_cast<std::size_t>(r * k + i)]) *
                           bf16_to_f32(w[static_cast<std::size_t>(c * k + i)]);
          exact += p;
          scale += std::abs(p);
        }
        worst = std::max(worst, std::abs(out[static_cast<std::size_t>(r * n + c)] - exact) / scale);
      }
    }
    EXPECT_LE(worst, 1e-5) << m << " x " << n << " x " << k;  // the claim is 1e-4; NaN fails
  }
}

void check_fused_ffn_bits(std::int64_t rows, std::int64_t d, std::int64_t f) {
  auto bf16_matrix = [](std::int64_t r, std::int64_t c, std::uint32_t seed) {
    std::vector<std::uint16_t> bits(static_cast<std::size_t>(r * c));
    const std::vector<float> v = random_floats(bits.size(), seed, 0.1f);
    for (std::size_t i = 0; i < bits.size(); ++i) bits[i] = f32_to_bf16(v[i]);
    return bits;
  };
  std::vector<float> x = random_floats(static_cast<std::size_t>(rows * d), 11);
  std::vector<std::uint16_t> gate = bf16_matrix(f, d, 12), up = bf16_matrix(f, d, 13),
                             down = bf16_matrix(d, f, 14);
  const TensorView xv = TensorView::contiguous(x.data(), DType::kF32, Shape{rows, d});
  const TensorView gv = TensorView::contiguous(gate.data(), DType::kBF16, Shape{f, d});
  const TensorView uv = TensorView::contiguous(up.data(), DType::kBF16, Shape{f, d});
  const TensorView dv = TensorView::contiguous(down.data(), DType::kBF16, Shape{d, f});
  const OpParams params;
  std::vector<float> fused(static_cast<std::size_t>(rows * d));
  const TensorView fv = TensorView::contiguous(fused.data(), DType::kF32, Shape{rows, d});
  const TensorView ffn_in[] = {xv, gv, uv, dv};
  ASSERT_TRUE(run_kernel(OpKind::kFfnSwiglu,
                         {DType::kF32, DType::kBF16, DType::kBF16, DType::kBF16, DType::kF32},
                         ffn_in, fv, params)
                  .is_ok());
  // The same by separate kernels, each through host memory.
  const DTypeList mixed{DType::kF32, DType::kBF16, DType::kF32};
  std::vector<float> g(static_cast<std::size_t>(rows * f)), u(g.size()), act(g.size());
  std::vector<float> unfused(fused.size());
  const TensorView g_v = TensorView::contiguous(g.data(), DType::kF32, Shape{rows, f});
  const TensorView u_v = TensorView::contiguous(u.data(), DType::kF32, Shape{rows, f});
  const TensorView a_v = TensorView::contiguous(act.data(), DType::kF32, Shape{rows, f});
  const TensorView o_v = TensorView::contiguous(unfused.data(), DType::kF32, Shape{rows, d});
  const TensorView gate_in[] = {xv, gv}, up_in[] = {xv, uv}, down_in[] = {a_v, dv};
  ASSERT_TRUE(run_kernel(OpKind::kMatmul, mixed, gate_in, g_v, params).is_ok());
  ASSERT_TRUE(run_kernel(OpKind::kMatmul, mixed, up_in, u_v, params).is_ok());
  const TensorView silu_in[] = {g_v};
  ASSERT_TRUE(run_kernel(OpKind::kSilu, {DType::kF32, DType::kF32}, silu_in, a_v, params).is_ok());
  const TensorView mul_in[] = {a_v, u_v};
  ASSERT_TRUE(run_kernel(OpKind::kMul, kF32x3, mul_in, a_v, params).is_ok());
  ASSERT_TRUE(run_kernel(OpKind::kMatmul, mixed, down_in, o_v, params).is_ok());
  EXPECT_EQ(std::memcmp(fused.data(), unfused.data(), fused.size() * sizeof(float)), 0);
}

}  // namespace
}  // namespace switchyard

namespace switchyard {
namespace {

using cuda_test::cuda_memory;

// Note [Collectives]: in a group of one NCCL rank the collectives go through
// NCCL (all_gather and reduce_scatter of several rows through the scratch and
// 2-D copies, Note [NCCL's layout and ours]); without a group each is a device
// copy. Either way one rank's result is its input.
TEST(CudaCollectiveTest, OneNcclRankAndNoGroupBothGiveTheInput) {
  REQUIRE_CUDA_DEVICE();
  Result<std::vector<std::unique_ptr<Communicator>>> group = cuda_memory().create_communicators(1);
  if (group.status().code() == StatusCode::kUnimplemented) {
    GTEST_SKIP() << group.status().message();
  }
  ASSERT_TRUE(group.is_ok()) << group.status().to_string();
  ASSERT_EQ(group->size(), 1u);
  Communicator& rank = *(*group)[0];
  EXPECT_EQ(rank.backend(), BackendId::kCuda);
  EXPECT_EQ(rank.size(), 1);
  for (const std::int64_t rows : {1, 3}) {
    std::vector<float> x = cuda_test::random_floats(static_cast<std::size_t>(rows * 40), 9);
    const TensorView xv = TensorView::contiguous(x.data(), DType::kF32, {rows, 40});
    for (OpKind op : kOpsOfFamily<OpFamily::kCollective>) {
      for (Communicator* comm : {&rank, static_cast<Communicator*>(nullptr)}) {
        std::vector<float> out(x.size(), -1.0f);
        const Status st = cuda_test::run_kernel(
            op, {DType::kF32, DType::kF32}, std::span(&xv, 1),
            TensorView::contiguous(out.data(), DType::kF32, {rows, 40}), OpParams{}, comm);
        ASSERT_TRUE(st.is_ok()) << name(op) << ": " << st.to_string();
        EXPECT_EQ(out, x) << name(op) << (comm ? " through NCCL" : " without a group");
      }
    }
  }
  // Planned for two ranks, run in the group of one.
  std::vector<float> x(8), out(8);
  const TensorView xv = TensorView::contiguous(x.data(), DType::kF32, {8});
  OpParams two;
  two.ranks = 2;
  const Status st =
      cuda_test::run_kernel(OpKind::kAllReduce, {DType::kF32, DType::kF32}, std::span(&xv, 1),
                            TensorView::contiguous(out.data(), DType::kF32, {8}), two, &rank);
  EXPECT_EQ(st.code(), StatusCode::kInvalidArgument) << st.to_string();
}

TEST(CudaCollectiveTest, AGroupLargerThanTheMachineIsRefused) {
  REQUIRE_CUDA_DEVICE();
  Result<std::vector<std::unique_ptr<Communicator>>> group =
      cuda_memory().create_communicators(HostRankGroup::kMaxRanks);
  ASSERT_FALSE(group.is_ok());
  EXPECT_TRUE(group.status().code() == StatusCode::kUnavailable ||
              group.status().code() == StatusCode::kUnimplemented)
      << group.status().to_string();
}

TEST(CudaCollectiveTest, WithoutADeviceNoGroupIsMade) {
  if (cuda_memory().ready().is_ok()) GTEST_SKIP() << "this machine has a CUDA device";
  EXPECT_EQ(cuda_memory().create_communicators(1).status().code(), StatusCode::kUnavailable);
}

}  // namespace
}  // namespace switchyard
