// The mixture-of-experts families (Qwen3-MoE, Mixtral) on the CUDA backend
// from real files (tests/models/moe_family_files.h): prefill and cached
// decode steps against the double-precision reference in f32/f16/bf16,
// per-op and graph; the router and the experts' products run as moe_route
// and moe_matmul thunks (ids read on the device), and in graph mode the
// state-fed decode step is one graph launch per token with the same tokens
// as the CPU backend.
#include <gtest/gtest.h>

#include <cmath>

#include "backends/cuda/cuda_executable.h"
#include "models/llama_generator.h"
#include "models/llama_reference.h"   // tests/models
#include "models/moe_family_files.h"  // tests/models
#include "test_util.h"

namespace rlx {
namespace {

using Case = std::tuple<test::Family (*)(), bool /*gguf*/, DType, ExecMode>;
class MoeFamilyCuda : public ::testing::TestWithParam<Case> {};

std::string write_model(const test::TempDir& d, const test::Family& f, const test::Weights& w, bool gguf) {
  if (!gguf) {
    test::write_moe_hf_dir(d.path(), f, w);
    return d.path().string();
  }
  test::write_moe_gguf(d.path() / "m.gguf", f, w);
  return (d.path() / "m.gguf").string();
}

TEST_P(MoeFamilyCuda, MatchesDoubleReference) {
  if (!cuda_available()) GTEST_SKIP() << "no CUDA device present: GPU tests skipped";
  auto [family, gguf, dt, mode] = GetParam();
  const test::Family f = family();
  test::TempDir d;
  const test::Weights w = test::weights_of(f.cfg);
  const std::string path = write_model(d, f, w, gguf);
  GeneratorOptions o;
  o.device = Device::Cuda;
  o.dtype = dt;
  o.mode = mode;
  LlamaGenerator gen(path, o);
  // f32: 1e-4 of max |logit|; f16/bf16 weights and activations: 3e-2 / 6e-2.
  const double tol = dt == DType::F32 ? 1e-4 : dt == DType::F16 ? 3e-2 : 6e-2;
  std::vector<int32_t> ids = test::random_ids(20, f.cfg.vocab_size, 11);
  if (dt != DType::F32) {
    // A router gap within the dtype's rounding (four units in the last place
    // of its logits) can pick other experts in f16/bf16, which no logit bound
    // covers: the prompt is the first of 64 whose every routing decision in
    // the reference is clear of that.
    const double tie = dt == DType::BF16 ? 4.0 / 256 : 4.0 / 2048;
    bool clear = false;
    for (uint64_t seed = 11; seed < 11 + 64 && !clear; ++seed) {
      ids = test::random_ids(20, f.cfg.vocab_size, seed);
      test::smallest_router_gap() = INFINITY;
      test::reference(f.cfg, w, ids, int(ids.size()) - 1);
      clear = test::smallest_router_gap() >= tie;
    }
    ASSERT_TRUE(clear) << f.name << ": no prompt of 64 routes clear of a near-tie in " << dtype_name(dt);
  }
  for (size_t n = 13; n <= ids.size(); ++n) {
    std::vector<int32_t> prefix(ids.begin(), ids.begin() + long(n));
    test::expect_close(gen.next_logits(prefix), test::reference(f.cfg, w, prefix, int(n) - 1), tol,
                       f.name + (gguf ? " gguf" : " hf") + " logits after " + std::to_string(n) + " tokens");
  }
  EXPECT_EQ(gen.decode_steps(), 7u);
  // Recomputing the prefix: the prefill shapes of the expert products.
  o.kv_cache = false;
  LlamaGenerator recompute(path, o);
  test::expect_close(recompute.next_logits(ids), test::reference(f.cfg, w, ids, int(ids.size()) - 1), tol,
                     f.name + " recomputed logits");
}

INSTANTIATE_TEST_SUITE_P(
    Families, MoeFamilyCuda,
    ::testing::Combine(::testing::Values(&test::qwen3_moe, &test::mixtral), ::testing::Bool(),
                       ::testing::Values(DType::F32, DType::F16, DType::BF16),
                       ::testing::Values(ExecMode::PerOp, ExecMode::Graph)),
    [](const auto& info) {
      const test::Family f = std::get<0>(info.param)();
      return f.name + (std::get<1>(info.param) ? "_gguf_" : "_hf_") + std::string(dtype_name(std::get<2>(info.param))) +
             (std::get<3>(info.param) == ExecMode::Graph ? "_graph" : "_perop");
    });

// Greedy decoding through the state-fed step: one graph launch per token,
// the sparse thunks recorded in it, and the CPU backend's tokens (f32).
TEST(MoeFamilyCuda, StateFedDecodeIsOneGraphLaunchAndMatchesTheCpu) {
  if (!cuda_available()) GTEST_SKIP() << "no CUDA device present: GPU tests skipped";
  for (auto family : {&test::qwen3_moe, &test::mixtral}) {
    const test::Family f = family();
    test::TempDir d;
    const std::string path = write_model(d, f, test::weights_of(f.cfg), false);
    std::vector<int32_t> prompt = test::random_ids(9, f.cfg.vocab_size, 5);
    auto greedy = [&](Device device) {
      GeneratorOptions o;
      o.device = device;
      if (device == Device::Cuda) o.mode = ExecMode::Graph;
      LlamaGenerator gen(path, o);
      std::vector<int32_t> ids = prompt;
      for (int i = 0; i < 12; ++i) ids.push_back(gen.next_token(ids));
      if (device == Device::Cuda) {
        EXPECT_GE(gen.device_steps(), 10u) << f.name;
        auto& cu = dynamic_cast<cuda::CudaExecutable&>(gen.state_fed_executable().backend());
        EXPECT_EQ(cu.counters().graph_launches, gen.device_steps()) << f.name;
        EXPECT_EQ(cu.counters().perop_launches, 0u) << f.name;
        const auto& h = gen.state_fed_executable().report().thunk_histogram;
        EXPECT_GT(h.count("moe_route") ? h.at("moe_route") : 0, 0) << f.name;
        EXPECT_GT(h.count("moe_matmul") ? h.at("moe_matmul") : 0, 0) << f.name;
      }
      return std::vector<int32_t>(ids.begin() + long(prompt.size()), ids.end());
    };
    EXPECT_EQ(greedy(Device::Cuda), greedy(Device::Cpu)) << f.name;
  }
}

}  // namespace
}  // namespace rlx
