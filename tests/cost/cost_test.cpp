#include "switchyard/cost.h"

#include <gtest/gtest.h>

#include "switchyard/kernel.h"

namespace switchyard {
namespace {

struct Call {
  std::vector<Shape> shapes;
  std::vector<DType> dtypes;
  OpKind op;
  CostInputs inputs() const { return {.op = op, .shapes = shapes, .dtypes = dtypes}; }
};

Call matmul_call() {
  return {{Shape{2, 4, 8}, Shape{16, 8}, Shape{2, 4, 16}},
          {DType::kF32, DType::kQ4_0, DType::kF32},
          OpKind::kMatmul};
}

TEST(CostExprTest, EvaluatesMatmulSymbolsAndOperandFunctions) {
  Result<CostExpr> expr = CostExpr::compile("2*m*n*k", "m*k*dtype_bytes(a) + bytes(b)", "100");
  ASSERT_TRUE(expr.is_ok()) << expr.status().to_string();
  const Call call = matmul_call();
  Result<CostEstimate> c = expr->evaluate(call.inputs());
  ASSERT_TRUE(c.is_ok()) << c.status().to_string();
  // m counts every activation row (batch folded in): 2*4 = 8.
  EXPECT_DOUBLE_EQ(c->flops, 2.0 * 8 * 16 * 8);
  EXPECT_DOUBLE_EQ(c->bytes, 8 * 8 * 4.0 + 16 * 8 * (18.0 / 32));
  EXPECT_DOUBLE_EQ(c->overhead_ns, 100);
  EXPECT_TRUE(c->known);
}

TEST(CostExprTest, PrecedenceParenthesesNegationAndDims) {
  const Call call = matmul_call();
  auto eval = [&](const char* src) {
    Result<CostExpr> e = CostExpr::compile(src, "0");
    EXPECT_TRUE(e.is_ok()) << src << ": " << e.status().to_string();
    return e->evaluate(call.inputs())->flops;
  };
  EXPECT_DOUBLE_EQ(eval("1 + 2 * 3"), 7);
  EXPECT_DOUBLE_EQ(eval("(1 + 2) * 3"), 9);
  EXPECT_DOUBLE_EQ(eval("10 - 4 - 3"), 3);  // left associative
  EXPECT_DOUBLE_EQ(eval("-2 * -3"), 6);
  EXPECT_DOUBLE_EQ(eval("8 / 2 / 2"), 2);
  EXPECT_DOUBLE_EQ(eval("dim(a, 0) + dim(a, -1)"), 2 + 8);
  EXPECT_DOUBLE_EQ(eval("rows(out) * cols(out)"), 8 * 16);
  EXPECT_DOUBLE_EQ(eval("numel(c)"), 2 * 4 * 16);
  EXPECT_DOUBLE_EQ(eval("1.5e3"), 1500);
}

TEST(CostExprTest, SyntaxErrorsAndUnknownNamesFailAtCompile) {
  for (const char* bad : {"2*", "(1+2", "1 2", "q", "numel(z)", "dim(a)", "foo(a)", ""}) {
    Result<CostExpr> e = CostExpr::compile(bad, "0");
    EXPECT_FALSE(e.is_ok()) << "'" << bad << "' compiled";
    if (!e.is_ok()) {
      EXPECT_EQ(e.status().code(), StatusCode::kInvalidArgument);
    }
  }
}

TEST(CostExprTest, UndefinedSymbolsAndDivisionByZeroFailAtEvaluation) {
  Call add{{Shape{4}, Shape{4}, Shape{4}}, {DType::kF32, DType::kF32, DType::kF32}, OpKind::kAdd};
  // m/n/k mean nothing for an elementwise op: an error, not a silent zero.
  Result<CostExpr> mnk = CostExpr::compile("m*n", "0");
  ASSERT_TRUE(mnk.is_ok());
  Result<CostEstimate> r = mnk->evaluate(add.inputs());
  ASSERT_FALSE(r.is_ok());
  EXPECT_NE(r.status().message().find("only for matmul"), std::string_view::npos);

  Result<CostExpr> missing = CostExpr::compile("numel(e)", "0");
  ASSERT_TRUE(missing.is_ok());
  EXPECT_FALSE(missing->evaluate(add.inputs()).is_ok());

  Result<CostExpr> div = CostExpr::compile("numel(a) / (numel(a) - 4)", "0");
  ASSERT_TRUE(div.is_ok());
  Result<CostEstimate> d = div->evaluate(add.inputs());
  ASSERT_FALSE(d.is_ok());
  EXPECT_NE(d.status().message().find("division by zero"), std::string_view::npos);

  Result<CostExpr> bad_dim = CostExpr::compile("dim(a, 3)", "0");
  ASSERT_TRUE(bad_dim.is_ok());
  EXPECT_FALSE(bad_dim->evaluate(add.inputs()).is_ok());
}

TEST(CostTest, DefaultCostsFollowTheRoofline) {
  Call add{{Shape{1000}, Shape{1000}, Shape{1000}},
           {DType::kF32, DType::kF32, DType::kF32},
           OpKind::kAdd};
  CostEstimate e = default_cost_for(OpKind::kAdd)(add.inputs());
  EXPECT_DOUBLE_EQ(e.flops, 1000);
  EXPECT_DOUBLE_EQ(e.bytes, 12000);
  const Call mm = matmul_call();
  CostEstimate m = default_cost_for(OpKind::kMatmul)(mm.inputs());
  EXPECT_DOUBLE_EQ(m.flops, 2.0 * 8 * 16 * 8);
  for (OpKind op : kAllOps) EXPECT_NE(default_cost_for(op), &unknown_cost) << name(op);
  EXPECT_FALSE(unknown_cost(add.inputs()).known);

  const BackendCaps caps{.peak_gflops = 100, .memory_gbps = 10, .call_overhead_ns = 5};
  // Memory bound: 12000 bytes at 10 bytes/ns = 1200 ns, plus overhead.
  EXPECT_DOUBLE_EQ(e.time_ns(caps), 1205);
}

// Note [Collective cost]: ring collectives over four ranks of 1000 f32 values.
TEST(CostTest, CollectivesCostAsRings) {
  OpParams params;
  params.ranks = 4;
  const BackendCaps caps{.link_hop_ns = 100};
  const auto cost = [&](OpKind op, Shape in, Shape out) {
    const Shape shapes[] = {in, out};
    const DType dtypes[] = {DType::kF32, DType::kF32};
    return default_cost_for(op)(
        {.op = op, .shapes = shapes, .dtypes = dtypes, .params = &params, .caps = &caps});
  };
  // all_reduce: 2 x 3/4 of 4000 bytes out and in, 6 hops, 3/4 of the additions.
  const CostEstimate reduce = cost(OpKind::kAllReduce, Shape{1000}, Shape{1000});
  EXPECT_DOUBLE_EQ(reduce.bytes, 4 * 0.75 * 4000);
  EXPECT_DOUBLE_EQ(reduce.overhead_ns, 600);
  EXPECT_DOUBLE_EQ(reduce.flops, 750);
  // all_gather: 3/4 of the 4000-byte result in 3 hops, no additions.
  const CostEstimate gather = cost(OpKind::kAllGather, Shape{250}, Shape{1000});
  EXPECT_DOUBLE_EQ(gather.bytes, 2 * 0.75 * 4000);
  EXPECT_DOUBLE_EQ(gather.overhead_ns, 300);
  EXPECT_DOUBLE_EQ(gather.flops, 0);
  // reduce_scatter: the same traffic, each of 250 outputs adds three peers'.
  const CostEstimate scatter = cost(OpKind::kReduceScatter, Shape{1000}, Shape{250});
  EXPECT_DOUBLE_EQ(scatter.bytes, 2 * 0.75 * 4000);
  EXPECT_DOUBLE_EQ(scatter.flops, 750);
  // One rank: a copy.
  params.ranks = 1;
  EXPECT_DOUBLE_EQ(cost(OpKind::kAllReduce, Shape{1000}, Shape{1000}).overhead_ns, 0);
}

}  // namespace
}  // namespace switchyard
