#include <gtest/gtest.h>

#include "compile/passes.h"
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

}  // namespace
}  // namespace rlx
