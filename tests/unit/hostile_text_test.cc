// Text as anyone could send it: a megabyte of special tokens, one enormous
// word, text far past the model's length. Tokenization stays linear, stops
// at the maximum length, and says when it cut.
#include <gtest/gtest.h>

#include <algorithm>
#include <ctime>
#include <cmath>
#include <fstream>

#include "backends/cpu/cpu_gemm_packed.h"
#include "models/embedder.h"
#include "models/test_files.h"  // tests/models
#include "test_util.h"
#include "tokenizers/wordpiece.h"

namespace rlx {
namespace {

using test::error_of;

// Timings are process CPU seconds, so a busy machine does not fail them; the
// bounds are generous (sanitizer builds run these too) yet far below what the
// quadratic behaviour they guard against would take.
using Clock = std::clock_t;
Clock now() { return std::clock(); }
double seconds_since(Clock t0) { return double(std::clock() - t0) / CLOCKS_PER_SEC; }

std::string repeat(const std::string& s, size_t times) {
  std::string out;
  out.reserve(s.size() * times);
  for (size_t i = 0; i < times; ++i) out += s;
  return out;
}

TEST(HostileText, AMegabyteOfSpecialTokensIsLinear) {
  ASSERT_TRUE(test::minilm_present());
  WordPiece wp = WordPiece::from_dir(test::minilm_dir());
  const int32_t cls = wp.id_of("[CLS]"), sep = wp.id_of("[SEP]"), mask = wp.id_of("[MASK]");
  // 1 MB of [CLS]: the old scan took 15 s for 100 KB; linear takes well under a second.
  const size_t n = (1 << 20) / 5;
  Clock t0 = now();
  std::vector<int32_t> toks = wp.tokenize(repeat("[CLS]", n));
  double s = seconds_since(t0);
  ASSERT_EQ(toks.size(), n);
  EXPECT_EQ(std::count(toks.begin(), toks.end(), cls), long(n));
  // Quadratic, as it was, this took about 25 minutes (15 s for 100 KB).
  EXPECT_LT(s, 30.0) << "tokenizing 1 MB of [CLS] took " << s << " s";
  // Mixed and near-miss specials: leftmost-longest, text between them tokenized normally.
  toks = wp.tokenize("x[SEP][MASK[MASK]y [CLS");
  std::vector<int32_t> want = wp.tokenize("x");
  want.push_back(sep);
  for (int32_t t : wp.tokenize("[MASK")) want.push_back(t);
  want.push_back(mask);
  for (int32_t t : wp.tokenize("y [CLS")) want.push_back(t);
  EXPECT_EQ(toks, want);
}

TEST(HostileText, EncodeStopsAtTheMaximumLength) {
  ASSERT_TRUE(test::minilm_present());
  WordPiece wp = WordPiece::from_dir(test::minilm_dir());
  const std::string text = repeat("hello world, ", 150000);  // 2 MB, 450k tokens
  // Each side's best of three, so that a loaded machine (the suite runs
  // tests in parallel) does not decide the comparison.
  double s = 1e30, full = 1e30;
  for (int round = 0; round < 3; ++round) {
    Clock t0 = now();
    Encoding e = wp.encode(text, 128);
    s = std::min(s, seconds_since(t0));
    EXPECT_EQ(e.size(), 128u);
    EXPECT_TRUE(e.truncated);
    EXPECT_EQ(e.ids[1], wp.id_of("hello"));
    EXPECT_EQ(e.ids.back(), wp.id_of("[SEP]"));
    t0 = now();
    std::vector<int32_t> everything = wp.tokenize(text);
    full = std::min(full, seconds_since(t0));
    EXPECT_EQ(everything.size(), 450000u);
  }
  // Stopping at 128 tokens leaves only the UTF-8 decode (about 40% of the
  // whole here): an encode that tokenized everything would take longer
  // than `full`, not half of it.
  EXPECT_LT(s, full / 2) << "encode of 2 MB into 128 tokens took " << s << " s, all of it " << full << " s";
  // Exactly full is not truncated; one more token is.
  std::vector<int32_t> all = wp.tokenize("a b c d e f");
  ASSERT_EQ(all.size(), 6u);
  EXPECT_FALSE(wp.encode("a b c d e f", 8).truncated);
  EXPECT_TRUE(wp.encode("a b c d e f", 7).truncated);
  EXPECT_EQ(wp.encode("a b c d e f", 7).size(), 7u);
}

TEST(HostileText, EnormousWordsAreUnknownQuickly) {
  ASSERT_TRUE(test::minilm_present());
  WordPiece wp = WordPiece::from_dir(test::minilm_dir());
  Clock t0 = now();
  std::vector<int32_t> toks = wp.tokenize(std::string(200000, 'a') + " ok " + std::string(100, 'b'));
  double s = seconds_since(t0);
  const int32_t unk = wp.id_of("[UNK]");
  ASSERT_GT(toks.size(), 3u);
  EXPECT_EQ(toks[0], unk);   // over max_input_chars_per_word (100)
  EXPECT_EQ(toks[1], wp.id_of("ok"));
  EXPECT_EQ(std::count(toks.begin() + 2, toks.end(), unk), 0);  // exactly 100 chars: split into pieces
  EXPECT_LT(s, 20.0);
  // The largest limit a tokenizer file may set, with words that long.
  WordPieceOptions o = wp.options();
  o.max_input_chars_per_word = WordPiece::kMaxWordChars;
  WordPiece wide({{"[UNK]", 0}, {"[CLS]", 1}, {"[SEP]", 2}, {"a", 3}, {"##a", 4}}, o, {});
  t0 = now();
  toks = wide.tokenize(repeat(std::string(1024, 'a') + " ", 200));  // 200 KB of longest words
  s = seconds_since(t0);
  ASSERT_EQ(toks.size(), 200u * 1024);
  EXPECT_EQ(toks[0], 3);
  EXPECT_EQ(toks[1], 4);
  EXPECT_LT(s, 60.0);
  o.max_input_chars_per_word = 1000000000;
  std::string msg = error_of([&] { WordPiece({{"[UNK]", 0}, {"[CLS]", 1}, {"[SEP]", 2}}, o, {}); });
  EXPECT_NE(msg.find("max_input_chars_per_word 1000000000 is outside [1, 1024]"), std::string::npos) << msg;
}

TEST(HostileText, EmbedderCountsTruncationOrRefusesIt) {
  ASSERT_TRUE(test::minilm_present());
  EmbedderOptions o;
  o.max_len = 16;
  Embedder e(test::minilm_dir(), o);
  const std::string long_text = repeat("word ", 40), short_text = "short";
  auto got = e.embed({long_text, short_text, long_text});
  EXPECT_EQ(e.truncated_texts(), 2u);
  ASSERT_EQ(got.size(), 3u);
  // The same text at two places in one batch: bit for bit with rlx's packed
  // GEMM; OpenBLAS (no AVX-512) rounds rows by their place in its tiles.
  ASSERT_EQ(got[0].size(), got[2].size());
  if (cpu::packed_gemm_available()) EXPECT_EQ(got[0], got[2]);
  for (size_t i = 0; i < got[0].size(); ++i) EXPECT_NEAR(got[0][i], got[2][i], 1e-6) << i;
  // The truncated text embeds as its first 14 word pieces do.
  auto cut = e.embed({repeat("word ", 14)});
  EXPECT_EQ(e.truncated_texts(), 2u);
  ASSERT_EQ(cut[0].size(), got[0].size());
  double diff = 0;
  for (size_t i = 0; i < cut[0].size(); ++i) diff = std::max(diff, std::fabs(double(cut[0][i]) - got[0][i]));
  EXPECT_LT(diff, 1e-5);

  o.truncate = false;
  Embedder strict(test::minilm_dir(), o);
  EXPECT_EQ(strict.embed({short_text}).size(), 1u);
  std::string msg = error_of([&] { strict.embed({short_text, long_text}); });
  EXPECT_NE(msg.find("text 1 is longer than the model's 16 tokens"), std::string::npos) << msg;
}

// Virtual memory of this process, in bytes (/proc/self/status VmSize).
uint64_t vm_size() {
  std::ifstream in("/proc/self/status");
  std::string line;
  while (std::getline(in, line))
    if (line.rfind("VmSize:", 0) == 0) return std::stoull(line.substr(7)) * 1024;
  return 0;
}

TEST(HostileText, ArenaIsSizedForTheInputNotTheLargestBatch) {
  ASSERT_TRUE(test::minilm_present());
  EmbedderOptions o;
  o.max_batch = 1024;
  Embedder e(test::minilm_dir(), o);
  const uint64_t before = vm_size();
  ASSERT_GT(before, 0u);
  auto one = e.embed({"one short sentence"});
  // Sized for batch 1024 x 256 tokens this took 3.6 GB; one sentence needs ~100 MB.
  EXPECT_LT(vm_size() - before, uint64_t(1) << 30) << "one sentence grew the process by "
                                                   << (vm_size() - before) / 1e6 << " MB";
  ASSERT_EQ(one.size(), 1u);
  ASSERT_EQ(e.buckets_used().size(), 1u);
  EXPECT_EQ(e.buckets_used()[0].batch, 1);
  EXPECT_EQ(e.buckets_used()[0].seq, 16);
  // A larger input later grows the arena and still gives the same answers.
  std::vector<std::string> many(40, "another sentence, a little longer than the first one");
  many[7] = "one short sentence";
  auto more = e.embed(many);
  ASSERT_EQ(more[7].size(), one[0].size());
  for (size_t i = 0; i < one[0].size(); ++i) EXPECT_NEAR(more[7][i], one[0][i], 1e-5) << i;
  EXPECT_EQ(e.buckets_used().back().batch, 64);
}

}  // namespace
}  // namespace rlx
