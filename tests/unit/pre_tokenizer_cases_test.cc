// Every splitting rule against Hugging Face's `tokenizers` running the
// rule as the model's tokenizer.json writes it, on a corpus of boundaries the
// llama.cpp vectors lack (tests/data/make_pre_tokenizer_cases.py).
#include <gtest/gtest.h>

#include <fstream>
#include <random>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "tokenizers/byte_level.h"
#include "tokenizers/pre_tokenizers.h"

namespace rlx {
namespace {

struct Rule {
  const char* name;
  BpeSplit split;
  bool digits;
};

const Rule kRules[] = {
    {"gpt2", BpeSplit::Gpt2, false},
    {"starcoder", BpeSplit::Gpt2, true},
    {"llama3", BpeSplit::Llama3, false},
    {"qwen2", BpeSplit::Qwen2, false},
    {"qwen35", BpeSplit::Qwen35, false},
    {"deepseek-llm", BpeSplit::DeepseekLlm, false},
    {"deepseek-coder", BpeSplit::DeepseekCoder, false},
    {"falcon", BpeSplit::Falcon, false},
    {"tekken", BpeSplit::Tekken, false},
};

const nlohmann::json& cases() {
  static const nlohmann::json j = [] {
    std::ifstream in(std::string(RLX_SOURCE_DIR) + "/tests/data/pre_tokenizer_cases.json");
    return nlohmann::json::parse(in);
  }();
  return j;
}

class PreTokenizerCases : public ::testing::TestWithParam<Rule> {};

TEST_P(PreTokenizerCases, MatchTokenizersLibrary) {
  const Rule& r = GetParam();
  const auto& list = cases().at(r.name);
  ASSERT_GE(list.size(), 300u);
  size_t passed = 0;
  for (const auto& c : list) {
    const std::string text = c.at(0).get<std::string>();
    const std::vector<std::string> want = c.at(1).get<std::vector<std::string>>();
    std::vector<std::string> got;
    for (auto [b, e] : pre_tokenize(text, r.split, r.digits)) {
      std::string mapped;
      for (size_t i = b; i < e; ++i) mapped += byte_to_unicode(uint8_t(text[i]));
      got.push_back(mapped);
    }
    EXPECT_EQ(got, want) << r.name << " on '" << text << "'";
    passed += got == want;
  }
  EXPECT_EQ(passed, list.size());
}

// On any bytes (invalid UTF-8, lone continuation bytes, NULs) every rule
// cuts the text into non-empty pieces that tile it in order.
TEST_P(PreTokenizerCases, PiecesTileAnyBytes) {
  const Rule& r = GetParam();
  std::mt19937 rng(22);
  const std::string alphabet = std::string("aZ1 \n\r\t.'/\0", 11) + "\xe4\xb8\xad\xcc\x81\xf0\x9f\xa6\x99\xff\x80\xc2\xb2";
  for (int round = 0; round < 500; ++round) {
    std::string text;
    const size_t n = rng() % 40;
    for (size_t i = 0; i < n; ++i) text += alphabet[rng() % alphabet.size()];
    size_t at = 0;
    for (auto [b, e] : pre_tokenize(text, r.split, r.digits)) {
      ASSERT_EQ(b, at) << r.name << ": a gap or overlap in '" << text << "'";
      ASSERT_LT(b, e) << r.name << ": an empty piece in '" << text << "'";
      at = e;
    }
    EXPECT_EQ(at, text.size()) << r.name;
  }
}

INSTANTIATE_TEST_SUITE_P(, PreTokenizerCases, ::testing::ValuesIn(kRules), [](const auto& info) {
  std::string n = info.param.name;
  for (char& c : n)
    if (c == '-') c = '_';
  return n;
});

}  // namespace
}  // namespace rlx
