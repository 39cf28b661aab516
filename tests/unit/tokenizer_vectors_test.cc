// llama.cpp's own tokenizer test vectors: the models/ggml-vocab-*.gguf
// vocabularies with their .inp/.out cases (scripts/setup fetches them into
// models/ggml-vocab/ from llama-cpp-python's source distribution). Each case is
// tokenized as llama.cpp's tests/test-tokenizer-0.cpp does it: no BOS/EOS
// added, special tokens not parsed.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "models/gguf.h"
#include "test_util.h"
#include "tokenizers/bpe.h"
#include "tokenizers/spm.h"
#include "tokenizers/tokenizer_files.h"

namespace rlx {
namespace {

const std::string kDir = std::string(RLX_SOURCE_DIR) + "/models/ggml-vocab/";

std::string slurp(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// As read_tests() in test-tokenizer-0.cpp: inputs separated by
// "\n__ggml_vocab_test__\n", one line of ids per input, and a map, so a text
// given twice counts once.
std::map<std::string, std::vector<int32_t>> read_cases(const std::string& base) {
  const std::string inp = slurp(base + ".inp");
  const std::string sep = "\n__ggml_vocab_test__\n";
  std::vector<std::string> texts;
  for (size_t pos = 0; pos < inp.size();) {
    size_t next = inp.find(sep, pos);
    if (next == std::string::npos) {
      texts.push_back(inp.substr(pos));
      break;
    }
    texts.push_back(inp.substr(pos, next - pos));
    pos = next + sep.size();
  }
  std::ifstream out(base + ".out");
  std::vector<std::vector<int32_t>> ids;
  for (std::string line; std::getline(out, line);) {
    std::istringstream ls(line);
    std::vector<int32_t> v;
    for (int32_t id; ls >> id;) v.push_back(id);
    ids.push_back(v);
  }
  EXPECT_EQ(texts.size(), ids.size()) << base;
  std::map<std::string, std::vector<int32_t>> cases;
  for (size_t i = 0; i < texts.size() && i < ids.size(); ++i) cases[texts[i]] = ids[i];
  return cases;
}

std::unique_ptr<TextTokenizer> load(const GgufFile& f) { return tokenizer_from_gguf(f); }

struct Vocab {
  const char* name;
  const char* refused;  // nullptr: every case must match; else the loader's error names this
};

// The 15 vocabularies that come with cases. Those rlx refuses are named with
// what their error says is missing.
const Vocab kVocabs[] = {
    {"llama-spm", nullptr},    {"llama-bpe", nullptr},    {"phi-3", nullptr},
    {"mpt", nullptr},          {"refact", nullptr},       {"starcoder", nullptr},
    {"gpt-2", nullptr},        {"command-r", nullptr},    {"qwen2", nullptr},
    {"deepseek-llm", nullptr},
    {"deepseek-coder", nullptr},
    {"falcon", nullptr},
    {"qwen35", nullptr},
    {"bert-bge", nullptr},     {"gemma-4", nullptr},
};

class TokenizerVectors : public ::testing::TestWithParam<Vocab> {};

TEST_P(TokenizerVectors, MatchLlamaCpp) {
  const Vocab& v = GetParam();
  const std::string base = kDir + "ggml-vocab-" + v.name + ".gguf";
  for (const std::string& p : {base, base + ".inp", base + ".out"})
    if (!std::filesystem::exists(p)) GTEST_SKIP() << p << " is missing (scripts/setup fetches it)";
  GgufFile f(base);
  if (v.refused) {
    std::string e = test::error_of([&] { load(f); });
    EXPECT_NE(e.find(v.refused), std::string::npos) << e;
    EXPECT_NE(e.find(base), std::string::npos) << e;
    return;
  }
  std::unique_ptr<TextTokenizer> t = load(f);
  auto cases = read_cases(base);
  ASSERT_GE(cases.size(), 25u);
  size_t passed = 0;
  for (const auto& [text, want] : cases) {
    auto got = t->encode(text, {.add_special = false, .parse_special = false});
    EXPECT_EQ(got, want) << "text: '" << text << "'";
    passed += got == want;
  }
  std::cout << v.name << ": " << passed << "/" << cases.size() << " cases match\n";
}

INSTANTIATE_TEST_SUITE_P(, TokenizerVectors, ::testing::ValuesIn(kVocabs), [](const auto& info) {
  std::string n = info.param.name;
  for (char& c : n)
    if (c == '-') c = '_';
  return n;
});

// The chat markers of two real vocabularies: one token only when parsed.
TEST(TokenizerVectorsSpecial, Phi3UserMarkerAndLlama3Header) {
  const std::string phi3 = kDir + "ggml-vocab-phi-3.gguf", llama3 = kDir + "ggml-vocab-llama-bpe.gguf";
  for (const std::string& p : {phi3, llama3})
    if (!std::filesystem::exists(p)) GTEST_SKIP() << p << " is missing (scripts/setup fetches it)";
  GgufFile pf(phi3);
  SpmTokenizer p = SpmTokenizer::from_gguf(pf);
  EXPECT_EQ(p.encode("<|user|>", {.add_special = false, .parse_special = true}), (std::vector<int32_t>{32010}));
  auto plain = p.encode("<|user|>", {.add_special = false, .parse_special = false});
  EXPECT_GE(plain.size(), 4u);  // "▁<", "|", "user", "|>" or finer
  EXPECT_EQ(std::count(plain.begin(), plain.end(), 32010), 0);
  EXPECT_EQ(p.decode(plain), "<|user|>");

  GgufFile lf(llama3);
  BpeTokenizer l = BpeTokenizer::from_gguf(lf);
  const std::string text = "<|start_header_id|>user<|end_header_id|>";
  EXPECT_EQ(l.encode(text, {.add_special = true, .parse_special = true}),
            (std::vector<int32_t>{128000, 128006, 882, 128007}));
  auto as_text = l.encode(text, {.add_special = true, .parse_special = false});
  ASSERT_GE(as_text.size(), 6u);
  EXPECT_EQ(as_text[0], 128000);  // BOS
  for (size_t i = 1; i < as_text.size(); ++i) EXPECT_LT(as_text[i], 128000) << i;
  EXPECT_EQ(l.decode(std::vector<int32_t>(as_text.begin() + 1, as_text.end())), text);
}

// Qwen2's regex takes one digit per piece (\p{N}) where Llama 3's takes up
// to three, the one rule its vectors barely exercise: every digit of a
// number is its own token, after a letter, a space or a sign alike.
TEST(TokenizerVectorsSpecial, Qwen2SplitsEveryDigit) {
  const std::string qwen2 = kDir + "ggml-vocab-qwen2.gguf";
  if (!std::filesystem::exists(qwen2)) GTEST_SKIP() << qwen2 << " is missing (scripts/setup fetches it)";
  GgufFile f(qwen2);
  BpeTokenizer t = BpeTokenizer::from_gguf(f);
  const EncodeOptions plain{.add_special = false, .parse_special = false};
  std::vector<int32_t> digits;
  for (char d : std::string("2026314159")) digits.push_back(t.encode(std::string(1, d), plain).at(0));
  for (const std::string& prefix : {"", "x", "-"}) {
    std::vector<int32_t> got = t.encode(prefix + "2026314159", plain);
    ASSERT_GE(got.size(), digits.size());
    EXPECT_EQ(std::vector<int32_t>(got.end() - long(digits.size()), got.end()), digits) << "after '" << prefix << "'";
    EXPECT_EQ(t.decode(got), prefix + "2026314159");
  }
  std::vector<int32_t> spaced = t.encode("year 2026", plain);
  EXPECT_EQ(spaced.size(), 1u + 1u + 4u) << "'year', ' ' and four digits";
}

}  // namespace
}  // namespace rlx
