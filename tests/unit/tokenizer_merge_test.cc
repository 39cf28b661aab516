// The merge loop (src/tokenizers/merge.h) against the loop it replaced, which
// rescanned every adjacent pair after each merge: the same symbols on random
// merge tables, the same ids through both tokenizers on real vocabularies,
// and long texts (32 KB of one letter, 32 KB of mixed text, 1 MB) in well
// under a second each, where the rescanning loop took seconds to minutes.
#include <gtest/gtest.h>

#include <chrono>
#include <fstream>
#include <iostream>
#include <map>
#include <nlohmann/json.hpp>
#include <random>
#include <string>
#include <unordered_map>
#include <vector>

#include "models/gguf.h"
#include "tokenizers/bpe.h"
#include "tokenizers/byte_level.h"
#include "tokenizers/merge.h"
#include "tokenizers/spm.h"
#include "tokenizers/utf8.h"

namespace rlx {
namespace {

const std::string kData = std::string(RLX_SOURCE_DIR) + "/tests/data/";
const std::string kSmolLM2 =
    std::string(RLX_SOURCE_DIR) + "/models/SmolLM2-135M-Instruct/SmolLM2-135M-Instruct.Q4_1.gguf";
// Generous enough for a sanitizer build; an optimized build takes a few
// milliseconds per 32 KB and under 0.2 s per MB, where the rescanning loop
// took 10-25 s per 32 KB.
constexpr double kLongTextSeconds = 5.0;
double bound_for(size_t bytes) { return bytes > 100000 ? 6 * kLongTextSeconds : kLongTextSeconds; }

std::vector<std::string> chars_of(const std::string& s) {
  std::vector<std::string> sym;
  for (size_t i = 0; i < s.size();) {
    size_t n = std::min(utf8_sequence_length(static_cast<unsigned char>(s[i])), s.size() - i);
    sym.push_back(s.substr(i, n));
    i += n;
  }
  return sym;
}

// The replaced loop: find the lowest key over all adjacent pairs (leftmost on
// ties), merge it, repeat.
template <class Key, class KeyFn>
std::vector<std::string> rescanning_merge(const std::string& text, KeyFn key) {
  std::vector<std::string> sym = chars_of(text);
  while (sym.size() > 1) {
    std::optional<Key> best;
    size_t at = 0;
    for (size_t i = 0; i + 1 < sym.size(); ++i) {
      std::optional<Key> k = key(sym[i], sym[i + 1]);
      if (k && (!best || *k < *best)) {
        best = k;
        at = i;
      }
    }
    if (!best) break;
    sym[at] += sym[at + 1];
    sym.erase(sym.begin() + std::ptrdiff_t(at) + 1);
  }
  return sym;
}

double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

// Mixed text: the BPE corpus's cases (prose, code, digits, accents, CJK,
// emoji, odd whitespace) repeated to at least n bytes.
std::string mixed_text(size_t n) {
  std::ifstream in(kData + "bpe_cases.json");
  EXPECT_TRUE(in) << "tests/data/bpe_cases.json missing";
  std::string corpus;
  const nlohmann::json cases = nlohmann::json::parse(in);
  for (const auto& c : cases.at("smollm2")) corpus += c.at("text").get<std::string>() + "\n";
  std::string s;
  while (s.size() < n) s += corpus;
  return s;
}

TEST(TokenizerMerge, MatchesTheRescanningLoopOnRandomTables) {
  std::mt19937 rng(7);
  size_t merged_total = 0;
  for (int round = 0; round < 300; ++round) {
    // Pieces built from an alphabet (one multi-byte character among them),
    // each merge joining two pieces already present; keys drawn from a small
    // range, so equal keys (the leftmost rule) are common.
    const std::vector<std::string> alphabet = {"a", "b", "c", "\xc3\xa9"};
    std::vector<std::string> pieces = alphabet;
    std::map<std::pair<std::string, std::string>, int> keys;
    const int n_merges = 1 + int(rng() % 40);
    for (int m = 0; m < n_merges; ++m) {
      const std::string& l = pieces[rng() % pieces.size()];
      const std::string& r = pieces[rng() % pieces.size()];
      if (keys.emplace(std::pair{l, r}, int(rng() % 8)).second) pieces.push_back(l + r);
    }
    auto key = [&](std::string_view l, std::string_view r) -> std::optional<int> {
      auto it = keys.find({std::string(l), std::string(r)});
      if (it == keys.end()) return std::nullopt;
      return it->second;
    };
    std::string text;
    const size_t len = rng() % 120;
    for (size_t i = 0; i < len; ++i) text += alphabet[rng() % alphabet.size()];
    if (round % 10 == 0) text += "\xc3";  // a cut UTF-8 sequence at the end is one symbol
    SCOPED_TRACE("round " + std::to_string(round) + ": " + text);
    std::vector<std::string> want = rescanning_merge<int>(text, key);
    std::vector<std::string> got;
    for (std::string_view s : merge_symbols<int>(text, key)) got.emplace_back(s);
    ASSERT_EQ(got, want);
    merged_total += chars_of(text).size() - got.size();
  }
  EXPECT_GT(merged_total, 2000u);  // the tables did merge, often
  EXPECT_TRUE(merge_symbols<int>("", [](std::string_view, std::string_view) { return std::optional<int>(0); })
                  .empty());
}

// Byte-level BPE the replaced way, from the GGUF's own merges and tokens:
// Digits then GPT-2's split (SmolLM2's pre-tokenizer), pieces merged by
// rescanning.
std::vector<int32_t> bpe_reference(const GgufFile& f, const std::string& text) {
  std::unordered_map<std::string, int32_t> vocab, rank;
  auto tokens = f.get_string_array("tokenizer.ggml.tokens");
  for (size_t i = 0; i < tokens.size(); ++i) vocab.emplace(tokens[i], int32_t(i));
  auto merges = f.get_string_array("tokenizer.ggml.merges");
  for (size_t i = 0; i < merges.size(); ++i) {
    size_t sp = merges[i].find(' ');
    rank.emplace(merges[i].substr(0, sp) + '\xff' + merges[i].substr(sp + 1), int32_t(i));
  }
  auto key = [&](const std::string& l, const std::string& r) -> std::optional<int32_t> {
    auto it = rank.find(l + '\xff' + r);
    if (it == rank.end()) return std::nullopt;
    return it->second;
  };
  std::vector<ByteRange> digits, pieces;
  split_digits(text, {0, text.size()}, digits);
  for (auto r : digits) split_gpt2(text, r, pieces);
  std::vector<int32_t> ids;
  for (auto [b, e] : pieces) {
    std::string mapped;
    for (size_t i = b; i < e; ++i) mapped += byte_to_unicode(uint8_t(text[i]));
    for (const auto& s : rescanning_merge<int32_t>(mapped, key)) ids.push_back(vocab.at(s));
  }
  return ids;
}

const EncodeOptions kPlain{false, false};

TEST(TokenizerMerge, BpeMatchesTheRescanningLoopAndIsFastOnLongText) {
  GgufFile f(kSmolLM2);
  BpeTokenizer t = BpeTokenizer::from_gguf(f);
  const std::string letters(1500, 'a'), mixed = mixed_text(1500).substr(0, 1500);
  for (const std::string& s : {letters, mixed}) {
    SCOPED_TRACE(s.substr(0, 40));
    auto want = bpe_reference(f, s);
    EXPECT_EQ(t.encode(s, kPlain), want);
    EXPECT_LT(want.size(), s.size() / 2);  // merges did happen
  }
  // Long texts: one piece of 32 KB (where the rescanning loop took many
  // seconds), mixed text, and 1 MB of mixed text.
  for (const std::string& s : {std::string(32768, 'a'), mixed_text(32768), mixed_text(1 << 20)}) {
    SCOPED_TRACE(s.substr(0, 40) + " (" + std::to_string(s.size()) + " bytes)");
    auto t0 = std::chrono::steady_clock::now();
    auto ids = t.encode(s, kPlain);
    const double sec = seconds_since(t0);
    std::cout << "bpe encode " << s.size() << " bytes (" << s.substr(0, 8) << "...): " << sec * 1e3 << " ms, "
              << ids.size() << " tokens\n";
    EXPECT_LT(sec, bound_for(s.size()));
    EXPECT_LT(ids.size(), s.size() / 2);
    EXPECT_EQ(t.decode(ids), s);
  }
}

// SentencePiece-BPE the replaced way, from the GGUF's pieces, scores and
// types: spaces to U+2581 with one prepended, merges by rescanning, byte
// fallback.
std::vector<int32_t> spm_reference(const GgufFile& f, const std::string& text) {
  auto pieces = f.get_string_array("tokenizer.ggml.tokens");
  auto types = f.get_int_array("tokenizer.ggml.token_type");
  std::vector<double> scores;
  for (float x : f.get_float_array("tokenizer.ggml.scores")) scores.push_back(x);
  std::unordered_map<std::string, int32_t> vocab;
  std::map<unsigned char, int32_t> byte_id;
  for (size_t i = 0; i < pieces.size(); ++i) {
    if (types[i] == 1 || types[i] == 4) vocab.emplace(pieces[i], int32_t(i));
    if (types[i] == 6) byte_id[static_cast<unsigned char>(std::stoi(pieces[i].substr(3, 2), nullptr, 16))] = int32_t(i);
  }
  std::string s = "\xe2\x96\x81";
  for (char c : text) s += c == ' ' ? std::string("\xe2\x96\x81") : std::string(1, c);
  auto key = [&](const std::string& l, const std::string& r) -> std::optional<float> {
    auto it = vocab.find(l + r);
    if (it == vocab.end()) return std::nullopt;
    return -float(scores[size_t(it->second)]);
  };
  std::vector<int32_t> ids;
  for (const auto& p : rescanning_merge<float>(s, key)) {
    if (auto it = vocab.find(p); it != vocab.end()) {
      ids.push_back(it->second);
    } else {
      for (unsigned char b : p) ids.push_back(byte_id.at(b));
    }
  }
  return ids;
}

TEST(TokenizerMerge, SpmMatchesTheRescanningLoopAndIsFastOnLongText) {
  GgufFile f(kData + "spm_vocab.gguf");
  SpmTokenizer t = SpmTokenizer::from_gguf(f);
  std::string words;
  while (words.size() < 1500) words += "the theory of the thing ";
  const std::string mixed = mixed_text(1500).substr(0, 1500);
  for (const std::string& s : {words, mixed}) {
    SCOPED_TRACE(s.substr(0, 40));
    auto want = spm_reference(f, s);
    EXPECT_EQ(t.encode(s, kPlain), want);
  }
  EXPECT_LT(spm_reference(f, words).size(), words.size() / 3);  // merges did happen
  std::string long_words;
  while (long_words.size() < 32768) long_words += "the theory of the thing ";
  for (const std::string& s : {std::string(32768, 't'), long_words, mixed_text(32768), mixed_text(1 << 20)}) {
    SCOPED_TRACE(s.substr(0, 40) + " (" + std::to_string(s.size()) + " bytes)");
    auto t0 = std::chrono::steady_clock::now();
    auto ids = t.encode(s, kPlain);
    const double sec = seconds_since(t0);
    std::cout << "spm encode " << s.size() << " bytes (" << s.substr(0, 8) << "...): " << sec * 1e3 << " ms, "
              << ids.size() << " tokens\n";
    EXPECT_LT(sec, bound_for(s.size()));
    EXPECT_EQ(t.decode(ids), s);
  }
}

}  // namespace
}  // namespace rlx
