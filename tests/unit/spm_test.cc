// SentencePiece-style (llama) vocabularies read from GGUF metadata against
// the `sentencepiece` package (tests/data/spm_vocab.gguf and spm_cases.json,
// made by make_spm_cases.py): ids, byte fallback, decoding.
#include "tokenizers/spm.h"

#include <gtest/gtest.h>

#include <fstream>
#include <nlohmann/json.hpp>

#include "models/gguf.h"
#include "test_util.h"

namespace rlx {
namespace {

const std::string kData = std::string(RLX_SOURCE_DIR) + "/tests/data/";

TEST(Spm, IdsAndTextMatchSentencepiece) {
  GgufFile f(kData + "spm_vocab.gguf");
  SpmTokenizer t = SpmTokenizer::from_gguf(f);
  EXPECT_EQ(t.bos_id(), 1);
  EXPECT_EQ(t.eos_id(), 2);
  ASSERT_TRUE(t.add_bos());
  std::ifstream in(kData + "spm_cases.json");
  ASSERT_TRUE(in);
  auto cases = nlohmann::json::parse(in);
  ASSERT_GE(cases.size(), 8u);
  size_t total = 0, bytes = 0;
  for (const auto& c : cases) {
    const std::string text = c.at("text");
    SCOPED_TRACE(text);
    std::vector<int32_t> want = {1};  // sentencepiece was asked without BOS
    for (int32_t id : c.at("ids").get<std::vector<int32_t>>()) {
      want.push_back(id);
      bytes += id >= 3 && id < 3 + 256;  // the byte tokens follow <unk>, <s>, </s>
    }
    EXPECT_EQ(t.encode(text), want);
    EXPECT_EQ(t.decode(want), c.at("decoded").get<std::string>());
    total += want.size();
  }
  EXPECT_GT(total, 100u);
  EXPECT_GT(bytes, 10u);  // byte fallback was exercised
}

TEST(Spm, RejectsOtherVocabularies) {
  GgufFile f(std::string(RLX_SOURCE_DIR) + "/tests/data/gguf_cases.gguf");
  std::string e = test::error_of([&] { SpmTokenizer::from_gguf(f); });
  EXPECT_NE(e.find("gguf_cases.gguf"), std::string::npos) << e;
  EXPECT_NE(e.find("tokenizer.ggml.model"), std::string::npos) << e;
}

}  // namespace
}  // namespace rlx
