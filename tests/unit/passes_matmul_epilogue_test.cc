#include <gtest/gtest.h>

#include "compile/passes.h"
#include "pass_test_graphs.h"

namespace rlx {
namespace {

using test::count_live;
using test::output_value;
using test::producer_of;

TEST(MatmulEpilogue, BiasAndActivationFoldIntoTheMatmul) {
  const std::pair<ValueId (Graph::*)(ValueId), Activation> acts[] = {
      {&Graph::gelu, Activation::Gelu}, {&Graph::gelu_tanh, Activation::GeluTanh},
      {&Graph::silu, Activation::Silu}, {&Graph::relu, Activation::Relu},
      {&Graph::tanh, Activation::Tanh}};
  for (const auto& [op, act] : acts) {
    Graph g;
    ValueId x = g.input("x", {2, 7, 9}, DType::F32);
    ValueId w = g.param("w", {13, 9}, DType::F32);
    ValueId b = g.param("b", {13}, DType::F32);
    g.output("y", (g.*op)(g.add(g.matmul(x, w, false, true), b)));

    fuse_matmul_epilogue(g);
    eliminate_dead_code(g);
    verify(g);
    EXPECT_EQ(count_live(g, OpKind::MatMul), 1);
    EXPECT_EQ(count_live(g, OpKind::Add), 0);
    EXPECT_EQ(g.live_node_count(), 4u);  // x, w, b, matmul
    const Node& mm = producer_of(g, output_value(g, "y"));
    ASSERT_EQ(mm.op, OpKind::MatMul);
    EXPECT_EQ(mm.inputs, (std::vector<ValueId>{x, w, b}));
    EXPECT_EQ(std::get<MatMulAttrs>(mm.attrs).act, act);
    EXPECT_TRUE(std::get<MatMulAttrs>(mm.attrs).trans_b);
  }
}

TEST(MatmulEpilogue, BiasOnTheLeftAndShapedAsARowIsReshaped) {
  Graph g;
  ValueId x = g.input("x", {7, 9}, DType::F32);
  ValueId w = g.param("w", {9, 5}, DType::F32);
  ValueId b = g.param("b", {1, 5}, DType::F32);
  g.output("y", g.add(b, g.matmul(x, w)));

  fuse_matmul_epilogue(g);
  eliminate_dead_code(g);
  verify(g);
  const Node& mm = producer_of(g, output_value(g, "y"));
  ASSERT_EQ(mm.op, OpKind::MatMul);
  ASSERT_EQ(mm.inputs.size(), 3u);
  EXPECT_EQ(g.value(mm.inputs[2]).shape, Shape{5});
  EXPECT_EQ(producer_of(g, mm.inputs[2]).op, OpKind::Reshape);
  EXPECT_EQ(producer_of(g, mm.inputs[2]).inputs[0], b);
  EXPECT_EQ(std::get<MatMulAttrs>(mm.attrs).act, Activation::None);
  EXPECT_EQ(count_live(g, OpKind::Add), 0);
}

TEST(MatmulEpilogue, ActivationWithoutBias) {
  Graph g;
  ValueId x = g.input("x", {3, 4}, DType::F32);
  ValueId w = g.param("w", {4, 6}, DType::F32);
  g.output("y", g.silu(g.matmul(x, w)));
  fuse_matmul_epilogue(g);
  eliminate_dead_code(g);
  const Node& mm = producer_of(g, output_value(g, "y"));
  ASSERT_EQ(mm.op, OpKind::MatMul);
  EXPECT_EQ(mm.inputs.size(), 2u);
  EXPECT_EQ(std::get<MatMulAttrs>(mm.attrs).act, Activation::Silu);
  EXPECT_EQ(count_live(g, OpKind::Silu), 0);
}

TEST(MatmulEpilogue, DoesNotFuseWhenTheProductIsReadElsewhere) {
  Graph g;
  ValueId x = g.input("x", {3, 4}, DType::F32);
  ValueId w = g.param("w", {4, 6}, DType::F32);
  ValueId b = g.param("b", {6}, DType::F32);
  ValueId p = g.matmul(x, w);
  g.output("y", g.add(p, b));
  g.output("p", p);  // the raw product is an output too
  ValueId q = g.matmul(x, w);
  g.output("z", g.relu(q));
  g.output("q_again", g.tanh(q));  // two activations read q

  fuse_matmul_epilogue(g);
  EXPECT_EQ(count_live(g, OpKind::MatMul), 2);
  EXPECT_EQ(count_live(g, OpKind::Add), 1);
  EXPECT_EQ(count_live(g, OpKind::Relu), 1);
  for (const Node& n : g.nodes())
    if (!n.dead && n.op == OpKind::MatMul) {
      EXPECT_EQ(n.inputs.size(), 2u);
      EXPECT_EQ(std::get<MatMulAttrs>(n.attrs).act, Activation::None);
    }
}

TEST(MatmulEpilogue, DoesNotFuseABroadcastingOrFullAdd) {
  Graph g;
  ValueId x = g.input("x", {3, 4}, DType::F32);
  ValueId w = g.param("w", {4, 6}, DType::F32);
  ValueId full = g.param("full", {3, 6}, DType::F32);   // not a row bias
  ValueId wide = g.param("wide", {2, 1, 6}, DType::F32);  // would widen the result
  ValueId col = g.param("col", {3, 1}, DType::F32);     // per-row, not per-column
  g.output("a", g.add(g.matmul(x, w), full));
  g.output("b", g.add(g.matmul(x, w), wide));
  g.output("c", g.add(g.matmul(x, w), col));
  fuse_matmul_epilogue(g);
  EXPECT_EQ(count_live(g, OpKind::Add), 3);
  for (const Node& n : g.nodes())
    if (!n.dead && n.op == OpKind::MatMul) EXPECT_EQ(n.inputs.size(), 2u);
}

TEST(MatmulEpilogue, SubIsNotABiasAdd) {
  Graph g;
  ValueId x = g.input("x", {3, 4}, DType::F32);
  ValueId w = g.param("w", {4, 6}, DType::F32);
  ValueId b = g.param("b", {6}, DType::F32);
  g.output("y", g.sub(g.matmul(x, w), b));
  fuse_matmul_epilogue(g);
  EXPECT_EQ(count_live(g, OpKind::Sub), 1);
}

}  // namespace
}  // namespace rlx
