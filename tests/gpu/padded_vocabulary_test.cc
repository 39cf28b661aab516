// A padded vocabulary on the CUDA backend: a GGUF whose LM head has 301 rows
// for a tokenizer of 280 tokens, with padding row 300 ten times the best
// token's row. The logits are the tokenizer's 280 (the narrowed head), equal
// to the CPU's, and neither the generator's device argmax nor the engine
// ever picks a padding row.
#include <gtest/gtest.h>

#include <algorithm>

#include "backends/cuda/cuda_executable.h"
#include "models/byte_level_vocab.h"       // tests/models
#include "models/decoder_family_files.h"  // tests/models
#include "models/gguf_writer.h"
#include "models/llama_generator.h"
#include "rlx/llm.h"
#include "test_util.h"

namespace rlx {
namespace {

void write_llama(const std::filesystem::path& p, const LlamaConfig& c, const test::Weights& w, int tokens) {
  test::GgufWriter gw;
  gw.str("general.architecture", "llama")
      .u32("llama.context_length", 64)
      .u32("llama.embedding_length", uint32_t(c.hidden_size))
      .u32("llama.feed_forward_length", uint32_t(c.intermediate_size))
      .u32("llama.block_count", uint32_t(c.num_layers))
      .u32("llama.attention.head_count", uint32_t(c.num_heads))
      .u32("llama.attention.head_count_kv", uint32_t(c.num_kv_heads))
      .u32("llama.attention.key_length", uint32_t(c.head_dim))
      .f32("llama.attention.layer_norm_rms_epsilon", 1e-5f)
      .f32("llama.rope.freq_base", 10000.f);
  if (tokens > 0) {
    gw.str("tokenizer.ggml.model", "gpt2").strs("tokenizer.ggml.tokens", test::byte_level_tokens(tokens));
    gw.strs("tokenizer.ggml.merges", {});
  }
  Graph g = build_llama_graph(c, 1, 1, DType::F32);
  for (const auto& [n, v] : w) gw.tensor(n, test::param_shape(g, n), v);
  gw.write(p);
}

TEST(PaddedVocabularyCuda, LogitsAndTokensStayInsideTheTokenizer) {
  if (!cuda_available()) GTEST_SKIP() << "no CUDA device present: GPU tests skipped";
  LlamaConfig c = test::odd_config();
  c.tie_embeddings = false;
  test::Weights w = test::weights_of(c);
  test::TempDir d;
  const int tokens = 280;
  const std::vector<int32_t> prompt = {5, 17, 42};
  GeneratorOptions cpu;
  cpu.device = Device::Cpu;
  write_llama(d.path() / "plain.gguf", c, w, 0);
  const std::vector<float> full = LlamaGenerator((d.path() / "plain.gguf").string(), cpu).next_logits(prompt);
  const int32_t best = int32_t(std::max_element(full.begin(), full.begin() + tokens) - full.begin());
  ASSERT_GT(full[size_t(best)], 0.f);
  std::vector<float>& head = w["output.weight"];
  const size_t H = size_t(c.hidden_size);
  for (size_t i = 0; i < H; ++i) head[300 * H + i] = 10.f * head[size_t(best) * H + i];
  const std::string path = (d.path() / "padded.gguf").string();
  write_llama(path, c, w, tokens);

  const std::vector<float> on_cpu = LlamaGenerator(path, cpu).next_logits(prompt);
  ASSERT_EQ(on_cpu.size(), size_t(tokens));
  for (ExecMode mode : {ExecMode::PerOp, ExecMode::Graph}) {
    GeneratorOptions o;
    o.device = Device::Cuda;
    o.mode = mode;
    LlamaGenerator gen(path, o);
    const std::vector<float> l = gen.next_logits(prompt);
    ASSERT_EQ(l.size(), size_t(tokens));
    test::expect_close(l, std::vector<double>(on_cpu.begin(), on_cpu.end()), 1e-4, "padded logits on CUDA");
    EXPECT_EQ(gen.next_token(prompt), best);
    // Cached decode steps from the device state: none picks a padding row.
    std::vector<int32_t> ids = prompt;
    for (int i = 0; i < 8; ++i) {
      const int32_t next = gen.next_token(ids);
      EXPECT_LT(next, tokens);
      ids.push_back(next);
    }
  }
  LlmOptions lo;
  lo.device = Device::Cuda;
  LLM llm(path, lo);
  GenerateOptions go;
  go.max_tokens = 8;
  go.ignore_eos = true;
  const Generation g = llm.generate(prompt, go);
  ASSERT_EQ(g.ids.size(), 8u);
  EXPECT_EQ(g.ids[0], best);
  for (int32_t id : g.ids) EXPECT_LT(id, tokens);
}

}  // namespace
}  // namespace rlx
