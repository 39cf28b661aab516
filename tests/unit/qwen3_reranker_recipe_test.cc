// A Qwen3-Reranker directory as Qwen publishes it (config.json naming
// Qwen3ForCausalLM, tokenizer files whose chat template is the chat model's,
// weights; no sentence-transformers files) scored by the built-in
// "qwen3-reranker" recipe: tests/data/qwen3_reranker copied without its
// sentence-transformers files must give the scores CrossEncoder.predict gave
// for the saved folder (reference.json), since the fixture's template is the
// model card's. Also: per-call prompts, and what is refused without the
// recipe or with a wrong one.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <nlohmann/json.hpp>

#include "cli_run.h"
#include "models/causal_reranker.h"
#include "models/embedder.h"
#include "models/llama_hf.h"
#include "models/reranker_recipe.h"
#include "models/test_files.h"  // tests/models
#include "test_util.h"

namespace rlx {
namespace {

namespace fs = std::filesystem;
const std::string kData = std::string(RLX_SOURCE_DIR) + "/tests/data/qwen3_reranker";

nlohmann::json reference() {
  std::ifstream in(kData + "/reference.json");
  EXPECT_TRUE(in) << kData << "/reference.json is missing";
  return nlohmann::json::parse(in);
}

std::vector<std::string> documents(const nlohmann::json& ref) {
  std::vector<std::string> d;
  for (const auto& p : ref.at("pairs")) d.push_back(p.at("document"));
  return d;
}

std::string read(const fs::path& f) {
  std::ifstream in(f, std::ios::binary);
  return std::string((std::istreambuf_iterator<char>(in)), {});
}

// The chat model's template, as a published Qwen3 directory carries it:
// a loop over the messages, which the pair renderer refuses, so a test
// passing with it shows the recipe's template is the one used.
const char* const kChatModelTemplate =
    "{%- for message in messages %}{{ '<|im_start|>' + message.role + '\\n' + message.content + '<|im_end|>\\n' }}"
    "{%- endfor %}{%- if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{%- endif %}";

// The fixture as a plain causal LM directory: config.json, model.safetensors,
// tokenizer.json, tokenizer_config.json holding the chat model's template.
std::string plain_copy(const test::TempDir& d) {
  const fs::path dir = d.path() / "Qwen3-Reranker";
  fs::create_directories(dir);
  for (const char* f : {"config.json", "generation_config.json", "model.safetensors", "tokenizer.json"})
    fs::copy_file(fs::path(kData) / f, dir / f);
  nlohmann::json tc = nlohmann::json::parse(read(fs::path(kData) / "tokenizer_config.json"));
  tc["chat_template"] = kChatModelTemplate;
  std::ofstream(dir / "tokenizer_config.json") << tc.dump(2);
  return dir.string();
}

EmbedderOptions recipe_options() {
  EmbedderOptions o;
  o.reranker_recipe = "qwen3-reranker";
  return o;
}

TEST(Qwen3RerankerRecipe, TemplateIsTheFixturesAndTheModelCards) {
  const RerankerRecipe& r = reranker_recipe("qwen3-reranker");
  EXPECT_EQ(r.chat_template, read(fs::path(kData) / "chat_template.jinja"));
  EXPECT_EQ(r.true_token, "yes");
  EXPECT_EQ(r.false_token, "no");
  EXPECT_EQ(r.max_length, 8192);
  const std::string msg = test::error_of([] { reranker_recipe("qwen2-reranker"); });
  EXPECT_NE(msg.find("'qwen2-reranker'"), std::string::npos) << msg;
  EXPECT_NE(msg.find("qwen3-reranker"), std::string::npos) << msg;
}

// The same token ids sentence-transformers fed the model, cut pair included.
TEST(Qwen3RerankerRecipe, TokensAreTheSavedCrossEncoders) {
  test::TempDir d;
  const std::string dir = plain_copy(d);
  const nlohmann::json ref = reference();
  LlamaSafetensors w(dir);
  CausalReranker r(dir, reranker_recipe("qwen3-reranker"), w);
  EXPECT_EQ(r.true_token(), ref.at("yes_id").get<int32_t>());
  EXPECT_EQ(r.false_token(), ref.at("no_id").get<int32_t>());
  EXPECT_EQ(r.chat_template_file(), "");
  const std::vector<int32_t> tail = r.suffix(""), prompt_tail = r.suffix(ref.at("prompt"));
  for (const auto& p : ref.at("pairs")) {
    const std::string doc = p.at("document");
    EXPECT_EQ(r.encode(ref.at("query"), doc, "", 160, tail).ids, p.at("ids").get<std::vector<int32_t>>()) << doc;
    EXPECT_EQ(r.encode(ref.at("query"), doc, ref.at("prompt"), 160, prompt_tail).ids,
              p.at("prompt_ids").get<std::vector<int32_t>>())
        << doc;
  }
}

TEST(Qwen3RerankerRecipe, PlainDirectoryScoresAsCrossEncoderPredict) {
  test::TempDir d;
  const std::string dir = plain_copy(d);
  const nlohmann::json ref = reference();
  const std::vector<std::string> docs = documents(ref);
  Embedder e(dir, recipe_options());
  EXPECT_TRUE(e.is_cross_encoder());
  EXPECT_TRUE(e.info().pair_prompt);
  EXPECT_EQ(e.info().architecture, "Qwen3ForCausalLM");
  EXPECT_EQ(e.info().score_activation, "sigmoid");
  EXPECT_EQ(e.max_len(), 160);  // tokenizer_config.json's model_max_length, under the recipe's 8192
  const std::vector<float> scores = e.score(ref.at("query"), docs);
  const std::vector<float> logits = e.logits(ref.at("query"), docs);
  ASSERT_EQ(scores.size(), docs.size());
  for (size_t i = 0; i < docs.size(); ++i) {
    const auto& p = ref.at("pairs")[i];
    EXPECT_NEAR(scores[i], p.at("score").get<double>(), 1e-4) << docs[i];
    EXPECT_NEAR(logits[i], p.at("logit").get<double>(), 1e-4) << docs[i];
    // The model card's score: softmax over the ("no", "yes") logits, "yes"'s share.
    EXPECT_NEAR(scores[i], 1 / (1 + std::exp(-double(logits[i]))), 1e-6) << docs[i];
  }
  EXPECT_EQ(e.truncated_texts(), 2u);  // the long document, in score() and in logits()
  EXPECT_GT(*std::max_element(logits.begin(), logits.end()) - *std::min_element(logits.begin(), logits.end()), 3.f);
}

// The instruction: EmbedderOptions' prompt, or per call (as a server does).
TEST(Qwen3RerankerRecipe, PromptIsTheInstruction) {
  test::TempDir d;
  const std::string dir = plain_copy(d);
  const nlohmann::json ref = reference();
  const std::vector<std::string> docs = documents(ref);
  EmbedderOptions o = recipe_options();
  o.prompt = ref.at("prompt");
  Embedder fixed(dir, o);
  Embedder e(dir, recipe_options());
  EmbedCall call;
  call.prompt = ref.at("prompt");
  std::vector<uint8_t> cut;
  call.truncated = &cut;
  const std::vector<float> per_call = e.score(ref.at("query"), docs, call);
  const std::vector<float> from_options = fixed.score(ref.at("query"), docs);
  const std::vector<float> without = e.score(ref.at("query"), docs);
  for (size_t i = 0; i < docs.size(); ++i) {
    const auto& p = ref.at("pairs")[i];
    EXPECT_NEAR(per_call[i], p.at("prompt_score").get<double>(), 1e-4) << docs[i];
    EXPECT_NEAR(from_options[i], p.at("prompt_score").get<double>(), 1e-4) << docs[i];
    EXPECT_NEAR(without[i], p.at("score").get<double>(), 1e-4) << docs[i];
    EXPECT_EQ(cut[i], p.at("prompt_ids").size() == 160) << docs[i];
  }
  // The directory names no prompts: a name is refused, listing none.
  call.prompt.reset();
  call.prompt_name = "query";
  const std::string msg = test::error_of([&] { e.score(ref.at("query"), docs, call); });
  EXPECT_NE(msg.find("no prompt named 'query'"), std::string::npos) << msg;
  EXPECT_NE(msg.find(dir), std::string::npos) << msg;
}

// Without the recipe the directory is a causal LM that nothing says how to
// score: an error naming the directory and what is missing, never scores.
TEST(Qwen3RerankerRecipe, WithoutTheRecipeScoringIsRefused) {
  test::TempDir d;
  const std::string dir = plain_copy(d);
  Embedder e(dir);
  EXPECT_FALSE(e.is_cross_encoder());
  const std::string msg = test::error_of([&] { e.score("q", {"a"}); });
  for (const char* part : {dir.c_str(), "Qwen3ForCausalLM", "modules.json", "LogitScore", "qwen3-reranker"})
    EXPECT_NE(msg.find(part), std::string::npos) << part << " in: " << msg;
}

TEST(Qwen3RerankerRecipe, WrongDirectoriesAreRefused) {
  {  // A sentence-transformers folder: its own files say how it scores.
    const std::string msg = test::error_of([] { Embedder e(kData, recipe_options()); });
    EXPECT_NE(msg.find("modules.json"), std::string::npos) << msg;
    EXPECT_NE(msg.find(kData), std::string::npos) << msg;
  }
  auto edited_config = [](const test::TempDir& d, const std::string& from, const std::string& to) {
    const std::string dir = plain_copy(d);
    std::string text = read(fs::path(dir) / "config.json");
    const size_t at = text.find(from);
    EXPECT_NE(at, std::string::npos) << from;
    text.replace(at, from.size(), to);
    std::ofstream(fs::path(dir) / "config.json", std::ios::trunc) << text;
    return dir;
  };
  {  // Another decoder family: not what the recipe was made for.
    test::TempDir d;
    const std::string dir = edited_config(d, "\"model_type\": \"qwen3\"", "\"model_type\": \"qwen2\"");
    const std::string msg = test::error_of([&] { Embedder e(dir, recipe_options()); });
    EXPECT_NE(msg.find("model_type 'qwen2'"), std::string::npos) << msg;
    EXPECT_NE(msg.find("config.json"), std::string::npos) << msg;
  }
  {  // No LM head to give the yes/no logits.
    test::TempDir d;
    const std::string dir = edited_config(d, "\"Qwen3ForCausalLM\"", "\"Qwen3Model\"");
    const std::string msg = test::error_of([&] { Embedder e(dir, recipe_options()); });
    EXPECT_NE(msg.find("'Qwen3Model'"), std::string::npos) << msg;
    EXPECT_NE(msg.find(dir), std::string::npos) << msg;
  }
  {  // A vocabulary without "yes".
    test::TempDir d;
    const std::string dir = plain_copy(d);
    nlohmann::json tj = nlohmann::json::parse(read(fs::path(dir) / "tokenizer.json"));
    auto& vocab = tj.at("model").at("vocab");
    ASSERT_TRUE(vocab.contains("yes"));
    vocab["yes_"] = vocab.at("yes");
    vocab.erase("yes");
    // and the merges that form or read it
    nlohmann::json merges = nlohmann::json::array();
    for (const auto& m : tj.at("model").at("merges"))
      if (m[0].get<std::string>() + m[1].get<std::string>() != "yes" && m[1] != "yes") merges.push_back(m);
    ASSERT_LT(merges.size(), tj.at("model").at("merges").size());
    tj["model"]["merges"] = merges;
    std::ofstream(fs::path(dir) / "tokenizer.json", std::ios::trunc) << tj.dump();
    const std::string msg = test::error_of([&] { Embedder e(dir, recipe_options()); });
    EXPECT_NE(msg.find("no token \"yes\""), std::string::npos) << msg;
    EXPECT_NE(msg.find("tokenizer.json"), std::string::npos) << msg;
  }
}

TEST(Qwen3RerankerRecipe, Cli) {
  test::TempDir d;
  const std::string dir = plain_copy(d);
  const nlohmann::json ref = reference();
  const std::string q = ref.at("query"), doc0 = ref.at("pairs")[0].at("document"),
                    doc6 = ref.at("pairs")[6].at("document");
  const std::string args = "rerank --device cpu --model " + dir + " --query \"" + q + "\" \"" + doc0 + "\" \"" + doc6 + "\"";
  {
    test::CliRun r = test::run_rlx(args);
    EXPECT_NE(r.status, 0) << r.out;
    EXPECT_NE(r.err.find(dir), std::string::npos) << r.err;
    EXPECT_NE(r.err.find("--recipe"), std::string::npos) << r.err;
    EXPECT_EQ(r.out, "");
  }
  for (const bool prompt : {false, true}) {
    const std::string p = ref.at("prompt");
    test::CliRun r = test::run_rlx(args + " --recipe qwen3-reranker" + (prompt ? " --prompt \"" + p + "\"" : ""));
    ASSERT_EQ(r.status, 0) << r.err;
    const nlohmann::json out = nlohmann::json::parse(r.out);
    ASSERT_EQ(out.at("results").size(), 2u) << r.out;
    for (const auto& row : out.at("results")) {
      const size_t i = row.at("index");
      const auto& pair = ref.at("pairs")[i == 0 ? 0 : 6];
      EXPECT_NEAR(row.at("score").get<double>(), pair.at(prompt ? "prompt_score" : "score").get<double>(), 1e-4)
          << r.out;
    }
  }
}

}  // namespace
}  // namespace rlx
