// Every product whose weights are constant names the next such product's
// weights for L2 (MatMulParams / MatMulQParams::next_weights), the last one
// the first's; a glu product's gate and up halves and a quantized product's
// quants and scales are separate ranges, each exactly where set_param puts
// that tensor; a product over computed operands is neither a source nor a
// target.
#include <gtest/gtest.h>

#include <map>
#include <variant>

#include "compile/passes.h"
#include "compile/weight_prefetch.h"
#include "fusion_check.h"
#include "rlx/options.h"
#include "rlx/quant.h"

namespace rlx {
namespace {

constexpr int64_t kHidden = 64, kFfn = 48;

std::map<std::string, const Binding*> bindings(const Schedule& s) {
  std::map<std::string, const Binding*> by_name;
  for (const Binding& b : s.param_bindings) by_name[b.name] = &b;
  return by_name;
}

std::vector<L2Prefetch> prefetches(const Schedule& s) {
  std::vector<L2Prefetch> out;
  for (const Thunk& t : s.thunks)
    std::visit(
        [&](const auto& p) {
          if constexpr (requires { p.next_weights; }) out.push_back(p.next_weights);
        },
        t.params);
  return out;
}

void expect_range(const L2Prefetch& f, int r, const Binding& b) {
  SCOPED_TRACE("range " + std::to_string(r) + " = " + b.name);
  EXPECT_EQ(f.offset[r], b.offset);
  EXPECT_EQ(f.bytes[r], b.bytes());
  EXPECT_EQ(f.per_block[r], 0u) << "the backend sets the blocks' slices at launch";
}

// A decode step's feed-forward block compiled with the GPU's passes: the
// gate and up products merge into one glu product over the param group
// [w_gate; w_up], then the down product; a product of two inputs between.
TEST(WeightPrefetch, ProductsNameTheNextProductsWeightsGluHalvesApart) {
  Graph g;
  const ValueId x = g.input("x", {1, 1, kHidden}, DType::F16);
  const ValueId y = g.input("y", {kHidden, kHidden}, DType::F16);
  const ValueId n = g.rms_norm(x, g.param("gamma", {kHidden}, DType::F16), 1e-5f);
  const ValueId gate = g.matmul(n, g.param("w_gate", {kFfn, kHidden}, DType::F16), false, true);
  const ValueId up = g.matmul(n, g.param("w_up", {kFfn, kHidden}, DType::F16), false, true);
  const ValueId h = g.add(x, g.matmul(g.swiglu(gate, up, Activation::Silu),
                                      g.param("w_down", {kHidden, kFfn}, DType::F16), false, true));
  g.output("out", g.matmul(h, y, false, true));
  CompileOptions o;
  o.device = Device::Cuda;
  run_passes(g, o);
  const auto exe = test::compile_cpu(g, false);
  const Schedule& s = exe->schedule();
  const auto b = bindings(s);
  const std::vector<L2Prefetch> f = prefetches(s);
  ASSERT_EQ(f.size(), 3u) << s.to_string();
  // gate/up -> down
  EXPECT_EQ(f[0].total(), b.at("w_down")->bytes());
  expect_range(f[0], 0, *b.at("w_down"));
  EXPECT_EQ(f[0].bytes[1], 0u);
  // down -> the first product again, its gate and up halves apart
  expect_range(f[1], 0, *b.at("w_gate"));
  expect_range(f[1], 1, *b.at("w_up"));
  EXPECT_EQ(f[1].bytes[2], 0u);
  // x . y^T reads no constant weights: it names none.
  EXPECT_EQ(f[2].total(), 0u);
}

// Quantized products: quants and scales, in that order.
TEST(WeightPrefetch, QuantizedProductsNameQuantsAndScales) {
  Graph g;
  const int64_t k = 64;
  const ValueId x = g.input("x", {1, k}, DType::F32);
  auto q = [&](ValueId in, const std::string& name, int64_t n) {
    return g.matmul_q(in, g.param(name + ".q", {n, k / quant_elems_per_word(QuantType::Q8_0)}, DType::I32),
                      g.param(name + ".s", {n, k / kQuantBlock}, DType::F16), QuantType::Q8_0);
  };
  g.output("out", q(q(x, "a", k), "b", 40));
  const auto exe = test::compile_cpu(g, false);
  const Schedule& s = exe->schedule();
  const auto b = bindings(s);
  const std::vector<L2Prefetch> f = prefetches(s);
  ASSERT_EQ(f.size(), 2u) << s.to_string();
  expect_range(f[0], 0, *b.at("b.q"));
  expect_range(f[0], 1, *b.at("b.s"));
  expect_range(f[1], 0, *b.at("a.q"));
  expect_range(f[1], 1, *b.at("a.s"));
  EXPECT_EQ(f[1].bytes[2], 0u);
}

}  // namespace
}  // namespace rlx
