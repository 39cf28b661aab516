// The CUDA sample kernel against the CPU one (the host definition): the same
// token for every row over vocabulary sizes, seeds, positions, temperatures,
// top-k and top-p, in f32, f16 and bf16, outputs poisoned before each run;
// and sampled decoding on CUDA: one state-fed run per token (in graph mode
// one graph launch), the tokens equal to the host-sampled path's.
#include <gtest/gtest.h>

#include <fstream>
#include <set>
#include <nlohmann/json.hpp>

#include "backends/cuda/cuda_executable.h"
#include "models/llama_greedy_check.h"  // tests/models
#include "sample_check.h"

namespace rlx {
namespace {

TEST(SampleGpu, EqualsTheCpuKernel) {
  if (!cuda_available()) GTEST_SKIP() << "no CUDA device present: GPU tests skipped";
  struct Size {
    int64_t vocab, rows;
  };
  const Size sizes[] = {{1, 2}, {7, 33}, {513, 16}, {1000, 16}, {32003, 6}, {151936, 2}};
  uint64_t seed = 100;
  int compared = 0, mismatched = 0;
  for (DType dt : {DType::F32, DType::F16, DType::BF16})
    for (const Size& sz : sizes)
      for (float temp : {0.3f, 1.f, 2.f})
        for (int top_k : {0, 1, 5, 50})
          for (float top_p : {1.f, 0.9f, 0.5f}) {
            ++seed;
            const std::vector<float> x = test::normal_logits(size_t(sz.vocab * sz.rows), seed, 2.f, dt);
            const std::vector<int32_t> pos = test::random_ints(size_t(sz.rows), seed + 7, 0, 1 << 24);
            const SampleAttrs a{temp, top_k, top_p, seed * 104729};
            const auto cpu = test::run_sample_op(Device::Cpu, dt, x, sz.vocab, pos, a);
            const auto gpu = test::run_sample_op(Device::Cuda, dt, x, sz.vocab, pos, a);
            for (int64_t r = 0; r < sz.rows; ++r) {
              ++compared;
              if (gpu[size_t(r)] != cpu[size_t(r)] && mismatched++ < 10)
                ADD_FAILURE() << dtype_name(dt) << " vocab " << sz.vocab << " row " << r << " T " << temp
                              << " top-k " << top_k << " top-p " << top_p << ": cuda " << gpu[size_t(r)] << ", cpu "
                              << cpu[size_t(r)];
            }
          }
  EXPECT_EQ(mismatched, 0) << "of " << compared;
  std::printf("sample: %d rows compared, %d mismatched\n", compared, mismatched);
}

// Ties, NaN and infinite rows, a row wider than the block, one executable
// replayed with new positions in both modes.
TEST(SampleGpu, PlantedRowsAndReplays) {
  if (!cuda_available()) GTEST_SKIP() << "no CUDA device present: GPU tests skipped";
  const int64_t vocab = 5000, rows = 5;
  std::vector<float> x = test::normal_logits(size_t(vocab * rows), 3, 1.f, DType::F32);
  for (int64_t j = 0; j < vocab; ++j) x[size_t(j)] = float(j % 7);  // row 0: heavy ties
  for (int64_t j = 0; j < vocab; ++j) x[size_t(vocab + j)] = NAN;  // row 1: token 0
  x[size_t(2 * vocab + 4000)] = x[size_t(2 * vocab + 4100)] = INFINITY;  // row 2: token 4000
  for (int64_t j = 0; j < vocab; j += 2) x[size_t(3 * vocab + j)] = NAN;  // row 3: NaN never drawn
  for (DType dt : {DType::F32, DType::BF16})
    for (ExecMode mode : {ExecMode::PerOp, ExecMode::Graph})
      for (const SampleAttrs a : {SampleAttrs{1.f, 0, 1.f, 1}, SampleAttrs{0.5f, 3, 1.f, 2}, SampleAttrs{2.f, 100, 0.3f, 3}})
        for (int step = 0; step < 12; ++step) {
          std::vector<int32_t> pos(rows);
          for (int64_t r = 0; r < rows; ++r) pos[size_t(r)] = int32_t(step * 31 + r);
          const std::vector<float> q = test::quantize(x, dt);
          const auto gpu = test::run_sample_op(Device::Cuda, dt, q, vocab, pos, a, mode);
          EXPECT_EQ(gpu, test::run_sample_op(Device::Cpu, dt, q, vocab, pos, a)) << "step " << step;
          EXPECT_EQ(gpu[1], 0);
          EXPECT_EQ(gpu[2], 4000);
          EXPECT_EQ(gpu[3] % 2, 1);
          if (a.top_k == 3) EXPECT_EQ(gpu[0] % 7, 6) << "top-k 3 keeps the ties at the largest value";
        }
}

class DeviceSampleGpu : public ::testing::TestWithParam<std::tuple<DType, ExecMode>> {};

TEST_P(DeviceSampleGpu, TokensFromDeviceStateEqualTheHostSampledPath) {
  if (!cuda_available()) GTEST_SKIP() << "no CUDA device present: GPU tests skipped";
  auto [dt, mode] = GetParam();
  const SamplingOptions s{1.2f, 40, 0.95f, 17};
  GeneratorOptions g;
  g.device = Device::Cuda;
  g.dtype = dt;
  g.mode = mode;
  GeneratorOptions d = g;
  d.sampling = s;
  GeneratorOptions c;
  c.threads = 1;
  c.sampling = s;
  const std::string tiny = std::string(RLX_SOURCE_DIR) + "/tests/data/tiny_llama.gguf";
  LlamaGenerator host(tiny, g), dev(tiny, d), cpu(tiny, c);
  std::ifstream in(std::string(RLX_SOURCE_DIR) + "/tests/data/tiny_llama_reference.json");
  ASSERT_TRUE(in);
  const std::vector<int32_t> prompt =
      cpu.tokenizer().encode(nlohmann::json::parse(in).at("prompt").get<std::string>());
  const int n = 40;
  for (LlamaGenerator* x : {&host, &dev, &cpu}) x->reserve(int64_t(prompt.size()) + n);

  const test::GreedyPaths p = test::run_sampled_paths(host, dev, prompt, n, s);
  EXPECT_EQ(p.device, p.host) << "state-fed and host-sampled decoding on one device disagree";
  EXPECT_GT(std::set<int32_t>(p.device.begin(), p.device.end()).size(), 3u);
  if (dt == DType::F32) {
    std::vector<int32_t> ids = prompt;
    for (int i = 0; i < n; ++i) ids.push_back(cpu.next_token(ids));
    EXPECT_EQ(std::vector<int32_t>(ids.begin() + std::ptrdiff_t(prompt.size()), ids.end()), p.device)
        << "CUDA f32 and the CPU backend draw differently";
  }

  EXPECT_EQ(dev.device_steps(), uint64_t(n - 1));
  EXPECT_EQ(dev.decode_steps(), 0u);
  Executable& step = dev.state_fed_executable();
  test::expect_state_fed_decode_graph(step, "sample");
  auto& cu = dynamic_cast<cuda::CudaExecutable&>(step.backend());
  EXPECT_EQ(cu.mode(), mode);
  EXPECT_EQ(cu.counters().forwards, uint64_t(n - 1));
  EXPECT_EQ(cu.counters().graph_launches, mode == ExecMode::Graph ? uint64_t(n - 1) : 0u);
  if (mode == ExecMode::Graph) EXPECT_EQ(cu.counters().perop_launches, 0u);
}

INSTANTIATE_TEST_SUITE_P(Modes, DeviceSampleGpu,
                         ::testing::Combine(::testing::Values(DType::F32, DType::F16, DType::BF16),
                                            ::testing::Values(ExecMode::PerOp, ExecMode::Graph)));

}  // namespace
}  // namespace rlx
