// LLaMA from a Hugging Face directory: config.json, weights in two
// safetensors shards listed by model.safetensors.index.json, tokenizer.json;
// logits against the double-precision reference, and broken directories.
#include "models/llama_hf.h"

#include <gtest/gtest.h>

#include <filesystem>

#include "models/llama_generator.h"
#include "models/llama_reference.h"  // tests/models
#include "models/test_files.h"       // tests/models
#include "test_util.h"

namespace rlx {
namespace {

namespace fs = std::filesystem;

const std::string kTokenizer = std::string(RLX_SOURCE_DIR) + "/tests/data/bpe_trained_tokenizer.json";

LlamaConfig hf_config() {
  LlamaConfig c = test::odd_config();
  c.vocab_size = 640;  // the tokenizer's 600, padded as Hugging Face checkpoints often are
  return c;
}

// Writes the directory; the shards split the layers between them.
test::Weights write_hf_dir(const fs::path& dir, const LlamaConfig& c) {
  test::Weights w = test::random_weights(build_llama_graph(c, 1, 1, DType::F32));
  Graph g = build_llama_graph(c, 1, 1, DType::F32);
  std::map<std::string, std::pair<Shape, std::vector<float>>> shard[2];
  std::string index = "{\"weight_map\": {";
  for (const auto& [name, v] : w) {
    const int which = name.rfind("blk.1.", 0) == 0 ? 1 : 0;
    Shape s;
    for (const Node& n : g.nodes())
      if (n.op == OpKind::Param && n.name == name) s = g.value(n.outputs[0]).shape;
    shard[which][llama_hf_name(name)] = {s, v};
    if (index.back() != '{') index += ",";
    index += "\"" + llama_hf_name(name) + "\": \"model-0000" + std::to_string(which + 1) + "-of-00002.safetensors\"";
  }
  index += "}}";
  test::write_safetensors(dir / "model-00001-of-00002.safetensors", shard[0]);
  test::write_safetensors(dir / "model-00002-of-00002.safetensors", shard[1]);
  test::write_text(dir / "model.safetensors.index.json", index);
  test::write_text(dir / "config.json", R"({"model_type": "llama", "vocab_size": 640, "hidden_size": 288,
    "intermediate_size": 776, "num_hidden_layers": 2, "num_attention_heads": 6, "num_key_value_heads": 2,
    "head_dim": 48, "rope_theta": 10000.0, "rms_norm_eps": 1e-5, "max_position_embeddings": 64,
    "tie_word_embeddings": true, "eos_token_id": 1})");
  test::write_text(dir / "tokenizer_config.json", R"({"chat_template": "<|im_start|>{{ x }}<|im_end|>"})");
  fs::copy_file(kTokenizer, dir / "tokenizer.json");
  return w;
}

TEST(LlamaHf, ShardedDirectoryMatchesTheReference) {
  test::TempDir d;
  LlamaConfig c = hf_config();
  test::Weights w = write_hf_dir(d.path(), c);
  GeneratorOptions o;
  o.threads = 1;
  LlamaGenerator gen(d.path().string(), o);
  EXPECT_FALSE(gen.config().rope_interleaved);
  EXPECT_EQ(gen.eos_id(), 1);
  EXPECT_NE(gen.chat_template().find("<|im_start|>"), std::string::npos);
  std::vector<int32_t> ids = gen.tokenizer().encode("Hello, world! It's a test: 3.14");
  ASSERT_GE(ids.size(), 8u);
  ASSERT_LE(ids.size(), 16u);
  // The model's 640 rows are padded past the tokenizer's 600 tokens (as
  // Qwen2.5's are): the logits are those of the tokenizer's tokens.
  ASSERT_LT(gen.tokenizer().vocab_size(), size_t(c.vocab_size));
  auto tokens_only = [&](std::vector<double> v) {
    v.resize(gen.tokenizer().vocab_size());
    return v;
  };
  test::expect_close(gen.next_logits(ids), tokens_only(test::reference(c, w, ids, int(ids.size()) - 1)), 1e-4,
                     "logits after a prompt");
  ids.resize(5);
  test::expect_close(gen.next_logits(ids), tokens_only(test::reference(c, w, ids, 4)), 1e-4, "logits after 5 tokens");
  EXPECT_EQ(gen.buckets(), (std::vector<int64_t>{16}));
}

TEST(LlamaHf, BrokenDirectoriesNameTheFile) {
  test::TempDir d;
  write_hf_dir(d.path(), hf_config());
  // The index sends a tensor to a shard that lacks it.
  test::write_text(d.path() / "model.safetensors.index.json",
                   R"({"weight_map": {"model.norm.weight": "model-00002-of-00002.safetensors"}})");
  std::string e = test::error_of([&] { LlamaSafetensors w(d.path().string()); });
  EXPECT_NE(e.find("model.norm.weight"), std::string::npos) << e;
  EXPECT_NE(e.find("model.safetensors.index.json"), std::string::npos) << e;
  // A tensor the graph needs is absent.
  test::write_text(d.path() / "model.safetensors.index.json",
                   R"({"weight_map": {"model.norm.weight": "model-00001-of-00002.safetensors"}})");
  LlamaSafetensors w(d.path().string());
  e = test::error_of([&] { w.validate(build_llama_graph(w.config(), 1, 1, DType::F32)); });
  EXPECT_NE(e.find("model.embed_tokens.weight"), std::string::npos) << e;
  // A shard outside the directory.
  test::write_text(d.path() / "model.safetensors.index.json",
                   R"({"weight_map": {"model.norm.weight": "../x.safetensors"}})");
  e = test::error_of([&] { LlamaSafetensors w2(d.path().string()); });
  EXPECT_NE(e.find("../x.safetensors"), std::string::npos) << e;
  EXPECT_EQ(llama_hf_name("blk.12.ffn_down.weight"), "model.layers.12.mlp.down_proj.weight");
}

}  // namespace
}  // namespace rlx
