#include <gtest/gtest.h>

#include "compile/passes.h"
#include "pass_test_graphs.h"

namespace rlx {
namespace {

using test::count_live;

TEST(DeadCode, RemovesNodesNoOutputDependsOn) {
  Graph g;
  ValueId x = g.input("x", {3, 7}, DType::F32);
  ValueId w = g.param("w", {7, 5}, DType::F32);
  ValueId used = g.relu(g.matmul(x, w));
  ValueId unused = g.tanh(g.mul(x, x));  // a chain nothing reads
  g.softmax(unused);
  g.constant_f32({2}, DType::F32, {1.f, 2.f}, "stray");
  g.output("y", used);

  eliminate_dead_code(g);
  EXPECT_EQ(count_live(g, OpKind::MatMul), 1);
  EXPECT_EQ(count_live(g, OpKind::Relu), 1);
  EXPECT_EQ(count_live(g, OpKind::Mul), 0);
  EXPECT_EQ(count_live(g, OpKind::Tanh), 0);
  EXPECT_EQ(count_live(g, OpKind::Softmax), 0);
  EXPECT_EQ(count_live(g, OpKind::Constant), 0);
  EXPECT_EQ(g.live_node_count(), 4u);  // x, w, matmul, relu
  verify(g);
}

TEST(DeadCode, KeepsUnusedInputsAndParams) {
  Graph g;
  ValueId x = g.input("x", {4}, DType::F32);
  g.input("unused_input", {1}, DType::I32);
  ValueId p = g.param("unused_param", {9}, DType::F32);
  g.relu(p);
  g.output("y", g.tanh(x));

  eliminate_dead_code(g);
  EXPECT_EQ(count_live(g, OpKind::Input), 2);
  EXPECT_EQ(count_live(g, OpKind::Param), 1);
  EXPECT_EQ(count_live(g, OpKind::Relu), 0);
  EXPECT_EQ(count_live(g, OpKind::Tanh), 1);
}

TEST(DeadCode, KeepsEveryAncestorOfEveryOutput) {
  Graph g;
  ValueId x = g.input("x", {5, 3}, DType::F32);
  ValueId a = g.relu(x);
  ValueId b = g.silu(a);
  ValueId c = g.add(a, b);
  g.output("b", b);
  g.output("c", c);
  const size_t before = g.live_node_count();
  eliminate_dead_code(g);
  EXPECT_EQ(g.live_node_count(), before);
  // Running again changes nothing.
  eliminate_dead_code(g);
  EXPECT_EQ(g.live_node_count(), before);
}

TEST(DeadCode, FollowsRedirectedUses) {
  Graph g;
  ValueId x = g.input("x", {6}, DType::F32);
  ValueId old_path = g.gelu(x);
  ValueId new_path = g.relu(x);
  g.output("y", old_path);
  g.replace_uses(old_path, new_path);
  eliminate_dead_code(g);
  EXPECT_EQ(count_live(g, OpKind::Gelu), 0);
  EXPECT_EQ(count_live(g, OpKind::Relu), 1);
  verify(g);
}

}  // namespace
}  // namespace rlx
