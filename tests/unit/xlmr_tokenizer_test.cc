// XLM-RoBERTa's tokenizer against Hugging Face's `tokenizers` on a small
// SentencePiece Unigram tokenizer.json carrying a real precompiled_charsmap
// (tests/data/make_xlmr_tokenizer_cases.py): the normalizer's output and the
// ids, exactly, for texts with accents (composed and decomposed), full-width
// forms, ligatures, stacked combining marks, whitespace runs, control
// characters, emoji and CJK; pairs with the <s> A </s></s> B </s> template;
// truncation; and the files that must be refused, by name.
#include <gtest/gtest.h>

#include <fstream>
#include <nlohmann/json.hpp>

#include "models/embedding_tokenizer.h"
#include "rlx/error.h"
#include "models/test_files.h"  // tests/models
#include "test_util.h"
#include "tokenizers/json_normalizer.h"
#include "tokenizers/precompiled_charsmap.h"
#include "tokenizers/unigram.h"

namespace rlx {
namespace {

const std::string kDir = std::string(RLX_SOURCE_DIR) + "/tests/data/embedding_tokenizers/xlmr_unigram";

nlohmann::json read(const std::string& path) {
  std::ifstream in(path);
  EXPECT_TRUE(in) << path;
  return nlohmann::json::parse(in);
}

TEST(XlmrTokenizer, NormalizerMatchesTokenizers) {
  const nlohmann::json cases = read(kDir + "/cases.json");
  const nlohmann::json tok = read(kDir + "/tokenizer.json");
  JsonNormalizer n = JsonNormalizer::from_json(tok.at("normalizer"), "test: ");
  const auto texts = cases.at("texts").get<std::vector<std::string>>();
  const auto want = cases.at("normalized").get<std::vector<std::string>>();
  ASSERT_EQ(texts.size(), want.size());
  ASSERT_GT(texts.size(), 300u);
  size_t changed = 0;
  for (size_t i = 0; i < texts.size(); ++i) {
    EXPECT_EQ(n.apply(texts[i]), want[i]) << "text " << i << ": '" << texts[i] << "'";
    changed += texts[i] != want[i];
  }
  // The cases must make the map work: most texts change.
  EXPECT_GT(changed, texts.size() / 2);
}

TEST(XlmrTokenizer, IdsMatchTokenizers) {
  const nlohmann::json cases = read(kDir + "/cases.json");
  const auto texts = cases.at("texts").get<std::vector<std::string>>();
  auto tok = load_embedding_tokenizer(kDir, EncoderFamily::Roberta);
  EXPECT_EQ(tok->kind(), "unigram");
  EXPECT_EQ(tok->pad_id(), 1);
  EXPECT_EQ(tok->token_text(3), "<unk>");
  const auto& singles = cases.at("singles");
  ASSERT_EQ(singles.size(), texts.size());
  size_t unknown = 0;
  for (size_t i = 0; i < texts.size(); ++i) {
    TokenizedText t = tok->encode(texts[i], 100000);
    const auto want = singles[i].get<std::vector<int32_t>>();
    EXPECT_EQ(t.ids, want) << "text " << i << ": '" << texts[i] << "'";
    EXPECT_EQ(t.type_ids, std::vector<int32_t>(t.ids.size(), 0));
    EXPECT_FALSE(t.truncated);
    unknown += std::count(want.begin(), want.end(), 3) > 0;
  }
  EXPECT_GT(unknown, 5u) << "the cases must reach the unknown token";
  size_t pairs = 0, cut = 0;
  for (const auto& p : cases.at("pairs")) {
    const size_t a = p[0].get<size_t>(), b = p[1].get<size_t>();
    const int len = p[2].get<int>();
    TokenizedText t = tok->encode_pair(texts[a], texts[b], len ? len : 100000);
    EXPECT_EQ(t.ids, p[3].get<std::vector<int32_t>>()) << "pair " << a << "," << b << " max " << len;
    EXPECT_EQ(t.type_ids, std::vector<int32_t>(t.ids.size(), 0));
    if (len) EXPECT_LE(int(t.ids.size()), len);
    cut += t.truncated;
    ++pairs;
  }
  EXPECT_GT(pairs, 80u);
  EXPECT_GT(cut, 20u) << "the cases must exercise pair truncation";
  for (const auto& c : cases.at("truncated")) {
    const size_t i = c[0].get<size_t>();
    const int len = c[1].get<int>();
    TokenizedText t = tok->encode(texts[i], len);
    EXPECT_EQ(t.ids, c[2].get<std::vector<int32_t>>()) << "text " << i << " max " << len;
    EXPECT_EQ(t.truncated, singles[i].size() > size_t(len)) << "text " << i << " max " << len;
  }
  // decode drops the template's tokens and the prepended space.
  EXPECT_EQ(tok->decode(tok->encode("Paris is the capital of France.", 100).ids), "Paris is the capital of France.");
  std::string msg = test::error_of([&] { tok->encode_pair("a", "b", 3); });
  EXPECT_NE(msg.find("4 special tokens"), std::string::npos) << msg;
}

// transformers 5 saves XLM-R's pre-tokenizer as WhitespaceSplit then
// Metaspace: whitespace runs and the text's ends give no lone U+2581.
TEST(XlmrTokenizer, WhitespaceSplitBeforeMetaspaceMatchesTokenizers) {
  const nlohmann::json cases = read(kDir + "/cases.json");
  nlohmann::json tok = read(kDir + "/tokenizer.json");
  const nlohmann::json metaspace = tok["pre_tokenizer"];
  nlohmann::json split = nlohmann::json::object();
  split["type"] = "WhitespaceSplit";
  tok["pre_tokenizer"] = nlohmann::json::object();
  tok["pre_tokenizer"]["type"] = "Sequence";
  tok["pre_tokenizer"]["pretokenizers"] = nlohmann::json::array({split, metaspace});
  test::TempDir d;
  test::write_text(d.path() / "tokenizer.json", tok.dump());
  auto t = load_embedding_tokenizer(d.path().string(), EncoderFamily::Roberta);
  const auto texts = cases.at("texts").get<std::vector<std::string>>();
  const auto& want = cases.at("singles_whitespace_split");
  ASSERT_EQ(want.size(), texts.size());
  size_t differ = 0;
  for (size_t i = 0; i < texts.size(); ++i) {
    const auto w = want[i].get<std::vector<int32_t>>();
    EXPECT_EQ(t->encode(texts[i], 100000).ids, w) << "text " << i << ": '" << texts[i] << "'";
    differ += w != cases.at("singles")[i].get<std::vector<int32_t>>();
  }
  EXPECT_GT(differ, 20u) << "the cases must tell the two pre-tokenizers apart";
  tok["pre_tokenizer"]["pretokenizers"][0]["type"] = "Whitespace";
  test::write_text(d.path() / "tokenizer.json", tok.dump());
  std::string msg = test::error_of([&] { load_embedding_tokenizer(d.path().string(), EncoderFamily::Roberta); });
  EXPECT_NE(msg.find("WhitespaceSplit then Metaspace"), std::string::npos) << msg;
}

TEST(XlmrTokenizer, PrecompiledMapTakesTheShortestKeyOfAShortCluster) {
  const nlohmann::json tok = read(kDir + "/tokenizer.json");
  const nlohmann::json* pre = nullptr;
  for (const auto& n : tok.at("normalizer").at("normalizers"))
    if (n.at("type") == "Precompiled") pre = &n;
  ASSERT_NE(pre, nullptr);
  const auto map = PrecompiledCharsmap::from_base64(pre->at("precompiled_charsmap").get<std::string>(), "test: ");
  EXPECT_EQ(map.transform("\xef\xac\x81"), std::optional<std::string_view>("fi"));  // U+FB01
  EXPECT_EQ(map.transform("a"), std::nullopt);
  // "a" + U+0308 + U+0301 is one cluster of 5 bytes: "a" + U+0308 is the
  // shortest key and replaces it whole, the acute is lost (as in tokenizers).
  EXPECT_EQ(map.normalize("a\xcc\x88\xcc\x81"), "\xc3\xa4");
  // Full-width a + acute (5 bytes): the full-width rule takes the cluster.
  EXPECT_EQ(map.normalize("\xef\xbd\x81\xcc\x81"), "a");
  // A cluster of 6 bytes or more is looked up code point by code point:
  // full-width a + acute + dot below keeps both marks.
  EXPECT_EQ(map.normalize("\xef\xbd\x81\xcc\x81\xcc\xa3"), "a\xcc\x81\xcc\xa3");
  EXPECT_EQ(map.normalize("x\x01y"), "xy");
  EXPECT_EQ(map.normalize(std::string("n\0l", 3)), std::string("n\0l", 3));
}

TEST(XlmrTokenizer, HostileFilesAreRefusedByName) {
  auto refuse = [](const nlohmann::json& n, const std::string& want) {
    std::string msg = test::error_of([&] { JsonNormalizer::from_json(n, "t: "); });
    EXPECT_NE(msg.find(want), std::string::npos) << msg;
  };
  refuse({{"type", "Lowercase"}}, "normalizer 'Lowercase' is not supported");
  refuse({{"type", "Replace"}, {"pattern", {{"Regex", "[ab]+"}}}, {"content", " "}}, "regex '[ab]+'");
  refuse({{"type", "Replace"}, {"pattern", {{"Regex", " *"}}}, {"content", " "}}, "regex ' *'");
  refuse({{"type", "Precompiled"}, {"precompiled_charsmap", "not base64!"}}, "base64");
  refuse({{"type", "Precompiled"}, {"precompiled_charsmap", "AQ=="}}, "has no trie size");
  // A trie of 1 GB in a map of 8 bytes.
  refuse({{"type", "Precompiled"}, {"precompiled_charsmap", "AAAAQAAAAAA="}}, "does not fit");
  std::string bad_text = std::string("\x04\0\0\0\0\0\0\0\xff", 9);
  EXPECT_NE(test::error_of([&] { PrecompiledCharsmap(bad_text, "t: "); }).find("not UTF-8"), std::string::npos);
  // A trie whose root leads outside it finds nothing, reads nothing outside.
  PrecompiledCharsmap stray(std::string("\x04\0\0\0\xff\xff\xff\xff", 8), "t: ");
  EXPECT_EQ(stray.normalize("abc"), "abc");
  // Replace by a string and by a run; Strip; NFKC.
  JsonNormalizer n = JsonNormalizer::from_json(
      nlohmann::json::parse(R"({"type":"Sequence","normalizers":[{"type":"Strip","strip_left":true,"strip_right":true},)"
                            R"({"type":"NFKC"},{"type":"Replace","pattern":{"String":"``"},"content":"\""},)"
                            R"({"type":"Replace","pattern":{"Regex":"\\s{2,3}"},"content":"_"}]})"),
      "t: ");
  EXPECT_EQ(n.apply(" \xe3\x80\x80``\xef\xbc\xa1  b     c\t "), "\"A_b__c");
}

TEST(XlmrTokenizer, MetaspacePrependFirstOnlyBeforeTheTextsFirstRun) {
  test::TempDir d;
  nlohmann::json tok = read(kDir + "/tokenizer.json");
  tok["pre_tokenizer"]["prepend_scheme"] = "first";
  test::write_text(d.path() / "tokenizer.json", tok.dump());
  UnigramTokenizer first = UnigramTokenizer::from_tokenizer_json((d.path() / "tokenizer.json").string());
  UnigramTokenizer always = UnigramTokenizer::from_tokenizer_json(kDir + "/tokenizer.json");
  const std::string text = "capital</s>capital";
  auto a = always.encode(text, {false, true}), f = first.encode(text, {false, true});
  EXPECT_EQ(std::vector<int32_t>(a.begin(), a.begin() + 2), std::vector<int32_t>(f.begin(), f.begin() + 2));
  EXPECT_NE(a, f) << "the run after </s> must not get the space";
}

}  // namespace
}  // namespace rlx
