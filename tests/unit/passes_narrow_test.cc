#include <gtest/gtest.h>

#include "compile/passes.h"
#include "pass_test_graphs.h"

namespace rlx {
namespace {

using test::count_live;
using test::output_value;
using test::producer_of;

TEST(NarrowFusion, AttentionReadsQkvSlicesInPlace) {
  Graph g;
  const int heads = 3, hd = 5, h = heads * hd;
  ValueId qkv = g.input("qkv", {2, 7, 3 * h + 4}, DType::F32);  // 4 unused trailing columns
  AttentionAttrs at;
  at.q_heads = at.kv_heads = heads;
  at.head_dim = hd;
  ValueId q = g.narrow(qkv, 2, 0, h);
  ValueId k = g.narrow(qkv, -1, h, h);
  ValueId v = g.narrow(qkv, 2, 2 * h, h);
  g.output("y", g.attention(q, k, v, -1, at));

  fuse_narrow(g);
  eliminate_dead_code(g);
  verify(g);
  EXPECT_EQ(count_live(g, OpKind::Narrow), 0);
  const Node& attn = producer_of(g, output_value(g, "y"));
  ASSERT_EQ(attn.op, OpKind::Attention);
  EXPECT_EQ(attn.inputs, (std::vector<ValueId>{qkv, qkv, qkv}));
  const auto& a = std::get<AttentionAttrs>(attn.attrs);
  EXPECT_EQ(a.q_offset, 0);
  EXPECT_EQ(a.k_offset, h);
  EXPECT_EQ(a.v_offset, 2 * h);
  EXPECT_EQ(a.q_stride, 3 * h + 4);
  EXPECT_EQ(a.k_stride, 3 * h + 4);
  EXPECT_EQ(a.v_stride, 3 * h + 4);
  EXPECT_EQ(g.value(output_value(g, "y")).shape, (Shape{2, 7, h}));
}

TEST(NarrowFusion, RopeReadsItsSliceInPlace) {
  Graph g;
  ValueId x = g.input("x", {1, 9, 20}, DType::F32);
  ValueId pos = g.input("pos", {9}, DType::I32);
  RopeAttrs ra;
  ra.heads = 2;
  ra.head_dim = 4;
  g.output("y", g.rope(g.narrow(x, 2, 11, 8), pos, ra));

  fuse_narrow(g);
  eliminate_dead_code(g);
  verify(g);
  EXPECT_EQ(count_live(g, OpKind::Narrow), 0);
  const Node& rope = producer_of(g, output_value(g, "y"));
  ASSERT_EQ(rope.op, OpKind::Rope);
  EXPECT_EQ(rope.inputs[0], x);
  EXPECT_EQ(std::get<RopeAttrs>(rope.attrs).offset, 11);
  EXPECT_EQ(std::get<RopeAttrs>(rope.attrs).stride, 20);
}

TEST(NarrowFusion, ChainedNarrowsCompose) {
  Graph g;
  ValueId x = g.input("x", {2, 3, 40}, DType::F32);
  ValueId pos = g.input("pos", {2, 3}, DType::I32);
  RopeAttrs ra;
  ra.heads = 1;
  ra.head_dim = 6;
  ra.offset = 2;  // the rope itself already skips two columns of its input
  ra.stride = 0;
  ValueId inner = g.narrow(g.narrow(x, 2, 7, 20), 2, 3, 10);  // columns [10, 20) of x
  g.output("y", g.rope(inner, pos, ra));

  fuse_narrow(g);
  eliminate_dead_code(g);
  verify(g);
  EXPECT_EQ(count_live(g, OpKind::Narrow), 0);
  const Node& rope = producer_of(g, output_value(g, "y"));
  EXPECT_EQ(rope.inputs[0], x);
  EXPECT_EQ(std::get<RopeAttrs>(rope.attrs).offset, 2 + 3 + 7);
  EXPECT_EQ(std::get<RopeAttrs>(rope.attrs).stride, 40);
}

TEST(NarrowFusion, NarrowStaysWhenItHasOtherUsers) {
  Graph g;
  ValueId x = g.input("x", {1, 4, 12}, DType::F32);
  ValueId pos = g.input("pos", {4}, DType::I32);
  RopeAttrs ra;
  ra.heads = 1;
  ra.head_dim = 6;
  ValueId n = g.narrow(x, 2, 6, 6);
  g.output("y", g.rope(n, pos, ra));
  g.output("n", g.relu(n));

  fuse_narrow(g);
  eliminate_dead_code(g);
  verify(g);
  EXPECT_EQ(count_live(g, OpKind::Narrow), 1);  // relu still reads the copy
  EXPECT_EQ(producer_of(g, output_value(g, "y")).inputs[0], x);
}

TEST(NarrowFusion, NarrowOfAnotherAxisIsLeftAlone) {
  Graph g;
  ValueId x = g.input("x", {1, 9, 8}, DType::F32);
  ValueId pos = g.input("pos", {4}, DType::I32);
  RopeAttrs ra;
  ra.heads = 2;
  ra.head_dim = 4;
  g.output("y", g.rope(g.narrow(x, 1, 2, 4), pos, ra));
  fuse_narrow(g);
  EXPECT_EQ(count_live(g, OpKind::Narrow), 1);
  EXPECT_EQ(producer_of(g, producer_of(g, output_value(g, "y")).inputs[0]).op, OpKind::Narrow);
}

}  // namespace
}  // namespace rlx
