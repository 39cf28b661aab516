// BERT embedders from GGUF files, as llama.cpp's convert_hf_to_gguf.py
// writes them, on the CPU: the random model of odd sizes
// tests/data/make_bert_gguf_case.py made (tests/data/bert_gguf: the
// sentence-transformers folder, its f32 and f16 GGUFs, and
// sentence-transformers' vectors). The GGUF's embeddings match
// sentence-transformers' and rlx's own from the folder, its WordPiece gives
// the Hugging Face tokenizer's ids, the command line takes the file, and a
// damaged file is an error naming the file and the key or tensor.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <set>

#include "cli_run.h"
#include "cpu_quant_kernel_scope.h"
#include "models/bert_gguf.h"
#include "models/bert_gguf_fixture.h"  // tests/models
#include "models/embedder.h"
#include "models/gguf.h"
#include "models/gguf_writer.h"  // tests/models
#include "models/test_files.h"
#include "rlx/dtype.h"
#include "test_util.h"

namespace rlx {
namespace {

namespace fs = std::filesystem;
using test::error_of;

using test::Case;
using test::cosine;
using test::kData;
using test::kDir;
using test::kF16;
using test::kF32;
using test::kNomic;
using test::max_diff;
using test::reference;
using test::texts_of;

TEST(BertGguf, EmbeddingsMatchSentenceTransformers) {
  const std::vector<Case> cases = reference();
  ASSERT_GE(cases.size(), 7u);
  // The last text is longer than the 64 positions: both sides cut it.
  ASSERT_EQ(cases.back().ids.size(), 64u);
  struct Mode {
    std::string file;
    DType dtype;
    int max_batch;
    double min_cos, max_err;
  };
  // Measured: f32 within 1e-7 of sentence-transformers; f16 weights (the
  // converter's --outtype f16) within 3e-4 (cosine 0.9999998); f16
  // activations within 5e-4.
  const Mode modes[] = {{kF32, DType::F32, 4, 0.99999, 1e-5},
                        {kF32, DType::F32, 1, 0.99999, 1e-5},
                        {kF16, DType::F32, 4, 0.9999, 2e-3},
                        {kF32, DType::F16, 4, 0.9999, 3e-3}};
  for (const Mode& m : modes) {
    SCOPED_TRACE(fs::path(m.file).filename().string() + ", " + std::string(dtype_name(m.dtype)) + ", batch " +
                 std::to_string(m.max_batch));
    EmbedderOptions o;
    o.dtype = m.dtype;
    o.max_batch = m.max_batch;
    Embedder e(m.file, o);
    const EmbedderInfo& info = e.info();
    EXPECT_EQ(info.model_type, "bert");
    EXPECT_EQ(info.hidden_size, 48);
    EXPECT_EQ(info.num_layers, 2);
    EXPECT_EQ(info.num_heads, 3);
    EXPECT_EQ(info.intermediate_size, 100);
    EXPECT_EQ(info.type_vocab_size, 2);
    EXPECT_EQ(info.max_position_embeddings, 64);
    EXPECT_EQ(info.pooling, "mean");  // bert.pooling_type 1
    EXPECT_TRUE(e.normalizes());
    EXPECT_EQ(e.dim(), 48);
    EXPECT_EQ(e.max_len(), 64);
    for (const Case& c : cases) EXPECT_EQ(e.tokenizer().encode(c.text, e.max_len()).ids, c.ids) << c.text;
    const auto got = e.embed(texts_of(cases));
    ASSERT_EQ(got.size(), cases.size());
    for (size_t i = 0; i < cases.size(); ++i) {
      EXPECT_GE(cosine(got[i], cases[i].embedding), m.min_cos) << "text " << i;
      EXPECT_LE(max_diff(got[i], cases[i].embedding), m.max_err) << "text " << i;
    }
  }
}

TEST(BertGguf, MatchesTheSameModelFromItsHuggingFaceFolder) {
  const std::vector<Case> cases = reference();
  Embedder gguf(kF32), dir(kDir);
  EXPECT_EQ(gguf.info().vocab_size, dir.info().vocab_size);
  EXPECT_EQ(gguf.info().pooling, dir.info().pooling);
  EXPECT_EQ(gguf.normalizes(), dir.normalizes());
  EXPECT_EQ(gguf.max_len(), dir.max_len());
  // The same weights through the same graph: the same values.
  const auto a = gguf.embed(texts_of(cases)), b = dir.embed(texts_of(cases));
  for (size_t i = 0; i < cases.size(); ++i) EXPECT_LE(max_diff(a[i], b[i]), 1e-6) << "text " << i;
  // And the same tokens, pairs too (type ids 0 then 1).
  for (const char* t : {"Hello, World!", "  spaces\tand\nlines  ", "[CLS] [SEP] [PAD] [UNK]", "ÀÉÎÕÜ ß ﬁ", "x"}) {
    const TokenizedText x = gguf.tokenizer().encode(t, 64), y = dir.tokenizer().encode(t, 64);
    EXPECT_EQ(x.ids, y.ids) << t;
    EXPECT_EQ(x.type_ids, y.type_ids) << t;
  }
  const TokenizedText x = gguf.tokenizer().encode_pair("What is the capital?", "Paris is.", 64),
                      y = dir.tokenizer().encode_pair("What is the capital?", "Paris is.", 64);
  EXPECT_EQ(x.ids, y.ids);
  EXPECT_EQ(x.type_ids, y.type_ids);
  EXPECT_EQ(gguf.tokenizer().pad_id(), dir.tokenizer().pad_id());
}

TEST(BertGguf, OptionsOverrideTheFile) {
  const std::vector<Case> cases = reference();
  EmbedderOptions o;
  o.pooling = PoolingMode::Cls;
  o.normalize = NormalizeMode::Off;
  EmbedderOptions od = o;
  Embedder gguf(kF32, o), dir(kDir, od);
  EXPECT_EQ(gguf.info().pooling, "cls");
  EXPECT_FALSE(gguf.normalizes());
  const auto a = gguf.embed(texts_of(cases)), b = dir.embed(texts_of(cases));
  for (size_t i = 0; i < cases.size(); ++i) {
    EXPECT_LE(max_diff(a[i], b[i]), 1e-5) << "text " << i;
    double norm = 0;
    for (float v : a[i]) norm += double(v) * v;
    EXPECT_GT(std::fabs(std::sqrt(norm) - 1.0), 1e-3) << "text " << i << " was normalized";
  }
}

TEST(BertGguf, TheCommandLineTakesTheFile) {
  const std::vector<Case> cases = reference();
  const Case& c = cases[2];
  const test::CliRun r = test::run_rlx("embed --device cpu --model " + kF32 + " \"" + c.text + "\"");
  ASSERT_EQ(r.status, 0) << r.err;
  const auto j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j.at("dim").get<int>(), 48);
  ASSERT_EQ(j.at("embeddings").size(), 1u);
  const auto got = j["embeddings"][0]["embedding"].get<std::vector<float>>();
  EXPECT_GE(cosine(got, c.embedding), 0.9999);
  EXPECT_LE(max_diff(got, c.embedding), 1e-4);
}

// The fixture rewritten: metadata keys replaced (a value) or dropped
// (nullopt), tensors dropped, renamed or reshaped; every tensor f32.
struct Rewrite {
  std::map<std::string, std::optional<std::pair<uint32_t, std::string>>> keys;  // Keys
  std::set<std::string> drop;
  std::map<std::string, std::vector<float>> add;  // 1-D tensors
  std::map<std::string, Shape> reshape;           // with zeros
};

template <class T>
std::string bytes_of(T v) {
  return std::string(reinterpret_cast<const char*>(&v), sizeof v);
}

using Keys = std::map<std::string, std::optional<std::pair<uint32_t, std::string>>>;

// f's metadata into out, with the keys of `keys` replaced (a value) or
// dropped (nullopt); keys that f lacks are added.
void copy_metadata(const GgufFile& f, test::GgufWriter& out, const Keys& keys) {
  for (const auto& [key, v] : f.metadata()) {
    if (auto it = keys.find(key); it != keys.end()) {
      if (it->second) out.value(key, it->second->first, it->second->second);
      continue;
    }
    switch (v.type) {
      case GgufValueType::String: out.str(key, v.s); break;
      case GgufValueType::Bool: out.boolean(key, v.u != 0); break;
      case GgufValueType::F32: out.f32(key, float(v.f)); break;
      case GgufValueType::Array:
        if (v.elem == GgufValueType::String) {
          out.strs(key, v.strings);
        } else {
          std::vector<int32_t> ints;
          for (int64_t x : f.get_int_array(key)) ints.push_back(int32_t(x));
          out.i32s(key, ints);
        }
        break;
      default: {  // integers, as many bytes as their type has
        const uint64_t u = v.type == GgufValueType::I8 || v.type == GgufValueType::I16 ||
                                   v.type == GgufValueType::I32 || v.type == GgufValueType::I64
                               ? uint64_t(v.i)
                               : v.u;
        const size_t n = v.type == GgufValueType::U8 || v.type == GgufValueType::I8     ? 1
                         : v.type == GgufValueType::U16 || v.type == GgufValueType::I16 ? 2
                         : v.type == GgufValueType::U64 || v.type == GgufValueType::I64 ? 8
                                                                                        : 4;
        out.value(key, uint32_t(v.type), bytes_of(u).substr(0, n));
        break;
      }
    }
  }
  for (const auto& [key, v] : keys)
    if (v && !f.has(key)) out.value(key, v->first, v->second);
}

fs::path rewrite(const test::TempDir& dir, const Rewrite& w, const std::string& name = "broken.gguf",
                 const std::string& from = kF32) {
  const GgufFile f(from);
  test::GgufWriter out;
  copy_metadata(f, out, w.keys);
  for (const GgufTensorInfo& t : f.tensors()) {
    if (w.drop.count(t.name)) continue;
    if (auto it = w.reshape.find(t.name); it != w.reshape.end()) {
      int64_t n = 1;
      for (int64_t d : it->second) n *= d;
      out.tensor(t.name, it->second, std::vector<float>(size_t(n), 0.f));
      continue;
    }
    out.tensor(t.name, t.shape, f.to_f32(t.name));
  }
  for (const auto& [n, v] : w.add) out.tensor(n, {int64_t(v.size())}, v);
  const fs::path p = dir.path() / name;
  out.write(p);
  return p;
}

void expect_error(const std::string& msg, std::initializer_list<std::string> parts) {
  ASSERT_FALSE(msg.empty()) << "no error";
  for (const std::string& p : parts) EXPECT_NE(msg.find(p), std::string::npos) << "'" << p << "' not in: " << msg;
}

std::string embedder_error(const fs::path& p, const EmbedderOptions& o = {}) {
  return error_of([&] {
    Embedder e(p.string(), o);
    e.embed({"hello"});
  });
}

constexpr uint32_t kU32 = 4, kString = 8;

TEST(BertGguf, TheRewrittenFixtureStillLoads) {
  // The rewriting itself keeps the model: f32 tensors, the same metadata.
  test::TempDir dir;
  const fs::path p = rewrite(dir, {});
  Embedder a(p.string()), b(kF32);
  const std::vector<Case> cases = reference();
  const auto x = a.embed(texts_of(cases)), y = b.embed(texts_of(cases));
  for (size_t i = 0; i < cases.size(); ++i) EXPECT_LE(max_diff(x[i], y[i]), 1e-6) << "text " << i;
}

TEST(BertGguf, AMissingTensorIsNamed) {
  test::TempDir dir;
  for (const char* t : {"blk.1.ffn_down.weight", "blk.0.attn_k.bias", "token_embd_norm.weight",
                        "position_embd.weight", "blk.1.layer_output_norm.weight"}) {
    Rewrite w;
    w.drop = {t};
    expect_error(embedder_error(rewrite(dir, w)), {"broken.gguf", std::string("has no tensor '") + t + "'"});
  }
  // Without the token table there is no vocabulary size.
  Rewrite w;
  w.drop = {"token_embd.weight"};
  expect_error(embedder_error(rewrite(dir, w)), {"broken.gguf", "has no tensor 'token_embd.weight'"});
}

TEST(BertGguf, MisshapenAndExtraTensorsAreNamed) {
  test::TempDir dir;
  Rewrite w;
  w.reshape = {{"blk.0.attn_q.weight", {48, 47}}};
  expect_error(embedder_error(rewrite(dir, w)), {"broken.gguf", "tensor 'blk.0.attn_q.weight' has shape [48, 47]"});
  w = {};
  w.reshape = {{"blk.1.ffn_up.weight", {99, 48}}};
  expect_error(embedder_error(rewrite(dir, w)), {"broken.gguf", "tensor 'blk.1.ffn_up.weight' has shape [99, 48]"});
  w = {};
  w.add = {{"blk.0.attn_mystery.weight", std::vector<float>(8, 1.f)}};
  expect_error(embedder_error(rewrite(dir, w)), {"broken.gguf", "tensor 'blk.0.attn_mystery.weight' is not used"});
  // A third layer's weights that bert.block_count does not count.
  w = {};
  w.add = {{"blk.2.attn_q.bias", std::vector<float>(48, 1.f)}};
  expect_error(embedder_error(rewrite(dir, w)), {"broken.gguf", "tensor 'blk.2.attn_q.bias' is not used"});
  // A reranker's classifier.
  w = {};
  w.add = {{"cls.output.weight", std::vector<float>(48, 1.f)}};
  expect_error(embedder_error(rewrite(dir, w)), {"broken.gguf", "cls.output.weight", "reranker"});
}

TEST(BertGguf, MetadataIsNamedWhenMissingOrWrong) {
  test::TempDir dir;
  auto with = [&](const std::string& key, std::optional<std::pair<uint32_t, std::string>> v) {
    Rewrite w;
    w.keys[key] = std::move(v);
    return embedder_error(rewrite(dir, w));
  };
  for (const char* key : {"bert.block_count", "bert.embedding_length", "bert.feed_forward_length",
                          "bert.attention.head_count", "bert.context_length", "bert.attention.layer_norm_epsilon",
                          "tokenizer.ggml.tokens"})
    expect_error(with(key, std::nullopt), {"broken.gguf", key});
  // Sizes that disagree with the tensors name the tensor.
  expect_error(with("bert.block_count", std::pair{kU32, bytes_of(uint32_t(3))}),
               {"broken.gguf", "has no tensor 'blk.2.ffn_up.weight'"});
  expect_error(with("bert.feed_forward_length", std::pair{kU32, bytes_of(uint32_t(101))}),
               {"broken.gguf", "tensor 'blk.1.ffn_up.weight' has shape [100, 48]"});
  expect_error(with("bert.attention.head_count", std::pair{kU32, bytes_of(uint32_t(5))}),
               {"broken.gguf", "bert.embedding_length 48 is not a multiple of bert.attention.head_count 5"});
  expect_error(with("bert.attention.head_count", std::pair{kString, bytes_of(uint64_t(1)) + "3"}),
               {"broken.gguf", "bert.attention.head_count"});
  expect_error(with("bert.block_count", std::pair{kU32, bytes_of(uint32_t(1u << 30))}),
               {"broken.gguf", "bert.block_count"});
  // Another architecture, and pooling rlx does not run.
  expect_error(with("general.architecture", std::pair{kString, bytes_of(uint64_t(12)) + "jina-bert-v2"}),
               {"broken.gguf", "general.architecture 'jina-bert-v2'"});
  // Another encoder's name over BERT's keys: its own keys are missing.
  expect_error(with("general.architecture", std::pair{kString, bytes_of(uint64_t(10)) + "nomic-bert"}),
               {"broken.gguf", "nomic-bert.block_count"});
  expect_error(with("bert.pooling_type", std::pair{kU32, bytes_of(uint32_t(4))}),
               {"broken.gguf", "bert.pooling_type 4"});
  // No pooling in the file: an error unless the caller chooses one.
  const fs::path none = [&] {
    Rewrite w;
    w.keys["bert.pooling_type"] = std::nullopt;
    return rewrite(dir, w, "nopool.gguf");
  }();
  expect_error(embedder_error(none), {"nopool.gguf", "bert.pooling_type"});
  EmbedderOptions o;
  o.pooling = PoolingMode::Mean;
  Embedder e(none.string(), o);
  const std::vector<Case> cases = reference();
  EXPECT_GE(cosine(e.embed({cases[2].text})[0], cases[2].embedding), 0.9999);
}

// llama.cpp's Q8_0 and Q4_0 blocks of 32 values (an f16 scale, then the
// values), rounded as its reference quantizers round.
std::string quantize_blocks(GgmlType type, const std::vector<float>& x) {
  std::string out;
  for (size_t b = 0; b < x.size(); b += 32) {
    float amax = 0, max = 0;
    for (size_t j = 0; j < 32; ++j)
      if (std::fabs(x[b + j]) > amax) amax = std::fabs(x[b + j]), max = x[b + j];
    const float d = type == GgmlType::Q8_0 ? amax / 127.f : max / -8.f;
    const float id = d != 0.f ? 1.f / d : 0.f;
    const uint16_t h = float_to_half(d);
    out.append(reinterpret_cast<const char*>(&h), 2);
    if (type == GgmlType::Q8_0) {
      for (size_t j = 0; j < 32; ++j) out += char(int8_t(std::lround(x[b + j] * id)));
    } else {
      for (size_t j = 0; j < 16; ++j) {
        auto q = [&](float v) { return uint8_t(std::min(15, int(v * id + 8.5f))); };
        out += char(q(x[b + j]) | (q(x[b + 16 + j]) << 4));
      }
    }
  }
  return out;
}

// A one-layer BERT of hidden 64 (every matrix's rows a whole number of
// blocks) with the fixture's vocabulary, its matrices stored as `type`, and
// the same model in f32 holding exactly the values those blocks decode to:
// both must give the same embeddings (quantized tensors are dequantized at
// load, the rest of the path is the f32 one).
std::pair<fs::path, fs::path> quantized_pair(const test::TempDir& dir, GgmlType type) {
  const GgufFile vocab(kF32);
  const int64_t H = 64, I = 96, P = 64, V = vocab.tensor("token_embd.weight").shape[0];
  const Keys keys = {{"bert.block_count", std::pair{kU32, bytes_of(uint32_t(1))}},
                     {"bert.embedding_length", std::pair{kU32, bytes_of(uint32_t(H))}},
                     {"bert.feed_forward_length", std::pair{kU32, bytes_of(uint32_t(I))}},
                     {"bert.attention.head_count", std::pair{kU32, bytes_of(uint32_t(4))}}};
  test::GgufWriter q, f;
  copy_metadata(vocab, q, keys);
  copy_metadata(vocab, f, keys);
  uint64_t seed = 11;
  auto add = [&](const std::string& name, const Shape& shape, float lo, float hi) {
    int64_t n = 1;
    for (int64_t d : shape) n *= d;
    std::vector<float> v = test::random_floats(size_t(n), ++seed, lo, hi);
    if (shape.size() == 2 && name != "token_types.weight") {
      const std::string blocks = quantize_blocks(type, v);
      q.tensor_bytes(name, shape, uint32_t(type), blocks);
      dequantize(type, reinterpret_cast<const uint8_t*>(blocks.data()), v.data(), uint64_t(n));
    } else {
      q.tensor(name, shape, v);
    }
    f.tensor(name, shape, v);
  };
  add("token_embd.weight", {V, H}, -1.f, 1.f);
  add("position_embd.weight", {P, H}, -0.5f, 0.5f);
  add("token_types.weight", {2, H}, -0.5f, 0.5f);
  add("token_embd_norm.weight", {H}, 0.8f, 1.2f);
  add("token_embd_norm.bias", {H}, -0.2f, 0.2f);
  for (const char* m : {"attn_q", "attn_k", "attn_v", "attn_output"}) {
    add(std::string("blk.0.") + m + ".weight", {H, H}, -0.3f, 0.3f);
    add(std::string("blk.0.") + m + ".bias", {H}, -0.2f, 0.2f);
  }
  add("blk.0.ffn_up.weight", {I, H}, -0.3f, 0.3f);
  add("blk.0.ffn_up.bias", {I}, -0.2f, 0.2f);
  add("blk.0.ffn_down.weight", {H, I}, -0.3f, 0.3f);
  add("blk.0.ffn_down.bias", {H}, -0.2f, 0.2f);
  for (const char* n : {"attn_output_norm", "layer_output_norm"}) {
    add(std::string("blk.0.") + n + ".weight", {H}, 0.8f, 1.2f);
    add(std::string("blk.0.") + n + ".bias", {H}, -0.2f, 0.2f);
  }
  const std::string tag = ggml_type_name(type);
  const fs::path pq = dir.path() / ("bert-" + tag + ".gguf"), pf = dir.path() / ("bert-" + tag + "-as-f32.gguf");
  q.write(pq);
  f.write(pf);
  return {pq, pf};
}

// The dense weights stay quantized on the integer kernels (matmul_q:
// activations as two int8 digits, within 1e-4 of the float file's vectors);
// with the f32 kernel every quantized tensor is dequantized at load and the
// vectors are the float file's within f32 rounding. The embedding tables
// are dequantized either way.
TEST(BertGguf, QuantizedDenseWeightsStayQuantizedOnTheIntegerKernels) {
  const std::vector<Case> cases = reference();
  test::TempDir dir;
  for (GgmlType type : {GgmlType::Q8_0, GgmlType::Q4_0}) {
    SCOPED_TRACE(ggml_type_name(type));
    const auto [quantized, plain] = quantized_pair(dir, type);
    {
      const GgufFile file(quantized.string());
      ASSERT_EQ(file.tensor("blk.0.ffn_down.weight").type, type);
      ASSERT_EQ(file.tensor("token_embd.weight").type, type);
    }
    for (cpu::QuantKernel kernel : {cpu::quant_kernel(), cpu::QuantKernel::F32}) {
      SCOPED_TRACE(cpu::quant_kernel_name(kernel));
      const test::QuantKernelScope scope(kernel);
      const uint64_t calls = cpu::quant_kernel_calls(kernel);
      Embedder a(quantized.string()), b(plain.string());
      EXPECT_EQ(a.dim(), 64);
      const auto x = a.embed(texts_of(cases));
      const bool integer = kernel != cpu::QuantKernel::F32;
      // 6 products a layer on the quantized file only; none with the f32 kernel.
      EXPECT_EQ(cpu::quant_kernel_calls(kernel) > calls, integer);
      const auto y = b.embed(texts_of(cases));
      for (size_t i = 0; i < cases.size(); ++i) {
        EXPECT_LE(max_diff(x[i], y[i]), integer ? 1e-4 : 1e-6) << "text " << i;
        double norm = 0;
        for (float v : x[i]) norm += double(v) * v;
        EXPECT_NEAR(norm, 1.0, 1e-5) << "text " << i;
      }
      // Not all texts give one vector: the model is not degenerate.
      EXPECT_LT(cosine(x[0], x[3]), 0.99);
    }
  }
}

// nomic-bert: the converter's f32 GGUF of a random NomicBertModel against a
// float64 forward of it (the texts cut at 64 tokens, as the reference's).
TEST(BertGguf, NomicBertMatchesAFloat64Forward) {
  const std::vector<Case> cases = reference();
  for (int max_batch : {4, 1}) {
    SCOPED_TRACE("batch " + std::to_string(max_batch));
    EmbedderOptions o;
    o.max_batch = max_batch;
    o.max_len = 64;
    Embedder e(kNomic, o);
    EXPECT_EQ(e.info().model_type, "nomic_bert");
    EXPECT_EQ(e.info().hidden_size, 48);
    EXPECT_EQ(e.info().num_layers, 2);
    EXPECT_EQ(e.info().intermediate_size, 100);
    EXPECT_EQ(e.info().max_position_embeddings, 2048);  // the converter's, for n_positions 8192
    EXPECT_EQ(e.info().pooling, "mean");
    EXPECT_TRUE(e.normalizes());
    for (const Case& c : cases) EXPECT_EQ(e.tokenizer().encode(c.text, e.max_len()).ids, c.ids) << c.text;
    const auto got = e.embed(texts_of(cases));
    for (size_t i = 0; i < cases.size(); ++i) {
      EXPECT_GE(cosine(got[i], cases[i].nomic), 0.99999) << "text " << i;
      EXPECT_LE(max_diff(got[i], cases[i].nomic), 1e-5) << "text " << i;
    }
  }
}

TEST(BertGguf, NomicBertTensorsAreNamed) {
  test::TempDir dir;
  for (const char* t : {"blk.1.ffn_gate.weight", "blk.0.attn_qkv.weight", "token_embd_norm.bias"}) {
    Rewrite w;
    w.drop = {t};
    expect_error(embedder_error(rewrite(dir, w, "nomic.gguf", kNomic)),
                 {"nomic.gguf", std::string("has no tensor '") + t + "'"});
  }
  Rewrite w;
  w.reshape = {{"blk.0.attn_qkv.weight", {143, 48}}};
  expect_error(embedder_error(rewrite(dir, w, "nomic.gguf", kNomic)),
               {"nomic.gguf", "tensor 'blk.0.attn_qkv.weight' has shape [143, 48]"});
  // A position table is no NomicBERT's.
  w = {};
  w.add = {{"position_embd.weight", std::vector<float>(48, 0.f)}};
  expect_error(embedder_error(rewrite(dir, w, "nomic.gguf", kNomic)),
               {"nomic.gguf", "tensor 'position_embd.weight' is not used by the nomic_bert config"});
  w = {};
  w.keys["nomic-bert.attention.head_count"] = std::pair{kU32, bytes_of(uint32_t(16))};  // a head of 3
  expect_error(embedder_error(rewrite(dir, w, "nomic.gguf", kNomic)), {"nomic.gguf", "even head size"});
}

TEST(BertGguf, ACutOrForeignFileIsAnError) {
  test::TempDir dir;
  std::ifstream in(kF32, std::ios::binary);
  std::string bytes((std::istreambuf_iterator<char>(in)), {});
  for (size_t keep : {size_t(3), size_t(40), bytes.size() / 2, bytes.size() - 7}) {
    const fs::path p = dir.path() / "cut.gguf";
    test::write_text(p, bytes.substr(0, keep));
    const std::string msg = embedder_error(p);
    EXPECT_FALSE(msg.empty()) << "kept " << keep;
    EXPECT_NE(msg.find("cut.gguf"), std::string::npos) << msg;
  }
  const fs::path text = dir.path() / "notes.txt";
  test::write_text(text, "not a model");
  expect_error(embedder_error(text), {"notes.txt", "not a GGUF file"});
  // A decoder's GGUF is for generate.
  expect_error(embedder_error(std::string(RLX_SOURCE_DIR) + "/tests/data/tiny_llama.gguf"),
               {"tiny_llama.gguf", "general.architecture 'llama'"});
}

TEST(BertGguf, TensorNamesMapBothWays) {
  EXPECT_EQ(bert_gguf_tensor(EncoderFamily::Bert, "embeddings.word_embeddings.weight"), "token_embd.weight");
  EXPECT_EQ(bert_gguf_tensor(EncoderFamily::Bert, "embeddings.LayerNorm.bias"), "token_embd_norm.bias");
  EXPECT_EQ(bert_gguf_tensor(EncoderFamily::Bert, "encoder.layer.11.attention.self.query.weight"), "blk.11.attn_q.weight");
  EXPECT_EQ(bert_gguf_tensor(EncoderFamily::Bert, "encoder.layer.0.attention.output.dense.bias"), "blk.0.attn_output.bias");
  EXPECT_EQ(bert_gguf_tensor(EncoderFamily::Bert, "encoder.layer.0.attention.output.LayerNorm.weight"), "blk.0.attn_output_norm.weight");
  EXPECT_EQ(bert_gguf_tensor(EncoderFamily::Bert, "encoder.layer.3.intermediate.dense.weight"), "blk.3.ffn_up.weight");
  EXPECT_EQ(bert_gguf_tensor(EncoderFamily::Bert, "encoder.layer.3.output.dense.weight"), "blk.3.ffn_down.weight");
  EXPECT_EQ(bert_gguf_tensor(EncoderFamily::Bert, "encoder.layer.3.output.LayerNorm.bias"), "blk.3.layer_output_norm.bias");
  // nomic's checkpoint names.
  const EncoderFamily nomic = EncoderFamily::NomicBert;
  EXPECT_EQ(bert_gguf_tensor(nomic, "embeddings.word_embeddings.weight"), "token_embd.weight");
  EXPECT_EQ(bert_gguf_tensor(nomic, "embeddings.token_type_embeddings.weight"), "token_types.weight");
  EXPECT_EQ(bert_gguf_tensor(nomic, "emb_ln.bias"), "token_embd_norm.bias");
  EXPECT_EQ(bert_gguf_tensor(nomic, "encoder.layers.1.attn.Wqkv.weight"), "blk.1.attn_qkv.weight");
  EXPECT_EQ(bert_gguf_tensor(nomic, "encoder.layers.1.attn.out_proj.weight"), "blk.1.attn_output.weight");
  EXPECT_EQ(bert_gguf_tensor(nomic, "encoder.layers.0.mlp.fc11.weight"), "blk.0.ffn_up.weight");
  EXPECT_EQ(bert_gguf_tensor(nomic, "encoder.layers.0.mlp.fc12.weight"), "blk.0.ffn_gate.weight");
  EXPECT_EQ(bert_gguf_tensor(nomic, "encoder.layers.0.mlp.fc2.bias"), "blk.0.ffn_down.bias");
  EXPECT_EQ(bert_gguf_tensor(nomic, "encoder.layers.0.norm1.weight"), "blk.0.attn_output_norm.weight");
  EXPECT_EQ(bert_gguf_tensor(nomic, "encoder.layers.0.norm2.weight"), "blk.0.layer_output_norm.weight");
  EXPECT_EQ(bert_gguf_tensor(nomic, "encoder.layer.0.attention.self.query.weight"), "");
  EXPECT_EQ(bert_gguf_tensor(nomic, "embeddings.position_embeddings.weight"), "");
  for (const char* unknown : {"pooler.dense.weight", "encoder.layer.x.output.dense.weight", "encoder.layer.1",
                              "embeddings.word_embeddings.scale", "classifier.weight"})
    EXPECT_EQ(bert_gguf_tensor(EncoderFamily::Bert, unknown), "") << unknown;
}

}  // namespace
}  // namespace rlx
