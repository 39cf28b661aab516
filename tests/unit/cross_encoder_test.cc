// BertForSequenceClassification as a cross-encoder: scores of (query,
// document) pairs against a plain double-precision forward of a random model
// of odd sizes, pair truncation, the activation config.json asks for, and
// the heads that must be refused rather than dropped.
#include <gtest/gtest.h>

#include <cmath>

#include "models/embedder.h"
#include "models/tiny_bert.h"  // tests/models

namespace rlx {
namespace {

using test::TinyBert;

const std::vector<int> kQuery = {2, 9, 14};
const std::vector<std::vector<int>> kDocs = {{1, 2, 3, 4, 5, 6, 7, 8}, {14}, {}, {20, 9, 2, 0, 11}, {3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3}};

std::vector<std::string> doc_texts() {
  std::vector<std::string> t;
  for (const auto& d : kDocs) t.push_back(TinyBert::text_of(d));
  return t;
}

class CrossEncoderFamily : public ::testing::TestWithParam<std::string> {};

TEST_P(CrossEncoderFamily, ScoresEachPairAsTheReferenceForward) {
  test::TempDir d;
  test::TinyBertSpec s;
  s.classifier = true;
  s.family = GetParam();
  TinyBert m(s);
  m.write(d.path());
  EmbedderOptions o;
  o.max_batch = 2;  // three chunks
  Embedder e(d.path().string(), o);
  ASSERT_TRUE(e.is_cross_encoder());
  EXPECT_EQ(e.info().score_activation, "sigmoid");
  std::vector<float> logits = e.logits(TinyBert::text_of(kQuery), doc_texts());
  std::vector<float> scores = e.score(TinyBert::text_of(kQuery), doc_texts());
  ASSERT_EQ(logits.size(), kDocs.size());
  ASSERT_EQ(scores.size(), kDocs.size());
  double spread = 0;
  for (size_t i = 0; i < kDocs.size(); ++i) {
    auto [ids, types] = m.pair_ids(kQuery, kDocs[i]);
    double want = m.logit(ids, types);
    EXPECT_NEAR(logits[i], want, 2e-5) << "pair " << i;
    EXPECT_NEAR(scores[i], 1.0 / (1.0 + std::exp(-want)), 1e-5) << "pair " << i;
    spread = std::max(spread, std::fabs(double(logits[i]) - logits[0]));
  }
  EXPECT_GT(spread, 1e-3) << "every pair scored the same: the documents were not read";
  std::string msg = test::error_of([&] { e.embed({"ba"}); });
  EXPECT_NE(msg.find("cross-encoder"), std::string::npos) << msg;
  EXPECT_NE(msg.find("ForSequenceClassification"), std::string::npos) << msg;
}

INSTANTIATE_TEST_SUITE_P(Families, CrossEncoderFamily, ::testing::Values("bert", "roberta", "distilbert", "xlm-roberta"),
                         [](const auto& info) { return info.param == "xlm-roberta" ? "xlm_roberta" : info.param; });

// Pairs of different queries (sentence-transformers' predict input) run
// batched together and score each as the reference forward of its own pair.
TEST(CrossEncoder, PairsOfDifferentQueriesScoreEachPair) {
  test::TempDir d;
  test::TinyBertSpec s;
  s.classifier = true;
  TinyBert m(s);
  m.write(d.path());
  EmbedderOptions o;
  o.max_batch = 2;  // batches that mix queries
  Embedder e(d.path().string(), o);
  const std::vector<std::vector<int>> queries = {kQuery, {5, 6}, {}};
  std::vector<std::pair<std::string, std::string>> pairs;
  std::vector<double> want;
  for (size_t i = 0; i < kDocs.size(); ++i) {
    const std::vector<int>& q = queries[i % queries.size()];
    pairs.emplace_back(TinyBert::text_of(q), TinyBert::text_of(kDocs[i]));
    auto [ids, types] = m.pair_ids(q, kDocs[i]);
    want.push_back(m.logit(ids, types));
  }
  const std::vector<float> logits = e.logits_pairs(pairs), scores = e.score_pairs(pairs);
  ASSERT_EQ(logits.size(), pairs.size());
  ASSERT_EQ(scores.size(), pairs.size());
  for (size_t i = 0; i < pairs.size(); ++i) {
    EXPECT_NEAR(logits[i], want[i], 2e-5) << "pair " << i;
    EXPECT_NEAR(scores[i], 1.0 / (1.0 + std::exp(-want[i])), 1e-5) << "pair " << i;
  }
  EXPECT_TRUE(e.score_pairs({}).empty());
  EmbedCall call;
  call.prompt = "Judge: ";
  const std::string msg = test::error_of([&] { e.score_pairs(pairs, call); });
  EXPECT_NE(msg.find("prompt"), std::string::npos) << msg;
}

// A prompt is a causal-LM cross-encoder's system message; a
// sequence-classification one refuses it rather than dropping it.
TEST(CrossEncoder, APromptIsRefusedByName) {
  test::TempDir d;
  test::TinyBertSpec s;
  s.classifier = true;
  TinyBert(s).write(d.path());
  for (const bool named : {true, false}) {
    EmbedderOptions o;
    if (named) o.prompt_name = "query";
    else o.prompt = "Judge: ";
    const std::string msg = test::error_of([&] { Embedder e(d.path().string(), o); });
    EXPECT_NE(msg.find("prompt"), std::string::npos) << msg;
    EXPECT_NE(msg.find(d.path().string()), std::string::npos) << msg;
  }
  Embedder e(d.path().string());  // without one it loads
  EXPECT_TRUE(e.is_cross_encoder());
  EXPECT_FALSE(e.info().pair_prompt);
  // Per call too: the scores are not given without it.
  for (const bool named : {true, false}) {
    EmbedCall call;
    if (named) call.prompt_name = "query";
    else call.prompt = "Judge: ";
    const std::string msg = test::error_of([&] { e.score("q", {"a", "b"}, call); });
    EXPECT_NE(msg.find("prompt"), std::string::npos) << msg;
    EXPECT_NE(msg.find(d.path().string()), std::string::npos) << msg;
  }
  const std::vector<std::string> docs{"a", "the passage is longer than the first"};
  const std::vector<float> plain = e.score("q", docs), with_call = e.score("q", docs, EmbedCall{});
  ASSERT_EQ(plain.size(), 2u);
  EXPECT_EQ(plain, with_call);
  EXPECT_NE(plain[0], plain[1]);
}

TEST(CrossEncoder, LongPairsAreCutLongestFirst) {
  test::TempDir d;
  test::TinyBertSpec s;
  s.classifier = true;
  TinyBert m(s);
  m.write(d.path());
  EmbedderOptions o;
  o.max_len = 12;  // room for 9 tokens of text
  Embedder e(d.path().string(), o);
  const std::vector<int> q = {1, 2, 3, 4, 5, 6, 7};
  const std::vector<int> shortq = {8, 9};
  const std::vector<int> doc = {10, 11, 12, 13, 14, 15, 16, 17, 18, 19, 20};
  // Both long: the first side gets 4 (9 / 2), the second 5. Short query:
  // it stays whole, the document gets the rest.
  auto both = m.pair_ids({1, 2, 3, 4}, {10, 11, 12, 13, 14});
  auto one = m.pair_ids(shortq, {10, 11, 12, 13, 14, 15, 16});
  EXPECT_EQ(e.tokenizer().encode_pair(TinyBert::text_of(q), TinyBert::text_of(doc), 12).ids, both.first);
  EXPECT_EQ(e.tokenizer().encode_pair(TinyBert::text_of(q), TinyBert::text_of(doc), 12).type_ids, both.second);
  auto got = e.logits(TinyBert::text_of(q), {TinyBert::text_of(doc)});
  EXPECT_NEAR(got[0], m.logit(both.first, both.second), 2e-5);
  got = e.logits(TinyBert::text_of(shortq), {TinyBert::text_of(doc)});
  EXPECT_NEAR(got[0], m.logit(one.first, one.second), 2e-5);
  EXPECT_EQ(e.truncated_texts(), 2u);
  o.truncate = false;
  Embedder strict(d.path().string(), o);
  std::string msg = test::error_of([&] { strict.score(TinyBert::text_of(q), {"ba", TinyBert::text_of(doc)}); });
  EXPECT_NE(msg.find("document 1"), std::string::npos) << msg;
}

TEST(CrossEncoder, RobertaPairsAreCutLongestFirstAroundFourSpecialTokens) {
  for (const std::string family : {"roberta", "xlm-roberta"}) {
  SCOPED_TRACE(family);
  test::TempDir d;
  test::TinyBertSpec s;
  s.classifier = true;
  s.family = family;
  TinyBert m(s);
  m.write(d.path());
  EmbedderOptions o;
  o.max_len = 13;  // room for 9 tokens of text
  Embedder e(d.path().string(), o);
  const std::vector<int> q = {1, 2, 3, 4, 5, 6, 7}, doc = {10, 11, 12, 13, 14, 15, 16, 17, 18, 19, 20};
  auto want = m.pair_ids({1, 2, 3, 4}, {10, 11, 12, 13, 14});
  EXPECT_EQ(e.tokenizer().encode_pair(TinyBert::text_of(q), TinyBert::text_of(doc), 13).ids, want.first);
  EXPECT_NEAR(e.logits(TinyBert::text_of(q), {TinyBert::text_of(doc)})[0], m.logit(want.first, want.second), 2e-5);
  }
}

TEST(CrossEncoder, ActivationFromConfigAndRefusedHeads) {
  test::TempDir d;
  test::TinyBertSpec s;
  s.classifier = true;
  s.extra_config = R"(,"sentence_transformers":{"activation_fn":"torch.nn.modules.linear.Identity"})";
  TinyBert m(s);
  m.write(d.path());
  {
    Embedder e(d.path().string());
    EXPECT_EQ(e.info().score_activation, "identity");
    auto [ids, types] = m.pair_ids(kQuery, kDocs[0]);
    EXPECT_NEAR(e.score(TinyBert::text_of(kQuery), {TinyBert::text_of(kDocs[0])})[0], m.logit(ids, types), 2e-5);
  }
  {
    // sentence-transformers 4+ keeps the activation in
    // config_sentence_transformers.json, which wins over config.json's.
    test::write_text(d.path() / "config_sentence_transformers.json",
                     R"({"activation_fn":"torch.nn.modules.activation.Sigmoid","model_type":"CrossEncoder"})");
    Embedder e(d.path().string());
    EXPECT_EQ(e.info().score_activation, "sigmoid");
    auto [ids, types] = m.pair_ids(kQuery, kDocs[0]);
    EXPECT_NEAR(e.score(TinyBert::text_of(kQuery), {TinyBert::text_of(kDocs[0])})[0],
                1 / (1 + std::exp(-m.logit(ids, types))), 2e-5);
    test::write_text(d.path() / "config_sentence_transformers.json", R"({"activation_fn":"torch.nn.Tanh"})");
    const std::string msg = test::error_of([&] { Embedder bad(d.path().string()); });
    EXPECT_NE(msg.find("config_sentence_transformers.json"), std::string::npos) << msg;
    EXPECT_NE(msg.find("Tanh"), std::string::npos) << msg;
    std::filesystem::remove(d.path() / "config_sentence_transformers.json");
  }
  test::write_text(d.path() / "config.json",
                   R"({"model_type":"bert","architectures":["BertForTokenClassification"]})");
  std::string msg = test::error_of([&] { Embedder e(d.path().string()); });
  EXPECT_NE(msg.find("BertForTokenClassification"), std::string::npos) << msg;
  EXPECT_NE(msg.find("config.json"), std::string::npos) << msg;
  test::write_text(d.path() / "config.json",
                   R"({"model_type":"bert","architectures":["BertForSequenceClassification"],)"
                   R"("sentence_transformers":{"activation_fn":"torch.nn.modules.activation.Softmax"}})");
  msg = test::error_of([&] { Embedder e(d.path().string()); });
  EXPECT_NE(msg.find("Softmax"), std::string::npos) << msg;
  // A head whose weights do not fit the config is named, not dropped.
  test::TinyBertSpec headless;
  headless.classifier = true;
  TinyBert hm(headless);
  hm.write(d.path());
  test::write_text(d.path() / "config.json",
                   R"({"model_type":"bert","architectures":["BertForSequenceClassification"],"vocab_size":28,)"
                   R"("hidden_size":20,"num_hidden_layers":2,"num_attention_heads":4,"intermediate_size":27,)"
                   R"("max_position_embeddings":40,"id2label":{"0":"a","1":"b"}})");
  msg = test::error_of([&] { Embedder e(d.path().string()); });
  EXPECT_NE(msg.find("classifier.weight"), std::string::npos) << msg;
  EXPECT_NE(msg.find("[1, 20]"), std::string::npos) << msg;
  // An embedding model cannot score.
  test::TinyBertSpec plain;
  TinyBert em(plain);
  em.write(d.path());
  Embedder e(d.path().string());
  msg = test::error_of([&] { e.score("ba", {"be"}); });
  EXPECT_NE(msg.find("not a cross-encoder"), std::string::npos) << msg;
}

}  // namespace
}  // namespace rlx
