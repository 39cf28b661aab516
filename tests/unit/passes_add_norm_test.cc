#include <gtest/gtest.h>

#include "compile/passes.h"
#include "fusion_check.h"
#include "pass_test_graphs.h"

namespace rlx {
namespace {

using test::count_live;
using test::output_value;
using test::producer_of;

TEST(AddNormFusion, PostNormLayerNorm) {
  Graph g;
  ValueId x = g.input("x", {2, 7, 9}, DType::F32);
  ValueId r = g.input("r", {2, 7, 9}, DType::F32);
  ValueId gamma = g.param("gamma", {9}, DType::F32), beta = g.param("beta", {9}, DType::F32);
  g.output("y", g.layer_norm(g.add(x, r), gamma, beta, 1e-3f));

  fuse_add_norm(g);
  eliminate_dead_code(g);
  verify(g);
  EXPECT_EQ(count_live(g, OpKind::Add), 0);
  EXPECT_EQ(count_live(g, OpKind::LayerNorm), 0);
  ASSERT_EQ(count_live(g, OpKind::AddNorm), 1);
  const ValueId y = output_value(g, "y");
  const Node& an = producer_of(g, y);
  ASSERT_EQ(an.op, OpKind::AddNorm);
  EXPECT_EQ(an.inputs, (std::vector<ValueId>{x, r, gamma, beta}));
  EXPECT_EQ(an.outputs[1], y);
  const auto& at = std::get<NormAttrs>(an.attrs);
  EXPECT_EQ(at.kind, NormKind::Layer);
  EXPECT_FLOAT_EQ(at.eps, 1e-3f);
}

TEST(AddNormFusion, PreNormRmsNormKeepsTheSumForTheNextResidual) {
  Graph g;
  ValueId x = g.input("x", {7, 9}, DType::F32);
  ValueId r = g.input("r", {7, 9}, DType::F32);
  ValueId gamma = g.param("gamma", {9}, DType::F32);
  ValueId w = g.param("w", {9, 9}, DType::F32);
  ValueId h = g.add(x, r);
  ValueId n = g.rms_norm(h, gamma, 1e-6f);
  g.output("next", g.add(h, g.matmul(n, w)));  // the sum is read again
  g.output("sum", h);

  fuse_add_norm(g);
  eliminate_dead_code(g);
  verify(g);
  EXPECT_EQ(count_live(g, OpKind::RmsNorm), 0);
  ASSERT_EQ(count_live(g, OpKind::AddNorm), 1);
  EXPECT_EQ(count_live(g, OpKind::Add), 1);  // the final residual add only
  const ValueId sum = output_value(g, "sum");
  const Node& an = producer_of(g, sum);
  ASSERT_EQ(an.op, OpKind::AddNorm);
  EXPECT_EQ(an.outputs[0], sum);
  EXPECT_EQ(std::get<NormAttrs>(an.attrs).kind, NormKind::Rms);
  const Node& next = producer_of(g, output_value(g, "next"));
  EXPECT_EQ(next.inputs[0], sum);
  EXPECT_EQ(producer_of(g, next.inputs[1]).inputs[0], an.outputs[1]);
}

TEST(AddNormFusion, BroadcastingAddIsLeftAlone) {
  Graph g;
  ValueId x = g.input("x", {7, 9}, DType::F32);
  ValueId row = g.param("row", {9}, DType::F32);
  ValueId gamma = g.param("gamma", {9}, DType::F32);
  g.output("y", g.rms_norm(g.add(x, row), gamma, 1e-6f));
  fuse_add_norm(g);
  EXPECT_EQ(count_live(g, OpKind::AddNorm), 0);
  EXPECT_EQ(count_live(g, OpKind::RmsNorm), 1);
}

TEST(AddNormFusion, NormOfSomethingElseIsLeftAlone) {
  Graph g;
  ValueId x = g.input("x", {7, 9}, DType::F32);
  ValueId gamma = g.param("gamma", {9}, DType::F32);
  g.output("y", g.layer_norm(g.mul(x, x), gamma, -1, 1e-5f));
  fuse_add_norm(g);
  EXPECT_EQ(count_live(g, OpKind::AddNorm), 0);
}


TEST(AddNormFusion, NumericPostNormLayerNormMatchesUnfused) {
  Graph g;
  ValueId x = g.input("x", {2, 7, 33}, DType::F32);
  ValueId r = g.input("r", {2, 7, 33}, DType::F32);
  ValueId gamma = g.param("gamma", {33}, DType::F32), beta = g.param("beta", {33}, DType::F32);
  ValueId gamma2 = g.param("gamma2", {33}, DType::F32);
  ValueId y = g.layer_norm(g.add(x, r), gamma, beta, 1e-5f);
  g.output("y", y);
  g.output("z", g.layer_norm(g.add(y, x), gamma2, -1, 1e-3f));  // no beta
  auto run = test::expect_fusion_preserves_outputs(g, 301);
  EXPECT_EQ(test::thunks_of(*run.unfused, "binary"), 2);
  EXPECT_EQ(test::thunks_of(*run.fused, "binary"), 0);
  EXPECT_EQ(test::thunks_of(*run.fused, "norm"), 2);
}

TEST(AddNormFusion, NumericPreNormSumUsedTwiceMatchesUnfused) {
  Graph g;
  ValueId x = g.input("x", {3, 129}, DType::F32);
  ValueId r = g.input("r", {3, 129}, DType::F32);
  ValueId gamma = g.param("gamma", {129}, DType::F32);
  ValueId w = g.param("w", {129, 129}, DType::F32);
  ValueId h = g.add(x, r);
  ValueId n = g.rms_norm(h, gamma, 1e-6f);
  g.output("next", g.add(h, g.matmul(n, w)));
  g.output("sum", h);
  g.output("normed", n);
  auto run = test::expect_fusion_preserves_outputs(g, 302);
  EXPECT_EQ(test::thunks_of(*run.fused, "binary"), 1);
  EXPECT_EQ(test::thunks_of(*run.fused, "norm"), 1);
}

// Gemma's sandwich norm: norm(o) + r becomes one norm adding r after.
TEST(AddNormFusion, NormThenAddAddsTheResidualAfter) {
  Graph g;
  ValueId o = g.input("o", {2, 9}, DType::F32);
  ValueId r = g.input("r", {2, 9}, DType::F32);
  ValueId gamma = g.param("gamma", {9}, DType::F32);
  g.output("h", g.add(r, g.rms_norm(o, gamma, 1e-6f)));
  fuse_add_norm(g);
  eliminate_dead_code(g);
  verify(g);
  EXPECT_EQ(count_live(g, OpKind::Add), 0);
  const Node& n = producer_of(g, output_value(g, "h"));
  ASSERT_EQ(n.op, OpKind::RmsNorm);
  EXPECT_TRUE(std::get<NormAttrs>(n.attrs).add_after);
  EXPECT_EQ(n.inputs, (std::vector<ValueId>{o, gamma, r}));
}

TEST(AddNormFusion, NormReadElsewhereOrBroadcastAddIsLeftAlone) {
  Graph g;
  ValueId o = g.input("o", {2, 9}, DType::F32);
  ValueId row = g.param("row", {9}, DType::F32);
  ValueId gamma = g.param("gamma", {9}, DType::F32);
  ValueId n = g.rms_norm(o, gamma, 1e-6f);
  g.output("h", g.add(n, g.input("r", {2, 9}, DType::F32)));
  g.output("n", n);  // the normed value is an output too
  g.output("b", g.add(g.rms_norm(o, gamma, 1e-5f), row));
  fuse_add_norm(g);
  EXPECT_EQ(count_live(g, OpKind::Add), 2);
  for (const Node& m : g.nodes())
    if (!m.dead && m.op == OpKind::RmsNorm) EXPECT_FALSE(std::get<NormAttrs>(m.attrs).add_after);
}

// A decode row through the whole pipeline: the next norm goes into the
// product, the sandwich norm takes the add; prefill rows keep add_norm. Both
// equal the unfused graph.
TEST(AddNormFusion, SandwichNormsInTheDecodeStepAndInPrefill) {
  for (int64_t rows : {1, 5}) {
    Graph g;
    ValueId x = g.input("x", {rows, 64}, DType::F32);
    ValueId a = g.input("a", {rows, 48}, DType::F32);
    ValueId h = g.add(x, g.rms_norm(g.matmul(a, g.param("wo", {64, 48}, DType::F32), false, true),
                                    g.param("post", {64}, DType::F32), 1e-6f));
    ValueId m = g.rms_norm(h, g.param("pre", {64}, DType::F32), 1e-6f);
    g.output("y", g.add(h, g.matmul(m, g.param("w", {64, 64}, DType::F32), false, true)));
    auto run = test::expect_fusion_preserves_outputs(g, 410 + uint64_t(rows));
    // Decode: both adds gone (into the norm, and into the last product);
    // prefill: the sum goes to add_norm, the last add stays.
    EXPECT_EQ(test::thunks_of(*run.fused, "binary"), rows == 1 ? 0 : 1) << rows;
    EXPECT_EQ(test::thunks_of(*run.fused, "norm"), rows == 1 ? 1 : 2) << rows;
  }
}

}  // namespace
}  // namespace rlx
