// WordPiece against ids that Hugging Face's `tokenizers` produced for the
// default model (tests/data/make_tokenizer_cases.py wrote the JSON once).
#include "tokenizers/wordpiece.h"

#include <gtest/gtest.h>

#include <fstream>
#include <nlohmann/json.hpp>

#include "models/test_files.h"  // tests/models

namespace rlx {
namespace {

struct Case {
  std::string label, text;
  int max_length;
  std::vector<int32_t> ids;
};

std::vector<Case> load_cases() {
  std::ifstream in(std::string(RLX_SOURCE_DIR) + "/tests/data/tokenizer_cases.json");
  EXPECT_TRUE(in) << "tests/data/tokenizer_cases.json is missing";
  if (!in) return {};
  auto j = nlohmann::json::parse(in);
  std::vector<Case> out;
  for (const auto& c : j.at("cases"))
    out.push_back({c.at("label"), c.at("text"), c.at("max_length"), c.at("ids")});
  return out;
}

std::string show(const std::vector<int32_t>& v) {
  std::string s;
  for (int32_t x : v) s += std::to_string(x) + " ";
  return s;
}

void expect_matches_reference(const WordPiece& wp) {
  auto cases = load_cases();
  ASSERT_GE(cases.size(), 25u);
  size_t long_inputs = 0;
  for (const auto& c : cases) {
    Encoding e = wp.encode(c.text, c.max_length);
    EXPECT_EQ(e.ids, c.ids) << "case '" << c.label << "'\n  rlx: " << show(e.ids)
                            << "\n  hf:  " << show(c.ids);
    EXPECT_EQ(e.attention_mask, std::vector<int32_t>(c.ids.size(), 1)) << c.label;
    EXPECT_EQ(e.type_ids, std::vector<int32_t>(c.ids.size(), 0)) << c.label;
    if (int(c.ids.size()) == c.max_length) ++long_inputs;
  }
  EXPECT_GE(long_inputs, 3u) << "the corpus must exercise truncation";
}

TEST(WordPiece, MatchesHuggingFaceFromTokenizerJson) {
  ASSERT_TRUE(test::minilm_present());
  WordPiece wp = WordPiece::from_dir(test::minilm_dir());
  EXPECT_EQ(wp.vocab_size(), 30522u);
  expect_matches_reference(wp);
}

TEST(WordPiece, MatchesHuggingFaceFromVocabTxt) {
  ASSERT_TRUE(test::minilm_present());
  WordPiece wp = WordPiece::from_vocab_txt(test::minilm_dir() + "/vocab.txt",
                                           test::minilm_dir() + "/tokenizer_config.json");
  EXPECT_TRUE(wp.options().lowercase);
  EXPECT_TRUE(wp.options().strip_accents);
  expect_matches_reference(wp);
}

TEST(WordPiece, BatchPadsToLongestWithMask) {
  ASSERT_TRUE(test::minilm_present());
  WordPiece wp = WordPiece::from_dir(test::minilm_dir());
  auto batch = wp.encode_batch({"a", "hello there world", ""}, 512);
  ASSERT_EQ(batch.size(), 3u);
  size_t want = wp.encode("hello there world").size();
  EXPECT_EQ(want, 5u);
  for (const auto& e : batch) {
    EXPECT_EQ(e.size(), want);
    EXPECT_EQ(e.attention_mask.size(), want);
  }
  EXPECT_EQ(batch[0].tokens(), 3u);
  EXPECT_EQ(batch[2].tokens(), 2u);
  EXPECT_EQ(batch[0].ids[3], wp.id_of("[PAD]"));
  EXPECT_EQ(batch[0].attention_mask, (std::vector<int32_t>{1, 1, 1, 0, 0}));
  auto fixed = wp.encode_batch({"a"}, 512, 9);
  EXPECT_EQ(fixed[0].size(), 9u);
  EXPECT_EQ(fixed[0].tokens(), 3u);
}

TEST(WordPiece, MaxLenBelowTwoIsAnError) {
  ASSERT_TRUE(test::minilm_present());
  WordPiece wp = WordPiece::from_dir(test::minilm_dir());
  EXPECT_THROW(wp.encode("hi", 1), Error);
}

}  // namespace
}  // namespace rlx
