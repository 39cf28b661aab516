// Decoder-based embedders (Qwen3-Embedding's layout) on the CPU, with the
// random Qwen3 (and Qwen2) of odd sizes tests/data/make_qwen3_embedding_case.py made
// (tests/data/qwen3_embed: GQA 3 query heads on 1 KV head, head_dim 16,
// tied embeddings, last-token pooling, Normalize, a "query" instruction
// prompt, a Qwen-shaped byte-level BPE tokenizer with NFC and an appended
// <|endoftext|>): texts of different lengths in padded batches, with and
// without the prompt, mean pooling in place of last-token; the hidden-state
// graphs run alone with poisoned outputs; the CLI; what is refused.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <numeric>

#include "backends/backend.h"
#include "cli_run.h"
#include "models/embedder.h"
#include "models/llama.h"
#include "models/llama_hf.h"
#include "models/test_files.h"  // tests/models
#include "test_util.h"
#include "tokenizers/bpe.h"

namespace rlx {
namespace {

const std::string kData = std::string(RLX_SOURCE_DIR) + "/tests/data/qwen3_embed";
// The same script's Qwen2 (gte-Qwen2's family): q/k/v biases, head_dim 8
// from hidden 40 / 5 heads, f16 weights, a Sequence post_processor.
const std::string kQwen2 = std::string(RLX_SOURCE_DIR) + "/tests/data/qwen2_embed";

nlohmann::json reference(const std::string& dir = kData) {
  std::ifstream in(dir + "/reference.json");
  EXPECT_TRUE(in) << dir << "/reference.json is missing";
  return nlohmann::json::parse(in);
}

struct Case {
  std::string text;
  std::vector<int32_t> ids, query_ids;
  std::vector<float> embedding, query_embedding, mean_embedding;
};

std::vector<Case> cases(const std::string& dir = kData) {
  std::vector<Case> out;
  const nlohmann::json ref = reference(dir);
  for (const auto& c : ref.at("texts"))
    out.push_back({c.at("text"), c.at("ids"), c.at("query_ids"), c.at("embedding"), c.at("query_embedding"),
                   c.at("mean_embedding")});
  return out;
}

std::vector<std::string> texts_of(const std::vector<Case>& cs) {
  std::vector<std::string> t;
  for (const Case& c : cs) t.push_back(c.text);
  return t;
}

void expect_close(const std::vector<float>& got, const std::vector<float>& want, double tol, const std::string& what) {
  ASSERT_EQ(got.size(), want.size()) << what;
  for (size_t i = 0; i < got.size(); ++i) {
    ASSERT_TRUE(std::isfinite(got[i])) << what << " [" << i << "]";
    ASSERT_NEAR(got[i], want[i], tol) << what << " [" << i << "]";
  }
}

std::vector<float> unit(std::vector<float> v) {
  l2_normalize(v);
  return v;
}

TEST(Qwen3Embedding, FixtureMixesLengths) {
  const std::vector<Case> cs = cases();
  ASSERT_GE(cs.size(), 5u);
  size_t shortest = 1000, longest = 0;
  for (const Case& c : cs) {
    shortest = std::min(shortest, c.ids.size());
    longest = std::max(longest, c.ids.size());
    ASSERT_EQ(c.ids.back(), 0) << "the template appends <|endoftext|> (id 0): '" << c.text << "'";
  }
  EXPECT_EQ(shortest, 1u);  // "" is <|endoftext|> alone
  EXPECT_GE(longest, 40u);
  EXPECT_EQ(reference().at("padding_side"), "left");
}

struct Mode {
  const char* name;
  int max_batch, threads;
};

// Every text in one padded batch (and in two, and alone): each row's vector
// is its last real token's, the pads after it unseen.
TEST(Qwen3Embedding, LastTokenEmbeddingsMatchTheReference) {
  const std::vector<Case> cs = cases();
  const std::vector<std::string> texts = texts_of(cs);
  for (const Mode m : {Mode{"batch 8", 8, 0}, Mode{"batch 4, one thread", 4, 1}, Mode{"alone", 1, 0}}) {
    EmbedderOptions o;
    o.max_batch = m.max_batch;
    o.threads = m.threads;
    Embedder e(kData, o);
    EXPECT_EQ(e.info().model_type, "qwen3");
    EXPECT_EQ(e.info().architecture, "Qwen3Model");
    EXPECT_EQ(e.info().pooling, "lasttoken");
    EXPECT_EQ(e.info().hidden_size, 48);
    EXPECT_EQ(e.info().num_heads, 3);
    EXPECT_EQ(e.dim(), 48);
    EXPECT_EQ(e.max_len(), 128);  // sentence_bert_config.json's max_seq_length
    EXPECT_TRUE(e.normalizes());
    EXPECT_FALSE(e.is_cross_encoder());
    EXPECT_EQ(e.tokenizer().kind(), "bpe");
    for (const Case& c : cs) {
      ASSERT_EQ(e.tokenizer().encode(c.text, e.max_len()).ids, c.ids) << "'" << c.text << "'";
      ASSERT_EQ(e.tokenizer().encode(e.prompt("query") + c.text, e.max_len()).ids, c.query_ids) << c.text;
    }
    auto got = e.embed(texts);
    ASSERT_EQ(got.size(), cs.size());
    for (size_t i = 0; i < cs.size(); ++i)
      expect_close(got[i], cs[i].embedding, 1e-4, std::string(m.name) + " '" + cs[i].text + "'");
    EmbedCall q;
    q.prompt_name = "query";
    got = e.embed(texts, q);
    for (size_t i = 0; i < cs.size(); ++i)
      expect_close(got[i], cs[i].query_embedding, 1e-4, std::string(m.name) + " query '" + cs[i].text + "'");
  }
  // Last-token pooling is what gives these vectors: the mean of the same
  // hidden states is far from them.
  double far = 0;
  for (const Case& c : cs)
    for (size_t d = 0; d < c.embedding.size(); ++d) far = std::max(far, double(std::abs(c.embedding[d] - c.mean_embedding[d])));
  EXPECT_GT(far, 0.05);
}

TEST(Qwen3Embedding, Qwen2FamilyMatchesTheReference) {
  const std::vector<Case> cs = cases(kQwen2);
  ASSERT_GE(cs.size(), 5u);
  for (PoolingMode pooling : {PoolingMode::Model, PoolingMode::Mean}) {
    EmbedderOptions o;
    o.max_batch = 4;
    o.pooling = pooling;
    Embedder e(kQwen2, o);
    EXPECT_EQ(e.info().model_type, "qwen2");
    EXPECT_EQ(e.dim(), 40);
    for (const Case& c : cs) ASSERT_EQ(e.tokenizer().encode(c.text, e.max_len()).ids, c.ids) << c.text;
    const bool mean = pooling == PoolingMode::Mean;
    auto got = e.embed(texts_of(cs));
    for (size_t i = 0; i < cs.size(); ++i)
      expect_close(got[i], mean ? cs[i].mean_embedding : cs[i].embedding, 1e-4, "qwen2 '" + cs[i].text + "'");
    if (mean) continue;
    EmbedCall q;
    q.prompt_name = "query";
    got = e.embed(texts_of(cs), q);
    for (size_t i = 0; i < cs.size(); ++i)
      expect_close(got[i], cs[i].query_embedding, 1e-4, "qwen2 query '" + cs[i].text + "'");
  }
}

// The prompt as EmbedderOptions gives it, and the prompts the folder names.
TEST(Qwen3Embedding, PromptsFromTheConfig) {
  const std::vector<Case> cs = cases();
  EmbedderOptions o;
  o.prompt_name = "query";
  Embedder e(kData, o);
  EXPECT_EQ(e.prompt("query"), "Instruct: Given a question, retrieve passages that answer it\nQuery:");
  EXPECT_EQ(e.prompt("document"), "");
  EXPECT_EQ(e.info().prompts.size(), 2u);
  auto got = e.embed(texts_of(cs));
  for (size_t i = 0; i < cs.size(); ++i) expect_close(got[i], cs[i].query_embedding, 1e-4, "query '" + cs[i].text + "'");
  EmbedCall doc;
  doc.prompt_name = "document";
  got = e.embed(texts_of(cs), doc);
  for (size_t i = 0; i < cs.size(); ++i) expect_close(got[i], cs[i].embedding, 1e-4, "document '" + cs[i].text + "'");
}

// --pooling mean: every row's hidden state comes back and is pooled on the
// host over the real tokens only.
TEST(Qwen3Embedding, MeanPoolingOverHiddenStates) {
  const std::vector<Case> cs = cases();
  EmbedderOptions o;
  o.pooling = PoolingMode::Mean;
  o.max_batch = 8;
  Embedder e(kData, o);
  EXPECT_EQ(e.info().pooling, "mean");
  auto got = e.embed(texts_of(cs));
  for (size_t i = 0; i < cs.size(); ++i) expect_close(got[i], cs[i].mean_embedding, 1e-4, "mean '" + cs[i].text + "'");
}

// The builder's two hidden-state graphs run alone, outputs poisoned with
// NaN first: one padded batch, pads of another id after each text.
TEST(Qwen3Embedding, HiddenStateGraphsWriteEveryRow) {
  const std::vector<Case> cs = cases();
  LlamaSafetensors w(kData);
  const LlamaConfig& c = w.config();
  EXPECT_EQ(c.family, "qwen3");
  EXPECT_TRUE(c.qk_norm);
  EXPECT_TRUE(c.tie_embeddings);
  EXPECT_EQ(c.num_kv_heads, 1);
  EXPECT_EQ(c.head_dim, 16);
  const int64_t B = int64_t(cs.size()), S = 64, H = c.hidden_size;
  std::vector<int32_t> ids(static_cast<size_t>(B * S), 7), positions(static_cast<size_t>(S)),
      last(static_cast<size_t>(B));
  std::iota(positions.begin(), positions.end(), 0);
  for (int64_t r = 0; r < B; ++r) {
    std::copy(cs[size_t(r)].ids.begin(), cs[size_t(r)].ids.end(), ids.begin() + r * S);
    last[size_t(r)] = int32_t(r * S + int64_t(cs[size_t(r)].ids.size()) - 1);
  }
  for (LlamaHidden which : {LlamaHidden::Rows, LlamaHidden::All}) {
    const bool rows = which == LlamaHidden::Rows;
    Graph g = build_llama_hidden_graph(c, B, S, DType::F32, which);
    w.validate(g);
    for (const Node& n : g.nodes()) ASSERT_NE(n.name, "output.weight") << "no LM head";
    auto exe = compile(g);
    w.load_into(*exe, g);
    const std::vector<std::string> names = exe->output_names();
    ASSERT_EQ(names, std::vector<std::string>{rows ? "embedding" : "last_hidden_state"});
    for (const Binding& o : exe->schedule().output_bindings) {
      auto nan = test::nan_bytes(size_t(numel(o.shape)), o.dtype);
      exe->backend().write_binding(o, nan.data());
    }
    std::map<std::string, HostTensor> in{{"input_ids", HostTensor::from_i32({B, S}, ids)},
                                         {"positions", HostTensor::from_i32({S}, positions)}};
    if (rows) in.emplace("last_index", HostTensor::from_i32({B}, last));
    const std::vector<float> out = exe->run(in).at(names[0]).to_f32();
    ASSERT_EQ(out.size(), size_t(rows ? B * H : B * S * H));
    for (float x : out) ASSERT_TRUE(std::isfinite(x)) << "an unwritten row";
    for (int64_t r = 0; r < B; ++r) {
      const Case& k = cs[size_t(r)];
      const float* h = rows ? out.data() + r * H : out.data() + int64_t(last[size_t(r)]) * H;
      expect_close(unit(std::vector<float>(h, h + H)), k.embedding, 1e-4, "row " + std::to_string(r));
      if (rows) continue;
      std::vector<float> mean(size_t(H), 0.f);
      for (size_t t = 0; t < k.ids.size(); ++t)
        for (int64_t d = 0; d < H; ++d) mean[size_t(d)] += out[size_t((r * S + int64_t(t)) * H + d)] / float(k.ids.size());
      expect_close(unit(mean), k.mean_embedding, 1e-4, "mean of row " + std::to_string(r));
    }
  }
}

// The tokenizer.json post_processor as Qwen's files write it: the template
// alone, inside a Sequence after ByteLevel, or none (no <|endoftext|>).
TEST(Qwen3Embedding, PostProcessorShapes) {
  const std::vector<Case> cs = cases();
  nlohmann::json tok;
  std::ifstream(kData + "/tokenizer.json") >> tok;
  const nlohmann::json templ = tok.at("post_processor");
  auto with_post = [&](const nlohmann::json& post) {
    test::TempDir d;
    std::filesystem::copy(kData, d.path(), std::filesystem::copy_options::recursive);
    nlohmann::json t = tok;
    t["post_processor"] = post;
    test::write_text(d.path() / "tokenizer.json", t.dump());
    Embedder e(d.path().string());
    return e.tokenizer().encode(cs[2].text, e.max_len()).ids;
  };
  nlohmann::json seq = {{"type", "Sequence"},
                        {"processors", nlohmann::json::array({{{"type", "ByteLevel"}, {"add_prefix_space", false},
                                                               {"trim_offsets", false}, {"use_regex", false}},
                                                              templ})}};
  EXPECT_EQ(with_post(seq), cs[2].ids);
  std::vector<int32_t> plain(cs[2].ids.begin(), cs[2].ids.end() - 1);
  EXPECT_EQ(with_post(nullptr), plain);
  EXPECT_EQ(with_post({{"type", "ByteLevel"}, {"trim_offsets", false}}), plain);
}

// Qwen's tokenizer.json normalizes to NFC before splitting (the fixture's
// "cafe\u0301" is "café" then); Unicode forms alone or in a Sequence are
// read, any other normalizer is refused by name.
TEST(Qwen3Embedding, ByteLevelBpeTakesUnicodeForms) {
  nlohmann::json tok;
  std::ifstream(kData + "/tokenizer.json") >> tok;
  test::TempDir d;
  auto load = [&](const nlohmann::json& norm) {
    nlohmann::json t = tok;
    t["normalizer"] = norm;
    test::write_text(d.path() / "tokenizer.json", t.dump());
    return BpeTokenizer::from_tokenizer_json((d.path() / "tokenizer.json").string());
  };
  const std::string composed = "caf\xc3\xa9", decomposed = "cafe\xcc\x81";
  const BpeTokenizer nfc = load({{"type", "NFC"}});
  EXPECT_EQ(nfc.encode(decomposed, {false, true}), nfc.encode(composed, {false, true}));
  const BpeTokenizer none = load(nullptr);
  EXPECT_NE(none.encode(decomposed, {false, true}), none.encode(composed, {false, true}));
  const BpeTokenizer seq = load({{"type", "Sequence"}, {"normalizers", {{{"type", "NFD"}}, {{"type", "NFC"}}}}});
  EXPECT_EQ(seq.encode(decomposed, {false, true}), nfc.encode(composed, {false, true}));
  const std::string msg = test::error_of([&] { load({{"type", "Lowercase"}}); });
  EXPECT_NE(msg.find("normalizer 'Lowercase'"), std::string::npos) << msg;
}

// Malformed tokenizer.json files the fuzzer found: a pre_tokenizer Sequence
// without its list, and a token id that is a float far past int64 (once a
// cast with undefined behaviour). Each is an rlx::Error naming the file.
TEST(Qwen3Embedding, MalformedTokenizerFilesNameTheFile) {
  nlohmann::json tok;
  std::ifstream(kData + "/tokenizer.json") >> tok;
  test::TempDir d;
  auto error_with = [&](const std::function<void(nlohmann::json&)>& edit) {
    std::filesystem::copy(kData, d.path(), std::filesystem::copy_options::recursive |
                                               std::filesystem::copy_options::overwrite_existing);
    nlohmann::json t = tok;
    edit(t);
    test::write_text(d.path() / "tokenizer.json", t.dump());
    return test::error_of([&] { Embedder e(d.path().string()); });
  };
  std::string e = error_with([](nlohmann::json& t) { t["pre_tokenizer"] = {{"type", "Sequence"}}; });
  EXPECT_NE(e.find("tokenizer.json"), std::string::npos) << e;
  EXPECT_NE(e.find("pretokenizers"), std::string::npos) << e;
  e = error_with([](nlohmann::json& t) { t["model"]["vocab"]["hello"] = 2.4e22; });
  EXPECT_NE(e.find("tokenizer.json"), std::string::npos) << e;
  EXPECT_NE(e.find("not an integer"), std::string::npos) << e;
  e = error_with([](nlohmann::json& t) { t["added_tokens"][0]["id"] = -1e30; });
  EXPECT_NE(e.find("not an integer"), std::string::npos) << e;
}

// The folder with its config.json changed by `edit`; the error of opening it.
std::string refusal(const std::function<void(nlohmann::json&)>& edit) {
  test::TempDir d;
  std::filesystem::copy(kData, d.path(), std::filesystem::copy_options::recursive);
  nlohmann::json cfg;
  std::ifstream(d.path() / "config.json") >> cfg;
  edit(cfg);
  test::write_text(d.path() / "config.json", cfg.dump());
  return test::error_of([&] { Embedder e(d.path().string()); });
}

TEST(Qwen3Embedding, UnsupportedModelsNameTheField) {
  auto refused = [](const std::function<void(nlohmann::json&)>& edit, const std::string& want) {
    const std::string msg = refusal(edit);
    EXPECT_NE(msg.find(want), std::string::npos) << want << ": " << msg;
  };
  refused([](nlohmann::json& c) { c["use_bidirectional_attention"] = true; }, "use_bidirectional_attention");
  refused([](nlohmann::json& c) { c["is_causal"] = false; }, "is_causal");
  refused([](nlohmann::json& c) { c["architectures"] = {"Qwen3ForSequenceClassification"}; },
          "'Qwen3ForSequenceClassification' is not supported as an embedder");
  refused([](nlohmann::json& c) { c["attention_bias"] = true; }, "attention_bias");
  refused([](nlohmann::json& c) { c["num_hidden_layers"] = 3; }, "layers.2.");
  refused([](nlohmann::json& c) { c["hidden_size"] = 64; }, "embed_tokens.weight");
  // A decoder family rlx does not run: the message lists those it does.
  const std::string msg = refusal([](nlohmann::json& c) { c["model_type"] = "gpt_neox"; });
  EXPECT_NE(msg.find("gpt_neox"), std::string::npos) << msg;
  EXPECT_NE(msg.find("qwen3"), std::string::npos) << msg;
}

TEST(Qwen3Embedding, Cli) {
  const std::vector<Case> cs = cases();
  test::CliRun r = test::run_rlx("embed --device cpu --model " + kData + " --format jsonl \"" + cs[2].text + "\" \"" +
                                 cs[3].text + "\" hello");
  ASSERT_EQ(r.status, 0) << r.err;
  std::vector<nlohmann::json> rows;
  std::istringstream lines(r.out);
  for (std::string line; std::getline(lines, line);)
    if (!line.empty()) rows.push_back(nlohmann::json::parse(line));
  ASSERT_EQ(rows.size(), 3u) << r.out;
  expect_close(rows[0].at("embedding").get<std::vector<float>>(), cs[2].embedding, 1e-4, "cli row 0");
  expect_close(rows[1].at("embedding").get<std::vector<float>>(), cs[3].embedding, 1e-4, "cli row 1");
  expect_close(rows[2].at("embedding").get<std::vector<float>>(), cs[0].embedding, 1e-4, "cli row 2");
  r = test::run_rlx("embed --device cpu --model " + kData + " --prompt-name query --format jsonl \"" + cs[2].text + "\"");
  ASSERT_EQ(r.status, 0) << r.err;
  expect_close(nlohmann::json::parse(r.out).at("embedding").get<std::vector<float>>(), cs[2].query_embedding, 1e-4,
               "cli query");
}

}  // namespace
}  // namespace rlx
