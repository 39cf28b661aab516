#include <gtest/gtest.h>

#include "compile/passes.h"
#include "pass_test_graphs.h"

namespace rlx {
namespace {

using test::count_live;
using test::output_value;
using test::producer_of;

// Checks that output `name` is narrow(merged, last axis, start, len).
void expect_slice(const Graph& g, const std::string& name, int64_t start, int64_t len, ValueId merged) {
  const Node& n = producer_of(g, output_value(g, name));
  ASSERT_EQ(n.op, OpKind::Narrow) << name;
  const auto& at = std::get<NarrowAttrs>(n.attrs);
  const int rank = int(g.value(n.inputs[0]).shape.size());
  EXPECT_TRUE(at.axis == rank - 1 || at.axis == -1) << name;
  EXPECT_EQ(at.start, start) << name;
  EXPECT_EQ(at.length, len) << name;
  EXPECT_EQ(n.inputs[0], merged) << name;
}

TEST(MergeSiblingMatmuls, QkvBecomesOneMatmulOverConcatenatedParams) {
  Graph g;
  ValueId x = g.input("x", {2, 7, 11}, DType::F32);
  ValueId wq = g.param("wq", {11, 11}, DType::F32);
  ValueId wk = g.param("wk", {3, 11}, DType::F32);
  ValueId wv = g.param("wv", {5, 11}, DType::F32);
  g.output("q", g.matmul(x, wq, false, true));
  g.output("k", g.matmul(x, wk, false, true));
  g.output("v", g.matmul(x, wv, false, true));

  merge_sibling_matmuls(g);
  eliminate_dead_code(g);
  verify(g);
  ASSERT_EQ(count_live(g, OpKind::MatMul), 1);
  EXPECT_EQ(count_live(g, OpKind::Concat), 1);
  EXPECT_EQ(count_live(g, OpKind::Narrow), 3);
  EXPECT_EQ(count_live(g, OpKind::Add), 0);

  const ValueId merged = producer_of(g, output_value(g, "q")).inputs[0];
  const Node& mm = producer_of(g, merged);
  ASSERT_EQ(mm.op, OpKind::MatMul);
  EXPECT_EQ(mm.inputs[0], x);
  EXPECT_TRUE(std::get<MatMulAttrs>(mm.attrs).trans_b);
  EXPECT_EQ(g.value(merged).shape, (Shape{2, 7, 19}));
  const Node& cat = producer_of(g, mm.inputs[1]);
  ASSERT_EQ(cat.op, OpKind::Concat);
  EXPECT_EQ(std::get<AxisAttrs>(cat.attrs).axis, 0);
  EXPECT_EQ(cat.inputs, (std::vector<ValueId>{wq, wk, wv}));
  expect_slice(g, "q", 0, 11, merged);
  expect_slice(g, "k", 11, 3, merged);
  expect_slice(g, "v", 14, 5, merged);
}

TEST(MergeSiblingMatmuls, BiasesAreConcatenatedIntoOneAdd) {
  Graph g;
  ValueId x = g.input("x", {7, 9}, DType::F32);
  ValueId w1 = g.param("w1", {4, 9}, DType::F32), b1 = g.param("b1", {4}, DType::F32);
  ValueId w2 = g.param("w2", {6, 9}, DType::F32), b2 = g.param("b2", {6}, DType::F32);
  g.output("y1", g.add(g.matmul(x, w1, false, true), b1));
  g.output("y2", g.add(b2, g.matmul(x, w2, false, true)));  // bias on the left

  merge_sibling_matmuls(g);
  eliminate_dead_code(g);
  verify(g);
  EXPECT_EQ(count_live(g, OpKind::MatMul), 1);
  EXPECT_EQ(count_live(g, OpKind::Add), 1);
  EXPECT_EQ(count_live(g, OpKind::Concat), 2);
  const ValueId summed = producer_of(g, output_value(g, "y1")).inputs[0];
  const Node& add = producer_of(g, summed);
  ASSERT_EQ(add.op, OpKind::Add);
  const Node& bias_cat = producer_of(g, add.inputs[1]);
  ASSERT_EQ(bias_cat.op, OpKind::Concat);
  EXPECT_EQ(bias_cat.inputs, (std::vector<ValueId>{b1, b2}));
  expect_slice(g, "y1", 0, 4, summed);
  expect_slice(g, "y2", 4, 6, summed);
}

TEST(MergeSiblingMatmuls, BiasesStaySeparateWhenOneSiblingHasNone) {
  Graph g;
  ValueId x = g.input("x", {7, 9}, DType::F32);
  ValueId w1 = g.param("w1", {4, 9}, DType::F32), b1 = g.param("b1", {4}, DType::F32);
  ValueId w2 = g.param("w2", {6, 9}, DType::F32);
  g.output("y1", g.add(g.matmul(x, w1, false, true), b1));
  g.output("y2", g.matmul(x, w2, false, true));

  merge_sibling_matmuls(g);
  eliminate_dead_code(g);
  verify(g);
  EXPECT_EQ(count_live(g, OpKind::MatMul), 1);
  EXPECT_EQ(count_live(g, OpKind::Concat), 1);
  EXPECT_EQ(count_live(g, OpKind::Add), 1);  // the original bias add, after its narrow
  const Node& add = producer_of(g, output_value(g, "y1"));
  ASSERT_EQ(add.op, OpKind::Add);
  EXPECT_EQ(producer_of(g, add.inputs[0]).op, OpKind::Narrow);
}

TEST(MergeSiblingMatmuls, UntransposedWeightsConcatenateAlongColumns) {
  Graph g;
  ValueId x = g.input("x", {5, 8}, DType::F32);
  ValueId gate = g.param("gate", {8, 13}, DType::F32);
  ValueId up = g.param("up", {8, 13}, DType::F32);
  ValueId gated = g.silu(g.matmul(x, gate));
  ValueId upped = g.matmul(x, up);
  g.output("y", g.mul(gated, upped));

  merge_sibling_matmuls(g);
  eliminate_dead_code(g);
  verify(g);
  ASSERT_EQ(count_live(g, OpKind::MatMul), 1);
  int concats = 0;
  for (const Node& n : g.nodes()) {
    if (n.dead || n.op != OpKind::Concat) continue;
    ++concats;
    EXPECT_EQ(std::get<AxisAttrs>(n.attrs).axis, 1);
    EXPECT_EQ(n.inputs, (std::vector<ValueId>{gate, up}));
    EXPECT_EQ(g.value(n.outputs[0]).shape, (Shape{8, 26}));
  }
  EXPECT_EQ(concats, 1);
  EXPECT_EQ(count_live(g, OpKind::Narrow), 2);
}

TEST(MergeSiblingMatmuls, LeavesIneligibleMatmulsAlone) {
  Graph g;
  ValueId x = g.input("x", {5, 8}, DType::F32);
  ValueId y = g.input("other", {5, 8}, DType::F32);
  ValueId shared = g.param("shared", {3, 8}, DType::F32);   // read by two matmuls
  ValueId wa = g.param("wa", {3, 8}, DType::F32);
  ValueId wb = g.param("wb", {4, 8}, DType::F32);            // different input A
  ValueId w16 = g.param("w16", {4, 8}, DType::F16);          // different dtype (cast input)
  ValueId xin = g.input("x_not_param", {4, 8}, DType::F32);  // B is not a param
  g.output("a", g.matmul(x, shared, false, true));
  g.output("b", g.matmul(y, shared, false, true));
  g.output("c", g.matmul(x, wa, false, true));
  g.output("d", g.matmul(y, wb, false, true));
  g.output("e", g.matmul(g.cast(x, DType::F16), w16, false, true));
  g.output("f", g.matmul(x, xin, false, true));

  const size_t before = g.live_node_count();
  merge_sibling_matmuls(g);
  EXPECT_EQ(g.live_node_count(), before);
  EXPECT_EQ(count_live(g, OpKind::MatMul), 6);
  EXPECT_EQ(count_live(g, OpKind::Concat), 0);
}

TEST(MergeSiblingMatmuls, ActivationOrTransposedAKeepsAMatmulOut) {
  Graph g;
  ValueId x = g.input("x", {5, 8}, DType::F32);
  ValueId w1 = g.param("w1", {3, 8}, DType::F32);
  ValueId w2 = g.param("w2", {3, 8}, DType::F32);
  ValueId w3 = g.param("w3", {3, 5}, DType::F32);
  g.output("a", g.linear(x, w1, -1, Activation::Relu));
  g.output("b", g.matmul(x, w2, false, true));
  g.output("c", g.matmul(x, w3, true, true));
  merge_sibling_matmuls(g);
  EXPECT_EQ(count_live(g, OpKind::MatMul), 3);
  EXPECT_EQ(count_live(g, OpKind::Concat), 0);
}

}  // namespace
}  // namespace rlx
