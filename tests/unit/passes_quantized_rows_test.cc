// keep_products_quantized: compiled for the CPU, a matmul_q of many rows has
// no dequantized copy of W (its arena is smaller by W in f32) and gives the
// product the reference gives; compiled for CUDA it keeps the scratch.
#include <gtest/gtest.h>

#include <cmath>
#include <map>

#include "compile/passes.h"
#include "cpu_quant_kernel_scope.h"
#include "fusion_check.h"
#include "rlx/options.h"
#include "rlx/quant.h"

namespace rlx {
namespace {

constexpr int64_t kRows = 20, kN = 512, kK = 256;

Graph prefill_product() {
  Graph g;
  const ValueId x = g.input("x", {kRows, kK}, DType::F32);
  g.output("y", g.matmul_q(x, g.param("w.quants", {kN, kK / 4}, DType::I32),
                           g.param("w.scales", {kN, kK / kQuantBlock}, DType::F16), QuantType::Q8_0));
  return g;
}

size_t matmul_q_outputs(const Graph& g) {
  for (const Node& n : g.nodes())
    if (!n.dead && n.op == OpKind::MatMulQ) return n.outputs.size();
  return 0;
}

TEST(KeepProductsQuantized, OnlyTheCpuDropsTheDequantizedScratch) {
  for (Device d : {Device::Cpu, Device::Cuda}) {
    Graph g = prefill_product();
    CompileOptions o;
    o.device = d;
    run_passes(g, o);
    EXPECT_EQ(matmul_q_outputs(g), d == Device::Cpu ? 1u : 2u) << (d == Device::Cpu ? "cpu" : "cuda");
  }
}

TEST(KeepProductsQuantized, CpuProductOfManyRowsWithoutScratchMatchesTheReference) {
  // Q8_0 quants from small random words, one scale per block.
  std::vector<int32_t> words(size_t(kN * kK / 4));
  uint64_t state = 5;
  for (int32_t& w : words) w = int32_t((state = state * 6364136223846793005ull + 1442695040888963407ull) >> 32);
  const std::vector<float> scales = test::random_floats(size_t(kN * kK / kQuantBlock), 6, 0.001f, 0.01f);
  const std::vector<float> x = test::random_floats(size_t(kRows * kK), 7, -2.f, 2.f);
  // The reference: W dequantized (int8 quants times the f16-rounded scale).
  const HostTensor sc = HostTensor::from_f32({kN, kK / kQuantBlock}, scales, DType::F16);
  const std::vector<float> s16 = sc.to_f32();
  std::vector<double> ref(size_t(kRows * kN), 0.0);
  for (int64_t r = 0; r < kN; ++r)
    for (int64_t c = 0; c < kK; ++c) {
      const int8_t q = int8_t(uint32_t(words[size_t(r * kK / 4 + c / 4)]) >> (8 * (c % 4)));
      const double w = double(q) * s16[size_t(r * kK / kQuantBlock + c / kQuantBlock)];
      for (int64_t i = 0; i < kRows; ++i) ref[size_t(i * kN + r)] += w * x[size_t(i * kK + c)];
    }
  uint64_t scratch_bytes = 0;
  for (cpu::QuantKernel k : {cpu::QuantKernel::F32, cpu::quant_kernel()}) {
    const test::QuantKernelScope scope(k);
    const Graph g = prefill_product();
    auto exe = test::compile_cpu(g, true);
    exe->set_param("w.quants", HostTensor::from_i32({kN, kK / 4}, words));
    exe->set_param("w.scales", sc);
    const std::vector<float> got = exe->run({{"x", HostTensor::from_f32({kRows, kK}, x)}}).at("y").to_f32();
    // f32: rounding only; the integer kernels: two-digit activations (dx / 256 per value).
    test::expect_close(got, ref, k == cpu::QuantKernel::F32 ? 1e-5 : 1e-3,
                       std::string("matmul_q of ") + std::to_string(kRows) + " rows, " + cpu::quant_kernel_name(k));
    scratch_bytes = exe->report().scratch_bytes;
  }
  EXPECT_LT(scratch_bytes, uint64_t(kN * kK * 4)) << "W in f32 would not fit: no dequantized copy";
}

}  // namespace
}  // namespace rlx
