// The portable reference kernels registered by the foundation: f32 add, mul,
// matmul and the float casts (add, mul and the casts now come from the elementwise
// family's accessors; cpu_elementwise_test.cpp covers every sibling).
#include <cmath>
#include <vector>

#include <gtest/gtest.h>

#include "backends/cpu/elementwise/elementwise.h"
#include "backends/cpu/gemm/dense_reference.h"
#include "switchyard/half.h"
#include "switchyard/thread_pool.h"

namespace switchyard {
namespace {

KernelFn ref_binary(OpKind op) { return cpu::binary_kernel(op, DType::kF32, cpu::Variant::kRef); }
KernelFn ref_cast(DType from, DType to) { return cpu::cast_kernel(from, to, cpu::Variant::kRef); }

Status run(KernelFn fn, std::vector<TensorView> in, std::vector<TensorView> out,
           ParallelRunner* runner = nullptr) {
  OpParams params;
  ExecContext ctx{.runner = runner};
  return fn({.inputs = in, .outputs = out, .params = params, .ctx = ctx});
}

TEST(CpuReferenceTest, AddBroadcastsThroughStrideZero) {
  std::vector<float> a = {1, 2, 3, 4, 5, 6};  // [2, 3]
  std::vector<float> b = {10, 20, 30};        // broadcast over rows
  std::vector<float> out(6, -1);
  const std::int64_t bstrides[] = {0, 1};
  ASSERT_TRUE(run(ref_binary(OpKind::kAdd),
                  {TensorView::contiguous(a.data(), DType::kF32, {2, 3}),
                   TensorView::strided(b.data(), DType::kF32, {2, 3}, bstrides)},
                  {TensorView::contiguous(out.data(), DType::kF32, {2, 3})})
                  .is_ok());
  EXPECT_EQ(out, (std::vector<float>{11, 22, 33, 14, 25, 36}));
}

TEST(CpuReferenceTest, MulRejectsShapeAndDtypeMismatch) {
  std::vector<float> a(6), out(4);
  Status s = run(ref_binary(OpKind::kMul),
                 {TensorView::contiguous(a.data(), DType::kF32, {2, 3}),
                  TensorView::contiguous(a.data(), DType::kF32, {2, 3})},
                 {TensorView::contiguous(out.data(), DType::kF32, {2, 2})});
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  Status d = run(ref_binary(OpKind::kMul),
                 {TensorView::contiguous(a.data(), DType::kF16, {2, 3}),
                  TensorView::contiguous(a.data(), DType::kF32, {2, 3})},
                 {TensorView::contiguous(a.data(), DType::kF32, {2, 3})});
  EXPECT_EQ(d.code(), StatusCode::kInvalidArgument);
  Status arity = run(ref_binary(OpKind::kMul), {TensorView::contiguous(a.data(), DType::kF32, {6})},
                     {TensorView::contiguous(a.data(), DType::kF32, {6})});
  EXPECT_EQ(arity.code(), StatusCode::kInvalidArgument);
}

TEST(CpuReferenceTest, MatmulMatchesHandComputedAndIsThreadDeterministic) {
  // a [2, 3] x w [2, 3] (rows are output features) -> [2, 2]
  std::vector<float> a = {1, 2, 3, 4, 5, 6};
  std::vector<float> w = {1, 0, -1, 2, 1, 0};
  std::vector<float> out(4);
  ASSERT_TRUE(run(&cpu::matmul_f32_ref,
                  {TensorView::contiguous(a.data(), DType::kF32, {2, 3}),
                   TensorView::contiguous(w.data(), DType::kF32, {2, 3})},
                  {TensorView::contiguous(out.data(), DType::kF32, {2, 2})})
                  .is_ok());
  EXPECT_EQ(out, (std::vector<float>{-2, 4, -2, 13}));

  const int m = 37, n = 19, k = 53;
  std::vector<float> x(m * k), wt(n * k), one(m * n), three(m * n);
  for (int i = 0; i < m * k; ++i) x[i] = std::sin(0.1f * i);
  for (int i = 0; i < n * k; ++i) wt[i] = std::cos(0.07f * i);
  ThreadPool pool(3);
  auto call = [&](std::vector<float>& o, ParallelRunner* r) {
    return run(&cpu::matmul_f32_ref,
               {TensorView::contiguous(x.data(), DType::kF32, {m, k}),
                TensorView::contiguous(wt.data(), DType::kF32, {n, k})},
               {TensorView::contiguous(o.data(), DType::kF32, {m, n})}, r);
  };
  ASSERT_TRUE(call(one, nullptr).is_ok());
  ASSERT_TRUE(call(three, &pool).is_ok());
  EXPECT_EQ(one, three);
}

TEST(CpuReferenceTest, MatmulRejectsMismatchedInnerDimension) {
  std::vector<float> a(6), w(8), out(4);
  Status s = run(&cpu::matmul_f32_ref,
                 {TensorView::contiguous(a.data(), DType::kF32, {2, 3}),
                  TensorView::contiguous(w.data(), DType::kF32, {2, 4})},
                 {TensorView::contiguous(out.data(), DType::kF32, {2, 2})});
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
}

TEST(CpuReferenceTest, CastsRoundTripThroughHalfTypes) {
  std::vector<float> src = {0.0f, 1.0f, -2.5f, 65504.0f, 1e-8f, 3.14159f};
  std::vector<std::uint16_t> half(src.size()), bf(src.size()), hb(src.size());
  std::vector<float> back(src.size());
  const std::int64_t n = static_cast<std::int64_t>(src.size());
  auto view = [n](void* p, DType t) { return TensorView::contiguous(p, t, {n}); };
  ASSERT_TRUE(run(ref_cast(DType::kF32, DType::kF16), {view(src.data(), DType::kF32)},
                  {view(half.data(), DType::kF16)})
                  .is_ok());
  for (std::size_t i = 0; i < src.size(); ++i) EXPECT_EQ(half[i], f32_to_f16(src[i]));
  ASSERT_TRUE(run(ref_cast(DType::kF16, DType::kF32), {view(half.data(), DType::kF16)},
                  {view(back.data(), DType::kF32)})
                  .is_ok());
  for (std::size_t i = 0; i < src.size(); ++i) EXPECT_EQ(back[i], f16_to_f32(half[i]));
  ASSERT_TRUE(run(ref_cast(DType::kF32, DType::kBF16), {view(src.data(), DType::kF32)},
                  {view(bf.data(), DType::kBF16)})
                  .is_ok());
  for (std::size_t i = 0; i < src.size(); ++i) EXPECT_EQ(bf[i], f32_to_bf16(src[i]));
  ASSERT_TRUE(run(ref_cast(DType::kF16, DType::kBF16), {view(half.data(), DType::kF16)},
                  {view(hb.data(), DType::kBF16)})
                  .is_ok());
  for (std::size_t i = 0; i < src.size(); ++i) {
    EXPECT_EQ(hb[i], f32_to_bf16(f16_to_f32(half[i])));
  }
  // A strided source is refused rather than misread.
  const std::int64_t stride2[] = {2};
  Status s = run(ref_cast(DType::kF32, DType::kF16),
                 {TensorView::strided(src.data(), DType::kF32, {3}, stride2)},
                 {TensorView::contiguous(half.data(), DType::kF16, {3})});
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace switchyard
