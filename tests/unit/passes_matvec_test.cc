// fuse_matvec: in a decode step (few rows) the residual add after a product
// and the RMSNorm before one fold into the product (MatVecFusion). The fused
// graph's outputs equal the unfused ones; with more rows nothing folds; a
// norm that is read by anything but a product stays.
#include <gtest/gtest.h>

#include <cmath>
#include <map>
#include <tuple>

#include "compile/passes.h"
#include "cpu_quant_kernel_scope.h"
#include "fusion_check.h"
#include "pass_test_graphs.h"
#include "rlx/options.h"

namespace rlx {
namespace {

using test::count_live;

constexpr int64_t kHidden = 64, kFfn = 56, kVocab = 30;

// Two pre-norm residual blocks and a normalized head over x [1, rows, 64],
// as a decoder step writes them; one product of each block quantized when
// `quantized` (Q8_0 over random words: any bytes are valid quants).
Graph pre_norm_chain(int64_t rows, DType dt, bool quantized) {
  Graph g;
  auto w = [&](const std::string& n, int64_t out, int64_t in) { return g.param(n, {out, in}, dt); };
  auto gamma = [&](const std::string& n) { return g.param(n, {kHidden}, dt); };
  const ValueId x = g.input("x", {1, rows, kHidden}, dt);
  ValueId a = g.linear(g.rms_norm(x, gamma("g1"), 1e-5f), w("wqkv", kHidden, kHidden), g.param("bqkv", {kHidden}, dt),
                       Activation::None);
  ValueId h1 = g.add(x, g.linear(a, w("wo", kHidden, kHidden), -1, Activation::None));
  const ValueId n2 = g.rms_norm(h1, gamma("g2"), 1e-6f);
  ValueId up = quantized ? g.matmul_q(n2, g.param("wu.quants", {kFfn, kHidden / 4}, DType::I32),
                                      g.param("wu.scales", {kFfn, kHidden / 32}, DType::F16), QuantType::Q8_0)
                         : g.linear(n2, w("wu", kFfn, kHidden), -1, Activation::None);
  ValueId h2 = g.add(g.linear(g.silu(up), w("wd", kHidden, kFfn), -1, Activation::None), h1);
  g.output("logits", g.linear(g.rms_norm(h2, gamma("g3"), 1e-5f), w("lm", kVocab, kHidden), -1, Activation::None));
  g.output("h2", h2);
  return g;
}

TEST(MatVecFusion, DecodeStepFoldsNormsAndResiduals) {
  for (int64_t rows : {int64_t(1), int64_t(3), kMatMulFusedRows}) {
    SCOPED_TRACE("rows " + std::to_string(rows));
    auto r = test::expect_fusion_preserves_outputs(pre_norm_chain(rows, DType::F32, false), 900 + uint64_t(rows));
    EXPECT_EQ(test::thunks_of(*r.unfused, "norm"), 3);
    EXPECT_EQ(test::thunks_of(*r.fused, "norm"), 0) << r.fused->report().schedule;
    EXPECT_EQ(test::thunks_of(*r.fused, "binary"), 0) << "both residual adds are in their products";
    EXPECT_EQ(test::thunks_of(*r.fused, "matmul"), 5);
  }
}

TEST(MatVecFusion, QuantizedProductNormalizesItsInput) {
  auto r = test::expect_fusion_preserves_outputs(pre_norm_chain(2, DType::F32, true), 911);
  EXPECT_EQ(test::thunks_of(*r.fused, "norm"), 0) << r.fused->report().schedule;
  EXPECT_EQ(test::thunks_of(*r.fused, "matmul_q"), 1);
}

TEST(MatVecFusion, BatchedRowsFuseIntoQuantizedProductsOnly) {
  // 8 rows (batch-8 decoding): a float product may run faster as a library
  // GEMM, so only the quantized product (whose norm it was) takes its norm;
  // the other two norms stay, one of them after an add (add_norm).
  auto r = test::expect_fusion_preserves_outputs(pre_norm_chain(kMatVecRows, DType::F32, true), 915);
  EXPECT_EQ(test::thunks_of(*r.fused, "norm"), 2) << r.fused->report().schedule;
  EXPECT_EQ(test::thunks_of(*r.fused, "binary"), 1) << "the attention-output residual add stays: its norm went into the quantized product";
}

// The RMSNorm fused into a quantized product and the same norm run apart
// (as a batch of more than kMatVecRows rows runs it) give the same bits on
// every CPU kernel: a sequence decodes the same alone as in a big batch.
TEST(MatVecFusion, QuantizedProductGivesTheSameBitsFusedOrApart) {
  for (cpu::QuantKernel kernel : {cpu::QuantKernel::F32, cpu::QuantKernel::Scalar, cpu::QuantKernel::Avx2,
                                  cpu::QuantKernel::Avx512Vnni}) {
    if (!cpu::quant_kernel_runs(kernel)) continue;
    const test::QuantKernelScope scope(kernel);
    for (int64_t rows : {int64_t(1), int64_t(3)}) {
      SCOPED_TRACE(std::string(cpu::quant_kernel_name(kernel)) + ", rows " + std::to_string(rows));
      Graph g;
      const ValueId x = g.input("x", {rows, 96}, DType::F32);
      const ValueId n = g.rms_norm(x, g.param("g", {96}, DType::F32), 1e-5f);
      g.output("y", g.matmul_q(n, g.param("w.quants", {37, 96 / 4}, DType::I32),
                               g.param("w.scales", {37, 96 / 32}, DType::F16), QuantType::Q8_0));
      // Random words are valid Q8_0 quants; scales small enough to stay finite.
      std::vector<int32_t> words(size_t(37 * 96 / 4));
      uint64_t state = 917 + uint64_t(rows);
      for (int32_t& w : words) w = int32_t((state = state * 6364136223846793005ull + 1442695040888963407ull) >> 32);
      const std::map<std::string, HostTensor> params = {
          {"g", HostTensor::from_f32({96}, test::random_floats(96, 918, 0.5f, 1.5f))},
          {"w.quants", HostTensor::from_i32({37, 96 / 4}, words)},
          {"w.scales", HostTensor::from_f32({37, 96 / 32}, test::random_floats(37 * 3, 919, -0.01f, 0.01f), DType::F16)}};
      const std::map<std::string, HostTensor> in = {
          {"x", HostTensor::from_f32({rows, 96}, test::random_floats(size_t(rows * 96), 920, -3.f, 3.f))}};
      auto fused = test::compile_cpu(g, true), apart = test::compile_cpu(g, false);
      for (const auto& [name, t] : params) {
        fused->set_param(name, t);
        apart->set_param(name, t);
      }
      EXPECT_EQ(test::thunks_of(*fused, "norm"), 0) << fused->report().schedule;
      EXPECT_EQ(test::thunks_of(*apart, "norm"), 1) << apart->report().schedule;
      const HostTensor a = fused->run(in).at("y"), b = apart->run(in).at("y");
      size_t nonzero = 0, finite = 0;
      for (float v : b.to_f32()) nonzero += v != 0.f, finite += std::isfinite(v);
      EXPECT_EQ(finite, size_t(rows * 37));
      EXPECT_EQ(nonzero, size_t(rows * 37));
      EXPECT_EQ(a.bytes, b.bytes) << "the fused norm rounds otherwise than the norm thunk";
    }
  }
}

TEST(MatVecFusion, HalfPrecisionStaysWithinRounding) {
  // The fused product does not round the normalized x to f16 first.
  auto r = test::expect_fusion_preserves_outputs(pre_norm_chain(2, DType::F16, false), 912, {}, 2e-2);
  EXPECT_EQ(test::thunks_of(*r.fused, "norm"), 0);
}

TEST(MatVecFusion, MoreRowsThanAVectorProductAreLeftToAddNorm) {
  auto r = test::expect_fusion_preserves_outputs(pre_norm_chain(kMatVecRows + 1, DType::F32, false), 913);
  EXPECT_EQ(test::thunks_of(*r.fused, "norm"), 3) << "one rms_norm and two add_norms\n" << r.fused->report().schedule;
}

TEST(MatVecFusion, NormReadByAnythingButAProductStays) {
  Graph g;
  const ValueId x = g.input("x", {2, kHidden}, DType::F32);
  const ValueId n = g.rms_norm(x, g.param("g", {kHidden}, DType::F32), 1e-5f);
  g.output("y", g.linear(n, g.param("w", {7, kHidden}, DType::F32), -1, Activation::None));
  g.output("n", n);
  auto r = test::expect_fusion_preserves_outputs(g, 914);
  EXPECT_EQ(test::thunks_of(*r.fused, "norm"), 1);
}

TEST(MatVecFusion, PassRewritesInputsInOrder) {
  Graph g = pre_norm_chain(1, DType::F32, false);
  fuse_matvec(g);
  eliminate_dead_code(g);
  verify(g);
  EXPECT_EQ(count_live(g, OpKind::RmsNorm), 0);
  EXPECT_EQ(count_live(g, OpKind::Add), 0);
  int with_norm = 0, with_residual = 0;
  for (const Node& n : g.nodes()) {
    if (n.dead || n.op != OpKind::MatMul) continue;
    const MatVecFusion& f = std::get<MatMulAttrs>(n.attrs).fused;
    const ProductInputs pi = product_inputs(n.inputs.size(), 2, f);
    with_norm += f.rms_norm;
    with_residual += f.residual;
    if (f.rms_norm) EXPECT_EQ(g.value(n.inputs[size_t(pi.gamma)]).shape, Shape{kHidden});
    if (pi.bias >= 0) EXPECT_EQ(g.value(n.inputs[size_t(pi.bias)]).shape, Shape{kHidden}) << "the QKV bias";
  }
  EXPECT_EQ(with_norm, 3);
  EXPECT_EQ(with_residual, 2);
}

// The feed-forward block of a decoder step: x + down(glu(gate(n), up(n)))
// with n = rms_norm(x), gate and up separate products as models write them.
Graph gated_ffn(int64_t rows, Activation act, bool bias) {
  Graph g;
  const ValueId x = g.input("x", {1, rows, kHidden}, DType::F32);
  const ValueId n = g.rms_norm(x, g.param("g", {kHidden}, DType::F32), 1e-5f);
  auto proj = [&](ValueId in, const std::string& name, int64_t out, int64_t k) {
    const ValueId y = g.matmul(in, g.param(name, {out, k}, DType::F32), false, true);
    return bias ? g.add(y, g.param(name + ".bias", {out}, DType::F32)) : y;
  };
  const ValueId gate = proj(n, "w_gate", kFfn, kHidden), up = proj(n, "w_up", kFfn, kHidden);  // in this order
  const ValueId gu = g.swiglu(gate, up, act);
  g.output("h", g.add(x, proj(gu, "w_down", kHidden, kFfn)));
  return g;
}

const Node* glu_product(const Graph& g) {
  for (const Node& n : g.nodes())
    if (!n.dead && n.op == OpKind::MatMul && std::get<MatMulAttrs>(n.attrs).fused.glu != Activation::None) return &n;
  return nullptr;
}

// Compiled for the GPU, the SwiGLU/GeGLU after the merged gate/up product
// goes into it (one output of kFfn columns, its norm kept); compiled for the
// CPU it stays. The gated product, run by the CPU's reference for it, gives
// the unfused block's output.
TEST(MatVecFusion, GpuProductsGateTheirOwnGateUpHalves) {
  for (const auto& [rows, act, bias] : {std::tuple{int64_t(1), Activation::Silu, false},
                                        std::tuple{int64_t(3), Activation::GeluTanh, true}}) {
    SCOPED_TRACE("rows " + std::to_string(rows));
    const Graph plain = gated_ffn(rows, act, bias);
    Graph gpu = plain, cpu = plain;
    CompileOptions o;
    o.device = Device::Cuda;
    run_passes(gpu, o);
    o.device = Device::Cpu;
    run_passes(cpu, o);
    EXPECT_EQ(count_live(gpu, OpKind::SwiGlu), 0);
    EXPECT_EQ(count_live(cpu, OpKind::SwiGlu), 1);
    const Node* p = glu_product(gpu);
    ASSERT_NE(p, nullptr);
    const MatMulAttrs& at = std::get<MatMulAttrs>(p->attrs);
    EXPECT_EQ(at.fused.glu, act);
    EXPECT_TRUE(at.fused.rms_norm) << "the norm before the product stays fused";
    EXPECT_EQ(gpu.value(p->outputs[0]).shape, (Shape{1, rows, kFfn}));

    // The GPU's graph run on the CPU (no further passes) against the plain one.
    auto want = test::compile_cpu(plain, false), got = test::compile_cpu(gpu, false);
    for (const auto& [name, t] : test::random_params(plain, 40 + uint64_t(rows))) {
      want->set_param(name, t);
      got->set_param(name, t);
    }
    const auto inputs = test::random_inputs(plain, 41 + uint64_t(rows), {});
    const std::vector<float> a = want->run(inputs).at("h").to_f32(), b = got->run(inputs).at("h").to_f32();
    test::expect_close(b, a, 1e-5, "gated product vs swiglu apart");
  }
}

// More rows than a fused product takes, or a product with its own
// activation: the glu stays a kernel of its own.
TEST(MatVecFusion, GluStaysApartPastTheFusedRows) {
  Graph g = gated_ffn(kMatMulFusedRows + 1, Activation::Silu, false);
  CompileOptions o;
  o.device = Device::Cuda;
  run_passes(g, o);
  EXPECT_EQ(count_live(g, OpKind::SwiGlu), 1);
  EXPECT_EQ(glu_product(g), nullptr);
}

// A glu over the halves of anything but a product (a MoE layer's grouped
// expert product, here an add) is left as it is.
TEST(MatVecFusion, GluOfAnythingButAProductStays) {
  Graph g;
  const ValueId x = g.input("x", {1, 1, 2 * kFfn}, DType::F32);
  g.output("y", g.swiglu_fused(g.add(x, g.param("b", {2 * kFfn}, DType::F32))));
  CompileOptions o;
  o.device = Device::Cuda;
  run_passes(g, o);
  EXPECT_EQ(count_live(g, OpKind::SwiGlu), 1);
}

TEST(MatVecFusion, ShapeInferenceNamesWhatDoesNotFit) {
  Graph g;
  const ValueId x = g.input("x", {9, 16}, DType::F32), w = g.param("w", {4, 16}, DType::F32);
  const ValueId gamma = g.param("g", {16}, DType::F32);
  MatMulAttrs at;
  at.trans_b = true;
  at.fused.rms_norm = true;
  std::string e = test::error_of([&] { g.add_node(OpKind::MatMul, {x, w, gamma}, at, "proj"); });
  EXPECT_NE(e.find("at most 8 rows"), std::string::npos) << e;
  const ValueId x2 = g.input("x2", {2, 16}, DType::F32);
  at.fused.rms_norm = false;
  at.fused.residual = true;
  e = test::error_of([&] { g.add_node(OpKind::MatMul, {x2, w, g.input("r", {2, 5}, DType::F32)}, at, "proj"); });
  EXPECT_NE(e.find("residual must be [2, 4]"), std::string::npos) << e;
  at.fused.residual = false;
  at.fused.glu = Activation::Silu;
  const ValueId w3 = g.param("w3", {5, 16}, DType::F32);
  e = test::error_of([&] { g.add_node(OpKind::MatMul, {x2, w3}, at, "gate_up"); });
  EXPECT_NE(e.find("even number of weight rows"), std::string::npos) << e;
  at.act = Activation::Relu;
  e = test::error_of([&] { g.add_node(OpKind::MatMul, {x2, w}, at, "gate_up"); });
  EXPECT_NE(e.find("no activation of its own"), std::string::npos) << e;
}

}  // namespace
}  // namespace rlx
