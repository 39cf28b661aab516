// matmul_q on CUDA against the CPU backend and a double reference: 1, 3 and
// 8 rows (the quantized matrix-vector kernel) and 17 (dequantize into
// scratch, then cuBLASLt), f32/f16/bf16 activations, Q8_0, Q4_0 and FP8, odd n,
// rows of x longer than one shared-memory tile; the path each took is
// asserted from the counters. Then the tiny LLaMA quantized at load: the
// GPU's greedy tokens and logits against the CPU's.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <functional>
#include <map>
#include <nlohmann/json.hpp>

#include "backends/cuda/cuda_executable.h"
#include "backends/cuda/matmul_quant.h"
#include "backends/cuda/matvec_chain.h"
#include "thunks/thunk.h"
#include "models/llama_generator.h"
#include "quant_weights.h"
#include "rlx/fp8.h"
#include "rlx/session.h"

namespace rlx {
namespace {

using test::QuantWeight;

const std::string kTiny = std::string(RLX_SOURCE_DIR) + "/tests/data/tiny_llama.gguf";

Graph product_graph(const QuantWeight& w, int64_t m, DType dt) {
  Graph g;
  ValueId x = g.input("x", {m, w.k}, dt), bias = g.input("bias", {w.n}, dt);
  ValueId q = g.param("w.quants", w.quants_shape(), DType::I32), s = g.param("w.scales", w.scales_shape(), DType::F16);
  g.output("out", g.matmul_q(x, q, s, w.type, bias));
  return g;
}

struct Shape3 {
  int64_t m, n, k;
};

TEST(MatMulQGpu, EqualsTheCpuAndTheReferenceOnEachPath) {
  if (!cuda_available()) GTEST_SKIP() << "no CUDA device present: GPU tests skipped";
  // 8224 = 257 blocks: one row of x is two shared-memory tiles; 2048 at 8
  // rows is three.
  const Shape3 shapes[] = {{1, 301, 288}, {3, 37, 160}, {8, 300, 2048}, {17, 301, 288}, {1, 65, 8224}, {2, 33, 8224}};
  uint64_t seed = 900;
  for (QuantType t : {QuantType::Q8_0, QuantType::Q4_0, QuantType::FP8})
    for (DType dt : {DType::F32, DType::F16, DType::BF16})
      for (const Shape3& s : shapes)
        for (ExecMode mode : {ExecMode::PerOp, ExecMode::Graph}) {
          const QuantWeight w = test::random_quant_weight(t, s.n, s.k, seed += 10);
          const Graph g = product_graph(w, s.m, dt);
          CompileOptions o;
          o.device = Device::Cuda;
          o.mode = mode;
          const cuda::MatMulQPathCounts before = cuda::matmul_q_path_counts();
          auto gpu = compile(g, o), cpu = compile(g, CompileOptions{});
          const cuda::MatMulQPathCounts after = cuda::matmul_q_path_counts();
          const bool vector = s.m <= kMatMulQVectorRows;
          EXPECT_EQ(after.gemv - before.gemv, vector ? 1 : 0);
          EXPECT_EQ(after.dequantize - before.dequantize, vector ? 0 : 1);
          for (Executable* e : {gpu.get(), cpu.get()}) {
            e->set_param("w.quants", HostTensor{DType::I32, w.quants_shape(), w.quants});
            e->set_param("w.scales", HostTensor{DType::F16, w.scales_shape(), w.scales});
          }
          const std::vector<float> x = test::quantize(test::random_floats(size_t(s.m * s.k), seed + 1), dt);
          const std::vector<float> b = test::quantize(test::random_floats(size_t(s.n), seed + 2), dt);
          const std::map<std::string, HostTensor> in{{"x", HostTensor::from_f32({s.m, s.k}, x, dt)},
                                                     {"bias", HostTensor::from_f32({s.n}, b, dt)}};
          const std::string what = std::string(quant_type_name(t)) + " " + std::string(dtype_name(dt)) + " " +
                                   std::to_string(s.m) + "x" + std::to_string(s.n) + "x" + std::to_string(s.k) +
                                   (mode == ExecMode::Graph ? " graph" : " perop");
          const std::vector<float> got = gpu->run(in).at("out").to_f32();
          // Longer rows, looser bound: the sums run in other orders.
          const double scale = 4 * std::sqrt(double(s.k) / 256);
          test::expect_close(test::to_double(got), test::quant_product_reference(x, w, s.m, &b), test::tol_for(dt, scale),
                             what + " vs reference");
          test::expect_close(test::to_double(got), test::to_double(cpu->run(in).at("out").to_f32()),
                             test::tol_for(dt, scale), what + " vs cpu");
        }
}

// The vector kernel's e4m3 decode (cuda_fp8.h's) on every code: W [32,
// 256] with scale 1 holds code 8r + i at row r, column 32i + 5; x's 8 rows
// are one-hot at those columns, so out[i, r] is exactly the value of code
// 8r + i as the host decodes it. (The NaN codes, which the quantizer never
// writes, are left out: NaN * 0 would poison their rows' other outputs.)
TEST(MatMulQGpu, Fp8VectorKernelDecodesEveryCodeAsTheHost) {
  if (!cuda_available()) GTEST_SKIP() << "no CUDA device present: GPU tests skipped";
  QuantWeight w;
  w.type = QuantType::FP8;
  w.n = 32;
  w.k = 256;
  w.quants.assign(size_t(w.n * w.k), 0);
  w.scales.resize(size_t(w.n * w.k / kQuantBlock) * 2);
  for (size_t i = 0; i < w.scales.size() / 2; ++i) reinterpret_cast<uint16_t*>(w.scales.data())[i] = float_to_half(1.f);
  std::vector<float> x(size_t(8 * w.k), 0.f);
  for (int64_t i = 0; i < 8; ++i) {
    x[size_t(i * w.k + 32 * i + 5)] = 1.f;
    for (int64_t r = 0; r < w.n; ++r)
      if (((8 * r + i) & 0x7F) != 0x7F) w.quants[size_t(r * w.k + 32 * i + 5)] = uint8_t(8 * r + i);
  }
  Graph g;
  ValueId xi = g.input("x", {8, w.k}, DType::F32);
  ValueId q = g.param("w.quants", w.quants_shape(), DType::I32), s = g.param("w.scales", w.scales_shape(), DType::F16);
  g.output("out", g.matmul_q(xi, q, s, w.type));
  CompileOptions o;
  o.device = Device::Cuda;
  const cuda::MatMulQPathCounts before = cuda::matmul_q_path_counts();
  auto gpu = compile(g, o);
  EXPECT_EQ(cuda::matmul_q_path_counts().gemv - before.gemv, 1);
  gpu->set_param("w.quants", HostTensor{DType::I32, w.quants_shape(), w.quants});
  gpu->set_param("w.scales", HostTensor{DType::F16, w.scales_shape(), w.scales});
  const std::vector<float> got = gpu->run({{"x", HostTensor::from_f32({8, w.k}, x, DType::F32)}}).at("out").to_f32();
  for (int64_t i = 0; i < 8; ++i)
    for (int64_t r = 0; r < w.n; ++r) {
      const uint8_t code = uint8_t(8 * r + i);
      const float want = (code & 0x7F) == 0x7F ? 0.f : e4m3_to_float(code);
      EXPECT_EQ(got[size_t(i * w.n + r)], want) << int(code);
    }
}

std::vector<int32_t> tiny_prompt(const LlamaGenerator& g) {
  std::ifstream in(std::string(RLX_SOURCE_DIR) + "/tests/data/tiny_llama_reference.json");
  EXPECT_TRUE(in);
  return g.tokenizer().encode(nlohmann::json::parse(in).at("prompt").get<std::string>());
}

// Quantized at load on both backends: in f32 the GPU's greedy tokens are the
// CPU's; in f16 each chosen token's CPU logit is near the CPU's best.
TEST(MatMulQGpu, TinyLlamaQuantizedAtLoadAgreesWithTheCpu) {
  if (!cuda_available()) GTEST_SKIP() << "no CUDA device present: GPU tests skipped";
  for (QuantType t : {QuantType::Q8_0, QuantType::Q4_0, QuantType::FP8})
    for (DType dt : {DType::F32, DType::F16}) {
      GeneratorOptions go, co;
      go.device = Device::Cuda;
      go.dtype = dt;
      go.quantize = co.quantize = t;
      co.threads = 1;
      const cuda::MatMulQPathCounts before = cuda::matmul_q_path_counts();
      LlamaGenerator gpu(kTiny, go), cpu(kTiny, co);
      std::vector<int32_t> ids = tiny_prompt(cpu);
      const int n = 24;
      gpu.reserve(int64_t(ids.size()) + n);
      cpu.reserve(int64_t(ids.size()) + n);
      double worst = 0;
      for (int i = 0; i < n; ++i) {
        const std::vector<float> ref = cpu.next_logits(ids);
        const int32_t tok = gpu.next_token(ids);
        double top = -INFINITY, scale = 0;
        for (float v : ref) {
          top = std::max(top, double(v));
          scale = std::max(scale, std::abs(double(v)));
        }
        const double gap = (top - ref[size_t(tok)]) / scale;
        worst = std::max(worst, gap);
        if (dt == DType::F32) EXPECT_EQ(tok, int32_t(std::max_element(ref.begin(), ref.end()) - ref.begin())) << i;
        else EXPECT_LE(gap, 3e-2) << i;
        ids.push_back(tok);
      }
      const cuda::MatMulQPathCounts after = cuda::matmul_q_path_counts();
      // Prefill (a 16- or 32-row bucket) dequantized; the decode graphs took the vector kernel.
      EXPECT_GT(after.dequantize, before.dequantize);
      EXPECT_GT(after.gemv, before.gemv);
      // Stored formats stay and the file mixes them within Q/K/V and gate/up: nothing merges.
      EXPECT_EQ(gpu.state_fed_executable().report().thunk_histogram.at("matmul_q"), 2 * 7 + 1);
      std::printf("%s %s: worst gap of the GPU's token below the CPU's best logit %.3g\n",
                  std::string(quant_type_name(t)).c_str(), std::string(dtype_name(dt)).c_str(), worst);
    }
}

// One decode step's quantized products at odd sizes (norm+QKV, output +
// residual, norm+gate/up with SwiGLU, down + residual, norm+head); the
// FFN is 7200 wide, so the down product stages 31.6 KB of x, near the
// 32 KB (7264 columns) a chain takes.
struct QuantDecodeStep {
  static constexpr int64_t kHidden = 288, kQkv = 352, kFfn = 7200, kHead = 77;
  std::map<std::string, QuantWeight> w;
  Graph g;
  QuantDecodeStep(QuantType t, DType dt, uint64_t seed) {
    const ValueId x = g.input("x", {1, kHidden}, dt);
    auto proj = [&](ValueId in, const std::string& name, int64_t n, int64_t k) {
      w.emplace(name, test::random_quant_weight(t, n, k, seed += 7));
      const QuantWeight& q = w.at(name);
      return g.matmul_q(in, g.param(name + ".quants", q.quants_shape(), DType::I32),
                        g.param(name + ".scales", q.scales_shape(), DType::F16), t);
    };
    auto norm = [&](ValueId in, const std::string& name) { return g.rms_norm(in, g.param(name, {kHidden}, dt), 1e-5f); };
    const ValueId qkv = proj(norm(x, "attn_norm"), "w_qkv", kQkv, kHidden);
    const ValueId h1 = g.add(x, proj(qkv, "w_o", kHidden, kQkv));
    const ValueId n2 = norm(h1, "ffn_norm");
    const ValueId gu = g.swiglu(proj(n2, "w_gate", kFfn, kHidden), proj(n2, "w_up", kFfn, kHidden));
    const ValueId h2 = g.add(h1, proj(gu, "w_down", kHidden, kFfn));
    g.output("logits", proj(norm(h2, "out_norm"), "w_head", kHead, kHidden));
    g.output("h", h2);
  }
  void fill(Executable& e) const {
    for (const auto& [name, q] : w) {
      e.set_param(name + ".quants", HostTensor{DType::I32, q.quants_shape(), q.quants});
      e.set_param(name + ".scales", HostTensor{DType::F16, q.scales_shape(), q.scales});
    }
    for (const char* n : {"attn_norm", "ffn_norm", "out_norm"}) {
      const auto v = test::random_floats(size_t(kHidden), std::hash<std::string>{}(n), 0.8f, 1.2f);
      e.set_param_f32(n, v.data(), v.size());
    }
  }
};

std::string schedule_labels(const Executable& exe) {
  std::string s;
  for (const auto& t : exe.schedule().thunks) s += "\n  " + t.label + " (" + thunk_name(t.kind()) + ")";
  return s;
}

void poison_outputs(Executable& exe) {
  for (const Binding& b : exe.schedule().output_bindings) {
    auto nan = test::nan_bytes(size_t(numel(b.shape)), b.dtype);
    exe.backend().write_binding(b, nan.data());
  }
}

TEST(MatMulQGpu, QuantizedChainOnOddShapesEqualsProductsOneByOne) {
  if (!cuda_available()) GTEST_SKIP() << "no CUDA device present: GPU tests skipped";
  for (QuantType t : {QuantType::Q8_0, QuantType::Q4_0, QuantType::FP8})
    for (DType dt : {DType::F16, DType::BF16}) {
      const std::string what = std::string(quant_type_name(t)) + " " + std::string(dtype_name(dt));
      const QuantDecodeStep step(t, dt, 4100);
      CompileOptions o;
      o.device = Device::Cuda;
      o.mode = ExecMode::Graph;
      const int64_t before = cuda::matvec_chain_launches();  // enqueued when the forward is recorded
      setenv("RLX_MATVEC_CHAIN", "1", 1);
      auto chained = compile(step.g, o);
      setenv("RLX_MATVEC_CHAIN", "0", 1);
      auto apart = compile(step.g, o);
      unsetenv("RLX_MATVEC_CHAIN");
      auto cpu = compile(step.g, CompileOptions{});
      for (Executable* e : {chained.get(), apart.get(), cpu.get()}) step.fill(*e);
      const auto& ce = dynamic_cast<cuda::CudaExecutable&>(chained->backend());
      // QKV, output, gate, up | SwiGLU | down, head.
      EXPECT_EQ(ce.matvec_chains(), 2) << what << schedule_labels(*chained);
      EXPECT_EQ(ce.chained_products(), 6) << what;
      std::printf("%s: %d products in %d chains\n", what.c_str(), ce.chained_products(), ce.matvec_chains());
      for (uint64_t i = 0; i < 3; ++i) {
        const std::vector<float> x =
            test::quantize(test::random_floats(size_t(QuantDecodeStep::kHidden), 4200 + i), dt);
        const std::map<std::string, HostTensor> in{{"x", HostTensor::from_f32({1, QuantDecodeStep::kHidden}, x, dt)}};
        poison_outputs(*chained);
        poison_outputs(*apart);
        const auto a = chained->run(in), b = apart->run(in), ref = cpu->run(in);
        for (const char* out : {"logits", "h"}) {
          EXPECT_EQ(a.at(out).bytes, b.at(out).bytes) << what << " step " << i << " " << out;
          // Relative to max |ref|: f16/bf16 intermediates round differently on each backend.
          test::expect_close(a.at(out).to_f32(), test::to_double(ref.at(out).to_f32()),
                             dt == DType::F16 ? 2e-2 : 5e-2, what + " step " + std::to_string(i) + " " + out + " vs cpu");
        }
      }
      EXPECT_GE(cuda::matvec_chain_launches() - before, 1) << what;
    }
}

}  // namespace
}  // namespace rlx
