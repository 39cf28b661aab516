// Byte-level BPE against Hugging Face's `tokenizers` (tests/data/bpe_cases.json,
// made by make_bpe_cases.py): the SmolLM2 tokenizer read from the default
// model's GGUF, and small BPEs trained on the spot (GPT-2's and Llama 3's
// pre-tokenizers) read from tokenizer.json.
#include "tokenizers/bpe.h"

#include <gtest/gtest.h>

#include <fstream>
#include <nlohmann/json.hpp>

#include "models/gguf.h"
#include "models/test_files.h"  // tests/models
#include "test_util.h"

namespace rlx {
namespace {

const std::string kData = std::string(RLX_SOURCE_DIR) + "/tests/data/";
const std::string kSmolLM2 =
    std::string(RLX_SOURCE_DIR) + "/models/SmolLM2-135M-Instruct/SmolLM2-135M-Instruct.Q4_1.gguf";

nlohmann::json cases(const std::string& which) {
  std::ifstream in(kData + "bpe_cases.json");
  EXPECT_TRUE(in) << "tests/data/bpe_cases.json missing";
  return nlohmann::json::parse(in).at(which);
}

void expect_matches(const BpeTokenizer& t, const nlohmann::json& cs) {
  ASSERT_GE(cs.size(), 15u);
  size_t total = 0;
  for (const auto& c : cs) {
    const std::string text = c.at("text");
    SCOPED_TRACE(text.substr(0, 60));
    auto want = c.at("ids").get<std::vector<int32_t>>();
    EXPECT_EQ(t.encode(text), want);
    EXPECT_EQ(t.decode(want), c.at("decoded").get<std::string>());
    total += want.size();
  }
  EXPECT_GT(total, 200u);  // the corpus is not trivially short
}

TEST(Bpe, SmolLM2FromGgufMatchesHuggingFace) {
  GgufFile f(kSmolLM2);
  BpeTokenizer t = BpeTokenizer::from_gguf(f);
  EXPECT_EQ(t.vocab_size(), 49152u);
  EXPECT_EQ(t.bos_id(), 1);
  EXPECT_EQ(t.eos_id(), 2);
  EXPECT_TRUE(t.options().split_digits);
  EXPECT_FALSE(t.options().add_bos);
  EXPECT_TRUE(t.is_special(t.id_of("<|im_start|>")));
  expect_matches(t, cases("smollm2"));
}

TEST(Bpe, TrainedTokenizerJsonMatchesHuggingFace) {
  BpeTokenizer t = BpeTokenizer::from_tokenizer_json(kData + "bpe_trained_tokenizer.json");
  EXPECT_FALSE(t.options().split_digits);
  EXPECT_EQ(t.id_of("<|sep|>"), 0);
  expect_matches(t, cases("trained"));
}

TEST(Bpe, Llama3PreTokenizerMatchesHuggingFace) {
  BpeTokenizer t = BpeTokenizer::from_tokenizer_json(kData + "bpe_llama3_tokenizer.json");
  EXPECT_EQ(t.options().split, BpeSplit::Llama3);
  EXPECT_TRUE(t.options().ignore_merges);
  expect_matches(t, cases("llama3"));
}

TEST(Bpe, BytesThatAreNotUtf8RoundTrip) {
  BpeTokenizer t = BpeTokenizer::from_tokenizer_json(kData + "bpe_trained_tokenizer.json");
  const std::string s = std::string("ok \xff\xfe bad \xc3 cut \xe2\x82") + '\0' + "end";
  auto ids = t.encode(s);
  EXPECT_GT(ids.size(), 5u);
  EXPECT_EQ(t.decode(ids), s);
}

TEST(Bpe, MalformedTokenizerJsonNamesTheFile) {
  test::TempDir d;
  auto p = d.path() / "tokenizer.json";
  test::write_text(p, R"({"model": {"type": "WordPiece"}, "normalizer": null})");
  std::string e = test::error_of([&] { BpeTokenizer::from_tokenizer_json(p.string()); });
  EXPECT_NE(e.find("tokenizer.json"), std::string::npos) << e;
  EXPECT_NE(e.find("BPE"), std::string::npos) << e;
  test::write_text(p, R"({"model": {"type": "BPE", "vocab": {}, "merges": []}, "normalizer": null,
                         "pre_tokenizer": {"type": "Metaspace"}})");
  e = test::error_of([&] { BpeTokenizer::from_tokenizer_json(p.string()); });
  EXPECT_NE(e.find("Metaspace"), std::string::npos) << e;
  test::write_text(p, "{not json");
  e = test::error_of([&] { BpeTokenizer::from_tokenizer_json(p.string()); });
  EXPECT_NE(e.find("tokenizer.json"), std::string::npos) << e;
}

}  // namespace
}  // namespace rlx
