// The embedder's controls on a random BERT of odd sizes against a plain
// double-precision forward: every pooling mode (from 1_Pooling/config.json
// and as an override), normalization on and off, Matryoshka truncation,
// prompts from config_sentence_transformers.json, and the installed
// tokenizer interface.
#include <gtest/gtest.h>

#include <cmath>

#include "models/embedder.h"
#include "models/tiny_bert.h"  // tests/models

namespace rlx {
namespace {

using test::TinyBert;

// Texts of different lengths, so a batch pads most of them.
const std::vector<std::vector<int>> kWords = {{3}, {0, 7, 11, 2, 19, 4, 4}, {22, 1}, {}, {5, 6, 8, 9, 10, 12, 13, 14, 15, 16, 17}};

std::vector<std::string> texts_of(const std::vector<std::vector<int>>& words) {
  std::vector<std::string> t;
  for (const auto& w : words) t.push_back(TinyBert::text_of(w));
  return t;
}

void expect_rows(const std::vector<std::vector<float>>& got, const std::vector<std::vector<double>>& want,
                 double tol, const std::string& what) {
  ASSERT_EQ(got.size(), want.size()) << what;
  for (size_t r = 0; r < got.size(); ++r) {
    ASSERT_EQ(got[r].size(), want[r].size()) << what << " row " << r;
    double err = 0, mag = 0;
    for (size_t d = 0; d < got[r].size(); ++d) {
      ASSERT_TRUE(std::isfinite(got[r][d])) << what << " row " << r;
      err = std::max(err, std::fabs(got[r][d] - want[r][d]));
      mag = std::max(mag, std::fabs(double(got[r][d])));
    }
    EXPECT_GT(mag, 1e-3) << what << " row " << r << " is all zeros";
    EXPECT_LT(err, tol) << what << " row " << r;
  }
}

std::vector<std::vector<double>> reference(const TinyBert& m, const std::vector<std::vector<int>>& words,
                                           const std::string& mode, bool normalize, size_t dims = 0,
                                           const std::vector<int>& prompt = {}) {
  std::vector<std::vector<double>> out;
  for (const auto& w : words) {
    std::vector<int> all = prompt;
    all.insert(all.end(), w.begin(), w.end());
    auto ids = m.ids_of(all);
    auto v = m.pool(m.hidden(ids, std::vector<int32_t>(ids.size(), 0)), mode);
    if (dims) v.resize(dims);
    out.push_back(normalize ? test::l2_normalized(v) : v);
  }
  return out;
}

TEST(EmbedderControls, EveryPoolingModeFromTheModelAndAsOverride) {
  test::TempDir d;
  TinyBert m({});
  m.write(d.path());
  const auto texts = texts_of(kWords);
  for (const std::string mode : {"mean", "cls", "max", "mean_sqrt_len", "weightedmean", "lasttoken"}) {
    test::write_sentence_modules(d.path(), mode, false);
    EmbedderOptions o;
    o.max_batch = 4;  // two chunks: 4 + 1
    Embedder e(d.path().string(), o);
    EXPECT_EQ(e.info().pooling, mode);
    EXPECT_FALSE(e.normalizes());
    expect_rows(e.embed(texts), reference(m, kWords, mode, false), 2e-5, "model's " + mode);
  }
  // The model says mean; each override wins.
  test::write_sentence_modules(d.path(), "mean", true);
  const std::pair<PoolingMode, const char*> overrides[] = {
      {PoolingMode::Cls, "cls"}, {PoolingMode::Max, "max"}, {PoolingMode::LastToken, "lasttoken"},
      {PoolingMode::WeightedMean, "weightedmean"}, {PoolingMode::MeanSqrtLen, "mean_sqrt_len"}};
  for (const auto& [mode, name] : overrides) {
    EmbedderOptions o;
    o.pooling = mode;
    Embedder e(d.path().string(), o);
    EXPECT_EQ(e.info().pooling, name);
    expect_rows(e.embed(texts), reference(m, kWords, name, true), 2e-6, std::string("override ") + name);
  }
}

class EncoderFamilies : public ::testing::TestWithParam<std::string> {};

// Each family's names, positions, token types and tokenizer, on a padded
// batch in two chunks, against the reference.
TEST_P(EncoderFamilies, EmbeddingsMatchTheReferenceForward) {
  test::TempDir d;
  test::TinyBertSpec s;
  s.family = GetParam();
  TinyBert m(s);
  m.write(d.path());
  const auto texts = texts_of(kWords);
  for (const std::string mode : {"mean", "cls", "max"}) {
    test::write_sentence_modules(d.path(), mode, true);
    EmbedderOptions o;
    o.max_batch = 4;
    Embedder e(d.path().string(), o);
    EXPECT_EQ(e.info().model_type, s.family);
    for (size_t i = 0; i < kWords.size(); ++i)
      ASSERT_EQ(e.tokenizer().encode(texts[i], 64).ids, m.ids_of(kWords[i])) << s.family << " text " << i;
    expect_rows(e.embed(texts), reference(m, kWords, mode, true), 2e-6, s.family + " " + mode);
  }
  // Stripped first as sentence-transformers does (for byte-level BPE a
  // leading space would change the first token).
  {
    Embedder e(d.path().string());
    auto padded = e.embed({" \t" + texts[1] + "  \xc2\xa0", texts[1]});
    auto want = reference(m, {kWords[1]}, "max", true);
    expect_rows({padded[0]}, want, 2e-6, s.family + " stripped");
    EXPECT_EQ(padded[0], padded[1]);
  }
  // The longest text the positions allow, and one past it.
  EmbedderOptions strict;
  strict.truncate = false;
  Embedder e(d.path().string(), strict);
  const int longest = s.family == "roberta" || s.family == "xlm-roberta" ? 40 - 2 : 40;
  EXPECT_EQ(e.max_len(), longest);
  std::vector<int> words(size_t(longest - 2), 3);
  expect_rows(e.embed({TinyBert::text_of(words)}), reference(m, {words}, "max", true), 2e-6, s.family + " longest");
  words.push_back(4);
  std::string msg = test::error_of([&] { e.embed({TinyBert::text_of(words)}); });
  EXPECT_NE(msg.find("longer than the model's " + std::to_string(longest) + " tokens"), std::string::npos) << msg;
}

INSTANTIATE_TEST_SUITE_P(Families, EncoderFamilies, ::testing::Values("bert", "roberta", "distilbert", "xlm-roberta"),
                         [](const auto& info) { return info.param == "xlm-roberta" ? "xlm_roberta" : info.param; });

TEST(EmbedderControls, UnsupportedFamiliesNameTheirModelType) {
  test::TempDir d;
  for (const auto& [type, arch] : std::vector<std::pair<std::string, std::string>>{
           {"new", "NewModel"}, {"gpt2", "GPT2Model"}, {"mpnet", "MPNetModel"}}) {
    test::write_text(d.path() / "config.json",
                     "{\"model_type\":\"" + type + "\",\"architectures\":[\"" + arch + "\"]}");
    std::string msg = test::error_of([&] { Embedder e(d.path().string()); });
    EXPECT_NE(msg.find("model_type '" + type + "'"), std::string::npos) << msg;
    EXPECT_NE(msg.find(arch), std::string::npos) << msg;
    EXPECT_NE(msg.find("qwen3"), std::string::npos) << "the decoder families are listed too: " << msg;
  }
  // A decoder family is read as a decoder embedder (qwen3_embedding_test.cc):
  // what its config lacks is named.
  test::write_text(d.path() / "config.json", R"({"model_type":"qwen3","architectures":["Qwen3Model"]})");
  std::string msg = test::error_of([&] { Embedder e(d.path().string()); });
  EXPECT_NE(msg.find("vocab_size"), std::string::npos) << msg;
}

TEST(EmbedderControls, NormalizeOverridesAndMatryoshkaDimensions) {
  test::TempDir d;
  TinyBert m({});
  m.write(d.path());
  test::write_sentence_modules(d.path(), "mean", true);
  const auto texts = texts_of(kWords);
  {
    EmbedderOptions o;
    o.normalize = NormalizeMode::Off;
    Embedder e(d.path().string(), o);
    EXPECT_FALSE(e.normalizes());
    expect_rows(e.embed(texts), reference(m, kWords, "mean", false), 2e-5, "normalize off");
  }
  {
    EmbedderOptions o;
    o.truncate_dim = 7;
    Embedder e(d.path().string(), o);
    EXPECT_EQ(e.dim(), 7);
    EXPECT_EQ(e.info().dim, 7);
    auto got = e.embed(texts);
    expect_rows(got, reference(m, kWords, "mean", true, 7), 2e-6, "truncate_dim 7, normalized after");
    double n = 0;
    for (float x : got[1]) n += double(x) * x;
    EXPECT_NEAR(n, 1.0, 1e-5);
  }
  test::write_sentence_modules(d.path(), "cls", false);
  {
    EmbedderOptions o;
    o.normalize = NormalizeMode::On;
    o.truncate_dim = 19;
    Embedder e(d.path().string(), o);
    expect_rows(e.embed(texts), reference(m, kWords, "cls", true, 19), 2e-6, "normalize on, 19 dims");
  }
  EmbedderOptions bad;
  bad.truncate_dim = 21;
  std::string msg = test::error_of([&] { Embedder e(d.path().string(), bad); });
  EXPECT_NE(msg.find("truncate_dim 21"), std::string::npos) << msg;
}

TEST(EmbedderControls, PromptsFromTheModelAsSentenceTransformersAppliesThem) {
  test::TempDir d;
  TinyBert m({});
  m.write(d.path());
  test::write_sentence_modules(d.path(), "mean", false);
  // "query: " is two vocabulary words here, so the reference knows its ids.
  const std::string query = TinyBert::word(20) + " " + TinyBert::word(21) + " ";
  test::write_text(d.path() / "config_sentence_transformers.json",
                   "{\"prompts\": {\"query\": \"" + query + "\", \"passage\": \"\"}, \"default_prompt_name\": null}");
  const auto texts = texts_of(kWords);
  {
    Embedder e(d.path().string());
    EXPECT_EQ(e.prompt("query"), query);
    ASSERT_EQ(e.info().prompts.size(), 2u);
    expect_rows(e.embed(texts), reference(m, kWords, "mean", false), 2e-5, "no prompt by default");
    EmbedCall call;
    call.prompt_name = "query";
    expect_rows(e.embed(texts, call), reference(m, kWords, "mean", false, 0, {20, 21}), 2e-5, "per-call prompt");
    call = {};
    call.prompt = TinyBert::word(9) + " ";
    expect_rows(e.embed(texts, call), reference(m, kWords, "mean", false, 0, {9}), 2e-5, "literal prompt");
    call = {};
    call.prompt_name = "title";
    std::string msg = test::error_of([&] { e.embed(texts, call); });
    EXPECT_NE(msg.find("no prompt named 'title'"), std::string::npos) << msg;
    EXPECT_NE(msg.find("passage, query"), std::string::npos) << msg;
  }
  {
    EmbedderOptions o;
    o.prompt_name = "query";
    Embedder e(d.path().string(), o);
    expect_rows(e.embed(texts), reference(m, kWords, "mean", false, 0, {20, 21}), 2e-5, "option prompt");
  }
  test::write_text(d.path() / "config_sentence_transformers.json",
                   "{\"prompts\": {\"query\": \"" + query + "\"}, \"default_prompt_name\": \"query\"}");
  {
    Embedder e(d.path().string());
    expect_rows(e.embed(texts), reference(m, kWords, "mean", false, 0, {20, 21}), 2e-5, "default prompt");
    EmbedderOptions o;
    o.prompt = "";  // an explicit empty prompt turns the default off
    Embedder off(d.path().string(), o);
    expect_rows(off.embed(texts), reference(m, kWords, "mean", false), 2e-5, "default prompt off");
  }
  test::write_text(d.path() / "config_sentence_transformers.json",
                   R"({"prompts": {"query": "q: "}, "default_prompt_name": "doc"})");
  std::string msg = test::error_of([&] { Embedder e(d.path().string()); });
  EXPECT_NE(msg.find("default_prompt_name 'doc'"), std::string::npos) << msg;
}

// Transformer, Pooling, Dense (20 -> 11, tanh), Normalize, as LaBSE-style
// models have them; a module rlx does not run is refused, never skipped.
TEST(EmbedderControls, DenseModuleAfterPooling) {
  test::TempDir d;
  TinyBert m({});
  m.write(d.path());
  test::write_sentence_modules(d.path(), "cls", true);
  test::write_text(d.path() / "modules.json",
                   R"([{"idx":0,"name":"0","path":"","type":"sentence_transformers.models.Transformer"},)"
                   R"({"idx":1,"name":"1","path":"1_Pooling","type":"sentence_transformers.models.Pooling"},)"
                   R"({"idx":2,"name":"2","path":"2_Dense","type":"sentence_transformers.models.Dense"},)"
                   R"({"idx":3,"name":"3","path":"3_Normalize","type":"sentence_transformers.models.Normalize"}])");
  const size_t in = 20, out = 11;
  const std::vector<float> w = test::random_floats(out * in, 91, -0.4f, 0.4f), b = test::random_floats(out, 92, -0.2f, 0.2f);
  test::write_text(d.path() / "2_Dense" / "config.json",
                   R"({"in_features": 20, "out_features": 11, "bias": true, )"
                   R"("activation_function": "torch.nn.modules.activation.Tanh"})");
  test::write_safetensors(d.path() / "2_Dense" / "model.safetensors",
                          {{"linear.weight", {{11, 20}, w}}, {"linear.bias", {{11}, b}}});
  Embedder e(d.path().string());
  EXPECT_EQ(e.dim(), 11);
  const auto texts = texts_of(kWords);
  std::vector<std::vector<double>> want;
  for (const auto& pooled : reference(m, kWords, "cls", false)) {
    std::vector<double> y(out);
    for (size_t o = 0; o < out; ++o) {
      double acc = b[o];
      for (size_t i = 0; i < in; ++i) acc += double(w[o * in + i]) * pooled[i];
      y[o] = std::tanh(acc);
    }
    want.push_back(test::l2_normalized(y));
  }
  expect_rows(e.embed(texts), want, 2e-6, "dense");
  // Matryoshka applies to the Dense output.
  EmbedderOptions o;
  o.truncate_dim = 5;
  Embedder cut(d.path().string(), o);
  for (auto& v : want) v = [&] {
    std::vector<double> t(v.begin(), v.begin() + 5);
    return t;
  }();
  auto got = cut.embed(texts);
  for (size_t r = 0; r < got.size(); ++r) {
    double n = 0, dot = 0;
    for (size_t k = 0; k < 5; ++k) n += want[r][k] * want[r][k];
    for (size_t k = 0; k < 5; ++k) dot += got[r][k] * want[r][k] / std::sqrt(n);
    EXPECT_NEAR(dot, 1.0, 1e-5) << "row " << r;
  }

  test::write_text(d.path() / "2_Dense" / "config.json", R"({"in_features": 19, "out_features": 11})");
  std::string msg = test::error_of([&] { Embedder bad(d.path().string()); });
  EXPECT_NE(msg.find("'linear.weight' has shape [11, 20], config.json needs [11, 19]"), std::string::npos) << msg;
  // Weights that fit their config, but not the pooled vector.
  test::write_safetensors(d.path() / "2_Dense" / "model.safetensors",
                          {{"linear.weight", {{11, 19}, test::random_floats(11 * 19, 93)}},
                           {"linear.bias", {{11}, b}}});
  msg = test::error_of([&] { Embedder bad(d.path().string()); });
  EXPECT_NE(msg.find("takes 19 values, the module before it gives 20"), std::string::npos) << msg;
  test::write_text(d.path() / "modules.json",
                   R"([{"idx":0,"name":"0","path":"","type":"sentence_transformers.models.Transformer"},)"
                   R"({"idx":1,"name":"1","path":"1_Pooling","type":"sentence_transformers.models.Pooling"},)"
                   R"({"idx":2,"name":"2","path":"2_LayerNorm","type":"sentence_transformers.models.LayerNorm"}])");
  msg = test::error_of([&] { Embedder bad(d.path().string()); });
  EXPECT_NE(msg.find("module type 'sentence_transformers.models.LayerNorm' is not supported"), std::string::npos) << msg;
  test::write_text(d.path() / "modules.json",
                   R"([{"idx":0,"name":"0","path":"","type":"sentence_transformers.models.Transformer"},)"
                   R"({"idx":1,"name":"1","path":"2_Normalize","type":"sentence_transformers.models.Normalize"},)"
                   R"({"idx":2,"name":"2","path":"1_Pooling","type":"sentence_transformers.models.Pooling"}])");
  msg = test::error_of([&] { Embedder bad(d.path().string()); });
  EXPECT_NE(msg.find("comes after a module it must precede"), std::string::npos) << msg;
}

// Older sentence-transformers models keep the transformer in a folder of its own.
TEST(EmbedderControls, TransformerInItsOwnFolder) {
  test::TempDir d;
  TinyBert m({});
  m.write(d.path() / "0_Transformer");
  test::write_text(d.path() / "0_Transformer" / "sentence_bert_config.json", R"({"max_seq_length": 9})");
  test::write_sentence_modules(d.path(), "max", false);
  test::write_text(d.path() / "modules.json",
                   R"([{"idx":0,"name":"0","path":"0_Transformer","type":"sentence_transformers.models.Transformer"},)"
                   R"({"idx":1,"name":"1","path":"1_Pooling","type":"sentence_transformers.models.Pooling"}])");
  Embedder e(d.path().string());
  EXPECT_EQ(e.max_len(), 9);
  const auto texts = texts_of({{1, 2, 3}, {4}});
  expect_rows(e.embed(texts), reference(m, {{1, 2, 3}, {4}}, "max", false), 2e-5, "0_Transformer");
}

// Without a max_seq_length, sentence-transformers cuts at the tokenizer's
// model_max_length (newer versions save the length only there); the ~1e30
// transformers writes for "no limit" leaves the positions' limit.
TEST(EmbedderControls, TokenizerModelMaxLengthBoundsTheText) {
  test::TempDir d;
  TinyBert m({});
  m.write(d.path());
  test::write_sentence_modules(d.path(), "mean", false);
  test::write_text(d.path() / "tokenizer_config.json", R"({"model_max_length": 7, "do_lower_case": true})");
  {
    Embedder e(d.path().string());
    EXPECT_EQ(e.max_len(), 7);
    const std::vector<std::vector<int>> words = {{1, 2, 3, 4, 5, 6, 7, 8, 9}};
    // [CLS] + 5 words + [SEP]: what sentence-transformers keeps of 9 words.
    expect_rows(e.embed(texts_of(words)), reference(m, {{1, 2, 3, 4, 5}}, "mean", false), 2e-5, "cut at 7");
  }
  test::write_text(d.path() / "tokenizer_config.json", R"({"model_max_length": 1000000000000000019884624838656})");
  EXPECT_EQ(Embedder(d.path().string()).max_len(), 40);
  test::write_text(d.path() / "tokenizer_config.json", R"({"model_max_length": 7})");
  test::write_text(d.path() / "sentence_bert_config.json", R"({"max_seq_length": 9})");
  EXPECT_EQ(Embedder(d.path().string()).max_len(), 9);
}

// sentence-transformers before 6 stripped every text; 6 tokenizes it as it
// is. With byte-level BPE a leading space makes "Ġ" + word, another token.
TEST(EmbedderControls, StrippingFollowsTheVersionThatSavedTheModel) {
  test::TempDir d;
  test::TinyBertSpec spec;
  spec.family = "roberta";
  TinyBert m(spec);
  m.write(d.path());
  test::write_sentence_modules(d.path(), "mean", false);
  const std::string w = TinyBert::word(3);
  auto mean_of = [&](const std::vector<int32_t>& ids) {
    return std::vector<std::vector<double>>{m.pool(m.hidden(ids, std::vector<int32_t>(ids.size(), 0)), "mean")};
  };
  for (const char* saved : {"", "2.2.2", "5.1.0"}) {
    test::write_text(d.path() / "config_sentence_transformers.json",
                     *saved ? std::string(R"({"__version__": {"sentence_transformers": ")") + saved + "\"}}" : "{}");
    Embedder e(d.path().string());
    expect_rows(e.embed({" " + w + " "}), mean_of({m.cls(), m.id(3), m.sep()}), 2e-5,
                std::string("stripped, saved by ") + saved);
  }
  test::write_text(d.path() / "config_sentence_transformers.json", R"({"__version__": {"sentence_transformers": "6.3.0"}})");
  Embedder e(d.path().string());
  expect_rows(e.embed({" " + w}), mean_of({m.cls(), m.id(3, true), m.sep()}), 2e-5, "as given, saved by 6.3.0");
}

// Embeddings stay on the device only on a GPU: a CPU embedder says so
// (tests/gpu/embedder_device_test.cc runs the device path).
TEST(EmbedderControls, DeviceEmbeddingsNeedAGpu) {
  test::TempDir d;
  TinyBert m({});
  m.write(d.path());
  EmbedderOptions o;
  o.device = Device::Cpu;
  Embedder e(d.path().string(), o);
  std::string msg = test::error_of([&] { e.embed_on_device({"a"}); });
  EXPECT_NE(msg.find("only for a CUDA embedder"), std::string::npos) << msg;
  EXPECT_NE(msg.find("runs on the CPU"), std::string::npos) << msg;
}

TEST(EmbedderControls, TokenizerAndInfoThroughTheInstalledInterfaces) {
  test::TempDir d;
  TinyBert m({});
  m.write(d.path());
  Embedder e(d.path().string());
  const EmbeddingTokenizer& t = e.tokenizer();
  EXPECT_EQ(t.kind(), "wordpiece");
  TokenizedText enc = t.encode(TinyBert::text_of({4, 1, 9}), 64);
  EXPECT_EQ(enc.ids, m.ids_of({4, 1, 9}));
  EXPECT_EQ(t.decode(enc.ids), TinyBert::text_of({4, 1, 9}));
  EXPECT_EQ(t.token_text(m.id(3)), TinyBert::word(3));
  EXPECT_EQ(t.token_id(TinyBert::word(3)), m.id(3));
  EXPECT_EQ(t.token_id("absent-token"), -1);
  EXPECT_EQ(t.vocab_size(), size_t(m.vocab()));
  const EmbedderInfo& i = e.info();
  EXPECT_EQ(i.model_type, "bert");
  EXPECT_EQ(i.architecture, "BertModel");
  EXPECT_EQ(i.hidden_size, 20);
  EXPECT_EQ(i.num_layers, 2);
  EXPECT_EQ(i.num_heads, 4);
  EXPECT_EQ(i.intermediate_size, 27);
  EXPECT_EQ(i.max_position_embeddings, 40);
  EXPECT_FALSE(i.cross_encoder);
  EXPECT_EQ(i.pooling, "mean");
}

}  // namespace
}  // namespace rlx
