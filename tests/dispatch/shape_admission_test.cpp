// Shape admission (KernelOptions::admits): a sibling that serves only some shapes
// is listed among the alternatives but never handed out by a shape-blind lookup.
#include <gtest/gtest.h>

#include "switchyard/binding_table.h"

namespace switchyard {
namespace {

Status kernel_a(const KernelCall&) { return Status::ok(); }
Status kernel_b(const KernelCall&) { return Status::ok(); }

bool one_row(std::span<const Shape> shapes) { return !shapes.empty() && shapes[0].outer() == 1; }

const DTypeList kKey{DType::kF32, DType::kF32, DType::kF32};

TEST(ShapeAdmission, ShapeBlindLookupsSkipRestrictedSiblings) {
  KernelBindingTable table;
  table.register_kernel(OpKind::kMatmul, kKey, BackendId::kCpu, &kernel_a,
                        {.name = "matmul_f32__cpu_rows", .admits = &one_row});
  table.register_kernel(OpKind::kMatmul, kKey, BackendId::kCpu, &kernel_b,
                        {.name = "matmul_f32__cpu_any"});
  ASSERT_TRUE(table.finalize().is_ok());
  Result<const BindingEntry*> e = table.lookup_with_caps(OpKind::kMatmul, kKey, BackendId::kCpu);
  ASSERT_TRUE(e.is_ok());
  EXPECT_EQ((*e)->name, "matmul_f32__cpu_any");
  EXPECT_EQ(table.lookup_alternatives(OpKind::kMatmul, kKey, BackendId::kCpu).size(), 2u);

  const BindingEntry& restricted =
      table.lookup_alternatives(OpKind::kMatmul, kKey, BackendId::kCpu)[0];
  const Shape single[] = {Shape{1, 8}, Shape{4, 8}, Shape{1, 4}};
  const Shape several[] = {Shape{3, 8}, Shape{4, 8}, Shape{3, 4}};
  EXPECT_TRUE(restricted.admits_shapes(single));
  EXPECT_FALSE(restricted.admits_shapes(several));
  EXPECT_TRUE((*e)->admits_shapes(several));
}

TEST(ShapeAdmission, OnlyRestrictedSiblingsIsAMissThatSaysWhy) {
  KernelBindingTable table;
  table.register_kernel(OpKind::kMatmul, kKey, BackendId::kCpu, &kernel_a,
                        {.name = "matmul_f32__cpu_rows", .admits = &one_row});
  ASSERT_TRUE(table.finalize().is_ok());
  EXPECT_FALSE(table.backend_supports(OpKind::kMatmul, kKey, BackendId::kCpu));
  Result<const BindingEntry*> e = table.lookup_with_caps(OpKind::kMatmul, kKey, BackendId::kCpu);
  ASSERT_FALSE(e.is_ok());
  EXPECT_EQ(e.status().code(), StatusCode::kNotFound);
  EXPECT_NE(e.status().message().find("serves only the shapes it admits"), std::string::npos)
      << e.status().message();
  // The plain lookup still returns the first sibling: it makes no shape promise.
  EXPECT_TRUE(table.lookup(OpKind::kMatmul, kKey, BackendId::kCpu).is_ok());
}

}  // namespace
}  // namespace switchyard
