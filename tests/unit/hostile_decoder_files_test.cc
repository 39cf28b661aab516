// Decoder model files as a hostile download could make them: GGUF metadata
// of the wrong type or out of range, sizes that disagree with the tensors,
// arrays that claim more than the file holds, a FIFO named as the model,
// Hugging Face configs that wrap or never end, weights no config uses, NaN
// weights, and the padded vocabularies real checkpoints ship. Each ends in
// an rlx::Error naming the file and the key, quickly, or in the defined
// result.
#include <gtest/gtest.h>

#include <sys/resource.h>
#include <sys/stat.h>

#include <chrono>
#include <cmath>
#include <cstring>
#include <limits>

#include "models/byte_level_vocab.h"  // tests/models
#include "models/decoder_family_files.h"
#include "models/gguf.h"
#include "models/gguf_writer.h"
#include "models/llama.h"
#include "models/llama_generator.h"
#include "models/sampling.h"
#include "models/test_files.h"
#include "rlx/llm.h"
#include "test_util.h"
#include "tokenizers/spm.h"

namespace rlx {
namespace {

namespace fs = std::filesystem;
using test::error_of;
using test::TempDir;

void expect_error(const std::string& msg, std::initializer_list<std::string> parts) {
  ASSERT_FALSE(msg.empty()) << "no error";
  for (const std::string& p : parts) EXPECT_NE(msg.find(p), std::string::npos) << "'" << p << "' not in: " << msg;
}

template <class T>
std::string bytes_of(T v) {
  return std::string(reinterpret_cast<const char*>(&v), sizeof v);
}

constexpr uint32_t kU32 = 4, kF32 = 6, kBool = 7, kU64 = 10, kI64 = 11, kF64 = 12;

// A valid 2-layer LLaMA GGUF (odd sizes, random weights), with metadata
// values replaced or added by `edits` (key -> type, payload) and tensors
// added by `extra`.
struct Edit {
  uint32_t type;
  std::string payload;
};

class LlamaGgufFiles : public ::testing::Test {
 protected:
  LlamaGgufFiles() : cfg_(test::odd_config()) {
    cfg_.tie_embeddings = false;
    w_ = test::weights_of(cfg_);
  }

  fs::path write(const std::map<std::string, Edit>& edits, const std::string& name = "m.gguf",
                 const std::vector<std::string>& tokens = {}, const test::Weights* weights = nullptr) {
    const LlamaConfig& c = cfg_;
    std::map<std::string, Edit> kv = {
        {"llama.context_length", {kU32, bytes_of(uint32_t(64))}},
        {"llama.embedding_length", {kU32, bytes_of(uint32_t(c.hidden_size))}},
        {"llama.feed_forward_length", {kU32, bytes_of(uint32_t(c.intermediate_size))}},
        {"llama.block_count", {kU32, bytes_of(uint32_t(c.num_layers))}},
        {"llama.attention.head_count", {kU32, bytes_of(uint32_t(c.num_heads))}},
        {"llama.attention.head_count_kv", {kU32, bytes_of(uint32_t(c.num_kv_heads))}},
        {"llama.attention.key_length", {kU32, bytes_of(uint32_t(c.head_dim))}},
        {"llama.attention.layer_norm_rms_epsilon", {kF32, bytes_of(1e-5f)}},
        {"llama.rope.freq_base", {kF32, bytes_of(10000.f)}},
    };
    for (const auto& [k, e] : edits) kv[k] = e;
    test::GgufWriter gw;
    gw.str("general.architecture", "llama");
    for (const auto& [k, e] : kv) gw.value(k, e.type, e.payload);
    if (!tokens.empty()) {
      gw.str("tokenizer.ggml.model", "gpt2").strs("tokenizer.ggml.tokens", tokens);
      gw.strs("tokenizer.ggml.merges", {});
    }
    Graph g = build_llama_graph(c, 1, 1, DType::F32);
    for (const auto& [n, v] : weights ? *weights : w_) gw.tensor(n, test::param_shape(g, n), v);
    for (const auto& [n, v] : extra_) gw.tensor(n, {int64_t(v.size())}, v);
    const fs::path p = dir_.path() / name;
    gw.write(p);
    return p;
  }
  std::string config_error(const std::map<std::string, Edit>& edits) {
    const fs::path p = write(edits);
    return error_of([&] { LlamaGguf m(p.string()); });
  }
  static GeneratorOptions cpu() {
    GeneratorOptions o;
    o.device = Device::Cpu;
    o.threads = 1;
    return o;
  }

  TempDir dir_;
  LlamaConfig cfg_;
  test::Weights w_;
  std::map<std::string, std::vector<float>> extra_;
};

TEST_F(LlamaGgufFiles, TheBaseLoadsAndRuns) {
  const fs::path p = write({});
  LlamaGenerator gen(p.string(), cpu());
  EXPECT_EQ(gen.config().num_layers, 2);
  const std::vector<float> l = gen.next_logits({1, 2, 3});
  ASSERT_EQ(int64_t(l.size()), cfg_.vocab_size);
  EXPECT_TRUE(std::all_of(l.begin(), l.end(), [](float v) { return std::isfinite(v); }));
}

TEST_F(LlamaGgufFiles, IntegersAreTypedAndRangeChecked) {
  const uint64_t big = uint64_t(1) << 32;
  // A u64 past 2^32 is not taken modulo 2^32.
  expect_error(config_error({{"llama.block_count", {kU64, bytes_of(big + 1)}}}),
               {"m.gguf", "llama.block_count", "4294967297", "outside [1, 1024]"});
  expect_error(config_error({{"llama.attention.head_count", {kU64, bytes_of(big + 4)}}}),
               {"m.gguf", "llama.attention.head_count", "4294967300", "outside"});
  expect_error(config_error({{"llama.embedding_length", {kU64, bytes_of(big + 64)}}}),
               {"llama.embedding_length", "4294967360", "outside"});
  expect_error(config_error({{"llama.attention.key_length", {kU64, bytes_of(big + 48)}}}),
               {"llama.attention.key_length", "outside"});
  expect_error(config_error({{"llama.vocab_size", {kU64, bytes_of(big + 301)}}}), {"llama.vocab_size", "outside"});
  expect_error(config_error({{"llama.block_count", {kI64, bytes_of(int64_t(-2))}}}), {"llama.block_count", "-2"});
  // A bool is not an integer.
  expect_error(config_error({{"llama.block_count", {kBool, std::string(1, '\1')}}}),
               {"m.gguf", "llama.block_count", "is a bool, not an integer"});
  // 2^31 - 1 layers over a file of 2: refused at once, before any graph.
  const auto t0 = std::chrono::steady_clock::now();
  expect_error(config_error({{"llama.block_count", {kU32, bytes_of(uint32_t(INT32_MAX))}}}),
               {"llama.block_count", "2147483647", "outside [1, 1024]"});
  expect_error(config_error({{"llama.context_length", {kU32, bytes_of(uint32_t(INT32_MAX))}}}),
               {"llama.context_length", "outside"});
  EXPECT_LT(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count(), 2.0);
}

TEST_F(LlamaGgufFiles, SizesAreCrossCheckedAgainstTheTensors) {
  expect_error(config_error({{"llama.block_count", {kU32, bytes_of(uint32_t(3))}}}),
               {"m.gguf", "block_count is 3 but the file holds tensors of 2 layers"});
  // Fewer layers than the file holds: the rest would be silently unused.
  expect_error(config_error({{"llama.block_count", {kU32, bytes_of(uint32_t(1))}}}),
               {"m.gguf", "tensor 'blk.1.", "belongs to layer 1, but block_count is 1", "does not use"});
  expect_error(config_error({{"llama.vocab_size", {kU32, bytes_of(uint32_t(300))}}}),
               {"llama.vocab_size 300 but token_embd.weight has 301 rows"});
}

TEST_F(LlamaGgufFiles, FloatsAreFiniteAndInTheirDomain) {
  const float nan = std::numeric_limits<float>::quiet_NaN(), inf = std::numeric_limits<float>::infinity();
  for (float theta : {nan, -10000.f, 0.f, inf})
    expect_error(config_error({{"llama.rope.freq_base", {kF32, bytes_of(theta)}}}),
                 {"m.gguf", "llama.rope.freq_base", "outside"});
  for (double eps : {1e300, 0.0, -1e-5, 1.0})
    expect_error(config_error({{"llama.attention.layer_norm_rms_epsilon", {kF64, bytes_of(eps)}}}),
                 {"m.gguf", "llama.attention.layer_norm_rms_epsilon", "outside"});
  // An integer where a float belongs is the wrong type.
  expect_error(config_error({{"llama.rope.freq_base", {kU32, bytes_of(uint32_t(10000))}}}),
               {"llama.rope.freq_base", "is a u32, not a float"});
  // An f64 of a plain value is read.
  const fs::path p = write({{"llama.rope.freq_base", {kF64, bytes_of(500000.0)}}});
  EXPECT_EQ(LlamaGguf(p.string()).config().rope_theta, 500000.f);
}

TEST_F(LlamaGgufFiles, UnknownTensorsAreNamed) {
  extra_["blk.0.attn_mystery.weight"] = std::vector<float>(8, 1.f);
  const fs::path p = write({});
  expect_error(error_of([&] {
                 LlamaGenerator gen(p.string(), cpu());
                 gen.next_logits({1});
               }),
               {"m.gguf", "tensor 'blk.0.attn_mystery.weight' is not used by the llama config"});
}

TEST_F(LlamaGgufFiles, AFifoIsRefusedWithoutWaiting) {
  const fs::path fifo = dir_.path() / "fifo.gguf";
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  const auto t0 = std::chrono::steady_clock::now();
  expect_error(error_of([&] { GgufFile f(fifo.string()); }), {"fifo.gguf' is not a regular file"});
  expect_error(error_of([&] { LlamaGenerator gen(fifo.string(), cpu()); }), {"fifo.gguf' is not a regular file"});
  EXPECT_LT(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count(), 2.0);
}

TEST_F(LlamaGgufFiles, APaddedVocabularyNeverChoosesThePadding) {
  // The row the unpadded model prefers among the tokenizer's 280 tokens...
  const int tokens = 280;
  const std::vector<int32_t> prompt = {5, 17, 42};
  std::vector<float> full = LlamaGenerator(write({}, "plain.gguf").string(), cpu()).next_logits(prompt);
  ASSERT_EQ(full.size(), size_t(cfg_.vocab_size));
  const int32_t best = int32_t(std::max_element(full.begin(), full.begin() + tokens) - full.begin());
  ASSERT_GT(full[size_t(best)], 0.f);
  // ... and a padding row that is ten times it, which would win were the
  // padding chosen.
  test::Weights w = w_;
  std::vector<float>& head = w["output.weight"];
  const size_t H = size_t(cfg_.hidden_size);
  for (size_t i = 0; i < H; ++i) head[300 * H + i] = 10.f * head[size_t(best) * H + i];
  const fs::path p = write({}, "padded.gguf", test::byte_level_tokens(tokens), &w);

  LlamaGenerator gen(p.string(), cpu());
  EXPECT_EQ(gen.config().vocab_size, 301);
  EXPECT_EQ(gen.config().chosen_vocab(), tokens);
  const std::vector<float> l = gen.next_logits(prompt);
  ASSERT_EQ(l.size(), size_t(tokens));
  for (int i = 0; i < tokens; ++i) EXPECT_NEAR(l[size_t(i)], full[size_t(i)], 1e-4f * (1 + std::fabs(full[size_t(i)])));
  EXPECT_EQ(gen.next_token(prompt), best);

  LlmOptions lo;
  lo.device = Device::Cpu;
  lo.threads = 1;
  LLM llm(p.string(), lo);
  GenerateOptions go;
  go.max_tokens = 3;
  go.ignore_eos = true;
  const Generation g = llm.generate(prompt, go);
  ASSERT_EQ(g.ids.size(), 3u);
  EXPECT_EQ(g.ids[0], best);
  for (int32_t id : g.ids) EXPECT_LT(id, tokens);

  // A tokenizer larger than the model is refused.
  const fs::path small = write({}, "small.gguf", test::byte_level_tokens(320));
  expect_error(error_of([&] { LlamaGenerator x(small.string(), cpu()); }),
               {"small.gguf", "the tokenizer has 320 tokens, more than the model's vocab_size 301"});
}

TEST_F(LlamaGgufFiles, AllNanLogitsAreAnErrorNotTokenZero) {
  test::Weights w = w_;
  for (float& v : w["output_norm.weight"]) v = std::numeric_limits<float>::quiet_NaN();
  const fs::path p = write({}, "nan.gguf", {}, &w);
  LlamaGenerator gen(p.string(), cpu());
  expect_error(error_of([&] { gen.next_token({1, 2}); }), {"gave NaN logits"});
  // Weights full of NaN everywhere reach every kernel (UBSan checks the
  // float->int paths on the way) and end in the same error.
  test::Weights all = w_;
  for (auto& [n, v] : all) std::fill(v.begin(), v.end(), std::numeric_limits<float>::quiet_NaN());
  const fs::path q = write({}, "all_nan.gguf", {}, &all);
  LlamaGenerator gen2(q.string(), cpu());
  expect_error(error_of([&] { gen2.next_token({1, 2}); }), {"gave NaN logits"});
}

// The paths that choose the token on the device read back no logits: their
// logit_sum output carries the NaN instead. A NaN embedding row for the
// token the model picks first leaves the prompt's pass finite and breaks
// the next one.
TEST_F(LlamaGgufFiles, NanLogitsOnDeviceChosenPathsAreAnError) {
  const std::vector<int32_t> prompt = {5, 17, 42};
  const int32_t first = LlamaGenerator(write({}, "clean.gguf").string(), cpu()).next_token(prompt);
  ASSERT_TRUE(std::find(prompt.begin(), prompt.end(), first) == prompt.end()) << first;
  test::Weights w = w_;
  const size_t H = size_t(cfg_.hidden_size);
  std::fill_n(w["token_embd.weight"].begin() + size_t(first) * H, H, std::numeric_limits<float>::quiet_NaN());
  const fs::path p = write({}, "nan_row.gguf", {}, &w);

  // The generator: prefill fine, then the step fed from the device state.
  LlamaGenerator gen(p.string(), cpu());
  EXPECT_EQ(gen.next_token(prompt), first);
  std::vector<int32_t> more = prompt;
  more.push_back(first);
  expect_error(error_of([&] { gen.next_token(more); }), {"the forward pass over 4 tokens gave NaN logits"});

  // The engine's greedy rows (no logits read back): the decode step after
  // the first token, and a prompt holding the token in its prefill.
  LlmOptions lo;
  lo.device = Device::Cpu;
  lo.threads = 1;
  LLM llm(p.string(), lo);
  GenerateOptions go;
  go.max_tokens = 4;
  go.ignore_eos = true;
  expect_error(error_of([&] { llm.generate(prompt, go); }), {"a decode step of 1 rows gave NaN logits"});
  expect_error(error_of([&] { llm.generate(more, go); }), {"the prefill of slot", "gave NaN logits"});
  // Sampling rows read the logits back: the same error.
  go.sampling.temperature = 0.8f;
  expect_error(error_of([&] { llm.generate(more, go); }), {"the prefill of slot", "gave NaN logits"});
}

// Found by fuzz/gguf_fuzzer.cc: sscanf's %X took "<0x-C>" as byte
// 0xFFFFFFF4 and the loader wrote outside its 256-entry byte table.
TEST(HostileGgufTokenizer, ASignedByteTokenIsRefused) {
  TempDir d;
  std::vector<std::string> pieces = {"<unk>", "<s>", "</s>", "<0x41>", "<0x-C>", "\xe2\x96\x81" "a"};
  std::string types;
  for (int32_t t : {2, 3, 3, 6, 6, 1}) types += bytes_of(t);
  test::GgufWriter gw;
  gw.str("tokenizer.ggml.model", "llama").strs("tokenizer.ggml.tokens", pieces);
  gw.value("tokenizer.ggml.token_type", 9, bytes_of(uint32_t(5)) + bytes_of(uint64_t(pieces.size())) + types);
  const fs::path p = d.path() / "signed_byte.gguf";
  gw.write(p);
  GgufFile f(p.string());
  expect_error(error_of([&] { SpmTokenizer::from_gguf(f); }), {"signed_byte.gguf", "byte token 4 is '<0x-C>'"});
}

TEST(HostArgmax, FollowsNumpyForNan) {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  EXPECT_EQ(argmax({1.f, 3.f, 3.f, 2.f}), 1);
  EXPECT_EQ(argmax({1.f, nan, 3.f, nan}), 1);
  EXPECT_EQ(argmax({nan, 5.f}), 0);
  EXPECT_EQ(argmax({-INFINITY, 2.f, INFINITY, nan}), 3);
  EXPECT_EQ(argmax({-INFINITY, -INFINITY}), 0);
}

// A GGUF whose one metadata array claims many u8 values: the reader keeps
// them in the mapped file, so memory stays near the file's size (a value
// object per element took ~100 bytes each).
TEST(HostileGgufMetadata, ArraysTakeNoMoreMemoryThanTheFile) {
  TempDir d;
  const uint64_t n = uint64_t(16) << 20;
  std::string b;
  auto put = [&](auto v) { b.append(reinterpret_cast<const char*>(&v), sizeof v); };
  put(uint32_t(0x46554747));
  put(uint32_t(3));
  put(uint64_t(0));  // tensors
  put(uint64_t(1));  // metadata
  put(uint64_t(5));
  b += "k.arr";
  put(uint32_t(9));  // array
  put(uint32_t(0));  // of u8
  put(n);
  b.append(size_t(n), '\7');
  const fs::path p = d.path() / "big_array.gguf";
  test::write_text(p, b);
  b.clear();
  b.shrink_to_fit();
  struct rusage before{}, after{};
  ::getrusage(RUSAGE_SELF, &before);
  GgufFile f(p.string());
  ::getrusage(RUSAGE_SELF, &after);
  EXPECT_LT(after.ru_maxrss - before.ru_maxrss, 200 * 1024) << "KiB of peak memory grew opening a "
                                                            << (n >> 20) << " MiB array";
  const GgufValue& v = f.get("k.arr");
  EXPECT_EQ(v.count, n);
  EXPECT_EQ(v.element(n - 1).as_int(), 7);
  expect_error(error_of([&] { f.get_string_array("k.arr"); }), {"big_array.gguf", "k.arr", "not an array of strings"});
  std::vector<int64_t> ids = f.get_int_array("k.arr", 0, 7);
  EXPECT_EQ(ids.size(), n);
  expect_error(error_of([&] { f.get_int_array("k.arr", 0, 6); }), {"big_array.gguf", "'k.arr'[0] is 7, outside [0, 6]"});
}

TEST(HostileGgufMetadata, ArraysOfArraysAndBadBoolsAreRefused) {
  TempDir d;
  auto file = [&](uint32_t elem, const std::string& items, uint64_t count) {
    std::string b;
    auto put = [&](auto v) { b.append(reinterpret_cast<const char*>(&v), sizeof v); };
    put(uint32_t(0x46554747));
    put(uint32_t(3));
    put(uint64_t(0));
    put(uint64_t(1));
    put(uint64_t(1));
    b += "a";
    put(uint32_t(9));
    put(elem);
    put(count);
    b += items;
    const fs::path p = d.path() / "arr.gguf";
    test::write_text(p, b);
    return error_of([&] { GgufFile f(p.string()); });
  };
  expect_error(file(9, std::string(24, '\0'), 1), {"arr.gguf", "metadata 'a'", "array of arrays"});
  expect_error(file(7, std::string("\1\2", 2), 2), {"arr.gguf", "metadata 'a'[1] is a bool of value 2"});
}

// Hugging Face LLaMA configs: every field typed and in range, by JsonField.
TEST(HostileLlamaConfig, FieldsAreTypedAndBounded) {
  TempDir d;
  auto err = [&](const std::string& field, const std::string& value) {
    std::map<std::string, std::string> f = {
        {"model_type", "\"llama\""}, {"vocab_size", "640"},         {"hidden_size", "64"},
        {"intermediate_size", "96"}, {"num_hidden_layers", "2"},    {"num_attention_heads", "4"},
        {"rms_norm_eps", "1e-5"},    {"max_position_embeddings", "128"}};
    f[field] = value;
    std::string j = "{";
    for (const auto& [k, v] : f) j += (j.size() > 1 ? ", \"" : "\"") + k + "\": " + v;
    test::write_text(d.path() / "config.json", j + "}");
    return error_of([&] { load_llama_config(d.path().string()); });
  };
  EXPECT_EQ(err("vocab_size", "640"), "");
  const auto t0 = std::chrono::steady_clock::now();
  expect_error(err("num_hidden_layers", "2147483647"), {"config.json", "num_hidden_layers", "outside [1, 1024]"});
  EXPECT_LT(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count(), 1.0);
  expect_error(err("vocab_size", "4294967936"), {"config.json", "vocab_size", "4294967936 is outside"});
  expect_error(err("vocab_size", "640.7"), {"config.json", "vocab_size", "640.7 is not an integer"});
  expect_error(err("hidden_size", "true"), {"hidden_size"});
  expect_error(err("num_attention_heads", "0"), {"num_attention_heads", "outside"});
  expect_error(err("rope_theta", "-10000"), {"rope_theta", "outside"});
  expect_error(err("rope_theta", "0"), {"rope_theta", "outside"});
  expect_error(err("rope_theta", "1e300"), {"rope_theta", "outside"});
  expect_error(err("rms_norm_eps", "1e300"), {"rms_norm_eps", "outside"});
  expect_error(err("rms_norm_eps", "0"), {"rms_norm_eps", "outside"});
  expect_error(err("max_position_embeddings", "2147483647"), {"max_position_embeddings", "outside"});
  expect_error(err("model_type", "7"), {"model_type", "must be a string"});
  expect_error(err("rope_scaling", R"({"rope_type": "linear", "factor": -2})"), {"rope_scaling.factor", "outside"});
}

}  // namespace
}  // namespace rlx
