// GGUF vocabularies checked at load (every class of malformed vocabulary
// refused with the file and the key or token named) and the BOS/EOS defaults
// llama.cpp applies per tokenizer type, on small vocabularies written here.
#include <gtest/gtest.h>

#include <functional>
#include <string>
#include <vector>

#include "models/gguf.h"
#include "models/gguf_writer.h"  // tests/models
#include "models/test_files.h"   // tests/models
#include "test_util.h"
#include "tokenizers/tokenizer_files.h"

namespace rlx {
namespace {

const EncodeOptions kPlain{.add_special = false, .parse_special = false};
const EncodeOptions kSpecial{.add_special = true, .parse_special = false};

// A byte-level BPE vocabulary: a b ab <s> </s>, one merge; edit() changes it.
struct BpeVocab {
  std::string model = "gpt2", pre = "gpt2";
  std::vector<std::string> tokens{"a", "b", "ab", "<s>", "</s>"};
  std::vector<int32_t> types{1, 1, 1, 3, 3};
  std::vector<std::string> merges{"a b"};
  std::function<void(test::GgufWriter&)> extra = [](test::GgufWriter& w) {
    w.u32("tokenizer.ggml.bos_token_id", 3).u32("tokenizer.ggml.eos_token_id", 4);
  };
  void write(const std::filesystem::path& p) const {
    test::GgufWriter w;
    w.str("general.architecture", "llama").str("tokenizer.ggml.model", model);
    if (!pre.empty()) w.str("tokenizer.ggml.pre", pre);
    w.strs("tokenizer.ggml.tokens", tokens).i32s("tokenizer.ggml.token_type", types);
    w.strs("tokenizer.ggml.merges", merges);
    extra(w);
    w.write(p);
  }
};

// A SentencePiece vocabulary: <unk> <s> </s> ▁a b <0x41>.
struct SpmVocab {
  std::vector<std::string> tokens{"<unk>", "<s>", "</s>", "\xe2\x96\x81" "a", "b", "<0x41>"};
  std::vector<int32_t> types{2, 3, 3, 1, 1, 6};
  void write(const std::filesystem::path& p) const {
    test::GgufWriter w;
    w.str("general.architecture", "llama").str("tokenizer.ggml.model", "llama");
    w.strs("tokenizer.ggml.tokens", tokens).i32s("tokenizer.ggml.token_type", types);
    w.f32s("tokenizer.ggml.scores", std::vector<float>(tokens.size(), 0.f));
    w.u32("tokenizer.ggml.bos_token_id", 1).u32("tokenizer.ggml.eos_token_id", 2);
    w.write(p);
  }
};

template <class V>
std::string load_error(const V& v, std::string* path_out = nullptr) {
  test::TempDir d;
  const auto p = d.path() / "vocab.gguf";
  v.write(p);
  if (path_out) *path_out = p.string();
  std::string e = test::error_of([&] { open_tokenizer(p.string()); });
  EXPECT_NE(e.find(p.string()), std::string::npos) << "the error names the file: " << e;
  return e;
}

template <class V>
std::vector<int32_t> encode(const V& v, const std::string& text, const EncodeOptions& o) {
  test::TempDir d;
  const auto p = d.path() / "vocab.gguf";
  v.write(p);
  return open_tokenizer(p.string())->encode(text, o);
}

TEST(GgufVocab, WellFormedVocabulariesLoad) {
  EXPECT_EQ(encode(BpeVocab{}, "ab", kPlain), (std::vector<int32_t>{2}));
  EXPECT_EQ(encode(BpeVocab{}, "ba", kPlain), (std::vector<int32_t>{1, 0}));
  EXPECT_EQ(encode(SpmVocab{}, "ab", kPlain), (std::vector<int32_t>{3, 4}));
  EXPECT_EQ(encode(SpmVocab{}, "A", kPlain), (std::vector<int32_t>{0, 5}));  // ▁ unknown, A as its byte
}

TEST(GgufVocab, ByteTokenThatIsNotHexIsRefused) {
  for (const char* bad : {"<0x4G>", "<0x4>", "<0x414>", "0x41", "<0X41>"}) {
    SpmVocab v;
    v.tokens[5] = bad;
    std::string e = load_error(v);
    EXPECT_NE(e.find(std::string("'") + bad + "'"), std::string::npos) << e;
    EXPECT_NE(e.find("byte token 5"), std::string::npos) << bad << ": " << e;
  }
  BpeVocab b;  // the same rule for a BPE vocabulary's byte tokens
  b.tokens.push_back("<0xZZ>");
  b.types.push_back(6);
  EXPECT_NE(load_error(b).find("'<0xZZ>'"), std::string::npos);
}

TEST(GgufVocab, TokenTypeOutsideTheEnumIsRefused) {
  for (int32_t bad : {99, 7, -1}) {
    BpeVocab b;
    b.types[2] = bad;
    std::string e = load_error(b);
    EXPECT_NE(e.find("tokenizer.ggml.token_type[2] is " + std::to_string(bad)), std::string::npos) << e;
    SpmVocab s;
    s.types[4] = bad;
    e = load_error(s);
    EXPECT_NE(e.find("tokenizer.ggml.token_type[4] is " + std::to_string(bad)), std::string::npos) << e;
  }
  BpeVocab short_types;
  short_types.types.pop_back();
  EXPECT_NE(load_error(short_types).find("4 entries for 5 tokens"), std::string::npos);
}

TEST(GgufVocab, MergeNamingAnUnknownTokenIsRefused) {
  BpeVocab b;
  b.merges = {"a b", "a c"};
  std::string e = load_error(b);
  EXPECT_NE(e.find("merge 1 'a c' names 'c'"), std::string::npos) << e;
}

TEST(GgufVocab, MergeWhoseResultIsNotATokenIsRefused) {
  BpeVocab b;
  b.merges = {"b a"};
  std::string e = load_error(b);
  EXPECT_NE(e.find("merge 0 'b a' forms 'ba'"), std::string::npos) << e;
}

TEST(GgufVocab, MergeThatIsNotTwoPartsIsRefused) {
  for (const char* bad : {"a b ab", "ab", "a  b", " a"}) {
    BpeVocab b;
    b.merges = {bad};
    std::string e = load_error(b);
    EXPECT_NE(e.find(std::string("merge '") + bad + "' is not two tokens"), std::string::npos) << e;
  }
}

TEST(GgufVocab, SpecialTokenIdOutOfRangeIsRefused) {
  struct Case {
    const char* key;
    std::function<void(test::GgufWriter&)> put;
    const char* says;
  };
  const Case cases[] = {
      {"eos", [](test::GgufWriter& w) { w.u32("tokenizer.ggml.eos_token_id", 5); }, "eos_token_id is 5"},
      {"bos", [](test::GgufWriter& w) { w.i32("tokenizer.ggml.bos_token_id", -3); }, "bos_token_id is -3"},
      {"pad", [](test::GgufWriter& w) { w.u32("tokenizer.ggml.padding_token_id", 1000); }, "padding_token_id is 1000"},
  };
  for (const Case& c : cases) {
    BpeVocab b;
    b.extra = c.put;
    std::string e = load_error(b);
    EXPECT_NE(e.find(c.says), std::string::npos) << c.key << ": " << e;
    EXPECT_NE(e.find("outside the vocabulary of 5 tokens"), std::string::npos) << e;
  }
  SpmVocab s;  // SentencePiece reads its ids the same way
  test::TempDir d;
  test::GgufWriter w;
  w.str("tokenizer.ggml.model", "llama").strs("tokenizer.ggml.tokens", s.tokens).i32s("tokenizer.ggml.token_type", s.types);
  w.u32("tokenizer.ggml.unknown_token_id", 6);
  w.write(d.path() / "v.gguf");
  std::string e = test::error_of([&] { open_tokenizer((d.path() / "v.gguf").string()); });
  EXPECT_NE(e.find("unknown_token_id is 6"), std::string::npos) << e;
}

TEST(GgufVocab, UnknownTokenizerModelIsNamed) {
  BpeVocab b;
  b.model = "rwkv";
  std::string e = load_error(b);
  EXPECT_NE(e.find("tokenizer.ggml.model is 'rwkv'"), std::string::npos) << e;
  BpeVocab p;
  p.pre = "no-such-pre";
  e = load_error(p);
  EXPECT_NE(e.find("pre-tokenizer 'no-such-pre'"), std::string::npos) << e;
}

// llama.cpp's defaults (llama_vocab::impl::load): BOS for SentencePiece, for
// Llama 3's pre-tokenizer and always for Gemma 4; none for other byte-level
// BPE; a file's add_bos_token key wins except for Gemma 4.
TEST(GgufVocabBos, DefaultsFollowLlamaCpp) {
  BpeVocab gpt2;
  EXPECT_EQ(encode(gpt2, "ab", kSpecial), (std::vector<int32_t>{2}));
  BpeVocab llama3;
  llama3.pre = "llama-bpe";
  EXPECT_EQ(encode(llama3, "ab", kSpecial), (std::vector<int32_t>{3, 2}));
  llama3.pre = "llama3";
  EXPECT_EQ(encode(llama3, "ab", kSpecial), (std::vector<int32_t>{3, 2}));
  EXPECT_EQ(encode(llama3, "ab", kPlain), (std::vector<int32_t>{2}));
  BpeVocab llama3_off = llama3;
  llama3_off.extra = [](test::GgufWriter& w) {
    w.u32("tokenizer.ggml.bos_token_id", 3).boolean("tokenizer.ggml.add_bos_token", false);
  };
  EXPECT_EQ(encode(llama3_off, "ab", kSpecial), (std::vector<int32_t>{2}));
  BpeVocab gpt2_on = gpt2;
  gpt2_on.extra = [](test::GgufWriter& w) {
    w.u32("tokenizer.ggml.bos_token_id", 3).u32("tokenizer.ggml.eos_token_id", 4);
    w.boolean("tokenizer.ggml.add_bos_token", true).boolean("tokenizer.ggml.add_eos_token", true);
  };
  EXPECT_EQ(encode(gpt2_on, "ab", kSpecial), (std::vector<int32_t>{3, 2, 4}));
  BpeVocab gemma4;  // raw UTF-8 BPE: "a b" is a ▁ b here
  gemma4.model = "gemma4";
  gemma4.pre = "";
  gemma4.extra = [](test::GgufWriter& w) {
    w.u32("tokenizer.ggml.bos_token_id", 3).boolean("tokenizer.ggml.add_bos_token", false);
  };
  EXPECT_EQ(encode(gemma4, "ab", kSpecial), (std::vector<int32_t>{3, 2}));
  EXPECT_EQ(encode(SpmVocab{}, "ab", kSpecial), (std::vector<int32_t>{1, 3, 4}));
}

}  // namespace
}  // namespace rlx
