// Batched greedy decoding on CUDA (tests/data/tiny_llama.gguf, f32): prompts
// of different lengths prefilled by one padded batch run, then each token of
// all sequences is one launch of the recorded batch decode graph; every
// sequence gets the tokens that decoding it alone on the GPU gives. Batch 8
// is the most rows the matrix-vector kernels take.
#include <gtest/gtest.h>

#include "backends/cuda/cuda_executable.h"
#include "models/llama_batch_check.h"  // tests/models

namespace rlx {
namespace {

class LlamaBatchGpu : public ::testing::TestWithParam<int> {};

TEST_P(LlamaBatchGpu, GreedyEqualsSingleSequenceRunsOneGraphLaunchPerStep) {
  if (!cuda_available()) GTEST_SKIP() << "no CUDA device present: GPU tests skipped";
  const int B = GetParam();
  GeneratorOptions o;
  o.device = Device::Cuda;
  o.dtype = DType::F32;
  o.mode = ExecMode::Graph;
  LlamaGenerator single(test::tiny_llama_path(), o), model(test::tiny_llama_path(), o);
  const std::vector<std::vector<int32_t>> prompts = test::tiny_batch_prompts(single, B);
  const int n = 30;
  const int64_t max_tokens = 22 + n;
  single.reserve(max_tokens);
  std::vector<std::vector<int32_t>> want;
  for (const auto& p : prompts) want.push_back(test::single_greedy(single, p, n));

  LlamaBatchGenerator batch(model, B, max_tokens);
  test::expect_batch_equals_singles(batch.generate(prompts, n), want);
  EXPECT_EQ(batch.prefill_runs(), 1u);
  EXPECT_EQ(batch.decode_steps(), uint64_t(n - 1));

  // One executable for every step: recorded once, one graph launch per step
  // for the whole batch, nothing launched per op.
  Executable& step = batch.decode_executable();
  test::expect_batch_decode_graph(step, B);
  auto& cu = dynamic_cast<cuda::CudaExecutable&>(step.backend());
  EXPECT_EQ(cu.mode(), ExecMode::Graph);
  EXPECT_EQ(cu.counters().forwards, uint64_t(n - 1));
  EXPECT_EQ(cu.counters().graph_launches, uint64_t(n - 1));
  EXPECT_EQ(cu.counters().perop_launches, 0u);
}

INSTANTIATE_TEST_SUITE_P(Batches, LlamaBatchGpu, ::testing::Values(3, 8));

}  // namespace
}  // namespace rlx
