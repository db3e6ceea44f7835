// The synthetic llama model on the GPU against the CPU: the same file loaded with
// --backend cuda and cpu gives logits within the kernels' precision and the same
// greedy tokens, prompt and decode, for f32, f16 and bf16 weights, and for
// quantized weights within the 8-bit activations' rounding.
#include <algorithm>
#include <bit>
#include <cmath>
#include <filesystem>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "backends/cuda/cuda_test_util.h"
#include "switchyard/backend_memory.h"
#include "switchyard/dispatch.h"
#include "switchyard/gguf.h"
#include "switchyard/kernel_mask.h"
#include "switchyard/llama.h"
#include "switchyard/registry.h"
#include "switchyard/synthetic_model.h"

namespace switchyard {
namespace {

Result<GgufFile> synthetic(DType weights, std::int64_t context = 64) {
  SyntheticLlamaConfig c = default_synthetic_llama_config();
  c.block_count = 2;
  c.context_length = context;
  SWITCHYARD_ASSIGN_OR_RETURN(SyntheticModel m, generate_synthetic_llama(c));
  std::vector<TensorTypeRule> rules;
  for (std::string_view role : synthetic_llama_weight_roles()) {
    rules.push_back({std::string(role), weights});
  }
  SWITCHYARD_RETURN_IF_ERROR(quantize_synthetic_llama(m, rules));
  SWITCHYARD_ASSIGN_OR_RETURN(GgufWriter w, synthetic_model_writer(m));
  const std::filesystem::path path =
      std::filesystem::path(::testing::TempDir()) /
      ("switchyard_cuda_llama_" + std::string(name(weights)) + ".gguf");
  SWITCHYARD_RETURN_IF_ERROR(w.write(path));
  Result<GgufFile> file = GgufFile::open(path);
  std::filesystem::remove(path);
  return file;
}

// A prompt of 20 tokens (enough rows for the split tensor-core product on bf16
// weights), then 2 decode steps: every row's logits. The steps feed the greedy
// token, or with `fixed_steps` tokens chosen in advance: logits that differ by a
// percent (quantized weights) may tie-break to different tokens on the two
// sides, and the logits after a different token are not comparable.
Result<std::vector<float>> generate(GgufFile& file, BackendId backend, Registry& registry,
                                    DType cache, bool fixed_steps = false, int devices = 0) {
  LlamaLoadOptions o;
  o.devices = devices;
  o.backend = backend;
  o.registry = &registry;
  o.cache_dtype = cache;
  o.max_context = 32;
  o.max_batch = 24;
  SWITCHYARD_ASSIGN_OR_RETURN(LlamaModel model, LlamaModel::load(std::move(file), o));
  const std::int64_t vocab = model.config().vocab_size;
  std::vector<std::int32_t> prompt(20);
  for (std::size_t i = 0; i < prompt.size(); ++i) {
    prompt[i] = static_cast<std::int32_t>((i * 37 + 1) % 251);
  }
  std::vector<float> all(prompt.size() * static_cast<std::size_t>(vocab));
  SWITCHYARD_RETURN_IF_ERROR(model.eval(prompt, all));
  for (int step = 0; step < 2; ++step) {
    const auto last = std::span(all).last(static_cast<std::size_t>(vocab));
    const auto next =
        fixed_steps
            ? static_cast<std::int32_t>((step * 53 + 7) % vocab)
            : static_cast<std::int32_t>(std::max_element(last.begin(), last.end()) - last.begin());
    std::vector<float> logits(static_cast<std::size_t>(vocab));
    SWITCHYARD_RETURN_IF_ERROR(model.eval(std::span(&next, 1), logits));
    all.insert(all.end(), logits.begin(), logits.end());
  }
  return all;
}

class CudaLlamaTest : public ::testing::TestWithParam<DType> {};

TEST_P(CudaLlamaTest, LogitsMatchTheCpu) {
  BackendMemory* memory = current_table()->backend_memory(BackendId::kCuda);
  ASSERT_NE(memory, nullptr);
  if (Status ready = memory->ready(); !ready.is_ok()) {
    GTEST_SKIP() << "needs a CUDA device: " << ready.message();
  }
  const DType weights = GetParam();
  for (const DType cache : {DType::kF32, DType::kF16, DType::kQ8_0}) {
    SCOPED_TRACE(::testing::Message() << "cache " << name(cache));
    Result<GgufFile> cpu_file = synthetic(weights);
    ASSERT_TRUE(cpu_file.is_ok()) << cpu_file.status().to_string();
    Result<GgufFile> gpu_file = synthetic(weights);
    ASSERT_TRUE(gpu_file.is_ok()) << gpu_file.status().to_string();
    Registry cpu_registry({.sink = [](std::string_view) {}});
    Registry gpu_registry({.sink = [](std::string_view) {}});
    Result<std::vector<float>> cpu =
        generate(*cpu_file, BackendId::kCpu, cpu_registry, cache, is_quantized(weights));
    ASSERT_TRUE(cpu.is_ok()) << cpu.status().to_string();
    Result<std::vector<float>> gpu =
        generate(*gpu_file, BackendId::kCuda, gpu_registry, cache, is_quantized(weights));
    ASSERT_TRUE(gpu.is_ok()) << gpu.status().to_string();
    // Every weight ran on the GPU: no accelerator violation at load.
    EXPECT_TRUE(gpu_registry.seal().violations.empty());
    ASSERT_EQ(gpu->size(), cpu->size());
    double err2 = 0, ref2 = 0;
    for (std::size_t i = 0; i < cpu->size(); ++i) {
      ASSERT_TRUE(std::isfinite((*gpu)[i])) << i;
      const double d = double((*gpu)[i]) - (*cpu)[i];
      err2 += d * d;
      ref2 += double((*cpu)[i]) * (*cpu)[i];
    }
    // Both sides compute in f32 from the same stored weights; the sums differ in
    // order only (1e-4 relative is what the matmul claims per element). An f16
    // cache rounds keys and values that differ that little, and a rounding that
    // falls differently moves an entry by 2^-11: up to 1e-3. Quantized weights
    // meet activations rounded to 8 bits on both sides, on the CPU per block of
    // 256 and on the GPU per block of 32 (bf16 for the prompt's rows): each
    // product moves by about 1 % at random, independently on the two sides (on
    // the CPU alone an f16 cache instead of an f32 one moves these logits by 2 %).
    // A q8_0 cache quantizes keys and values the same way on both sides (Note [A
    // q8_0 cache on the device]), but of values that differ as above: where a
    // level rounds differently, a value moves by 1/127 of its block's largest.
    const double tolerance = is_quantized(weights)   ? 5e-2
                             : cache == DType::kQ8_0 ? 2e-2
                             : cache == DType::kF32  ? 1e-4
                                                     : 1e-3;
    const double rms = std::sqrt(err2 / ref2);
    RecordProperty("relative_rms_difference", std::to_string(rms));
    EXPECT_LE(rms, tolerance) << name(weights);
  }
}

INSTANTIATE_TEST_SUITE_P(Weights, CudaLlamaTest,
                         ::testing::Values(DType::kF32, DType::kF16, DType::kBF16, DType::kQ4_K,
                                           DType::kQ6_K, DType::kQ8_0, DType::kQ4_0,
                                           DType::kIQ4_XS),
                         [](const auto& param) { return std::string(name(param.param)); });

// The f32 model split over `cuda_ranks` ranks on cuda (an NCCL group) against
// the same model split over two simulated ranks on the cpu.
void expect_cuda_split_matches_cpu_split(int cuda_ranks) {
  Result<GgufFile> cpu_file = synthetic(DType::kF32);
  ASSERT_TRUE(cpu_file.is_ok()) << cpu_file.status().to_string();
  Result<GgufFile> gpu_file = synthetic(DType::kF32);
  ASSERT_TRUE(gpu_file.is_ok()) << gpu_file.status().to_string();
  Registry cpu_registry({.sink = [](std::string_view) {}});
  Registry gpu_registry({.sink = [](std::string_view) {}});
  Result<std::vector<float>> gpu =
      generate(*gpu_file, BackendId::kCuda, gpu_registry, DType::kF32, false, cuda_ranks);
  if (gpu.status().code() == StatusCode::kUnimplemented) GTEST_SKIP() << gpu.status().message();
  ASSERT_TRUE(gpu.is_ok()) << gpu.status().to_string();
  EXPECT_TRUE(gpu_registry.seal().violations.empty());
  Result<std::vector<float>> cpu =
      generate(*cpu_file, BackendId::kCpu, cpu_registry, DType::kF32, false, 2);
  ASSERT_TRUE(cpu.is_ok()) << cpu.status().to_string();
  ASSERT_EQ(gpu->size(), cpu->size());
  double err2 = 0, ref2 = 0;
  for (std::size_t i = 0; i < cpu->size(); ++i) {
    const double d = double((*gpu)[i]) - (*cpu)[i];
    err2 += d * d;
    ref2 += double((*cpu)[i]) * (*cpu)[i];
  }
  EXPECT_LE(std::sqrt(err2 / ref2), 1e-4);
}

// Note [Tensor-parallel llama]: the plan of one rank on cuda, its collectives
// through an NCCL group of one, against the CPU's model split over two simulated
// ranks: both the same model, in f32.
TEST(CudaLlamaSplitTest, OneNcclRankMatchesTheCpusTwoRanks) {
  REQUIRE_CUDA_DEVICE();
  expect_cuda_split_matches_cpu_split(1);
}

// Note [One device per rank] in backend_memory.h: with a GPU per rank, each
// rank's plan runs on its own GPU and the ranks meet in NCCL. Skipped on a
// machine with one GPU (the one-rank test above runs there).
TEST(CudaLlamaSplitTest, TwoRanksOnTwoGpusMatchTheCpusTwoRanks) {
  REQUIRE_CUDA_DEVICE();
  BackendMemory* memory = current_table()->backend_memory(BackendId::kCuda);
  ASSERT_NE(memory, nullptr);
  if (memory->device_count() < 2) {
    GTEST_SKIP() << "needs two GPUs; this machine has " << memory->device_count();
  }
  expect_cuda_split_matches_cpu_split(2);
}

// Note [Recorded runs]: decode steps replayed from recordings give the bits of
// steps launched node by node, across the 256-row windows a decode step binds
// the cache in (each window is recorded once), and the recordings are used.
TEST(CudaLlamaRecordingTest, ReplayedDecodeStepsHaveThePlainStepsBits) {
  BackendMemory* memory = current_table()->backend_memory(BackendId::kCuda);
  ASSERT_NE(memory, nullptr);
  if (Status ready = memory->ready(); !ready.is_ok()) {
    GTEST_SKIP() << "needs a CUDA device: " << ready.message();
  }
  constexpr int kSteps = 300;
  std::vector<std::vector<float>> runs;
  for (bool record : {false, true}) {
    Result<GgufFile> file = synthetic(DType::kF32, 512);
    ASSERT_TRUE(file.is_ok()) << file.status().to_string();
    Registry registry({.sink = [](std::string_view) {}});
    LlamaLoadOptions o;
    o.backend = BackendId::kCuda;
    o.registry = &registry;
    o.max_context = 512;
    o.max_batch = 8;
    o.record_steps = record;
    Result<LlamaModel> model = LlamaModel::load(std::move(*file), o);
    ASSERT_TRUE(model.is_ok()) << model.status().to_string();
    const auto vocab = static_cast<std::size_t>(model->config().vocab_size);
    std::vector<float> all, logits(vocab);
    const std::int32_t prompt[] = {3, 14, 15, 92};
    ASSERT_TRUE(model->eval(prompt, logits).is_ok());
    all.insert(all.end(), logits.begin(), logits.end());
    for (int step = 0; step < kSteps; ++step) {
      const std::int32_t next = argmax_token(logits);
      const Status st = model->eval(std::span(&next, 1), logits);
      ASSERT_TRUE(st.is_ok()) << "step " << step << ": " << st.to_string();
      all.insert(all.end(), logits.begin(), logits.end());
    }
    const ExecStats& stats = model->executor_stats();
    if (record) {
      EXPECT_EQ(stats.recording_failures, 0u) << stats.last_recording_failure;
      // Windows [1, 256] and [257, 512]: each recorded on its third step.
      EXPECT_EQ(stats.recordings, 2u);
      EXPECT_GE(stats.replays, static_cast<std::uint64_t>(kSteps - 4));
    } else {
      EXPECT_EQ(stats.recordings + stats.replays, 0u);
    }
    runs.push_back(std::move(all));
  }
  ASSERT_EQ(runs[0].size(), runs[1].size());
  EXPECT_TRUE(std::equal(runs[0].begin(), runs[0].end(), runs[1].begin(), [](float a, float b) {
    return std::bit_cast<std::uint32_t>(a) == std::bit_cast<std::uint32_t>(b);
  }));
}

// The registry on the GPU's key space (docs/registry.md): a weight whose cuda
// kernel is masked is an accelerator violation named by tensor, role and dtype,
// and strict mode refuses the load before anything touches a device, so this
// runs without one too.
TEST(CudaLlamaRegistryTest, AMaskedCudaKernelIsNamedAndStrictModeRefuses) {
  Result<GgufFile> file = synthetic(DType::kBF16);
  ASSERT_TRUE(file.is_ok()) << file.status().to_string();
  Result<KernelMask> mask = KernelMask::parse("cuda:matmul:bf16");
  ASSERT_TRUE(mask.is_ok());
  ASSERT_TRUE(set_kernel_mask(*mask).is_ok());
  Registry registry({.strict = StrictPolicy::all(), .sink = [](std::string_view) {}});
  LlamaLoadOptions o;
  o.backend = BackendId::kCuda;
  o.registry = &registry;
  o.max_context = 32;
  Result<LlamaModel> model = LlamaModel::load(std::move(*file), o);
  ASSERT_TRUE(clear_kernel_mask().is_ok());
  ASSERT_FALSE(model.is_ok());
  EXPECT_EQ(model.status().code(), StatusCode::kFailedPrecondition);
  const std::string message(model.status().message());
  for (const char* part : {"cuda", "bf16", "attn_q"}) {
    EXPECT_NE(message.find(part), std::string::npos) << part << " in: " << message;
  }
}

}  // namespace
}  // namespace switchyard
