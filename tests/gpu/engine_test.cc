// The engine on CUDA (tests/data/tiny_llama.gguf): eight sequences, greedy
// and sampled, joining a running batch at different steps and leaving at
// different lengths, each get the tokens they get alone on the same device;
// in graph mode every decode step is one launch of a graph recorded for its
// batch bucket, whatever sequences (slots, positions) fill it.
#include <gtest/gtest.h>

#include "backends/cuda/cuda_executable.h"
#include "engine/engine_impl.h"
#include "models/llama_batch_check.h"  // tests/models
#include "rlx/llm.h"

namespace rlx {
namespace {

class EngineGpu : public ::testing::TestWithParam<std::tuple<DType, ExecMode>> {};

LlmOptions gpu_options(int sequences) {
  LlmOptions o;
  o.device = Device::Cuda;
  o.dtype = std::get<0>(EngineGpu::GetParam());
  o.mode = std::get<1>(EngineGpu::GetParam());
  o.max_sequences = sequences;
  return o;
}

GenerateOptions options_for(size_t i, int n) {
  GenerateOptions o;
  o.max_tokens = n;
  o.ignore_eos = true;
  if (i % 2) {
    o.sampling.temperature = 0.9f;
    o.sampling.top_k = 20;
    o.sampling.seed = 77 + i;
  }
  return o;
}

TEST_P(EngineGpu, InterleavedSequencesEqualEachAloneOneLaunchPerStep) {
  if (!cuda_available()) GTEST_SKIP() << "no CUDA device present: GPU tests skipped";
  LLM llm(test::tiny_llama_path(), gpu_options(8)), one(test::tiny_llama_path(), gpu_options(1));
  const std::vector<int32_t> longest = llm.tokenizer().encode("Once upon a time there was a little dog who liked to "
                                                              "run in the park with the other dogs.", true, false);
  ASSERT_GE(longest.size(), 20u);
  const int lengths[] = {30, 9, 20, 14, 25, 6, 18, 11};
  const size_t prompt_len[] = {12, 3, 20, 7, 17, 5, 19, 9};
  std::vector<std::vector<int32_t>> prompts, want;
  for (size_t i = 0; i < 8; ++i) {
    prompts.emplace_back(longest.begin(), longest.begin() + std::ptrdiff_t(prompt_len[i]));
    want.push_back(one.generate(prompts[i], options_for(i, lengths[i])).ids);
  }
  std::vector<std::unique_ptr<Sequence>> seqs;
  std::vector<Generation> got(8);
  size_t submitted = 0;
  for (int step = 0; submitted < 8 || !llm.engine().idle(); ++step) {
    if (submitted < 8 && step % 2 == 0) {
      const size_t i = submitted++;
      seqs.push_back(llm.new_sequence());
      llm.engine().submit(*seqs.back(), prompts[i], options_for(i, lengths[i]), {},
                          [&, i](const Generation& g) { got[i] = g; });
    }
    llm.engine().step();
  }
  for (size_t i = 0; i < 8; ++i) EXPECT_EQ(got[i].ids, want[i]) << "sequence " << i;

  // Every decode executable ran as asked: in graph mode one launch per run, nothing per op.
  PoolRunner& r = pool_runner_of(llm.engine());
  uint64_t forwards = 0;
  for (int64_t b : {1, 2, 4, 8})
    for (bool logits : {false, true}) {
      auto& cu = dynamic_cast<cuda::CudaExecutable&>(r.decode_executable(b, logits).backend());
      EXPECT_EQ(cu.mode(), std::get<1>(GetParam()));
      forwards += cu.counters().forwards;
      if (std::get<1>(GetParam()) == ExecMode::Graph) {
        EXPECT_EQ(cu.counters().graph_launches, cu.counters().forwards) << "bucket " << b;
        EXPECT_EQ(cu.counters().perop_launches, 0u) << "bucket " << b;
      }
    }
  EXPECT_EQ(forwards, r.decode_runs());
  EXPECT_GT(r.decode_runs(), 0u);
}

INSTANTIATE_TEST_SUITE_P(Modes, EngineGpu,
                         ::testing::Combine(::testing::Values(DType::F32, DType::F16),
                                            ::testing::Values(ExecMode::PerOp, ExecMode::Graph)));

}  // namespace
}  // namespace rlx
