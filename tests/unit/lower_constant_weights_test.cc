// Lowering marks a matmul's second operand constant (MatMulParams::b_constant)
// only when it is a param or constant, a param group (a concatenation of
// params nothing else reads, laid out at load), or a view of one: the CUDA
// matrix-vector kernel reads such a weight before waiting for the kernel
// before it, which would be a race for an operand some thunk writes.
#include <gtest/gtest.h>

#include <variant>
#include <vector>

#include "rlx/session.h"
#include "thunks/thunk.h"

namespace rlx {
namespace {

TEST(LowerConstantWeights, OnlyParamsParamGroupsAndTheirViewsAreMarkedConstant) {
  Graph g;
  ValueId x = g.input("x", {3, 8}, DType::F32);
  ValueId w = g.param("w", {5, 8}, DType::F32);
  ValueId flat = g.param("flat", {40}, DType::F32);
  ValueId y = g.input("y", {5, 8}, DType::F32);
  g.output("by_param", g.matmul(x, w, false, true));
  g.output("by_view", g.matmul(x, g.reshape(flat, {5, 8}), false, true));
  g.output("by_input", g.matmul(x, y, false, true));
  g.output("by_computed", g.matmul(x, g.add(y, y), false, true));
  ValueId w1 = g.param("w1", {2, 8}, DType::F32), w2 = g.param("w2", {3, 8}, DType::F32);
  g.output("by_group", g.matmul(x, g.concat({w1, w2}, 0), false, true));
  // A concatenation of a param that something else reads too is computed by a copy.
  ValueId shared = g.param("shared", {2, 8}, DType::F32);
  g.output("shared_too", g.add(shared, shared));
  g.output("by_concat", g.matmul(x, g.concat({shared, g.param("w3", {3, 8}, DType::F32)}, 0), false, true));
  CompileOptions o;
  o.fuse = false;
  auto exe = compile(g, o);
  std::vector<int> flags;
  for (const Thunk& t : exe->schedule().thunks)
    if (const auto* p = std::get_if<MatMulParams>(&t.params)) flags.push_back(p->b_constant);
  EXPECT_EQ(flags, (std::vector<int>{1, 1, 0, 0, 1, 0}));
}

}  // namespace
}  // namespace rlx
