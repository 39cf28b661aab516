// The builder infers shapes and rejects bad graphs with messages that name the node.
#include <gtest/gtest.h>

#include "test_util.h"

#include "rlx/graph.h"

using namespace rlx;

using rlx::test::error_of;

TEST(Graph, InfersShapes) {
  Graph g;
  ValueId x = g.input("x", {2, 7, 33}, DType::F32);
  ValueId w = g.param("w", {129, 33}, DType::F32);
  ValueId y = g.matmul(x, w, false, true);
  EXPECT_EQ(g.value(y).shape, (Shape{2, 7, 129}));
  ValueId b = g.add(y, g.param("b", {129}, DType::F32));
  EXPECT_EQ(g.value(b).shape, (Shape{2, 7, 129}));
  ValueId r = g.reshape(b, {-1, 129});
  EXPECT_EQ(g.value(r).shape, (Shape{14, 129}));
  EXPECT_EQ(g.value(g.transpose(r, 0, 1)).shape, (Shape{129, 14}));
  EXPECT_EQ(g.value(g.narrow(b, -1, 3, 5)).shape, (Shape{2, 7, 5}));
  EXPECT_EQ(g.value(g.concat({b, b}, 1)).shape, (Shape{2, 14, 129}));
  EXPECT_EQ(g.value(g.reduce(b, 1, ReduceKind::Mean)).shape, (Shape{2, 129}));
  EXPECT_EQ(g.value(g.reduce(b, 1, ReduceKind::Max, true)).shape, (Shape{2, 1, 129}));
  EXPECT_EQ(g.value(g.cast(b, DType::F16)).dtype, DType::F16);
  auto [sum, normed] = g.add_norm(b, b, g.param("g", {129}, DType::F32), -1, NormKind::Rms, 1e-6f);
  EXPECT_EQ(g.value(sum).shape, g.value(normed).shape);
  ValueId ids = g.input("ids", {2, 7}, DType::I32);
  EXPECT_EQ(g.value(g.gather(g.param("emb", {50, 33}, DType::F32), ids)).shape, (Shape{2, 7, 33}));
  ValueId bc = g.mul(g.input("a", {3, 1, 5}, DType::F32), g.input("c", {4, 1}, DType::F32));
  EXPECT_EQ(g.value(bc).shape, (Shape{3, 4, 5}));
  g.output("y", b);
  EXPECT_NO_THROW(verify(g));
}

TEST(Graph, AttentionAndRopeShapes) {
  Graph g;
  ValueId qkv = g.input("qkv", {3, 11, 4 * 8 + 2 * 2 * 8}, DType::F16);
  AttentionAttrs a;
  a.q_heads = 4;
  a.kv_heads = 2;
  a.head_dim = 8;
  a.q_stride = a.k_stride = a.v_stride = 64;
  a.k_offset = 32;
  a.v_offset = 48;
  a.mask = MaskKind::Causal;
  EXPECT_EQ(g.value(g.attention(qkv, qkv, qkv, -1, a)).shape, (Shape{3, 11, 32}));
  RopeAttrs r;
  r.heads = 2;
  r.head_dim = 8;
  r.offset = 32;
  r.stride = 64;
  ValueId pos = g.input("pos", {11}, DType::I32);
  EXPECT_EQ(g.value(g.rope(qkv, pos, r)).shape, (Shape{3, 11, 16}));
}

TEST(Graph, ErrorsNameTheNodeAndTheProblem) {
  Graph g;
  ValueId x = g.input("x", {2, 3}, DType::F32);
  ValueId w = g.param("w", {4, 5}, DType::F32);
  std::string e = error_of([&] { g.add_node(OpKind::MatMul, {x, w}, MatMulAttrs{}, "proj"); });
  EXPECT_NE(e.find("matmul 'proj'"), std::string::npos) << e;
  EXPECT_NE(e.find("inner dims"), std::string::npos) << e;
  e = error_of([&] { g.add(x, g.input("y", {4}, DType::F32)); });
  EXPECT_NE(e.find("do not broadcast"), std::string::npos) << e;
  e = error_of([&] { g.add(x, g.input("z", {2, 3}, DType::F16)); });
  EXPECT_NE(e.find("must be f32"), std::string::npos) << e;
  e = error_of([&] { g.narrow(x, 1, 2, 5); });
  EXPECT_NE(e.find("out of range"), std::string::npos) << e;
  e = error_of([&] { g.reshape(x, {4, 2}); });
  EXPECT_NE(e.find("cannot reshape"), std::string::npos) << e;
  e = error_of([&] { g.gather(w, x); });
  EXPECT_NE(e.find("ids must be i32"), std::string::npos) << e;
  e = error_of([&] { g.input("x", {1}, DType::F32); });
  EXPECT_NE(e.find("used twice"), std::string::npos) << e;
  e = error_of([&] { g.input("bad", {0, 3}, DType::F32); });
  EXPECT_NE(e.find("non-positive"), std::string::npos) << e;
  e = error_of([&] { g.permute(x, {0, 0}); });
  EXPECT_NE(e.find("not a permutation"), std::string::npos) << e;
  e = error_of([&] { g.softmax_cross_entropy(x, g.input("lab", {3}, DType::I32)); });
  EXPECT_NE(e.find("labels must be [2]"), std::string::npos) << e;
  AttentionAttrs a;
  a.q_heads = 3;
  a.kv_heads = 2;
  e = error_of([&] { g.attention(x, x, x, -1, a); });
  EXPECT_NE(e.find("multiple of kv_heads"), std::string::npos) << e;
  // A two-sided window (no causal mask) centres on the query's own key.
  ValueId q = g.input("q", {1, 5, 8}, DType::F32), kv = g.input("kv", {1, 7, 8}, DType::F32);
  AttentionAttrs two;
  two.head_dim = 8;
  two.window = 3;
  e = error_of([&] { g.attention(q, kv, kv, -1, two); });
  EXPECT_NE(e.find("two-sided sliding window needs as many queries as keys"), std::string::npos) << e;
  two.q_pos = true;
  e = error_of([&] { g.attention(q, q, q, -1, two, g.input("start", {1}, DType::I32)); });
  EXPECT_NE(e.find("cannot take query positions"), std::string::npos) << e;
  two.q_pos = false;
  EXPECT_EQ(g.value(g.attention(q, q, q, -1, two)).shape, (Shape{1, 5, 8}));
}

TEST(Graph, VerifierCatchesTamperedNodes) {
  Graph g;
  ValueId x = g.input("x", {2, 3}, DType::F32);
  ValueId y = g.relu(x);
  g.output("y", y);
  g.value_mut(y).shape = {3, 2};
  std::string e = error_of([&] { verify(g); });
  EXPECT_NE(e.find("inference says [2, 3]"), std::string::npos) << e;
  g.value_mut(y).shape = {2, 3};
  g.node_mut(g.value(y).producer).dead = true;
  e = error_of([&] { verify(g); });
  EXPECT_NE(e.find("dead"), std::string::npos) << e;
}

TEST(Dtype, HalfAndBf16RoundTrip) {
  for (float f : {0.f, 1.f, -2.5f, 65504.f, 6.1e-5f, 3e-7f, 0.1f}) {
    EXPECT_NEAR(half_to_float(float_to_half(f)), f, std::abs(f) * 1e-3 + 6e-8) << f;
    EXPECT_NEAR(bf16_to_float(float_to_bf16(f)), f, std::abs(f) * 8e-3) << f;
  }
  EXPECT_EQ(float_to_half(1e6f), 0x7c00);  // overflow to inf
  EXPECT_EQ(half_to_float(0x3c00), 1.f);
  EXPECT_EQ(float_to_half(1.f + 1.f / 2048), 0x3c00);  // ties to even
}
