// ModernBERT (modernbert) on the CPU against sentence-transformers, with the
// random models of odd sizes tests/data/make_modernbert_case.py made
// (tests/data/modernbert): embeddings of texts longer than the local
// layers' window, alone and in padded batches, in f32 (and f16/bf16
// storage); the cross-encoder's scores; and the configs it must refuse, by
// the field's name.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "models/embedder.h"
#include "models/test_files.h"  // tests/models
#include "test_util.h"

namespace rlx {
namespace {

using test::cosine;

const std::string kData = std::string(RLX_SOURCE_DIR) + "/tests/data/modernbert";

nlohmann::json reference() {
  std::ifstream in(kData + "/reference.json");
  EXPECT_TRUE(in) << kData << "/reference.json is missing";
  return nlohmann::json::parse(in);
}

struct Mode {
  const char* name;
  DType dtype;
  int max_batch, threads;
  double min_cos;
};

TEST(ModernBert, EmbeddingsMatchSentenceTransformers) {
  const nlohmann::json ref = reference();
  std::vector<std::string> texts;
  std::vector<std::vector<float>> want;
  std::vector<std::vector<int32_t>> ids;
  for (const auto& c : ref.at("texts")) {
    texts.push_back(c.at("text"));
    want.push_back(c.at("embedding").get<std::vector<float>>());
    ids.push_back(c.at("ids").get<std::vector<int32_t>>());
  }
  ASSERT_GE(texts.size(), 6u);
  // The window (keys within 4 tokens) bites: most texts are longer than 9 tokens.
  size_t longer = 0;
  for (const auto& i : ids) longer += i.size() > 9;
  ASSERT_GE(longer, 3u);
  // Padded batches of 4 (two chunks of mixed lengths), one text per run, one
  // thread; f16 and bf16 weights and activations (f32 arithmetic).
  const Mode modes[] = {{"f32 batch 4", DType::F32, 4, 0, 0.9999},
                        {"f32 alone", DType::F32, 1, 0, 0.9999},
                        {"f32 batch 8, one thread", DType::F32, 8, 1, 0.9999},
                        {"f16 batch 4", DType::F16, 4, 0, 0.999},
                        {"bf16 batch 4", DType::BF16, 4, 0, 0.99}};
  for (const Mode& m : modes) {
    EmbedderOptions o;
    o.dtype = m.dtype;
    o.max_batch = m.max_batch;
    o.threads = m.threads;
    Embedder e(kData + "/embed", o);
    EXPECT_EQ(e.info().model_type, "modernbert");
    EXPECT_EQ(e.max_len(), 64);
    EXPECT_TRUE(e.normalizes());
    for (size_t i = 0; i < texts.size(); ++i)
      ASSERT_EQ(e.tokenizer().encode(texts[i], e.max_len()).ids, ids[i]) << "text " << i;
    auto got = e.embed(texts);
    ASSERT_EQ(got.size(), texts.size());
    for (size_t i = 0; i < texts.size(); ++i) {
      ASSERT_EQ(got[i].size(), 48u);
      for (float x : got[i]) ASSERT_TRUE(std::isfinite(x)) << m.name << " text " << i;
      EXPECT_GE(cosine(got[i], want[i]), m.min_cos) << m.name << " '" << texts[i] << "'";
    }
  }
}

TEST(ModernBert, CrossEncoderMatchesSentenceTransformers) {
  const nlohmann::json ref = reference();
  ASSERT_TRUE(ref.contains("pairs"));
  Embedder e(kData + "/rerank");
  ASSERT_TRUE(e.is_cross_encoder());
  EXPECT_EQ(e.info().model_type, "modernbert");
  for (const auto& p : ref.at("pairs")) {
    const std::string q = p.at("query"), d = p.at("passage");
    const double score = p.at("score").get<double>();
    EXPECT_NEAR(e.score(q, {d})[0], score, 1e-4) << q << " / " << d;
    // The logit under CrossEncoder's sigmoid.
    EXPECT_NEAR(e.logits(q, {d})[0], std::log(score / (1 - score)), 5e-4) << q << " / " << d;
    // The reference ids and logit came from the tokenizer called on (q, d),
    // which takes an empty d for no pair at all; CrossEncoder (and rlx)
    // encode it as a pair, [CLS] q [SEP] [SEP].
    if (d.empty()) continue;
    EXPECT_EQ(e.tokenizer().encode_pair(q, d, e.max_len()).ids, p.at("ids").get<std::vector<int32_t>>()) << q;
    EXPECT_NEAR(e.logits(q, {d})[0], p.at("logit").get<double>(), 2e-4) << q << " / " << d;
  }
}

// The fixture's folder with `extra` members appended to its config.json
// (later members of a JSON object win in nlohmann's parser, as in Python's).
std::string refusal(const std::string& model, const std::string& extra) {
  test::TempDir d;
  std::filesystem::copy(kData + "/" + model, d.path(), std::filesystem::copy_options::recursive);
  std::ifstream in(d.path() / "config.json");
  std::stringstream ss;
  ss << in.rdbuf();
  std::string cfg = ss.str();
  cfg = cfg.substr(0, cfg.rfind('}')) + extra + "}";
  test::write_text(d.path() / "config.json", cfg);
  return test::error_of([&] { Embedder e(d.path().string()); });
}

TEST(ModernBert, UnsupportedConfigsNameTheField) {
  auto refused = [](const std::string& extra, const std::string& want, const std::string& model = "embed") {
    const std::string msg = refusal(model, extra);
    EXPECT_NE(msg.find(want), std::string::npos) << extra << ": " << msg;
  };
  refused(R"(,"rope_parameters":{"sliding_attention":{"rope_type":"yarn","rope_theta":100}})", "rope_type 'yarn'");
  refused(R"(,"layer_types":["full_attention","chunked_attention","full_attention"])",
          "layer type 'chunked_attention'");
  refused(R"(,"layer_types":["full_attention"])", "1 entries for 3 layers");
  refused(R"(,"hidden_activation":"quick_gelu")", "hidden_activation 'quick_gelu'");
  refused(R"(,"head_dim":8)", "head_dim");
  refused(R"(,"num_attention_heads":16)", "even head size");
  refused(R"(,"rope_scaling":{"type":"linear","factor":2})", "rope_scaling");
  // Weights the config asks for and the file lacks are named.
  refused(R"(,"attention_bias":true)", "layers.0.attn.Wqkv.bias");
  refused(R"(,"norm_bias":true)", "embeddings.norm.bias");
  refused(R"(,"intermediate_size":30)", "mlp.Wi.weight");
  refused(R"(,"classifier_pooling":"max")", "classifier_pooling 'max'", "rerank");
  refused(R"(,"classifier_activation":"softplus")", "classifier_activation 'softplus'", "rerank");
}

// transformers before 5 writes global_attn_every_n_layers and the two
// thetas instead of layer_types and rope_parameters: the same model.
TEST(ModernBert, OlderConfigKeysGiveTheSameModel) {
  const nlohmann::json ref = reference();
  test::TempDir d;
  std::filesystem::copy(kData + "/embed", d.path(), std::filesystem::copy_options::recursive);
  nlohmann::json cfg;
  std::ifstream(d.path() / "config.json") >> cfg;
  cfg.erase("layer_types");
  cfg.erase("rope_parameters");
  cfg["global_rope_theta"] = 5000.0;
  cfg["local_rope_theta"] = 100.0;
  test::write_text(d.path() / "config.json", cfg.dump());
  Embedder e(d.path().string());
  const auto& c = ref.at("texts").at(4);
  auto got = e.embed({c.at("text").get<std::string>()});
  EXPECT_GE(cosine(got[0], c.at("embedding").get<std::vector<float>>()), 0.9999);
}

}  // namespace
}  // namespace rlx
