// `rlx generate` as a user runs it: greedy text equal to the NumPy
// reference's, seeded sampling repeatable, ChatML prompts, and errors.
#include <gtest/gtest.h>

#include <sys/wait.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <iterator>
#include <nlohmann/json.hpp>

#include "cli_run.h"  // tests/
#include "models/decoder_family_files.h"  // tests/models
#include "models/gguf.h"
#include "models/llama_generator.h"
#include "models/llama_hf.h"
#include "models/llama_reference.h"  // tests/models
#include "models/sampling.h"
#include "models/test_files.h"  // tests/models
#include "tokenizers/bpe.h"

namespace rlx {
namespace {

const std::string kSmolLM2 =
    std::string(RLX_SOURCE_DIR) + "/models/SmolLM2-135M-Instruct/SmolLM2-135M-Instruct.Q4_1.gguf";

using Ran = test::CliRun;

// One thread: ctest runs tests side by side on CI's two cores.
Ran run_generate(const std::string& args, const std::string& model = kSmolLM2, const std::string& env = "") {
  return test::run_rlx("generate --threads 1 --model " + model + " " + args, env);
}

TEST(GenerateCli, GreedyTextIsTheReferenceContinuation) {
  std::ifstream in(std::string(RLX_SOURCE_DIR) + "/tests/data/smollm2_reference.json");
  auto ref = nlohmann::json::parse(in);
  GgufFile f(kSmolLM2);
  BpeTokenizer tok = BpeTokenizer::from_gguf(f);
  auto ids = ref.at("generated_ids").get<std::vector<int32_t>>();
  ids.resize(6);
  Ran r = run_generate("--device cpu -n 6 --prompt \"" + ref.at("prompt").get<std::string>() + "\"");
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_EQ(r.out, tok.decode(ids) + "\n");
  EXPECT_NE(r.err.find("prompt 5 tokens"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("decode 5 tokens"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("KV cache: 5 decode steps"), std::string::npos) << r.err;  // the cached path ran
  // The full-prefix recompute writes the same text.
  Ran full = run_generate("--device cpu --recompute -n 6 --prompt \"" + ref.at("prompt").get<std::string>() + "\"");
  ASSERT_EQ(full.status, 0) << full.err;
  EXPECT_EQ(full.out, r.out);
  EXPECT_NE(full.err.find("full-prefix recompute: 0 decode steps"), std::string::npos) << full.err;
  // --warmup runs the prompt once untimed first: the same text, the timed
  // run's own steps counted.
  Ran warm = run_generate("--device cpu --warmup -n 6 --prompt \"" + ref.at("prompt").get<std::string>() + "\"");
  ASSERT_EQ(warm.status, 0) << warm.err;
  EXPECT_EQ(warm.out, r.out);
  EXPECT_NE(warm.err.find("warm-up (the prompt and 2 tokens, untimed)"), std::string::npos) << warm.err;
  EXPECT_NE(warm.err.find("KV cache: 5 decode steps"), std::string::npos) << warm.err;
}

TEST(GenerateCli, SeededSamplingRepeats) {
  const std::string args = "-n 3 --temperature 0.9 --top-k 40 --top-p 0.95 --seed 11 --prompt \"Once upon\"";
  Ran a = run_generate(args), b = run_generate(args);
  ASSERT_EQ(a.status, 0) << a.err;
  ASSERT_EQ(b.status, 0) << b.err;
  EXPECT_GT(a.out.size(), 1u);
  EXPECT_EQ(a.out, b.out);
}

TEST(GenerateCli, ChatWrapsThePromptInChatML) {
  Ran r = run_generate("-n 1 --chat --prompt \"Hi!\"");
  ASSERT_EQ(r.status, 0) << r.err;
  // The default system turn, the user turn and the assistant's opening.
  EXPECT_NE(r.err.find("prompt 32 tokens"), std::string::npos) << r.err;
}

// A Hugging Face directory with one model.safetensors and no tokenizer:
// --prompt-ids in, ids out, equal to the host-driven greedy path in process;
// the config's EOS is the first token chosen, so only --ignore-eos gets past it.
TEST(GenerateCli, PromptIdsWithoutATokenizer) {
  namespace fs = std::filesystem;
  test::TempDir d;
  const LlamaConfig c = test::odd_config();
  Graph g = build_llama_graph(c, 1, 1, DType::F32);
  const test::Weights w = test::random_weights(g);
  std::map<std::string, std::pair<Shape, std::vector<float>>> ts;
  for (const Node& n : g.nodes())
    if (n.op == OpKind::Param) ts[llama_hf_name(n.name)] = {g.value(n.outputs[0]).shape, w.at(n.name)};
  test::write_safetensors(d.path() / "model.safetensors", ts);
  auto config = [&](int eos) {
    test::write_text(d.path() / "config.json",
                     "{\"model_type\": \"llama\", \"vocab_size\": " + std::to_string(c.vocab_size) +
                         ", \"hidden_size\": " + std::to_string(c.hidden_size) +
                         ", \"intermediate_size\": " + std::to_string(c.intermediate_size) +
                         ", \"num_hidden_layers\": " + std::to_string(c.num_layers) +
                         ", \"num_attention_heads\": " + std::to_string(c.num_heads) +
                         ", \"num_key_value_heads\": " + std::to_string(c.num_kv_heads) +
                         ", \"head_dim\": " + std::to_string(c.head_dim) +
                         ", \"rms_norm_eps\": 1e-5, \"max_position_embeddings\": " + std::to_string(c.max_positions) +
                         ", \"tie_word_embeddings\": " + (c.tie_embeddings ? "true" : "false") +
                         ", \"eos_token_id\": " + std::to_string(eos) + "}");
  };
  config(-1);
  ASSERT_FALSE(fs::exists(d.path() / "tokenizer.json"));
  const std::vector<int32_t> prompt{3, 1, 4, 1, 5, 9, 2};
  std::vector<int32_t> want;
  {
    GeneratorOptions o;
    o.threads = 1;
    LlamaGenerator gen(d.path().string(), o);
    EXPECT_FALSE(gen.has_tokenizer());
    std::vector<int32_t> ids = prompt;
    for (int i = 0; i < 9; ++i) {
      want.push_back(argmax(gen.next_logits(ids)));
      ids.push_back(want.back());
    }
  }
  std::string want_text;
  for (size_t i = 0; i < want.size(); ++i) want_text += (i ? "," : "") + std::to_string(want[i]);
  Ran r = run_generate("-n 9 --prompt-ids 3,1,4,1,5,9,2", d.path().string());
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_EQ(r.out, want_text + "\n");
  EXPECT_NE(r.err.find("prompt 7 tokens"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("decode 8 tokens"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("KV cache: 8 decode steps; finish length"), std::string::npos) << r.err;

  config(want[0]);  // EOS: the first token
  r = run_generate("-n 9 --prompt-ids 3,1,4,1,5,9,2", d.path().string());
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_EQ(r.out, "\n");
  r = run_generate("-n 9 --ignore-eos --prompt-ids 3,1,4,1,5,9,2", d.path().string());
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_EQ(r.out, want_text + "\n");

  // The per-token trace line, and errors: no tokenizer for text, bad ids.
  r = run_generate("-n 3 --prompt-ids 3,1", d.path().string(), "RLX_TRACE=decode ");
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_NE(r.err.find("rlx decode: token 2 id"), std::string::npos) << r.err;
  r = run_generate("--prompt hi", d.path().string());
  EXPECT_EQ(r.status, 1);
  EXPECT_NE(r.err.find("no tokenizer"), std::string::npos) << r.err;
  r = run_generate("--prompt-ids 3,x", d.path().string());
  EXPECT_EQ(r.status, 1);
  EXPECT_NE(r.err.find("'x'"), std::string::npos) << r.err;
  r = run_generate("--prompt-ids 3," + std::to_string(c.vocab_size), d.path().string());
  EXPECT_EQ(r.status, 1);
  EXPECT_NE(r.err.find("outside the vocabulary"), std::string::npos) << r.err;
}

// --quantize fp8 on a float directory: the greedy ids of LlamaGenerator
// quantizing the same way; an unknown format is refused.
TEST(GenerateCli, QuantizeFp8IsTheGeneratorsFp8) {
  test::TempDir d;
  test::Family f = test::llama3();
  f.cfg.hidden_size = 64;
  f.cfg.intermediate_size = 96;
  f.cfg.num_heads = 4;
  f.cfg.num_kv_heads = 2;
  f.cfg.head_dim = f.cfg.rope_dims = 16;
  f.cfg.rope_freq_divisors = test::hf_llama3_divisors(16, 10000, 8, 1, 4, 16);
  test::write_hf_dir(d.path(), f, test::weights_of(f.cfg));
  const std::vector<int32_t> prompt{3, 1, 4, 1, 5, 9, 2};
  std::string want;
  {
    GeneratorOptions o;
    o.threads = 1;
    o.quantize = QuantType::FP8;
    LlamaGenerator gen(d.path().string(), o);
    std::vector<int32_t> ids = prompt;
    for (int i = 0; i < 5; ++i) {
      ids.push_back(argmax(gen.next_logits(ids)));
      want += (i ? "," : "") + std::to_string(ids.back());
    }
  }
  Ran r = run_generate("-n 5 --quantize fp8 --prompt-ids 3,1,4,1,5,9,2", d.path().string());
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_EQ(r.out, want + "\n");
  r = run_generate("-n 5 --quantize fp7 --prompt-ids 3,1", d.path().string());
  EXPECT_NE(r.status, 0);
  EXPECT_NE(r.err.find("fp7"), std::string::npos) << r.err;
}

TEST(GenerateCli, ErrorsNameTheProblem) {
  Ran r = run_generate("--prompt hi", "/nonexistent/x.gguf");
  EXPECT_EQ(r.status, 1);
  EXPECT_NE(r.err.find("/nonexistent/x.gguf"), std::string::npos) << r.err;
  r = run_generate("--prompt hi --top-p 0");
  EXPECT_EQ(r.status, 1);
  EXPECT_NE(r.err.find("top-p"), std::string::npos) << r.err;
}

// --batch 3: the prompt three times, decoded together; the first sequence
// streams, equal to the batch-1 output, and the decode speed counts all three.
TEST(GenerateCli, BatchDecodesCopiesOfThePromptTogether) {
  const std::string tiny = std::string(RLX_SOURCE_DIR) + "/tests/data/tiny_llama.gguf";
  const std::string args = "-n 8 --ignore-eos --prompt-ids 1,45,96,173,17";
  Ran one = run_generate(args, tiny), three = run_generate(args + " --batch 3", tiny);
  ASSERT_EQ(one.status, 0) << one.err;
  ASSERT_EQ(three.status, 0) << three.err;
  EXPECT_EQ(std::count(one.out.begin(), one.out.end(), ','), 7) << one.out;
  EXPECT_EQ(three.out, one.out);
  EXPECT_NE(three.err.find("prompt 15 tokens (3 x 5)"), std::string::npos) << three.err;
  EXPECT_NE(three.err.find("24 tokens in"), std::string::npos) << three.err;  // 3 sequences x 8
  // The engine ran them together: fewer decode runs than the 3 x 7 of one at a time.
  const size_t at = three.err.find("engine, batch 3: 3 prefill runs, ");
  ASSERT_NE(at, std::string::npos) << three.err;
  const int decode_runs = std::atoi(three.err.c_str() + at + std::string("engine, batch 3: 3 prefill runs, ").size());
  EXPECT_GE(decode_runs, 7);
  EXPECT_LE(decode_runs, 9) << three.err;
  Ran sampled = run_generate(args + " --batch 2 --temperature 0.7", tiny);
  EXPECT_EQ(sampled.status, 1);
  EXPECT_NE(sampled.err.find("--batch decodes greedily"), std::string::npos) << sampled.err;
}

}  // namespace
}  // namespace rlx
