// Greedy decoding advanced on the device, on CUDA (tests/data/tiny_llama.gguf):
// after the prefill each token is one run of the state-fed decode graph, in
// graph mode one graph launch with no input copied in and 4 bytes read back.
// The tokens equal the host-driven path's on the same device and dtype; in
// f32 they equal the CPU's, in f16/bf16 each chosen token's CPU logit is
// within a tolerance of the CPU's largest (logit-level agreement).
#include <gtest/gtest.h>

#include <stdlib.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <nlohmann/json.hpp>

#include "backends/cuda/cuda_executable.h"
#include "models/llama_greedy_check.h"  // tests/models

namespace rlx {
namespace {

const std::string kTiny = std::string(RLX_SOURCE_DIR) + "/tests/data/tiny_llama.gguf";

class DeviceGreedyGpu : public ::testing::TestWithParam<std::tuple<DType, ExecMode>> {};

TEST_P(DeviceGreedyGpu, TokensFromDeviceStateEqualTheHostDrivenPath) {
  if (!cuda_available()) GTEST_SKIP() << "no CUDA device present: GPU tests skipped";
  auto [dt, mode] = GetParam();
  GeneratorOptions g;
  g.device = Device::Cuda;
  g.dtype = dt;
  g.mode = mode;
  GeneratorOptions c;
  c.threads = 1;
  LlamaGenerator host(kTiny, g), dev(kTiny, g), cpu(kTiny, c);
  std::ifstream in(std::string(RLX_SOURCE_DIR) + "/tests/data/tiny_llama_reference.json");
  ASSERT_TRUE(in);
  const std::vector<int32_t> prompt =
      cpu.tokenizer().encode(nlohmann::json::parse(in).at("prompt").get<std::string>());
  const int n = 40;
  for (LlamaGenerator* x : {&host, &dev, &cpu}) x->reserve(int64_t(prompt.size()) + n);

  const test::GreedyPaths p = test::run_greedy_paths(host, dev, prompt, n);
  EXPECT_EQ(p.device, p.host) << "state-fed and host-fed decoding on one device disagree";

  // Against the CPU in f32, along the GPU's own continuation.
  std::vector<int32_t> ids = prompt;
  double worst_gap = 0;
  for (int i = 0; i < n; ++i) {
    const std::vector<float> ref = cpu.next_logits(ids);
    const float top = *std::max_element(ref.begin(), ref.end());
    double scale = 0;
    for (float v : ref) scale = std::max(scale, std::abs(double(v)));
    const double gap = (double(top) - double(ref[size_t(p.device[size_t(i)])])) / scale;
    worst_gap = std::max(worst_gap, gap);
    if (dt == DType::F32) EXPECT_EQ(p.device[size_t(i)], argmax(ref)) << "step " << i;
    else EXPECT_LE(gap, dt == DType::F16 ? 3e-2 : 6e-2) << "step " << i;
    ids.push_back(p.device[size_t(i)]);
  }
  std::printf("%s %s: worst gap of the chosen token's CPU logit below the CPU's best %.3g\n",
              std::string(dtype_name(dt)).c_str(), mode == ExecMode::Graph ? "graph" : "perop", worst_gap);

  // One run per token after the prefill, nothing copied in; in graph mode
  // one graph launch per token, recorded once.
  EXPECT_EQ(dev.device_steps(), uint64_t(n - 1));
  EXPECT_EQ(dev.decode_steps(), 0u);
  Executable& greedy = dev.state_fed_executable();
  test::expect_state_fed_decode_graph(greedy);
  auto& cu = dynamic_cast<cuda::CudaExecutable&>(greedy.backend());
  EXPECT_EQ(cu.mode(), mode);
  EXPECT_EQ(cu.counters().forwards, uint64_t(n - 1));
  EXPECT_EQ(cu.counters().graph_launches, mode == ExecMode::Graph ? uint64_t(n - 1) : 0u);
  if (mode == ExecMode::Graph) EXPECT_EQ(cu.counters().perop_launches, 0u);
}

INSTANTIATE_TEST_SUITE_P(Modes, DeviceGreedyGpu,
                         ::testing::Combine(::testing::Values(DType::F32, DType::F16, DType::BF16),
                                            ::testing::Values(ExecMode::PerOp, ExecMode::Graph)));

// RLX_TRACE=decode: each run's device time from CUDA events, positive and
// no more than the run's wall time; without it none is measured.
TEST(DeviceGreedyGpuTrace, DeviceTimeOfEachStep) {
  if (!cuda_available()) GTEST_SKIP() << "no CUDA device present: GPU tests skipped";
  GeneratorOptions g;
  g.device = Device::Cuda;
  {
    LlamaGenerator plain(kTiny, g);
    std::vector<int32_t> ids{1, 2, 3};
    ids.push_back(plain.next_greedy(ids));
    plain.next_greedy(ids);
    EXPECT_LT(plain.last_device_us(), 0.0);
  }
  ASSERT_EQ(setenv("RLX_TRACE", "decode", 1), 0);
  LlamaGenerator traced(kTiny, g);
  std::vector<int32_t> ids{1, 2, 3};
  for (int i = 0; i < 4; ++i) {
    const auto t0 = std::chrono::steady_clock::now();
    ids.push_back(traced.next_greedy(ids));
    const double wall_us = std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0).count();
    EXPECT_GT(traced.last_device_us(), 0.0) << "step " << i;
    EXPECT_LE(traced.last_device_us(), wall_us) << "step " << i;
  }
  EXPECT_EQ(traced.device_steps(), 3u);
  unsetenv("RLX_TRACE");
}

// The argmax kernel on a row the width of a vocabulary, ties across warps
// and blocks' strides: the lowest index wins, as on the CPU.
TEST(ArgmaxGpu, WideRowsTiesAcrossWarps) {
  if (!cuda_available()) GTEST_SKIP() << "no CUDA device present: GPU tests skipped";
  for (DType dt : {DType::F32, DType::F16, DType::BF16}) {
    Graph g;
    const int64_t rows = 3, cols = 49152;
    ValueId x = g.input("x", {rows, cols}, dt);
    g.output("i", g.argmax(x));
    std::vector<float> v(size_t(rows * cols));
    for (size_t i = 0; i < v.size(); ++i) v[i] = float(int(i * 2654435761u % 1000)) / 1000.f;
    const int64_t want[3] = {31000, 257, 49151};
    v[size_t(0 * cols + 31000)] = v[size_t(0 * cols + 40001)] = v[size_t(0 * cols + 31256)] = 4.f;  // ties
    v[size_t(1 * cols + 257)] = v[size_t(1 * cols + 513)] = 4.f;  // same thread's slice, two strides apart
    v[size_t(2 * cols + 49151)] = 4.f;
    CompileOptions o;
    o.device = Device::Cuda;
    auto exe = compile(g, o);
    const std::vector<int32_t> got = exe->run({{"x", HostTensor::from_f32({rows, cols}, v, dt)}}).at("i").to_i32();
    for (int r = 0; r < 3; ++r) EXPECT_EQ(got[size_t(r)], want[r]) << dtype_name(dt) << " row " << r;
  }
}

}  // namespace
}  // namespace rlx
