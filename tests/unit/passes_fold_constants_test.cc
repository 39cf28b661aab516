#include <gtest/gtest.h>

#include <cmath>

#include "compile/passes.h"
#include "fusion_check.h"
#include "pass_test_graphs.h"

namespace rlx {
namespace {

using test::count_live;
using test::output_value;
using test::producer_of;

std::vector<float> payload_f32(const Node& n, const Value& v) {
  std::vector<float> r(size_t(numel(v.shape)));
  for (size_t i = 0; i < r.size(); ++i) r[i] = load_as_float(n.data->data(), v.dtype, i);
  return r;
}

TEST(FoldConstants, ConstantChainBecomesOneConstant) {
  const std::vector<float> a = test::random_floats(3 * 7, 11), b = test::random_floats(7, 12);
  Graph g;
  ValueId x = g.input("x", {3, 7}, DType::F32);
  ValueId ca = g.constant_f32({3, 7}, DType::F32, a, "a");
  ValueId cb = g.constant_f32({7}, DType::F32, b, "b");
  ValueId folded = g.tanh(g.mul(g.add(ca, cb), ca));  // (a + b) * a, then tanh
  g.output("y", g.add(x, folded));

  fold_constants(g);
  eliminate_dead_code(g);
  verify(g);
  EXPECT_EQ(count_live(g, OpKind::Mul), 0);
  EXPECT_EQ(count_live(g, OpKind::Tanh), 0);
  EXPECT_EQ(count_live(g, OpKind::Add), 1);  // x + constant
  EXPECT_EQ(count_live(g, OpKind::Constant), 1);
  const Node& add = producer_of(g, output_value(g, "y"));
  ASSERT_EQ(add.op, OpKind::Add);
  EXPECT_EQ(add.inputs[0], x);
  const Node& c = producer_of(g, add.inputs[1]);
  ASSERT_EQ(c.op, OpKind::Constant);
  const Value& cv = g.value(add.inputs[1]);
  EXPECT_EQ(cv.shape, (Shape{3, 7}));
  std::vector<double> want(21);
  for (size_t i = 0; i < 21; ++i) want[i] = std::tanh((double(a[i]) + b[i % 7]) * a[i]);
  test::expect_close(payload_f32(c, cv), want, 1e-6, "folded constant");
}

TEST(FoldConstants, NodesReadingInputsOrParamsStay) {
  Graph g;
  ValueId x = g.input("x", {5}, DType::F32);
  ValueId p = g.param("p", {5}, DType::F32);
  ValueId c = g.constant_f32({5}, DType::F32, {1, 2, 3, 4, 5}, "c");
  g.output("y", g.mul(g.add(x, c), g.relu(p)));
  const size_t before = g.live_node_count();
  fold_constants(g);
  EXPECT_EQ(g.live_node_count(), before);
  EXPECT_EQ(count_live(g, OpKind::Constant), 1);
}

TEST(FoldConstants, ReshapeNarrowConcatAndMatmulOfConstants) {
  const std::vector<float> a = test::random_floats(4 * 6, 21), w = test::random_floats(6 * 3, 22);
  Graph g;
  ValueId x = g.input("x", {2, 3}, DType::F32);
  ValueId ca = g.constant_f32({4, 6}, DType::F32, a, "a");
  ValueId cw = g.constant_f32({6, 3}, DType::F32, w, "w");
  ValueId top = g.narrow(g.matmul(ca, cw), 0, 1, 2);                 // rows 1..2 of a @ w: [2, 3]
  ValueId both = g.concat({top, g.reshape(g.narrow(ca, 1, 0, 3), {4, 3})}, 0);  // [6, 3]
  g.output("y", g.add(x, g.narrow(both, 0, 1, 2)));                  // rows 1..2 of `both`

  fold_constants(g);
  eliminate_dead_code(g);
  verify(g);
  EXPECT_EQ(count_live(g, OpKind::MatMul), 0);
  EXPECT_EQ(count_live(g, OpKind::Concat), 0);
  EXPECT_EQ(count_live(g, OpKind::Reshape), 0);
  EXPECT_EQ(count_live(g, OpKind::Narrow), 0);
  EXPECT_EQ(count_live(g, OpKind::Constant), 1);
  const Node& add = producer_of(g, output_value(g, "y"));
  const Node& c = producer_of(g, add.inputs[1]);
  ASSERT_EQ(c.op, OpKind::Constant);
  // rows 1..2 of `both` = row 2 of a@w, then row 0 of a[:, :3].
  std::vector<double> want;
  for (int j = 0; j < 3; ++j) {
    double s = 0;
    for (int k = 0; k < 6; ++k) s += double(a[size_t(2 * 6 + k)]) * w[size_t(k * 3 + j)];
    want.push_back(s);
  }
  for (int j = 0; j < 3; ++j) want.push_back(a[size_t(j)]);
  test::expect_close(payload_f32(c, g.value(add.inputs[1])), want, 1e-6, "folded constant");
}

TEST(FoldConstants, CompiledGraphComputesWithTheFoldedValue) {
  const std::vector<float> a = test::random_floats(9, 31), xs = test::random_floats(2 * 9, 32);
  Graph g;
  ValueId x = g.input("x", {2, 9}, DType::F32);
  ValueId ca = g.constant_f32({9}, DType::F32, a, "a");
  g.output("y", g.mul(x, g.silu(ca)));
  for (bool fuse : {false, true}) {
    auto exe = test::compile_cpu(g, fuse);
    EXPECT_EQ(test::thunks_of(*exe, "unary"), 0) << "silu of a constant should be folded";
    auto out = exe->run({{"x", HostTensor::from_f32({2, 9}, xs)}});
    std::vector<double> want(18);
    for (size_t i = 0; i < 18; ++i) {
      const double s = a[i % 9] / (1.0 + std::exp(-double(a[i % 9])));
      want[i] = xs[i] * s;
    }
    test::expect_close(out.at("y").to_f32(), want, 1e-5, "y");
  }
}

}  // namespace
}  // namespace rlx
