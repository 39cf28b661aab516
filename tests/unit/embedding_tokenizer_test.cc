// The embedding tokenizers against Hugging Face's `tokenizers` on tokenizers
// it trained (tests/data/make_embedding_tokenizer_cases.py): WordPiece with
// BertProcessing and RoBERTa's byte-level BPE with RobertaProcessing, single
// texts and pairs cut longest-first, ids and token types exactly.
#include <gtest/gtest.h>

#include <fstream>
#include <nlohmann/json.hpp>

#include "models/embedding_tokenizer.h"
#include "rlx/error.h"

namespace rlx {
namespace {

const std::string kDir = std::string(RLX_SOURCE_DIR) + "/tests/data/embedding_tokenizers";

void check_family(const std::string& name, EncoderFamily family) {
  std::ifstream in(kDir + "/cases.json");
  ASSERT_TRUE(in) << kDir << "/cases.json";
  const nlohmann::json cases = nlohmann::json::parse(in);
  const auto texts = cases.at("texts").get<std::vector<std::string>>();
  auto tok = load_embedding_tokenizer(kDir + "/" + name, family);
  const auto& singles = cases.at(name).at("singles");
  ASSERT_EQ(singles.size(), texts.size());
  for (size_t i = 0; i < texts.size(); ++i) {
    TokenizedText t = tok->encode(texts[i], 100000);
    EXPECT_EQ(t.ids, singles[i].get<std::vector<int32_t>>()) << name << " text " << i << ": '" << texts[i] << "'";
    EXPECT_FALSE(t.truncated);
  }
  size_t cut = 0;
  const auto& pairs = cases.at(name).at("pairs");
  ASSERT_GT(pairs.size(), 50u);
  for (const auto& p : pairs) {
    const size_t q = p[0].get<size_t>(), d = p[1].get<size_t>();
    const int len = p[2].get<int>();
    TokenizedText t = tok->encode_pair(texts[q], texts[d], len);
    EXPECT_EQ(t.ids, p[3].get<std::vector<int32_t>>()) << name << " pair " << q << "," << d << " max " << len;
    // RoBERTa models take no token types (all 0); tokenizers reports the pair's second part as 1.
    if (family == EncoderFamily::Bert)
      EXPECT_EQ(t.type_ids, p[4].get<std::vector<int32_t>>()) << name << " pair " << q << "," << d << " max " << len;
    else
      EXPECT_EQ(t.type_ids, std::vector<int32_t>(t.ids.size(), 0));
    EXPECT_LE(int(t.ids.size()), len);
    cut += t.truncated;
  }
  EXPECT_GT(cut, 10u) << "the cases must exercise truncation";
}

TEST(EmbeddingTokenizer, WordPieceMatchesHuggingFace) { check_family("wordpiece", EncoderFamily::Bert); }
TEST(EmbeddingTokenizer, RobertaBpeMatchesHuggingFace) { check_family("roberta_bpe", EncoderFamily::Roberta); }

TEST(EmbeddingTokenizer, RobertaWithoutTokenizerJsonIsAClearError) {
  std::string msg;
  try {
    load_embedding_tokenizer(kDir, EncoderFamily::Roberta);
  } catch (const Error& e) {
    msg = e.what();
  }
  EXPECT_NE(msg.find("needs tokenizer.json"), std::string::npos) << msg;
}

}  // namespace
}  // namespace rlx
