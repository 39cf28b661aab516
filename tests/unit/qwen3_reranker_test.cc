// Causal-LM cross-encoders (Qwen3-Reranker's layout) on the CPU, with the
// random Qwen3ForCausalLM of odd sizes tests/data/make_qwen3_reranker_case.py
// saved through sentence-transformers 6.3's CrossEncoder
// (tests/data/qwen3_reranker: GQA 3 query heads on 1 KV head, head_dim 12,
// an untied LM head, Qwen3-Reranker's chat template, LogitScore on the ids
// of "yes" and "no", max_seq_length 160): the token ids of each pair, its
// score and logit against CrossEncoder.predict, with a prompt, cut at 160
// and at 120 tokens, in batches of 1 and more; the chat template renderer
// against jinja2 as transformers sets it up; tied embeddings; NaN
// weights; the CLI; what is refused.
#include <gtest/gtest.h>

#include <sstream>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <nlohmann/json.hpp>

#include "cli_run.h"
#include "models/causal_reranker.h"
#include "models/embedder.h"
#include "models/hf_config.h"
#include "models/llama_hf.h"
#include "models/pair_template.h"
#include "models/test_files.h"  // tests/models
#include "rlx/error.h"

namespace rlx {
namespace {

const std::string kData = std::string(RLX_SOURCE_DIR) + "/tests/data/qwen3_reranker";

nlohmann::json reference() {
  std::ifstream in(kData + "/reference.json");
  EXPECT_TRUE(in) << kData << "/reference.json is missing";
  return nlohmann::json::parse(in);
}

struct Pair {
  std::string document;
  std::vector<int32_t> ids, prompt_ids, short_ids;
  double logit, score, prompt_logit, prompt_score, short_logit, tied_logit;
};

std::vector<Pair> pairs() {
  std::vector<Pair> out;
  const nlohmann::json ref = reference();
  for (const auto& p : ref.at("pairs"))
    out.push_back({p.at("document"), p.at("ids"), p.at("prompt_ids"), p.at("short_ids"), p.at("logit"),
                   p.at("score"), p.at("prompt_logit"), p.at("prompt_score"), p.at("short_logit"), p.at("tied_logit")});
  return out;
}

std::vector<std::string> documents() {
  std::vector<std::string> d;
  for (const Pair& p : pairs()) d.push_back(p.document);
  return d;
}

std::string query() { return reference().at("query"); }
std::string prompt() { return reference().at("prompt"); }

TEST(Qwen3Reranker, FixtureCoversEmptyAndCutPairs) {
  const std::vector<Pair> ps = pairs();
  ASSERT_GE(ps.size(), 6u);
  size_t empty = 0, cut = 0, short_cut = 0;
  for (const Pair& p : ps) {
    empty += p.document.empty();
    cut += p.ids.size() == 160;
    short_cut += p.short_ids.size() == 120;
  }
  EXPECT_EQ(empty, 1u);
  EXPECT_EQ(cut, 1u);
  EXPECT_GE(short_cut, 4u);
}

TEST(Qwen3Reranker, LoadsAsACrossEncoder) {
  Embedder e(kData);
  EXPECT_TRUE(e.is_cross_encoder());
  EXPECT_EQ(e.info().architecture, "Qwen3ForCausalLM");
  EXPECT_EQ(e.info().model_type, "qwen3");
  EXPECT_TRUE(e.info().cross_encoder);
  EXPECT_EQ(e.info().num_labels, 1);
  EXPECT_EQ(e.info().score_activation, "sigmoid");
  EXPECT_EQ(e.info().hidden_size, 40);
  EXPECT_EQ(e.max_len(), 160);  // tokenizer_config.json's model_max_length
  EXPECT_THROW(e.embed({"hello"}), Error);
}

// What the model reads: the chat template's text, tokenized without special
// tokens added; the cut row keeps the template's tail.
TEST(Qwen3Reranker, TokensAreSentenceTransformers) {
  const SentenceConfig s = load_sentence_config(kData);
  ASSERT_FALSE(s.logit_score_dir.empty());
  EXPECT_EQ(s.transformer_task, "text-generation");
  EXPECT_TRUE(s.message_modality);
  EXPECT_EQ(s.message_format, "flat");
  LlamaSafetensors w(kData);
  CausalReranker r(s, w);
  const nlohmann::json ref = reference();
  EXPECT_EQ(r.true_token(), ref.at("yes_id").get<int32_t>());
  EXPECT_EQ(r.false_token(), ref.at("no_id").get<int32_t>());
  EXPECT_EQ(std::filesystem::path(r.chat_template_file()).filename(), "chat_template.jinja");
  const std::vector<int32_t> tail = r.suffix(""), prompt_tail = r.suffix(prompt());
  ASSERT_GE(tail.size(), 6u);  // <|im_end|> \n <|im_start|> assistant ... </think> \n \n
  EXPECT_EQ(tail, prompt_tail);
  for (const Pair& p : pairs()) {
    const TokenizedText t = r.encode(query(), p.document, "", 160, tail);
    EXPECT_EQ(t.ids, p.ids) << p.document;
    EXPECT_EQ(t.truncated, p.ids.size() == 160) << p.document;
    EXPECT_EQ(r.encode(query(), p.document, prompt(), 160, prompt_tail).ids, p.prompt_ids) << p.document;
    const TokenizedText s120 = r.encode(query(), p.document, "", 120, tail);
    EXPECT_EQ(s120.ids, p.short_ids) << p.document;
    ASSERT_GE(s120.ids.size(), tail.size());
    EXPECT_TRUE(std::equal(tail.begin(), tail.end(), s120.ids.end() - long(tail.size()))) << p.document;
  }
}

TEST(Qwen3Reranker, ScoresAsCrossEncoderPredict) {
  const std::vector<Pair> ps = pairs();
  Embedder e(kData);
  const std::vector<float> scores = e.score(query(), documents());
  const std::vector<float> logits = e.logits(query(), documents());
  ASSERT_EQ(scores.size(), ps.size());
  ASSERT_EQ(logits.size(), ps.size());
  double worst = 0;
  for (size_t i = 0; i < ps.size(); ++i) {
    EXPECT_NEAR(scores[i], ps[i].score, 1e-4) << ps[i].document;
    EXPECT_NEAR(logits[i], ps[i].logit, 1e-4) << ps[i].document;
    EXPECT_NEAR(scores[i], 1 / (1 + std::exp(-double(logits[i]))), 1e-6) << ps[i].document;
    worst = std::max(worst, std::abs(double(logits[i]) - ps[i].logit));
  }
  RecordProperty("max_logit_diff", std::to_string(worst));
  EXPECT_EQ(e.truncated_texts(), 2u);  // the long document, in score() and in logits()
  // The scores spread: a wrong graph would not land within 1e-4 by chance.
  EXPECT_GT(*std::max_element(logits.begin(), logits.end()) - *std::min_element(logits.begin(), logits.end()), 3.f);
}

TEST(Qwen3Reranker, PromptIsTheSystemMessage) {
  const std::vector<Pair> ps = pairs();
  EmbedderOptions o;
  o.prompt = prompt();
  Embedder e(kData, o);
  const std::vector<float> scores = e.score(query(), documents());
  const std::vector<float> logits = e.logits(query(), documents());
  for (size_t i = 0; i < ps.size(); ++i) {
    EXPECT_NEAR(scores[i], ps[i].prompt_score, 1e-4) << ps[i].document;
    EXPECT_NEAR(logits[i], ps[i].prompt_logit, 1e-4) << ps[i].document;
  }
}

// max_length 120 cuts most pairs; each keeps the template's tail.
TEST(Qwen3Reranker, CutPairsKeepTheTemplateTail) {
  const std::vector<Pair> ps = pairs();
  EmbedderOptions o;
  o.max_len = 120;
  Embedder e(kData, o);
  const std::vector<float> logits = e.logits(query(), documents());
  size_t cut = 0;
  for (size_t i = 0; i < ps.size(); ++i) {
    EXPECT_NEAR(logits[i], ps[i].short_logit, 1e-4) << ps[i].document;
    cut += ps[i].short_ids.size() == 120;
  }
  EXPECT_EQ(e.truncated_texts(), cut);
  o.truncate = false;
  Embedder strict(kData, o);
  EXPECT_THROW(strict.logits(query(), documents()), Error);
  EXPECT_NEAR(strict.logits(query(), {""})[0], ps[1].short_logit, 1e-4);
}

// One pair per run, or all in one padded batch, or chunks of 2: the same scores.
TEST(Qwen3Reranker, BatchSizesAgree) {
  const std::vector<Pair> ps = pairs();
  std::vector<std::vector<float>> runs;
  for (int b : {1, 2, 8}) {
    EmbedderOptions o;
    o.max_batch = b;
    Embedder e(kData, o);
    runs.push_back(e.logits(query(), documents()));
  }
  for (size_t i = 0; i < ps.size(); ++i) {
    EXPECT_NEAR(runs[0][i], ps[i].logit, 1e-4) << ps[i].document;
    EXPECT_NEAR(runs[1][i], runs[0][i], 1e-5) << ps[i].document;
    EXPECT_NEAR(runs[2][i], runs[0][i], 1e-5) << ps[i].document;
  }
  // A pair scored alone equals itself in the batch.
  Embedder e(kData);
  EXPECT_NEAR(e.logits(query(), {ps[4].document})[0], runs[2][4], 1e-5);
  EXPECT_TRUE(e.logits(query(), {}).empty());
}

// A copy of the fixture whose tensor `name` holds NaN at element `at`.
void poison(const std::filesystem::path& dir, const std::string& name, size_t at) {
  std::filesystem::copy(kData, dir, std::filesystem::copy_options::recursive);
  const std::filesystem::path f = dir / "model.safetensors";
  std::fstream io(f, std::ios::in | std::ios::out | std::ios::binary);
  uint64_t n = 0;
  io.read(reinterpret_cast<char*>(&n), 8);
  std::string header(n, '\0');
  io.read(header.data(), long(n));
  const nlohmann::json h = nlohmann::json::parse(header);
  ASSERT_EQ(h.at(name).at("dtype"), "F32");
  const uint64_t begin = h.at(name).at("data_offsets")[0];
  const float nan = std::nanf("");
  io.seekp(long(8 + n + begin + 4 * at));
  io.write(reinterpret_cast<const char*>(&nan), 4);
}

TEST(Qwen3Reranker, NonFiniteScoresAreRefused) {
  const int32_t yes = reference().at("yes_id");
  {
    test::TempDir d;
    poison(d.path() / "m", "lm_head.weight", size_t(yes) * 40 + 7);  // the "yes" row only
    Embedder e((d.path() / "m").string());
    try {
      e.score(query(), {"Paris"});
      FAIL() << "a NaN score was returned";
    } catch (const Error& err) {
      EXPECT_NE(std::string(err.what()).find("non-finite"), std::string::npos) << err.what();
    }
  }
  {
    test::TempDir d;
    poison(d.path() / "m", "lm_head.weight", size_t(yes + 1) * 40);  // another row: no effect
    Embedder e((d.path() / "m").string());
    EXPECT_NEAR(e.logits(query(), {pairs()[0].document})[0], pairs()[0].logit, 1e-4);
  }
  {
    test::TempDir d;
    poison(d.path() / "m", "model.layers.1.mlp.down_proj.weight", 3);
    Embedder e((d.path() / "m").string());
    EXPECT_THROW(e.logits(query(), {"a", "b"}), Error);
  }
}

// The template renderer against jinja2 with transformers' settings
// (trim_blocks, lstrip_blocks, one trailing newline dropped): the
// expected texts are what it rendered.
TEST(Qwen3Reranker, PairTemplateRendersAsJinja) {
  const std::vector<ChatMessage> plain = PairTemplate::pair_messages("q1", "");
  const std::vector<ChatMessage> with_system = PairTemplate::pair_messages("q1", " d\n", "sys");
  const PairTemplate vllm(
      "question:{{ (messages | selectattr(\"role\", \"eq\", \"query\") | first).content }}\n\npassage:{{ (messages | "
      "selectattr(\"role\", \"eq\", \"document\") | first).content }}\n",
      "vllm");
  EXPECT_EQ(vllm.render(plain), "question:q1\n\npassage:");
  EXPECT_EQ(vllm.render(with_system), "question:q1\n\npassage: d\n");
  const PairTemplate boolean(
      "{{ messages | selectattr('role', 'eq', 'system') | map(attribute='content') | first | default('fallback', "
      "true) }}:{{ messages | selectattr('role','eq','query') | map(attribute='content') | first }}:{{ messages | "
      "selectattr('role','eq','document') | map(attribute='content') | first | d('empty', true) }}\r\n\n",
      "boolean");
  EXPECT_EQ(boolean.render(plain), "fallback:q1:empty\n");
  EXPECT_EQ(boolean.render(with_system), "sys:q1: d\n\n");
  const PairTemplate ws(
      "  {%- set q = messages | selectattr('role', 'equalto', 'query') | map(attribute='content') | first %}\n    {% "
      "set d = (messages | selectattr(\"role\", \"==\", \"document\") | first).content -%}\n\nQ={{ q }}|  {{- d -}}  "
      "|\n  {# a comment #}\n{{ messages | selectattr('role', 'eq', 'system') | map(attribute='content') | first | "
      "default('none') }}\n  {% set e = 'x' %}  \n{{ e }}\n\n",
      "whitespace");
  EXPECT_EQ(ws.render(plain), "Q=q1||\nnone\n  \nx\n");
  EXPECT_EQ(ws.render(with_system), "Q=q1| d\n|\nsys\n  \nx\n");
  // The fixture's (Qwen3-Reranker's) template: the instruction defaults
  // when there is no system message.
  std::ifstream in(kData + "/chat_template.jinja");
  const std::string qwen((std::istreambuf_iterator<char>(in)), {});
  const std::string text = PairTemplate(qwen, "qwen").render(PairTemplate::pair_messages("Q?", "D."));
  EXPECT_EQ(text,
            "<|im_start|>system\nJudge whether the Document meets the requirements based on the Query and the Instruct "
            "provided. Note that the answer can only be \"yes\" or \"no\".<|im_end|>\n<|im_start|>user\n<Instruct>: "
            "Given a web search query, retrieve relevant passages that answer the query\n<Query>: Q?\n<Document>: "
            "D.<|im_end|>\n<|im_start|>assistant\n<think>\n\n</think>\n\n");
}

void expect_refused(const std::string& tmpl, const std::string& needle) {
  try {
    PairTemplate t(tmpl, "'x/chat_template.jinja'");
    t.render(PairTemplate::pair_messages("a", "b"));
    ADD_FAILURE() << "accepted: " << tmpl;
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("x/chat_template.jinja"), std::string::npos) << e.what();
  }
}

TEST(Qwen3Reranker, PairTemplateRefusesWhatItDoesNotRender) {
  expect_refused("{% for m in messages %}{{ m.content }}{% endfor %}", "'{% for %}'");
  expect_refused("{% if messages %}x{% endif %}", "'{% if %}'");
  expect_refused("{{ messages | selectattr('role', 'eq', 'query') | map(attribute='content') | join }}",
                 "filter 'join'");
  expect_refused("{{ bos_token }}{{ messages | first }}", "'bos_token'");
  expect_refused("{{ messages | selectattr('role', 'eq', 'query') }}", "a list of messages as text");
  expect_refused("{{ (messages | selectattr('role', 'eq', 'system') | first).content }}", "no message has that role");
  expect_refused("{{ messages", "unclosed tag");
}

// A copy of the fixture with `edit` applied to one of its files.
std::string edited(const test::TempDir& d, const std::string& file, const std::function<void(std::string&)>& edit) {
  const std::filesystem::path dir = d.path() / "m";
  std::filesystem::copy(kData, dir, std::filesystem::copy_options::recursive);
  std::ifstream in(dir / file);
  std::string text((std::istreambuf_iterator<char>(in)), {});
  in.close();
  edit(text);
  std::ofstream(dir / file, std::ios::binary | std::ios::trunc) << text;
  return dir.string();
}

void expect_load_refused(const std::string& file, const std::function<void(std::string&)>& edit,
                         const std::vector<std::string>& needles) {
  test::TempDir d;
  const std::string dir = edited(d, file, edit);
  try {
    Embedder e(dir);
    ADD_FAILURE() << "accepted an edited " << file;
  } catch (const Error& err) {
    for (const std::string& n : needles) EXPECT_NE(std::string(err.what()).find(n), std::string::npos) << err.what();
  }
}

void replace(std::string& s, const std::string& from, const std::string& to) {
  const size_t at = s.find(from);
  ASSERT_NE(at, std::string::npos) << from;
  s.replace(at, from.size(), to);
}

TEST(Qwen3Reranker, RefusesWhatItCannotScore) {
  expect_load_refused("1_LogitScore/config.json", [](std::string& s) { replace(s, "\"true_token_id\"", "\"yes_id\""); },
                      {"1_LogitScore/config.json", "true_token_id is missing"});
  expect_load_refused("1_LogitScore/config.json",
                      [](std::string& s) { replace(s, "\"false_token_id\": 281", "\"false_token_id\": 100000"); },
                      {"1_LogitScore/config.json", "false_token_id"});
  expect_load_refused("1_LogitScore/config.json",
                      [](std::string& s) { replace(s, "\"causal_logits\"", "\"token_embeddings\""); },
                      {"1_LogitScore/config.json", "module_input_name 'token_embeddings'"});
  expect_load_refused("modules.json", [](std::string& s) { replace(s, "logit_score.LogitScore", "logit_score.Ranker"); },
                      {"modules.json", "'sentence_transformers.cross_encoder.modules.logit_score.Ranker' is not supported"});
  expect_load_refused("sentence_bert_config.json",
                      [](std::string& s) { replace(s, "\"text-generation\"", "\"feature-extraction\""); },
                      {"sentence_bert_config.json", "transformer_task 'feature-extraction'"});
  expect_load_refused("sentence_bert_config.json", [](std::string& s) { replace(s, "\"message\"", "\"image\""); },
                      {"sentence_bert_config.json", "no 'message' entry"});
  expect_load_refused("sentence_bert_config.json", [](std::string& s) { replace(s, "\"flat\"", "\"structured\""); },
                      {"sentence_bert_config.json", "'structured'"});
  expect_load_refused("config_sentence_transformers.json",
                      [](std::string& s) { replace(s, "activation.Sigmoid", "activation.Tanh"); },
                      {"config_sentence_transformers.json", "activation 'torch.nn.modules.activation.Tanh'"});
  expect_load_refused("chat_template.jinja",
                      [](std::string& s) { replace(s, "{{ document_text }}", "{{ query_text }}"); },
                      {"chat_template.jinja", "'document' message's content"});
  expect_load_refused("chat_template.jinja", [](std::string& s) { s = "{% for m in messages %}{% endfor %}"; },
                      {"chat_template.jinja", "{% for %}"});
  {  // Without the template file, and none in tokenizer_config.json.
    test::TempDir d;
    const std::string dir = edited(d, "modules.json", [](std::string&) {});
    std::filesystem::remove(std::filesystem::path(dir) / "chat_template.jinja");
    try {
      Embedder e(dir);
      ADD_FAILURE() << "accepted a cross-encoder without a chat template";
    } catch (const Error& err) {
      EXPECT_NE(std::string(err.what()).find("has no chat template"), std::string::npos) << err.what();
    }
  }
  {  // The same template in tokenizer_config.json: the same scores.
    test::TempDir d;
    const std::string dir = edited(d, "tokenizer_config.json", [](std::string& s) {
      std::ifstream in(kData + "/chat_template.jinja");
      const std::string t((std::istreambuf_iterator<char>(in)), {});
      nlohmann::json j = nlohmann::json::parse(s);
      j["chat_template"] = t;
      s = j.dump();
    });
    std::filesystem::remove(std::filesystem::path(dir) / "chat_template.jinja");
    Embedder e(dir);
    EXPECT_NEAR(e.logits(query(), {pairs()[0].document})[0], pairs()[0].logit, 1e-4);
  }
  {  // Identity as the activation: score() gives the logit.
    test::TempDir d;
    const std::string dir = edited(d, "config_sentence_transformers.json", [](std::string& s) {
      replace(s, "torch.nn.modules.activation.Sigmoid", "torch.nn.modules.linear.Identity");
    });
    Embedder e(dir);
    EXPECT_EQ(e.info().score_activation, "identity");
    EXPECT_NEAR(e.score(query(), {pairs()[0].document})[0], pairs()[0].logit, 1e-4);
  }
}

// tie_word_embeddings (Qwen3-Reranker-0.6B's): the score's rows come from
// the token embedding; the checkpoint's lm_head is left unread.
TEST(Qwen3Reranker, TiedEmbeddingsGiveTheHead) {
  test::TempDir d;
  const std::string dir = edited(d, "config.json", [](std::string& s) {
    replace(s, "\"tie_word_embeddings\": false", "\"tie_word_embeddings\": true");
  });
  Embedder e(dir);
  const std::vector<Pair> ps = pairs();
  const std::vector<float> logits = e.logits(query(), documents());
  for (size_t i = 0; i < ps.size(); ++i) EXPECT_NEAR(logits[i], ps[i].tied_logit, 1e-4) << ps[i].document;
}

TEST(Qwen3Reranker, Cli) {
  const std::vector<Pair> ps = pairs();
  for (const bool raw : {false, true}) {
    test::CliRun r = test::run_rlx("rerank --device cpu --model " + kData + " --query \"" + query() + "\" \"" +
                                   ps[0].document + "\" \"\" \"" + ps[6].document + "\"" + (raw ? " --raw" : ""));
    ASSERT_EQ(r.status, 0) << r.err;
    const nlohmann::json out = nlohmann::json::parse(r.out);
    ASSERT_EQ(out.at("results").size(), 3u) << r.out;
    const size_t ref_of[] = {0, 1, 6};
    double prev = 1e9;
    for (const auto& row : out.at("results")) {
      const size_t i = row.at("index");
      const Pair& p = ps[ref_of[i]];
      EXPECT_NEAR(row.at("score").get<double>(), raw ? p.logit : p.score, 1e-4) << r.out;
      EXPECT_LE(row.at("score").get<double>(), prev) << "not ordered: " << r.out;
      prev = row.at("score").get<double>();
    }
  }
  // --prompt: the instruction as the system message, as CrossEncoder.predict(prompt=...).
  test::CliRun r = test::run_rlx("rerank --device cpu --model " + kData + " --query \"" + query() + "\" --prompt \"" +
                                 prompt() + "\" --format compact \"" + ps[0].document + "\" \"" + ps[6].document + "\"");
  ASSERT_EQ(r.status, 0) << r.err;
  std::istringstream lines(r.out);
  std::string line;
  int rows = 0;
  while (std::getline(lines, line)) {
    const size_t tab = line.find('\t');
    ASSERT_NE(tab, std::string::npos) << line;
    const size_t i = std::stoul(line.substr(tab + 1));
    ASSERT_LT(i, 2u) << line;
    EXPECT_NEAR(std::stod(line.substr(0, tab)), ps[i == 0 ? 0 : 6].prompt_score, 1e-4) << line;
    ++rows;
  }
  EXPECT_EQ(rows, 2) << r.out;
}

}  // namespace
}  // namespace rlx
