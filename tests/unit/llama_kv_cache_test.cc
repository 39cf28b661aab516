// Decoding through the KV cache on the CPU: each step's logits equal a
// full-prefix forward's (a tiny random LLaMA of odd sizes, GQA), and the
// generator takes one decode step per token and gives what the
// recomputing generator gives.
#include <gtest/gtest.h>

#include <fstream>
#include <nlohmann/json.hpp>

#include "models/llama_decode_check.h"  // tests/models
#include "models/llama_generator.h"

namespace rlx {
namespace {

TEST(LlamaKvCache, DecodeEqualsFullPrefixForwardAtEveryStep) {
  CompileOptions o;
  o.threads = 1;
  o.verify_plan = true;
  const double worst = test::check_decode_against_full(test::small_odd_config(), o, DType::F32, 5, 12, 1e-5);
  std::printf("decode vs full prefix: max relative error %.3g over 12 steps\n", worst);
}

TEST(LlamaKvCache, InterleavedRopeAndLongerPrompt) {
  LlamaConfig c = test::small_odd_config();
  c.rope_interleaved = true;
  c.rope_dims = 8;  // the last 4 dims of each head pass through
  c.tie_embeddings = false;  // a separate LM head
  CompileOptions o;
  o.threads = 1;
  test::check_decode_against_full(c, o, DType::F32, 19, 10, 1e-5);
}

TEST(LlamaKvCache, GeneratorDecodesOneStepPerTokenLikeTheRecomputingOne) {
  const std::string dir = std::string(RLX_SOURCE_DIR) + "/tests/data/";
  GeneratorOptions cached, recompute;
  cached.threads = recompute.threads = 1;
  recompute.kv_cache = false;
  LlamaGenerator a(dir + "tiny_llama.gguf", cached), b(dir + "tiny_llama.gguf", recompute);
  std::ifstream in(dir + "tiny_llama_reference.json");
  ASSERT_TRUE(in);
  std::vector<int32_t> ids = a.tokenizer().encode(nlohmann::json::parse(in).at("prompt").get<std::string>());
  const size_t prompt = ids.size();
  a.reserve(int64_t(prompt) + 14);
  b.reserve(int64_t(prompt) + 14);
  for (int step = 0; step < 14; ++step) {
    std::vector<float> la = a.next_logits(ids), lb = b.next_logits(ids);
    EXPECT_LE(test::max_rel_error(la, lb), 1e-5) << "step " << step;
    ids.push_back(int32_t(std::max_element(la.begin(), la.end()) - la.begin()));
  }
  EXPECT_EQ(a.decode_steps(), 13u);  // the prompt was prefilled, every later token decoded
  EXPECT_EQ(b.decode_steps(), 0u);
  EXPECT_EQ(a.buckets(), (std::vector<int64_t>{32}));  // the 21-token prompt's only
  // A new prompt that does not extend the cached tokens is prefilled again.
  ids.resize(prompt - 1);
  test::expect_close(a.next_logits(ids), b.next_logits(ids), 1e-5, "a shorter prompt");
  EXPECT_EQ(a.decode_steps(), 13u);
  // Several new tokens after the cached ones are prefilled after them.
  ids.push_back(5);
  ids.push_back(7);
  ids.push_back(9);
  test::expect_close(a.next_logits(ids), b.next_logits(ids), 1e-5, "three tokens after the cached prefix");
  EXPECT_EQ(a.decode_steps(), 13u);
}

}  // namespace
}  // namespace rlx
