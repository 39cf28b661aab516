// `rlx tokenize` as a user runs it: vocabulary-only GGUF files of three
// tokenizer kinds and a Hugging Face directory, each output form, the BOS
// and parse-special switches, and its errors.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>

#include "cli_run.h"            // tests/
#include "models/test_files.h"  // tests/models

namespace rlx {
namespace {

const std::string kVocab = std::string(RLX_SOURCE_DIR) + "/models/ggml-vocab/ggml-vocab-";

std::string vocab(const std::string& name) {
  const std::string p = kVocab + name + ".gguf";
  if (!std::filesystem::exists(p)) return "";
  return p;
}

test::CliRun tokenize(const std::string& args) { return test::run_rlx("tokenize " + args); }

TEST(TokenizeCli, Llama3VocabularyIdsPiecesAndBos) {
  const std::string m = vocab("llama-bpe");
  if (m.empty()) GTEST_SKIP() << "scripts/setup fetches the llama.cpp vocabularies";
  auto r = tokenize("--model " + m + " --ids 'Hello world'");
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_EQ(r.out, "[128000, 9906, 1917]\n");  // BOS by llama.cpp's Llama 3 default: the file has no add_bos key
  r = tokenize("--model " + m + " --ids --no-bos 'Hello world'");
  EXPECT_EQ(r.out, "[9906, 1917]\n");
  r = tokenize("-m " + m + " 'Hello world'");
  EXPECT_EQ(r.out, "128000 -> '<|begin_of_text|>'\n9906 -> 'Hello'\n1917 -> ' world'\n");
  test::TempDir d;
  std::ofstream(d.path() / "t.txt") << "a\nb";
  r = tokenize("-m " + m + " --pieces --no-bos --file " + (d.path() / "t.txt").string());
  EXPECT_EQ(r.out, "'a'\n'\\n'\n'b'\n");  // a newline piece printed escaped, one token a line
}

TEST(TokenizeCli, ControlTokenTextIsTextUnlessParseSpecial) {
  const std::string m = vocab("llama-bpe");
  if (m.empty()) GTEST_SKIP() << "scripts/setup fetches the llama.cpp vocabularies";
  auto parsed = tokenize("-m " + m + " --ids --no-bos --parse-special '<|start_header_id|>user'");
  ASSERT_EQ(parsed.status, 0) << parsed.err;
  EXPECT_EQ(parsed.out, "[128006, 882]\n");
  auto plain = tokenize("-m " + m + " --ids --no-bos '<|start_header_id|>user'");
  ASSERT_EQ(plain.status, 0) << plain.err;
  EXPECT_EQ(plain.out.find("128006"), std::string::npos) << plain.out;
  EXPECT_GT(plain.out.size(), parsed.out.size());
}

TEST(TokenizeCli, SentencePieceWordPieceAndGemma4Vocabularies) {
  const std::string spm = vocab("llama-spm"), bert = vocab("bert-bge"), gemma = vocab("gemma-4");
  if (spm.empty() || bert.empty() || gemma.empty()) GTEST_SKIP() << "scripts/setup fetches the llama.cpp vocabularies";
  auto r = tokenize("-m " + spm + " --ids 'Hello world'");
  EXPECT_EQ(r.out, "[1, 15043, 3186]\n") << r.err;
  r = tokenize("-m " + bert + " --pieces 'Hello world'");
  EXPECT_EQ(r.out, "'[CLS]'\n' hello'\n' world'\n'[SEP]'\n") << r.err;
  r = tokenize("-m " + bert + " --ids --no-bos 'Hello world'");
  EXPECT_EQ(r.out, "[7592, 2088]\n") << r.err;
  r = tokenize("-m " + gemma + " --ids 'Hello world'");
  EXPECT_EQ(r.out, "[2, 9259, 1902]\n") << r.err;
}

TEST(TokenizeCli, HuggingFaceDirectory) {
  std::ifstream in(std::string(RLX_SOURCE_DIR) + "/tests/data/bpe_cases.json");
  const auto cases = nlohmann::json::parse(in).at("llama3");
  test::TempDir d;
  std::filesystem::copy_file(std::string(RLX_SOURCE_DIR) + "/tests/data/bpe_llama3_tokenizer.json",
                             d.path() / "tokenizer.json");
  std::ofstream(d.path() / "text.txt") << cases.at(0).at("text").get<std::string>();
  auto r = tokenize("-m " + d.path().string() + " --ids --no-bos --file " + (d.path() / "text.txt").string());
  ASSERT_EQ(r.status, 0) << r.err;
  std::string want = "[";
  for (const auto& id : cases.at(0).at("ids")) want += (want.size() > 1 ? ", " : "") + std::to_string(id.get<int>());
  EXPECT_EQ(r.out, want + "]\n");
}

TEST(TokenizeCli, ErrorsNameWhatIsWrong) {
  auto r = tokenize("--model /no/such/model.gguf hi");
  EXPECT_EQ(r.status, 1);
  EXPECT_NE(r.err.find("/no/such/model.gguf"), std::string::npos) << r.err;
  test::TempDir d;
  r = tokenize("--model " + d.path().string() + " hi");
  EXPECT_EQ(r.status, 1);
  EXPECT_NE(r.err.find("neither tokenizer.json nor vocab.txt"), std::string::npos) << r.err;
  const std::string m = vocab("gpt-2");
  if (m.empty()) return;
  r = tokenize("--model " + m);
  EXPECT_EQ(r.status, 1);
  EXPECT_NE(r.err.find("give the text"), std::string::npos) << r.err;
  r = tokenize("--model " + m + " --ids --pieces hi");
  EXPECT_NE(r.status, 0);
}

}  // namespace
}  // namespace rlx
