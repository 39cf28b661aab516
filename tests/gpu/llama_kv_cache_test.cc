// Decoding through the KV cache on the CUDA backend in both execution modes:
// each step's logits equal the full-prefix forward's on the same device
// (the check of tests/models/llama_decode_check.h, as the CPU suite runs it).
// In graph mode the decode step is recorded once and replayed with a new
// position read from device memory.
#include <gtest/gtest.h>

#include "backends/cuda/cuda_executable.h"
#include "models/llama_decode_check.h"  // tests/models

namespace rlx {
namespace {

class LlamaKvCacheGpu : public ::testing::TestWithParam<std::tuple<DType, ExecMode>> {};

TEST_P(LlamaKvCacheGpu, DecodeEqualsFullPrefixForwardAtEveryStep) {
  if (!cuda_available()) GTEST_SKIP() << "no CUDA device present: GPU tests skipped";
  auto [dt, mode] = GetParam();
  CompileOptions o;
  o.device = Device::Cuda;
  o.mode = mode;
  // f32: the two paths sum in different orders; f16/bf16 round activations.
  const double tol = dt == DType::F32 ? 1e-4 : dt == DType::F16 ? 3e-2 : 6e-2;
  setenv("RLX_MATVEC_CHAIN", "1", 1);  // whatever the default, the chained decode step is checked here
  const double worst = test::check_decode_against_full(
      test::small_odd_config(), o, dt, 5, 12, tol, [mode = mode, dt = dt](Executable& decode) {
        // Graph mode: the decode step was recorded and replayed once per token.
        auto& cu = dynamic_cast<cuda::CudaExecutable&>(decode.backend());
        EXPECT_EQ(cu.mode(), mode);
        EXPECT_EQ(cu.counters().forwards, 12u);
        EXPECT_EQ(cu.counters().graph_launches, mode == ExecMode::Graph ? 12u : 0u);
        // Each layer's output and gate/up products (16-byte rows) run as one chain.
        if (dt != DType::F32) EXPECT_GE(cu.matvec_chains(), 2);
      });
  unsetenv("RLX_MATVEC_CHAIN");
  std::printf("%s %s: decode vs full prefix max relative error %.3g\n", std::string(dtype_name(dt)).c_str(),
              mode == ExecMode::Graph ? "graph" : "perop", worst);
}

INSTANTIATE_TEST_SUITE_P(Modes, LlamaKvCacheGpu,
                         ::testing::Combine(::testing::Values(DType::F32, DType::F16, DType::BF16),
                                            ::testing::Values(ExecMode::PerOp, ExecMode::Graph)));

}  // namespace
}  // namespace rlx
