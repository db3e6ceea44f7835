#include "switchyard/tensor.h"

#include <vector>

#include <gtest/gtest.h>

namespace switchyard {
namespace {

TEST(TensorViewTest, ContiguousViewsAndStrides) {
  float data[24] = {};
  TensorView v = TensorView::contiguous(data, DType::kF32, {2, 3, 4});
  EXPECT_TRUE(v.is_contiguous());
  EXPECT_FALSE(v.has_broadcast());
  EXPECT_EQ(v.numel(), 24);
  EXPECT_EQ(std::vector<std::int64_t>(v.strides().begin(), v.strides().end()),
            (std::vector<std::int64_t>{12, 4, 1}));
  EXPECT_EQ(v.shape().outer(), 6);
  EXPECT_EQ(v.shape().inner(), 4);
  EXPECT_EQ(describe(v), "f32[2, 3, 4]");
}

TEST(TensorViewTest, BroadcastTransposeAndOffsetPredicates) {
  float data[12] = {};
  const std::int64_t broadcast[] = {0, 1};
  TensorView b = TensorView::strided(data, DType::kF32, {3, 4}, broadcast);
  EXPECT_TRUE(b.has_broadcast());
  EXPECT_FALSE(b.is_contiguous());
  EXPECT_TRUE(b.inner_contiguous());

  const std::int64_t transposed[] = {1, 3};
  TensorView t = TensorView::strided(data, DType::kF32, {4, 3}, transposed);
  EXPECT_FALSE(t.is_contiguous());
  EXPECT_FALSE(t.inner_contiguous());
  EXPECT_NE(describe(t).find("strides [1, 3]"), std::string::npos);

  const std::int64_t rows[] = {4, 1};
  TensorView o = TensorView::strided(data, DType::kF32, {2, 4}, rows, 4);
  EXPECT_TRUE(o.is_contiguous());
  EXPECT_EQ(o.first_as<float>(), data + 4);

  // Size-1 dimensions never break contiguity, whatever their stride.
  const std::int64_t odd[] = {99, 1};
  EXPECT_TRUE(TensorView::strided(data, DType::kF32, {1, 4}, odd).is_contiguous());
}

TEST(TensorViewTest, QuantizedByteOffsetsFollowBlocks) {
  std::byte data[4 * 144] = {};
  TensorView q = TensorView::contiguous(data, DType::kQ4_K, {2, 512});
  EXPECT_EQ(q.byte_offset(512), 2 * 144);
  const std::int64_t strides[] = {512, 1};
  TensorView row1 = TensorView::strided(data, DType::kQ4_K, {1, 512}, strides, 512);
  EXPECT_EQ(row1.first(), data + 288);
}

TEST(TensorViewTest, ReshapeKeepsDataAndRejectsMismatches) {
  float data[6] = {};
  TensorView v = TensorView::contiguous(data, DType::kF32, {2, 3});
  Result<TensorView> r = v.reshaped({3, 2});
  ASSERT_TRUE(r.is_ok());
  EXPECT_EQ(r->data(), data);
  EXPECT_EQ(v.reshaped({4, 2}).status().code(), StatusCode::kInvalidArgument);
  const std::int64_t transposed[] = {1, 2};
  TensorView t = TensorView::strided(data, DType::kF32, {3, 2}, transposed);
  EXPECT_EQ(t.reshaped({6}).status().code(), StatusCode::kFailedPrecondition);
}

TEST(ShapeTest, MakeShapeValidates) {
  const std::int64_t ok[] = {2, 0, 3};
  EXPECT_TRUE(make_shape(ok).is_ok());
  const std::int64_t negative[] = {2, -1};
  EXPECT_EQ(make_shape(negative).status().code(), StatusCode::kInvalidArgument);
  const std::int64_t huge[] = {std::int64_t{1} << 40, std::int64_t{1} << 40};
  EXPECT_EQ(make_shape(huge).status().code(), StatusCode::kOutOfRange);
  const std::int64_t deep[] = {1, 1, 1, 1, 1, 1, 1};
  EXPECT_EQ(make_shape(deep).status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(Shape({}).numel(), 1);
}

}  // namespace
}  // namespace switchyard
