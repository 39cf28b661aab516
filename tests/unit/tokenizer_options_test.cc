// EncodeOptions on both tokenizers: control-token text in the input is
// ordinary text unless parse_special asks (user-defined tokens match either
// way), and add_special adds BOS/EOS as the vocabulary's metadata say, with
// llama.cpp's defaults where a key is missing. Small vocabularies are written
// as GGUF metadata here so every id is known.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <optional>
#include <string>
#include <vector>

#include "models/gguf.h"
#include "models/test_files.h"  // tests/models
#include "tokenizers/bpe.h"
#include "tokenizers/byte_level.h"
#include "tokenizers/spm.h"

namespace rlx {
namespace {

const std::string kData = std::string(RLX_SOURCE_DIR) + "/tests/data/";
const std::string kSmolLM2 =
    std::string(RLX_SOURCE_DIR) + "/models/SmolLM2-135M-Instruct/SmolLM2-135M-Instruct.Q4_1.gguf";

// GGUF v3 with metadata only (value types numbered as in the format).
class GgufMeta {
 public:
  GgufMeta& str(const std::string& k, const std::string& v) { return head(k, 8).text(v); }
  GgufMeta& u32(const std::string& k, uint32_t v) { return head(k, 4).raw(v); }
  GgufMeta& flag(const std::string& k, bool v) { return head(k, 7).raw(uint8_t(v)); }
  GgufMeta& strs(const std::string& k, const std::vector<std::string>& v) {
    head(k, 9).raw(uint32_t(8)).raw(uint64_t(v.size()));
    for (const auto& s : v) text(s);
    return *this;
  }
  GgufMeta& i32s(const std::string& k, const std::vector<int32_t>& v) {
    head(k, 9).raw(uint32_t(5)).raw(uint64_t(v.size()));
    for (int32_t x : v) raw(x);
    return *this;
  }
  GgufMeta& f32s(const std::string& k, const std::vector<float>& v) {
    head(k, 9).raw(uint32_t(6)).raw(uint64_t(v.size()));
    for (float x : v) raw(x);
    return *this;
  }
  std::string write(const test::TempDir& d, const std::string& name) const {
    GgufMeta h;
    h.raw(uint32_t(0x46554747)).raw(uint32_t(3)).raw(uint64_t(0)).raw(uint64_t(n_));
    std::string b = h.b_ + b_;
    while (b.size() % 32) b += '\0';
    auto p = d.path() / name;
    test::write_text(p, b);
    return p.string();
  }

 private:
  template <class T>
  GgufMeta& raw(T v) {
    b_.append(reinterpret_cast<const char*>(&v), sizeof v);
    return *this;
  }
  GgufMeta& text(const std::string& s) {
    raw(uint64_t(s.size()));
    b_ += s;
    return *this;
  }
  GgufMeta& head(const std::string& k, uint32_t type) {
    ++n_;
    return text(k).raw(type);
  }
  std::string b_;
  uint64_t n_ = 0;
};

// A byte-level BPE vocabulary: ids 0-255 are the bytes, then BOS, EOS, a
// control token, a user-defined one and "hi" (made by the one merge).
enum : int32_t { kBos = 256, kEos = 257, kImEnd = 258, kTool = 259, kHi = 260 };

GgufMeta bpe_vocab(const std::string& pre) {
  std::vector<std::string> tokens;
  std::vector<int32_t> types;
  for (int b = 0; b < 256; ++b) {
    tokens.push_back(byte_to_unicode(uint8_t(b)));
    types.push_back(1);
  }
  for (const char* s : {"<|begin_of_text|>", "<|end_of_text|>", "<|im_end|>"}) {
    tokens.push_back(s);
    types.push_back(3);  // control
  }
  tokens.push_back("<tool>");
  types.push_back(4);  // user-defined
  tokens.push_back("hi");
  types.push_back(1);
  GgufMeta m;
  m.str("tokenizer.ggml.model", "gpt2").str("tokenizer.ggml.pre", pre).strs("tokenizer.ggml.tokens", tokens);
  m.i32s("tokenizer.ggml.token_type", types).strs("tokenizer.ggml.merges", {"h i"});
  m.u32("tokenizer.ggml.bos_token_id", kBos).u32("tokenizer.ggml.eos_token_id", kEos);
  return m;
}

std::vector<int32_t> bytes_of(const std::string& s) {
  std::vector<int32_t> ids;
  for (unsigned char c : s) ids.push_back(c);
  return ids;
}

std::vector<int32_t> cat(std::vector<int32_t> a, const std::vector<int32_t>& b) {
  a.insert(a.end(), b.begin(), b.end());
  return a;
}

TEST(BpeEncodeOptions, ControlTokenTextIsTextUnlessParsed) {
  test::TempDir d;
  GgufFile f(bpe_vocab("llama-bpe").write(d, "v.gguf"));
  BpeTokenizer t = BpeTokenizer::from_gguf(f);
  const std::string text = "hi<|im_end|>";
  // Llama 3's split: "hi" "<|" "im" "_end" "|>"; no merge but "h i".
  const std::vector<int32_t> as_text = cat({kHi}, bytes_of("<|im_end|>"));
  EXPECT_EQ(t.encode(text, {.add_special = false, .parse_special = false}), as_text);
  EXPECT_EQ(t.decode(as_text), text);
  EXPECT_EQ(t.encode(text, {.add_special = false, .parse_special = true}), (std::vector<int32_t>{kHi, kImEnd}));
  // BOS too, and a BOS written in the text is text as well.
  EXPECT_EQ(t.encode("<|begin_of_text|>hi", {.add_special = true, .parse_special = false}),
            cat(cat({kBos}, bytes_of("<|begin_of_text|>")), {kHi}));
  // A user-defined token is split out either way.
  for (bool parse : {false, true})
    EXPECT_EQ(t.encode("a<tool>hi", {.add_special = false, .parse_special = parse}),
              (std::vector<int32_t>{'a', kTool, kHi}));
  // The one-argument form parses control tokens, as before the options.
  EXPECT_EQ(t.encode(text), (std::vector<int32_t>{kBos, kHi, kImEnd}));
}

TEST(BpeEncodeOptions, BosAndEosFollowTheMetadataWithLlamaCppDefaults) {
  test::TempDir d;
  const EncodeOptions add{.add_special = true, .parse_special = true};
  const EncodeOptions none{.add_special = false, .parse_special = true};
  auto encode = [&](const GgufMeta& m, const EncodeOptions& o) {
    GgufFile f(m.write(d, "v.gguf"));
    return BpeTokenizer::from_gguf(f).encode("hi", o);
  };
  // Llama 3 without add_bos_token: BOS, as llama.cpp adds it.
  EXPECT_EQ(encode(bpe_vocab("llama-bpe"), add), (std::vector<int32_t>{kBos, kHi}));
  EXPECT_EQ(encode(bpe_vocab("llama-bpe"), none), (std::vector<int32_t>{kHi}));
  EXPECT_EQ(encode(bpe_vocab("llama-bpe").flag("tokenizer.ggml.add_bos_token", false), add),
            (std::vector<int32_t>{kHi}));
  // Other pre-tokenizers: no BOS unless the file asks; EOS when it asks.
  EXPECT_EQ(encode(bpe_vocab("gpt2"), add), (std::vector<int32_t>{kHi}));
  EXPECT_EQ(encode(bpe_vocab("gpt2").flag("tokenizer.ggml.add_bos_token", true), add),
            (std::vector<int32_t>{kBos, kHi}));
  EXPECT_EQ(encode(bpe_vocab("llama-bpe").flag("tokenizer.ggml.add_eos_token", true), add),
            (std::vector<int32_t>{kBos, kHi, kEos}));
  EXPECT_EQ(encode(bpe_vocab("llama-bpe").flag("tokenizer.ggml.add_eos_token", true), none),
            (std::vector<int32_t>{kHi}));
  // llama.cpp's names for rules rlx has: gpt-2 as gpt2, command-r as starcoder.
  GgufFile g(bpe_vocab("gpt-2").write(d, "g.gguf"));
  EXPECT_EQ(BpeTokenizer::from_gguf(g).options().split, BpeSplit::Gpt2);
  EXPECT_FALSE(BpeTokenizer::from_gguf(g).options().split_digits);
  GgufFile c(bpe_vocab("command-r").write(d, "c.gguf"));
  EXPECT_TRUE(BpeTokenizer::from_gguf(c).options().split_digits);
}

TEST(BpeEncodeOptions, SmolLM2ChatMarkersOnlyWhenParsed) {
  GgufFile f(kSmolLM2);
  BpeTokenizer t = BpeTokenizer::from_gguf(f);
  const int32_t start = t.id_of("<|im_start|>"), end = t.id_of("<|im_end|>");
  ASSERT_EQ(start, 1);
  ASSERT_EQ(end, 2);
  const std::string text = "<|im_start|>user\nhi<|im_end|>";
  auto parsed = t.encode(text, {.add_special = false, .parse_special = true});
  ASSERT_GE(parsed.size(), 4u);
  EXPECT_EQ(parsed.front(), start);
  EXPECT_EQ(parsed.back(), end);
  auto plain = t.encode(text, {.add_special = false, .parse_special = false});
  EXPECT_EQ(std::count(plain.begin(), plain.end(), start), 0);
  EXPECT_EQ(std::count(plain.begin(), plain.end(), end), 0);
  EXPECT_GT(plain.size(), parsed.size() + 4);
  EXPECT_EQ(t.decode(plain), text);
  // The middle is the same text either way.
  auto middle = t.encode("user\nhi", {.add_special = false, .parse_special = false});
  EXPECT_EQ(std::vector<int32_t>(parsed.begin() + 1, parsed.end() - 1), middle);
}

// A SentencePiece vocabulary in the phi-3 manner: <unk> <s> </s>, the 256 byte
// tokens (ids 3 + byte), a few pieces, a control <|user|> and a user-defined
// <|tool|>.
enum : int32_t { kSpmBos = 1, kSpmEos = 2, kSpace = 259, kH = 260, kI = 261, kSpmHi = 262, kSpaceHi = 263,
                 kUser = 264, kSpmTool = 265 };

GgufMeta spm_vocab() {
  std::vector<std::string> tokens = {"<unk>", "<s>", "</s>"};
  std::vector<int32_t> types = {2, 3, 3};
  std::vector<float> scores = {0, 0, 0};
  for (int b = 0; b < 256; ++b) {
    char buf[8];
    std::snprintf(buf, sizeof buf, "<0x%02X>", b);
    tokens.push_back(buf);
    types.push_back(6);
    scores.push_back(0);
  }
  const std::vector<std::pair<const char*, float>> pieces = {
      {"\xe2\x96\x81", -1}, {"h", -2}, {"i", -3}, {"hi", -4}, {"\xe2\x96\x81hi", -5}};
  for (auto [p, s] : pieces) {
    tokens.push_back(p);
    types.push_back(1);
    scores.push_back(s);
  }
  tokens.push_back("<|user|>");
  types.push_back(3);
  scores.push_back(0);
  tokens.push_back("<|tool|>");
  types.push_back(4);
  scores.push_back(0);
  GgufMeta m;
  m.str("tokenizer.ggml.model", "llama").strs("tokenizer.ggml.tokens", tokens).f32s("tokenizer.ggml.scores", scores);
  m.i32s("tokenizer.ggml.token_type", types).u32("tokenizer.ggml.bos_token_id", kSpmBos);
  m.u32("tokenizer.ggml.eos_token_id", kSpmEos).u32("tokenizer.ggml.unknown_token_id", 0);
  return m;
}

std::vector<int32_t> spm_bytes(const std::string& s) {
  std::vector<int32_t> ids;
  for (unsigned char c : s) ids.push_back(3 + c);
  return ids;
}

TEST(SpmEncodeOptions, ControlTokenTextIsTextUnlessParsed) {
  test::TempDir d;
  GgufFile f(spm_vocab().write(d, "v.gguf"));
  SpmTokenizer t = SpmTokenizer::from_gguf(f);
  ASSERT_TRUE(t.add_bos());  // llama.cpp's default for SentencePiece
  ASSERT_FALSE(t.add_eos());
  const std::string text = "<|user|>hi";
  // "▁<|user|>hi": "hi" merges, the rest has no piece and falls back to bytes.
  EXPECT_EQ(t.encode(text, {.add_special = true, .parse_special = false}),
            cat(cat({kSpmBos, kSpace}, spm_bytes("<|user|>")), {kSpmHi}));
  // Parsed, <|user|> is one token and the text after it starts with the
  // prepended space again: "▁hi".
  EXPECT_EQ(t.encode(text, {.add_special = true, .parse_special = true}),
            (std::vector<int32_t>{kSpmBos, kUser, kSpaceHi}));
  EXPECT_EQ(t.encode(text, {.add_special = false, .parse_special = true}), (std::vector<int32_t>{kUser, kSpaceHi}));
  EXPECT_EQ(t.encode("hi<|user|>", {.add_special = false, .parse_special = true}),
            (std::vector<int32_t>{kSpaceHi, kUser}));
  EXPECT_EQ(t.encode("</s>", {.add_special = false, .parse_special = true}), (std::vector<int32_t>{kSpmEos}));
  // A user-defined token is split out either way.
  for (bool parse : {false, true})
    EXPECT_EQ(t.encode("<|tool|>hi", {.add_special = false, .parse_special = parse}),
              (std::vector<int32_t>{kSpmTool, kSpaceHi}));
  // The one-argument form: BOS, control tokens not parsed, as before the options.
  EXPECT_EQ(t.encode(text), t.encode(text, {.add_special = true, .parse_special = false}));
}

TEST(SpmEncodeOptions, EosWhenTheVocabularyAsks) {
  test::TempDir d;
  GgufFile f(spm_vocab().flag("tokenizer.ggml.add_bos_token", false).flag("tokenizer.ggml.add_eos_token", true)
                 .write(d, "v.gguf"));
  SpmTokenizer t = SpmTokenizer::from_gguf(f);
  EXPECT_EQ(t.encode("hi", {.add_special = true, .parse_special = false}), (std::vector<int32_t>{kSpaceHi, kSpmEos}));
  EXPECT_EQ(t.encode("hi", {.add_special = false, .parse_special = false}), (std::vector<int32_t>{kSpaceHi}));
}

TEST(SpmEncodeOptions, SentencepieceControlTokensInTheTestVocabulary) {
  GgufFile f(kData + "spm_vocab.gguf");
  SpmTokenizer t = SpmTokenizer::from_gguf(f);
  const std::string text = "hi</s>there";
  auto plain = t.encode(text, {.add_special = false, .parse_special = false});
  EXPECT_EQ(std::count(plain.begin(), plain.end(), 2), 0);
  EXPECT_EQ(t.decode(plain), text);
  auto parsed = t.encode(text, {.add_special = false, .parse_special = true});
  EXPECT_EQ(parsed, cat(cat(t.encode("hi", {.add_special = false}), {2}), t.encode("there", {.add_special = false})));
}

}  // namespace
}  // namespace rlx
