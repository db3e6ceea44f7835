#include "switchyard/graph.h"

#include <gtest/gtest.h>

#include "plan/test_kernels.h"

namespace switchyard {
namespace {

using testing::ramp;

TEST(GraphBuilder, InfersMatmulAndBroadcastShapes) {
  GraphBuilder b;
  const std::int64_t t = b.symbol("tokens");
  ValueId x = b.input("x", DType::kF32, {t, 8});
  ValueId w = b.constant_f32("w", {16, 8}, ramp(128, 1));
  ValueId bias = b.constant_f32("bias", {16}, ramp(16, 2));
  ValueId h = b.matmul(x, w, "fc");
  ValueId y = b.add(h, b.broadcast(bias, {t, 16}), "fc_bias");
  b.output(y);
  Result<Graph> g = std::move(b).build();
  ASSERT_TRUE(g.is_ok()) << g.status().to_string();
  EXPECT_EQ(g->value(h).shape, (Shape{t, 16}));
  EXPECT_EQ(g->shape_string(g->value(y).shape), "[tokens, 16]");
  EXPECT_EQ(g->nodes().size(), 2u);
  EXPECT_EQ(g->inputs().size(), 1u);
}

TEST(GraphBuilder, ReportsShapeMismatchNamingTheNode) {
  GraphBuilder b;
  ValueId x = b.input("x", DType::kF32, {4, 8});
  ValueId w = b.constant_f32("w", {16, 7}, ramp(112, 1));
  ValueId h = b.matmul(x, w, "bad_fc");
  EXPECT_FALSE(h.valid());
  // Later calls are no-ops; build() reports the first error.
  ValueId r = b.relu(h, "act");
  EXPECT_FALSE(r.valid());
  Result<Graph> g = std::move(b).build();
  ASSERT_FALSE(g.is_ok());
  EXPECT_EQ(g.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(g.status().message().find("bad_fc"), std::string_view::npos);
  EXPECT_NE(g.status().message().find("inner dims differ"), std::string_view::npos);
}

TEST(GraphBuilder, ReportsDtypeMismatch) {
  GraphBuilder b;
  ValueId x = b.input("x", DType::kF32, {4});
  ValueId y = b.input("y", DType::kBF16, {4});
  b.add(x, y, "sum");
  Result<Graph> g = std::move(b).build();
  ASSERT_FALSE(g.is_ok());
  EXPECT_NE(g.status().message().find("operand 1 is bf16"), std::string_view::npos);
}

TEST(GraphBuilder, RefusesDuplicateNodeNamesAndUnbroadcastAdds) {
  GraphBuilder b;
  ValueId x = b.input("x", DType::kF32, {4, 3});
  ValueId v = b.input("v", DType::kF32, {3});
  EXPECT_FALSE(b.add(x, v, "no_broadcast").valid());
  GraphBuilder c;
  ValueId x2 = c.input("x", DType::kF32, {4});
  c.relu(x2, "a");
  c.relu(x2, "a");
  EXPECT_EQ(c.status().code(), StatusCode::kAlreadyExists);
}

TEST(GraphBuilder, BroadcastViewHasZeroStrides) {
  Result<ViewLayout> l = view_layout(ViewKind::kBroadcast, Shape{5}, Shape{3, 5});
  ASSERT_TRUE(l.is_ok());
  EXPECT_EQ(l->strides[0], 0);
  EXPECT_EQ(l->strides[1], 1);
  EXPECT_FALSE(view_layout(ViewKind::kBroadcast, Shape{4}, Shape{3, 5}).is_ok());
  Result<ViewLayout> t = view_layout(ViewKind::kTranspose, Shape{2, 3}, Shape{});
  ASSERT_TRUE(t.is_ok());
  EXPECT_EQ(t->shape, (Shape{3, 2}));
  EXPECT_EQ(t->strides[0], 1);
  EXPECT_EQ(t->strides[1], 3);
  EXPECT_FALSE(view_layout(ViewKind::kReshape, Shape{2, 3}, Shape{4, 2}).is_ok());
}

// Low-level construction can wire what the builder cannot: validate finds it.
Graph two_node_graph() {
  Graph g;
  Value in;
  in.name = "x";
  in.shape = Shape{4};
  ValueId x = g.add_value(in);
  Value a;
  a.name = "a";
  a.shape = Shape{4};
  a.kind = ValueKind::kNodeOutput;
  ValueId av = g.add_value(a);
  a.name = "b";
  ValueId bv = g.add_value(a);
  g.add_node({.op = OpKind::kAdd, .inputs = {x, bv}, .output = av, .name = "n0"});
  g.add_node({.op = OpKind::kRelu, .inputs = {av}, .output = bv, .name = "n1"});
  g.add_output(bv);
  return g;
}

TEST(Graph, ValidateFindsCycle) {
  Graph g = two_node_graph();
  Status s = g.validate();
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("cycle"), std::string_view::npos) << s.to_string();
}

TEST(Graph, ValidateFindsDanglingInput) {
  Graph g;
  Value in;
  in.name = "x";
  in.shape = Shape{4};
  ValueId x = g.add_value(in);
  Value out = in;
  out.name = "y";
  out.kind = ValueKind::kNodeOutput;
  ValueId y = g.add_value(out);
  g.add_node({.op = OpKind::kAdd, .inputs = {x, ValueId{42}}, .output = y, .name = "n"});
  Status s = g.validate();
  EXPECT_NE(s.message().find("dangling"), std::string_view::npos) << s.to_string();

  // A node-output value nobody produces is dangling too.
  Graph h;
  ValueId hx = h.add_value(in);
  ValueId orphan = h.add_value(out);
  out.name = "z";
  ValueId z = h.add_value(out);
  h.add_node({.op = OpKind::kAdd, .inputs = {hx, orphan}, .output = z, .name = "m"});
  EXPECT_FALSE(h.validate().is_ok());
}

TEST(Graph, ValidateChecksDeclaredOutputShape) {
  Graph g;
  Value in;
  in.name = "x";
  in.shape = Shape{4};
  ValueId x = g.add_value(in);
  Value out = in;
  out.name = "y";
  out.shape = Shape{5};
  out.kind = ValueKind::kNodeOutput;
  ValueId y = g.add_value(out);
  g.add_node({.op = OpKind::kRelu, .inputs = {x}, .output = y, .name = "r"});
  Status s = g.validate();
  EXPECT_NE(s.message().find("declared f32[5]"), std::string_view::npos) << s.to_string();
}

TEST(Graph, OutputsMustBeNodeOutputs) {
  GraphBuilder b;
  ValueId x = b.input("x", DType::kF32, {4});
  b.output(x);
  Result<Graph> g = std::move(b).build();
  ASSERT_FALSE(g.is_ok());
  EXPECT_NE(g.status().message().find("add a copy"), std::string_view::npos);
}

TEST(Graph, OutputsAreListedOnce) {
  GraphBuilder b;
  ValueId y = b.relu(b.input("x", DType::kF32, {4}), "r");
  b.output(y);
  b.output(y);
  Result<Graph> g = std::move(b).build();
  ASSERT_FALSE(g.is_ok());
  EXPECT_NE(g.status().message().find("listed twice"), std::string_view::npos);
}

TEST(Graph, TopologicalOrderIsStableAndRespectsEdges) {
  GraphBuilder b;
  ValueId x = b.input("x", DType::kF32, {4});
  ValueId a = b.relu(x, "a");
  ValueId c = b.relu(x, "c");
  b.output(b.add(a, c, "sum"));
  Result<Graph> g = std::move(b).build();
  ASSERT_TRUE(g.is_ok());
  Result<std::vector<std::int32_t>> order = g->topological_order();
  ASSERT_TRUE(order.is_ok());
  EXPECT_EQ(*order, (std::vector<std::int32_t>{0, 1, 2}));
}

// --- control edges ---------------------------------------------------------------

// Four independent relus of one input, added a, b, c, d.
struct FourRelus {
  GraphBuilder b;
  ValueId x = b.input("x", DType::kF32, {4});
  ValueId a = b.relu(x, "a");
  ValueId bv = b.relu(x, "b");
  ValueId c = b.relu(x, "c");
  ValueId d = b.relu(x, "d");
  FourRelus() {
    for (ValueId v : {a, bv, c, d}) b.output(v);
  }
};

std::vector<std::int32_t> order_of(const Graph& g) {
  Result<std::vector<std::int32_t>> order = g.topological_order();
  EXPECT_TRUE(order.is_ok()) << order.status().to_string();
  return order.is_ok() ? *order : std::vector<std::int32_t>{};
}

TEST(GraphControlEdges, RunAfterMovesOnlyWhatItMust) {
  FourRelus without;
  Result<Graph> plain = std::move(without.b).build();
  ASSERT_TRUE(plain.is_ok()) << plain.status().to_string();
  EXPECT_EQ(order_of(*plain), (std::vector<std::int32_t>{0, 1, 2, 3}));

  // "a" waits for "d"; b and c keep their places ahead of both.
  FourRelus with;
  with.b.run_after(with.a, with.d);
  Result<Graph> g = std::move(with.b).build();
  ASSERT_TRUE(g.is_ok()) << g.status().to_string();
  EXPECT_EQ(order_of(*g), (std::vector<std::int32_t>{1, 2, 3, 0}));
  EXPECT_EQ(g->node(0).after, (std::vector<ValueId>{with.d}));
}

TEST(GraphControlEdges, EdgesChainAndRepeatsAreHarmless) {
  FourRelus f;
  f.b.run_after(f.a, f.c);
  f.b.run_after(f.c, f.d);
  f.b.run_after(f.a, f.c);  // the same edge again
  Result<Graph> g = std::move(f.b).build();
  ASSERT_TRUE(g.is_ok()) << g.status().to_string();
  EXPECT_EQ(g->node(0).after.size(), 1u);
  EXPECT_EQ(order_of(*g), (std::vector<std::int32_t>{1, 3, 2, 0}));
}

TEST(GraphControlEdges, EdgeAlongADataEdgeKeepsTheOrder) {
  GraphBuilder b;
  ValueId x = b.input("x", DType::kF32, {4});
  ValueId first = b.relu(x, "first");
  ValueId second = b.relu(first, "second");
  b.run_after(second, first);
  b.output(second);
  Result<Graph> g = std::move(b).build();
  ASSERT_TRUE(g.is_ok()) << g.status().to_string();
  EXPECT_EQ(order_of(*g), (std::vector<std::int32_t>{0, 1}));
}

TEST(GraphControlEdges, CycleThroughAControlEdgeIsRefusedAtBuild) {
  GraphBuilder b;
  ValueId x = b.input("x", DType::kF32, {4});
  ValueId first = b.relu(x, "first");
  ValueId second = b.relu(first, "second");
  b.run_after(first, second);  // but "second" reads "first"
  b.output(second);
  EXPECT_TRUE(b.status().is_ok());  // a longer cycle is found by build()
  Result<Graph> g = std::move(b).build();
  ASSERT_FALSE(g.is_ok());
  EXPECT_EQ(g.status().code(), StatusCode::kInvalidArgument);
  const std::string_view m = g.status().message();
  EXPECT_NE(m.find("cycle"), std::string_view::npos) << m;
  EXPECT_NE(m.find("control edge \"'first' runs after 'second'\""), std::string_view::npos) << m;
}

TEST(GraphControlEdges, DataCycleIsNotBlamedOnAControlEdge) {
  Graph g = two_node_graph();
  Status s = g.validate();
  ASSERT_FALSE(s.is_ok());
  EXPECT_EQ(s.message().find("control edge"), std::string_view::npos) << s.to_string();
}

TEST(GraphControlEdges, NodeCannotRunAfterItself) {
  FourRelus f;
  f.b.run_after(f.a, f.a);
  EXPECT_EQ(f.b.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(f.b.status().message().find("'a' cannot run after itself"), std::string_view::npos)
      << f.b.status().to_string();
  EXPECT_FALSE(std::move(f.b).build().is_ok());
}

TEST(GraphControlEdges, RunAfterRefusesWhatIsNotANodeOutput) {
  {
    FourRelus f;
    f.b.run_after(f.a, ValueId{});
    EXPECT_NE(f.b.status().message().find("does not exist"), std::string_view::npos)
        << f.b.status().to_string();
  }
  {
    FourRelus f;
    f.b.run_after(ValueId{1000}, f.a);
    EXPECT_NE(f.b.status().message().find("does not exist"), std::string_view::npos)
        << f.b.status().to_string();
  }
  {
    FourRelus f;
    f.b.run_after(f.a, f.x);
    EXPECT_NE(f.b.status().message().find("'x' (input) is not a node output"),
              std::string_view::npos)
        << f.b.status().to_string();
    EXPECT_FALSE(std::move(f.b).build().is_ok());
  }
  {
    FourRelus f;
    ValueId view = f.b.reshape(f.d, {2, 2}, "d_view");
    f.b.run_after(f.a, view);
    EXPECT_NE(f.b.status().message().find("view's source"), std::string_view::npos)
        << f.b.status().to_string();
  }
}

TEST(GraphControlEdges, ValidateRefusesDanglingControlEdges) {
  FourRelus f;
  Result<Graph> built = std::move(f.b).build();
  ASSERT_TRUE(built.is_ok());

  Graph dangling = *built;
  dangling.mutable_node(0).after.push_back(ValueId{42});
  Status s = dangling.validate();
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("node 'a' runs after value #42"), std::string_view::npos)
      << s.to_string();
  EXPECT_FALSE(dangling.topological_order().is_ok());

  Graph on_input = *built;
  on_input.mutable_node(0).after.push_back(f.x);
  s = on_input.validate();
  EXPECT_NE(s.message().find("'x' (input), which is not a node output"), std::string_view::npos)
      << s.to_string();
  EXPECT_FALSE(on_input.topological_order().is_ok());

  // A node-output value that no node produces.
  Graph orphan = *built;
  Value v;
  v.name = "orphan";
  v.shape = Shape{4};
  v.kind = ValueKind::kNodeOutput;
  orphan.mutable_node(0).after.push_back(orphan.add_value(v));
  EXPECT_FALSE(orphan.validate().is_ok());
  EXPECT_FALSE(orphan.topological_order().is_ok());
}

TEST(Graph, InferOutputFollowsOpsContracts) {
  const OpParams p;
  auto infer = [&](OpKind op, std::vector<OperandInfo> in) { return infer_output(op, in, p); };
  const DType f = DType::kF32;
  EXPECT_EQ(infer(OpKind::kLinear, {{f, {2, 8}}, {f, {4, 8}}, {f, {4}}})->shape, (Shape{2, 4}));
  EXPECT_FALSE(infer(OpKind::kLinear, {{f, {2, 8}}, {f, {4, 8}}, {f, {5}}}).is_ok());
  EXPECT_EQ(infer(OpKind::kFfnSwiglu, {{f, {2, 8}}, {f, {6, 8}}, {f, {6, 8}}, {f, {8, 6}}})->shape,
            (Shape{2, 8}));
  EXPECT_EQ(infer(OpKind::kAttention, {{f, {3, 4, 8}}, {f, {5, 2, 8}}, {f, {5, 2, 8}}})->shape,
            (Shape{3, 4, 8}));
  EXPECT_FALSE(infer(OpKind::kAttention, {{f, {3, 3, 8}}, {f, {5, 2, 8}}, {f, {5, 2, 8}}}).is_ok());
  EXPECT_FALSE(infer(OpKind::kRope, {{f, {3, 4, 8}}, {f, {3}}}).is_ok());  // positions must be i32
  EXPECT_EQ(infer(OpKind::kRope, {{f, {3, 4, 8}}, {DType::kI32, {3}}})->shape, (Shape{3, 4, 8}));
  EXPECT_EQ(infer(OpKind::kSum, {{f, {3, 4}}})->shape, (Shape{3, 1}));
  EXPECT_EQ(infer(OpKind::kGetRows, {{DType::kQ4_0, {10, 32}}, {DType::kI32, {3}}})->shape,
            (Shape{3, 32}));
  OpParams concat;
  concat.axis = 0;
  EXPECT_EQ(
      infer_output(OpKind::kConcat, std::vector<OperandInfo>{{f, {2, 4}}, {f, {3, 4}}}, concat)
          ->shape,
      (Shape{5, 4}));
  EXPECT_FALSE(infer(OpKind::kCast, {{f, {2}}}).is_ok());  // needs a destination dtype
}

}  // namespace
}  // namespace switchyard
