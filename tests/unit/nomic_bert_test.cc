// NomicBERT (nomic_bert) embeddings of a random model of odd sizes, written
// with nomic's tensor names, against a plain double-precision forward:
// rotary positions (halves and interleaved), the SwiGLU MLP, with and
// without biases, on padded batches; and the configs it must refuse, by the
// field's name.
#include <gtest/gtest.h>

#include <cmath>

#include "models/embedder.h"
#include "models/tiny_nomic.h"  // tests/models

namespace rlx {
namespace {

using test::TinyBert;
using test::TinyNomic;

const std::vector<std::vector<int>> kWords = {
    {3}, {0, 7, 11, 2, 19, 4, 4}, {22, 1}, {}, {5, 6, 8, 9, 10, 12, 13, 14, 15, 16, 17, 18, 20, 21, 3, 3, 2}};

std::vector<double> pool(const std::vector<std::vector<double>>& x, const std::string& mode) {
  if (mode == "cls") return x[0];
  std::vector<double> out(x[0].size(), 0.0);
  for (const auto& r : x)
    for (size_t d = 0; d < r.size(); ++d) out[d] += r[d] / double(x.size());
  return out;
}

void check(const test::TinyNomicSpec& s, const std::string& what) {
  test::TempDir d;
  TinyNomic m(s);
  m.write(d.path());
  std::vector<std::string> texts;
  for (const auto& w : kWords) texts.push_back(TinyBert::text_of(w));
  for (const std::string mode : {"mean", "cls"}) {
    test::write_sentence_modules(d.path(), mode, mode == "mean");
    EmbedderOptions o;
    o.max_batch = 4;  // two chunks, each padded
    Embedder e(d.path().string(), o);
    EXPECT_EQ(e.info().model_type, "nomic_bert");
    EXPECT_EQ(e.max_len(), 48);
    auto got = e.embed(texts);
    ASSERT_EQ(got.size(), texts.size());
    for (size_t i = 0; i < texts.size(); ++i) {
      ASSERT_EQ(e.tokenizer().encode(texts[i], 64).ids, m.ids_of(kWords[i])) << what << " text " << i;
      auto want = pool(m.hidden(m.ids_of(kWords[i])), mode);
      if (mode == "mean") want = test::l2_normalized(want);
      ASSERT_EQ(got[i].size(), want.size());
      double err = 0, mag = 0;
      for (size_t k = 0; k < want.size(); ++k) {
        ASSERT_TRUE(std::isfinite(got[i][k])) << what << " " << mode << " row " << i;
        err = std::max(err, std::fabs(got[i][k] - want[k]));
        mag = std::max(mag, std::fabs(want[k]));
      }
      EXPECT_GT(mag, 1e-2) << what << " " << mode << " row " << i;
      EXPECT_LT(err, 2e-5 * std::max(1.0, mag)) << what << " " << mode << " row " << i;
    }
  }
}

TEST(NomicBert, EmbeddingsMatchTheReferenceForward) {
  check({}, "halves, no biases");
  test::TinyNomicSpec s;
  s.interleaved = true;
  s.biases = true;
  s.rotary_base = 10000.0;
  s.seed = 23;
  check(s, "interleaved, biases");
}

TEST(NomicBert, PositionsMatter) {
  // The same words in another order give another embedding: the rotary
  // positions reach attention (mean pooling alone is order-blind).
  test::TempDir d;
  TinyNomic m({});
  m.write(d.path());
  test::write_sentence_modules(d.path(), "mean", false);
  Embedder e(d.path().string());
  auto got = e.embed({TinyBert::text_of({1, 2, 3}), TinyBert::text_of({3, 2, 1})});
  double diff = 0;
  for (size_t k = 0; k < got[0].size(); ++k) diff = std::max(diff, double(std::fabs(got[0][k] - got[1][k])));
  EXPECT_GT(diff, 1e-3);
}

TEST(NomicBert, UnsupportedConfigsNameTheField) {
  test::TempDir d;
  auto refused = [&](const std::string& extra, const std::string& want, bool biases = false) {
    test::TinyNomicSpec s;
    s.extra_config = extra;
    s.biases = biases;
    TinyNomic m(s);
    m.write(d.path());
    std::string msg = test::error_of([&] { Embedder e(d.path().string()); });
    EXPECT_NE(msg.find(want), std::string::npos) << extra << ": " << msg;
  };
  // Later members of a JSON object win in nlohmann's parser, as in Python's.
  refused(",\"prenorm\":true", "prenorm");
  refused(",\"rotary_emb_fraction\":0.5", "rotary_emb_fraction 0.5");
  refused(",\"activation_function\":\"gelu\"", "activation_function 'gelu'");
  refused(",\"rotary_emb_scale_base\":512", "rotary_emb_scale_base");
  refused(",\"causal\":true", "causal");
  refused(",\"qkv_proj_bias\":true", "encoder.layers.0.attn.Wqkv.bias");
  refused(",\"n_inner\":30", "mlp.fc11.weight");
  // transformers' own layout of the config is named, not misread.
  {
    test::TinyNomicSpec s;
    TinyNomic m(s);
    m.write(d.path());
    test::write_text(d.path() / "config.json",
                     R"({"model_type":"nomic_bert","architectures":["NomicBertModel"],"hidden_size":24})");
    std::string msg = test::error_of([&] { Embedder e(d.path().string()); });
    EXPECT_NE(msg.find("hidden_size without n_embd"), std::string::npos) << msg;
  }
  // A head rlx does not run is refused, not dropped.
  test::TinyNomicSpec s;
  TinyNomic m(s);
  m.write(d.path());
  test::write_text(d.path() / "config.json",
                   R"({"model_type":"nomic_bert","architectures":["NomicBertForSequenceClassification"]})");
  std::string msg = test::error_of([&] { Embedder e(d.path().string()); });
  EXPECT_NE(msg.find("NomicBertForSequenceClassification"), std::string::npos) << msg;
}

}  // namespace
}  // namespace rlx
