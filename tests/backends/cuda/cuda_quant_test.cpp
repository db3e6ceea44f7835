// The CUDA kernels over GGUF block-quantized weights: every weight format is bound
// (checked without a device too), prompts and decoding take the siblings meant for
// them, and on a GPU: dequantization gives the CPU's bits, both matmul siblings
// keep their claims against a float64 product of the dequantized weights, results
// repeat bit for bit, NaN activations reach their rows, an index out of range and
// a misaligned weight are errors.
#include <algorithm>
#include <bit>
#include <cmath>
#include <cstring>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "backends/cuda/cuda_test_util.h"
#include "switchyard/bucket_plan.h"
#include "switchyard/dispatch.h"
#include "switchyard/graph.h"
#include "switchyard/half.h"
#include "switchyard/plan.h"
#include "switchyard/quant.h"

namespace switchyard {
namespace {

using cuda_test::cuda_memory;
using cuda_test::DeviceBuffer;
using cuda_test::random_floats;
using cuda_test::run_entry;
using cuda_test::Stream;
using ::testing::HasSubstr;

constexpr DType kF32 = DType::kF32;

// Host bytes of `values` quantized to t (whole blocks).
std::vector<std::byte> quantized(DType t, const std::vector<float>& values) {
  const Result<std::int64_t> bytes = row_bytes(t, static_cast<std::int64_t>(values.size()));
  SWITCHYARD_CHECK_MSG(bytes.is_ok(), "whole blocks");
  std::vector<std::byte> out(static_cast<std::size_t>(*bytes));
  SWITCHYARD_CHECK_MSG(quantize(t, values, out).is_ok(), "finite values quantize");
  return out;
}

std::vector<float> dequantized(DType t, const std::vector<std::byte>& bytes, std::size_t n) {
  std::vector<float> out(n);
  SWITCHYARD_CHECK_MSG(dequantize(t, bytes, out).is_ok(), "sizes match");
  return out;
}

// The CUDA matmul sibling of weight format w whose name ends in `variant`.
const BindingEntry* matmul_sibling(DType w, std::string_view variant) {
  for (const BindingEntry& e : current_table()->lookup_alternatives(
           OpKind::kMatmul, DTypeList{kF32, w, kF32}, BackendId::kCuda)) {
    if (e.name.ends_with(variant)) return &e;
  }
  return nullptr;
}

// The weights' row length: several 256-element super-blocks, or an odd number of
// 32-element blocks (fewer chunks than a warp has lanes).
std::int64_t row_length(DType w) { return block_elems(w) == 32 ? 96 + 32 * 13 : 512; }

// --- without a device (CI) as with one -----------------------------------------------

TEST(CudaQuantTest, EveryWeightFormatIsBoundWithOrWithoutADevice) {
  const TableSnapshot table = current_table();
  for (DType w : kQuantizedWeightDTypes) {
    SCOPED_TRACE(name(w));
    const auto alts =
        table->lookup_alternatives(OpKind::kMatmul, DTypeList{kF32, w, kF32}, BackendId::kCuda);
    ASSERT_EQ(alts.size(), 2u);
    const std::string key = fmt::format("matmul_f32_{}_f32__cuda_", name(w));
    EXPECT_EQ(alts[0].name, key + "cublaslt_bf16");
    EXPECT_EQ(alts[1].name, key + "dp4a");
    for (DType out : {DType::kF32, DType::kF16, DType::kBF16}) {
      EXPECT_TRUE(
          table->backend_supports(OpKind::kGetRows, {w, DType::kI32, out}, BackendId::kCuda));
      EXPECT_TRUE(table->backend_supports(OpKind::kCast, {w, out}, BackendId::kCuda));
    }
  }
}

// Planning needs no device: a prompt bucket takes the bf16 tiles (Note [Quantized
// prompts on the tensor cores]) and decoding the matrix-vector kernel, through
// the tile sibling's shape admission.
TEST(CudaQuantTest, PromptsTakeTheBf16TilesAndDecodingTheMatvec) {
  const std::vector<std::byte> w = quantized(DType::kQ4_K, random_floats(32 * 256, 1));
  GraphBuilder b;
  const std::int64_t t = b.symbol("tokens");
  const ValueId x = b.input("x", kF32, {t, 256});
  const ValueId weight = b.constant_borrowed("w", DType::kQ4_K, {32, 256}, w.data());
  b.output(b.op(OpKind::kMatmul, {x, weight}, "proj"));
  Result<Graph> graph = std::move(b).build();
  ASSERT_TRUE(graph.is_ok()) << graph.status().to_string();
  PlanOptions options;
  options.policy.preferred = {BackendId::kCuda};
  options.buckets = {{"decode", {{"tokens", 1, 1}}}, {"prompt", {{"tokens", 2, 64}}}};
  options.record_in_registry = false;
  Result<ExecutionPlan> plan = plan_graph(*graph, current_table(), options);
  ASSERT_TRUE(plan.is_ok()) << plan.status().to_string();
  std::vector<std::string> kernels;
  for (std::size_t i = 0; i < plan->bucket_count(); ++i) {
    for (const PlannedStep& step : plan->bucket(i).steps) {
      if (step.kind == StepKind::kKernel) kernels.push_back(step.entry->name);
    }
  }
  EXPECT_THAT(kernels, ::testing::ElementsAre("matmul_f32_q4_k_f32__cuda_dp4a",
                                              "matmul_f32_q4_k_f32__cuda_cublaslt_bf16"));
}

// --- on a device, per format ------------------------------------------------------------

class CudaQuantFormatTest : public ::testing::TestWithParam<DType> {};

// Note [Levels fit a signed byte]: casts and get_rows give the CPU dequantizer's
// f32 bits, and those rounded once to f16 and bf16; an index out of range is an
// error found on the device.
TEST_P(CudaQuantFormatTest, DequantizesToTheCpusBits) {
  REQUIRE_CUDA_DEVICE();
  const DType w = GetParam();
  const std::int64_t rows = 6, k = row_length(w);
  const std::vector<std::byte> bytes = quantized(w, random_floats(rows * k, 2));
  const std::vector<float> ref = dequantized(w, bytes, static_cast<std::size_t>(rows * k));
  const TensorView table =
      TensorView::contiguous(const_cast<std::byte*>(bytes.data()), w, Shape{rows, k});
  for (DType out : {DType::kF32, DType::kF16, DType::kBF16}) {
    SCOPED_TRACE(name(out));
    auto expected_bits = [&](float v) -> std::uint32_t {
      if (out == DType::kF16) return f32_to_f16(v);
      if (out == DType::kBF16) return f32_to_bf16(v);
      return std::bit_cast<std::uint32_t>(v);
    };
    auto got_bits = [&](const std::vector<std::uint32_t>& raw, std::size_t i) -> std::uint32_t {
      if (out == DType::kF32) return raw[i];
      std::uint16_t h;
      std::memcpy(&h, reinterpret_cast<const std::byte*>(raw.data()) + 2 * i, 2);
      return h;
    };
    std::vector<std::uint32_t> raw(static_cast<std::size_t>(rows * k), 0xdeadbeef);
    const TensorView cast_out = TensorView::contiguous(raw.data(), out, Shape{rows, k});
    Result<const BindingEntry*> cast =
        current_table()->lookup(OpKind::kCast, {w, out}, BackendId::kCuda);
    ASSERT_TRUE(cast.is_ok());
    ASSERT_TRUE(run_entry(**cast, std::span(&table, 1), cast_out, {}).is_ok());
    for (std::size_t i = 0; i < ref.size(); ++i) {
      ASSERT_EQ(got_bits(raw, i), expected_bits(ref[i])) << "element " << i << " of " << ref[i];
    }

    std::vector<std::int32_t> idx = {5, 0, 3, 3};
    std::fill(raw.begin(), raw.end(), 0xdeadbeef);
    const TensorView rows_out = TensorView::contiguous(raw.data(), out, Shape{4, k});
    const TensorView in[] = {table, TensorView::contiguous(idx.data(), DType::kI32, Shape{4})};
    Result<const BindingEntry*> get =
        current_table()->lookup(OpKind::kGetRows, {w, DType::kI32, out}, BackendId::kCuda);
    ASSERT_TRUE(get.is_ok());
    ASSERT_TRUE(run_entry(**get, in, rows_out, {}).is_ok());
    for (std::size_t r = 0; r < idx.size(); ++r) {
      for (std::int64_t j = 0; j < k; j += 7) {
        const auto src = static_cast<std::size_t>(idx[r] * k + j);
        ASSERT_EQ(got_bits(raw, r * static_cast<std::size_t>(k) + static_cast<std::size_t>(j)),
                  expected_bits(ref[src]))
            << "row " << r << ", column " << j;
      }
    }
    idx = {1, static_cast<std::int32_t>(rows)};
    const TensorView bad[] = {table, TensorView::contiguous(idx.data(), DType::kI32, Shape{2})};
    const Status st =
        run_entry(**get, bad, TensorView::contiguous(raw.data(), out, Shape{2, k}), {});
    EXPECT_EQ(st.code(), StatusCode::kOutOfRange) << st.to_string();
  }
}

struct ProductCheck {
  double worst = 0;  // |got - exact| / sum |a w| over finite rows
  bool nan_rows_are_nan = true, other_rows_finite = true;
};

// out against a float64 product of the stored activations and dequantized weights.
ProductCheck check_product(const std::vector<float>& a, const std::vector<float>& w,
                           const std::vector<float>& out, std::int64_t m, std::int64_t n,
                           std::int64_t k, std::int64_t nan_row) {
  ProductCheck c;
  for (std::int64_t r = 0; r < m; ++r) {
    for (std::int64_t col = 0; col < n; ++col) {
      const float got = out[static_cast<std::size_t>(r * n + col)];
      if (r == nan_row) {
        c.nan_rows_are_nan = c.nan_rows_are_nan && std::isnan(got);
        continue;
      }
      c.other_rows_finite = c.other_rows_finite && std::isfinite(got);
      double exact = 0, scale = 0;
      for (std::int64_t i = 0; i < k; ++i) {
        const double p = double(a[static_cast<std::size_t>(r * k + i)]) *
                         w[static_cast<std::size_t>(col * k + i)];
        exact += p;
        scale += std::abs(p);
      }
      c.worst = std::max(c.worst, std::abs(got - exact) / scale);
    }
  }
  return c;
}

// Both siblings at their claims (1/64 for 8-bit activations, 1/128 for bf16
// tiles), at row counts that take one and two groups of the matrix-vector
// kernel's rows and a weight count no block of warps divides; the same bits on
// a second run; a NaN in one activation row makes that row NaN and no other.
TEST_P(CudaQuantFormatTest, BothMatmulSiblingsKeepTheirClaims) {
  REQUIRE_CUDA_DEVICE();
  const DType wt = GetParam();
  constexpr std::int64_t kN = 37;
  const std::int64_t k = row_length(wt);
  const std::vector<std::byte> bytes = quantized(wt, random_floats(kN * k, 3, 0.5f));
  const std::vector<float> w = dequantized(wt, bytes, static_cast<std::size_t>(kN * k));
  struct Case {
    std::string_view variant;
    std::int64_t m;
    double claim;
  };
  for (const Case& c : {Case{"dp4a", 1, 1.0 / 64}, Case{"dp4a", 3, 1.0 / 64},
                        Case{"dp4a", 9, 1.0 / 64}, Case{"cublaslt_bf16", 20, 1.0 / 128}}) {
    SCOPED_TRACE(::testing::Message() << c.variant << ", " << c.m << " rows");
    const BindingEntry* e = matmul_sibling(wt, c.variant);
    ASSERT_NE(e, nullptr);
    std::vector<float> a = random_floats(static_cast<std::size_t>(c.m * k), 4);
    const std::int64_t nan_row = c.m > 1 ? 1 : -1;
    if (nan_row >= 0) a[static_cast<std::size_t>(nan_row * k + 5)] = std::nanf("");
    const TensorView in[] = {
        TensorView::contiguous(a.data(), kF32, Shape{c.m, k}),
        TensorView::contiguous(const_cast<std::byte*>(bytes.data()), wt, Shape{kN, k})};
    std::vector<std::vector<float>> runs;
    for (int run = 0; run < 2; ++run) {
      std::vector<float> out(static_cast<std::size_t>(c.m * kN), -7.0f);
      const Status st =
          run_entry(*e, in, TensorView::contiguous(out.data(), kF32, Shape{c.m, kN}), {});
      ASSERT_TRUE(st.is_ok()) << st.to_string();
      runs.push_back(std::move(out));
    }
    EXPECT_EQ(std::memcmp(runs[0].data(), runs[1].data(), runs[0].size() * sizeof(float)), 0);
    const ProductCheck check = check_product(a, w, runs[0], c.m, kN, k, nan_row);
    EXPECT_TRUE(check.nan_rows_are_nan);
    EXPECT_TRUE(check.other_rows_finite);
    EXPECT_LE(check.worst, c.claim);
  }
}

INSTANTIATE_TEST_SUITE_P(Formats, CudaQuantFormatTest,
                         ::testing::ValuesIn(kQuantizedWeightDTypes.begin(),
                                             kQuantizedWeightDTypes.end()),
                         [](const auto& param) { return std::string(name(param.param)); });

// --- on a device, one format ------------------------------------------------------------

// A weight larger than one bf16 tile (Note [Quantized prompts on the tensor
// cores]: 64 Mi weights) is multiplied a tile of rows at a time into the right
// columns; sampled columns of every tile against float64.
TEST(CudaQuantTest, APromptOverSeveralTilesFillsEveryColumn) {
  REQUIRE_CUDA_DEVICE();
  constexpr std::int64_t kM = 16, kN = 16640 + 3 * 256, kK = 4096;  // 71 Mi weights: 2 tiles
  const DType wt = DType::kQ8_0;
  const std::vector<std::byte> bytes = quantized(wt, random_floats(kN * kK, 5, 0.5f));
  const std::vector<float> a = random_floats(kM * kK, 6);
  std::vector<float> out(kM * kN, std::nanf(""));
  const TensorView in[] = {
      TensorView::contiguous(const_cast<float*>(a.data()), kF32, Shape{kM, kK}),
      TensorView::contiguous(const_cast<std::byte*>(bytes.data()), wt, Shape{kN, kK})};
  const BindingEntry* e = matmul_sibling(wt, "cublaslt_bf16");
  ASSERT_NE(e, nullptr);
  ASSERT_TRUE(
      run_entry(*e, in, TensorView::contiguous(out.data(), kF32, Shape{kM, kN}), {}).is_ok());
  const Result<std::int64_t> row = row_bytes(wt, kK);
  ASSERT_TRUE(row.is_ok());
  double worst = 0;
  for (std::int64_t col = 0; col < kN; col += 61) {
    std::vector<float> wrow(kK);
    ASSERT_TRUE(dequantize(wt,
                           std::span(bytes).subspan(static_cast<std::size_t>(col * *row),
                                                    static_cast<std::size_t>(*row)),
                           wrow)
                    .is_ok());
    for (std::int64_t r = 0; r < kM; ++r) {
      double exact = 0, scale = 0;
      for (std::int64_t i = 0; i < kK; ++i) {
        const double p = double(a[static_cast<std::size_t>(r * kK + i)]) * wrow[i];
        exact += p;
        scale += std::abs(p);
      }
      const float got = out[static_cast<std::size_t>(r * kN + col)];
      ASSERT_TRUE(std::isfinite(got)) << "row " << r << ", column " << col;
      worst = std::max(worst, std::abs(got - exact) / scale);
    }
  }
  EXPECT_LE(worst, 1.0 / 128);
}

// One and two activation rows take the matrix-vector kernel's one- and
// two-row forms over rows of several steps (Note [Staging weights in shared
// memory]), the last one partial, and more weight rows than one wave of blocks
// holds: both give the same bits for the same row and keep the 8-bit
// activations' claim.
TEST(CudaQuantTest, OneAndTwoRowsGiveTheSameBitsOverSeveralSteps) {
  REQUIRE_CUDA_DEVICE();
  for (DType wt : {DType::kQ4_0, DType::kQ4_K, DType::kQ6_K}) {
    SCOPED_TRACE(std::string(name(wt)));
    const BindingEntry* e = matmul_sibling(wt, "dp4a");
    ASSERT_NE(e, nullptr);
    // 5001 rows: more than one wave of 4-warp blocks; 4864 values: one
    // 4096-value step and part of another.
    constexpr std::int64_t kN = 5001, kK = 4864;
    const std::vector<std::byte> bytes = quantized(wt, random_floats(kN * kK, 7, 0.5f));
    std::vector<float> a = random_floats(kK, 8);
    a.insert(a.end(), a.begin(), a.end());  // two equal rows
    const auto run = [&](std::int64_t m) {
      std::vector<float> out(static_cast<std::size_t>(m * kN), -7.0f);
      const TensorView in[] = {
          TensorView::contiguous(a.data(), kF32, Shape{m, kK}),
          TensorView::contiguous(const_cast<std::byte*>(bytes.data()), wt, Shape{kN, kK})};
      const Status st =
          run_entry(*e, in, TensorView::contiguous(out.data(), kF32, Shape{m, kN}), {});
      EXPECT_TRUE(st.is_ok()) << st.to_string();
      return out;
    };
    const std::vector<float> one = run(1), two = run(2);
    ASSERT_EQ(std::memcmp(one.data(), two.data(), one.size() * sizeof(float)), 0);
    ASSERT_EQ(std::memcmp(one.data(), two.data() + kN, one.size() * sizeof(float)), 0);
    const std::vector<float> w = dequantized(wt, bytes, static_cast<std::size_t>(kN * kK));
    EXPECT_LE(check_product(a, w, one, 1, kN, kK, -1).worst, 1.0 / 64);
  }
}

// A quantized weight must start on its format's alignment (Note [Reading blocks
// on the device]); one that does not is refused by name, not read crooked.
TEST(CudaQuantTest, AMisalignedWeightIsRefused) {
  REQUIRE_CUDA_DEVICE();
  const BindingEntry* e = matmul_sibling(DType::kQ4_K, "dp4a");
  ASSERT_NE(e, nullptr);
  DeviceBuffer a(4 * 256), w(144 * 4 + 16), out(4 * 4);
  Stream stream;
  const TensorView in[] = {TensorView::contiguous(a.get(), kF32, Shape{1, 256}, BackendId::kCuda),
                           TensorView::contiguous(static_cast<std::byte*>(w.get()) + 4,
                                                  DType::kQ4_K, Shape{4, 256}, BackendId::kCuda)};
  const TensorView o = TensorView::contiguous(out.get(), kF32, Shape{1, 4}, BackendId::kCuda);
  ExecContext ctx{.stream = stream.get()};
  const Status st = e->fn({.inputs = in,
                           .outputs = std::span<const TensorView>(&o, 1),
                           .params = OpParams{},
                           .ctx = ctx,
                           .name = e->name});
  EXPECT_EQ(st.code(), StatusCode::kInvalidArgument);
  EXPECT_THAT(st.message(), HasSubstr("16-byte"));
  EXPECT_THAT(st.message(), HasSubstr(e->name));
}

}  // namespace
}  // namespace switchyard
