// Batched greedy decoding on the CPU backend (tests/data/tiny_llama.gguf):
// prompts of different lengths prefilled by one padded batch run, then one
// state-fed decode run per token for the whole batch, give each sequence the
// tokens that decoding it alone gives.
#include <gtest/gtest.h>

#include <algorithm>

#include "models/llama_batch_check.h"  // tests/models
#include "rlx/error.h"

namespace rlx {
namespace {

GeneratorOptions cpu_options() {
  GeneratorOptions o;
  o.threads = 1;
  return o;
}

TEST(LlamaBatch, GreedyEqualsSingleSequenceRuns) {
  LlamaGenerator single(test::tiny_llama_path(), cpu_options()), model(test::tiny_llama_path(), cpu_options());
  const std::vector<std::vector<int32_t>> prompts = test::tiny_batch_prompts(single, 3);
  const int n = 24;
  const int64_t max_tokens = 22 + n;
  single.reserve(max_tokens);
  std::vector<std::vector<int32_t>> want;
  for (const auto& p : prompts) want.push_back(test::single_greedy(single, p, n));

  LlamaBatchGenerator batch(model, 3, max_tokens);
  EXPECT_EQ(batch.cache_len(), 64);
  const auto got = batch.generate(prompts, n);
  test::expect_batch_equals_singles(got, want);
  // One prefill run (the 22-token prompt's bucket), then one run of the
  // batch decode step per token for all three.
  EXPECT_EQ(batch.buckets(), std::vector<int64_t>{32});
  EXPECT_EQ(batch.prefill_runs(), 1u);
  EXPECT_EQ(batch.decode_steps(), uint64_t(n - 1));
  EXPECT_EQ(batch.decode_executable().run_count(), uint64_t(n - 1));
  test::expect_batch_decode_graph(batch.decode_executable(), 3);

  // Again, in another order: the prefill starts every sequence over.
  const std::vector<std::vector<int32_t>> reversed(prompts.rbegin(), prompts.rend());
  const auto again = batch.generate(reversed, n);
  test::expect_batch_equals_singles(again, std::vector<std::vector<int32_t>>(want.rbegin(), want.rend()));
  EXPECT_EQ(batch.prefill_runs(), 2u);
  EXPECT_EQ(batch.decode_steps(), uint64_t(2 * (n - 1)));
}

// A stop token ends each sequence before it (not included), and the steps
// end when the last sequence has ended.
TEST(LlamaBatch, StopTokenEndsEachSequence) {
  LlamaGenerator single(test::tiny_llama_path(), cpu_options()), model(test::tiny_llama_path(), cpu_options());
  const std::vector<std::vector<int32_t>> prompts = test::tiny_batch_prompts(single, 3);
  const int n = 20;
  single.reserve(22 + n);
  std::vector<std::vector<int32_t>> full;
  for (const auto& p : prompts) full.push_back(test::single_greedy(single, p, n));
  const int32_t stop = full[1][5];
  std::vector<std::vector<int32_t>> want;
  size_t last_step = 0;  // the step that chose the last token any sequence needed
  for (const auto& f : full) {
    const size_t at = size_t(std::find(f.begin(), f.end(), stop) - f.begin());
    want.emplace_back(f.begin(), f.begin() + std::ptrdiff_t(std::min(at, f.size())));
    last_step = std::max(last_step, std::min(at, f.size() - 1));
  }
  ASSERT_LE(want[1].size(), 5u);

  LlamaBatchGenerator batch(model, 3, 22 + n);
  EXPECT_EQ(batch.generate(prompts, n, stop), want);
  EXPECT_EQ(batch.decode_steps(), uint64_t(last_step));
}

TEST(LlamaBatch, RefusesWhatItCannotRun) {
  LlamaGenerator model(test::tiny_llama_path(), cpu_options());
  const std::vector<std::vector<int32_t>> prompts = test::tiny_batch_prompts(model, 2);  // 12 and 3 tokens
  LlamaBatchGenerator batch(model, 2, 20);  // a cache of 32 rows
  EXPECT_THROW(batch.step(), Error);  // nothing started
  EXPECT_THROW(batch.start({prompts[0]}), Error);  // one prompt for a batch of two
  EXPECT_THROW(batch.start({prompts[0], {}}), Error);  // an empty prompt
  EXPECT_THROW(batch.start({prompts[0], {1, model.config().vocab_size}}), Error);  // an id out of range
  EXPECT_THROW(batch.generate(prompts, 9), Error);  // 12 + 9 tokens > 20
  EXPECT_THROW(LlamaBatchGenerator(model, 0, 20), Error);
  EXPECT_THROW(LlamaBatchGenerator(model, 2, model.config().max_positions + 1), Error);
  // Steps stop at the cache's end: the 12-token sequence writes rows 12..31.
  batch.start(prompts);
  for (int i = 0; i < 20; ++i) batch.step();
  EXPECT_THROW(batch.step(), Error);
  EXPECT_EQ(batch.decode_steps(), 20u);

  GeneratorOptions sampled = cpu_options();
  sampled.sampling.temperature = 0.8f;
  LlamaGenerator sampler(test::tiny_llama_path(), sampled);
  EXPECT_THROW(LlamaBatchGenerator(sampler, 2, 20), Error);
}

}  // namespace
}  // namespace rlx
