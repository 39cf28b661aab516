// WordPiece tokenization as Hugging Face's BertTokenizerFast does it:
// special tokens split out of the raw text, BERT normalization (clean text,
// CJK spacing, accent stripping, lowercasing), whitespace + punctuation
// pre-tokenization, greedy longest-match-first WordPiece, then
// [CLS] ... [SEP], truncation and padding.
#pragma once
#include <cstdint>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "tokenizers/token_trie.h"

namespace rlx {

struct Encoding {
  std::vector<int32_t> ids;
  std::vector<int32_t> type_ids;
  std::vector<int32_t> attention_mask;  // 1 = token, 0 = padding
  bool truncated = false;               // the text had more tokens than fit
  size_t size() const { return ids.size(); }
  size_t tokens() const;  // positions with mask 1
};

struct WordPieceOptions {
  bool clean_text = true;
  bool handle_chinese_chars = true;
  bool strip_accents = true;
  bool lowercase = true;
  int max_input_chars_per_word = 100;  // at most kMaxWordChars
  std::string unk = "[UNK]", cls = "[CLS]", sep = "[SEP]", pad = "[PAD]";
  std::string continuing_prefix = "##";
};

class WordPiece {
 public:
  // Bounds on what a tokenizer file may ask for, so that no file makes
  // tokenization slow: longer words become [UNK], as in Hugging Face.
  static constexpr int kMaxWordChars = 1024;
  static constexpr size_t kMaxSpecialChars = 256;  // code points in one added token

  WordPiece(std::unordered_map<std::string, int32_t> vocab, WordPieceOptions opts,
            std::vector<std::string> special_tokens);

  // tokenizer.json when present, else vocab.txt + tokenizer_config.json.
  static WordPiece from_dir(const std::string& dir);
  static WordPiece from_tokenizer_json(const std::string& path);
  static WordPiece from_vocab_txt(const std::string& vocab_path, const std::string& config_path = "");

  // WordPiece tokens of the text, no special tokens added; at most `limit`
  // tokens (work stops there).
  std::vector<int32_t> tokenize(std::string_view text, size_t limit = SIZE_MAX) const;
  // [CLS] tokens [SEP], truncated to max_len tokens in all (max_len >= 2);
  // `truncated` says whether tokens were dropped.
  Encoding encode(std::string_view text, int max_len = 512) const;
  // Each text encoded, then all padded to the longest (or to pad_to when larger).
  std::vector<Encoding> encode_batch(const std::vector<std::string>& texts, int max_len = 512,
                                     int pad_to = 0) const;
  // [CLS] a [SEP] b [SEP] with type ids 0 then 1, cut to max_len tokens in
  // all as Hugging Face's longest_first truncation does.
  Encoding encode_pair(std::string_view a, std::string_view b, int max_len = 512) const;
  void pad(Encoding& e, size_t length) const;
  // The vocabulary entry of an id ("" when none); decode() joins pieces
  // without special tokens, "##" pieces glued on.
  const std::string& token(int32_t id) const;
  std::string decode(const std::vector<int32_t>& ids) const;

  int32_t id_of(const std::string& token) const;  // -1 when absent
  size_t vocab_size() const { return vocab_.size(); }
  int32_t max_id() const { return max_id_; }  // the largest id the tokenizer can produce
  const WordPieceOptions& options() const { return opts_; }

 private:
  // False once `out` holds `limit` tokens.
  bool tokenize_plain(std::u32string_view text, size_t limit, std::vector<int32_t>& out) const;
  void normalize(char32_t c, std::u32string& out) const;
  void word_piece(const std::u32string& word, std::vector<int32_t>& out) const;

  std::unordered_map<std::string, int32_t> vocab_;
  WordPieceOptions opts_;
  TokenTrie specials_;         // matched in the raw text, leftmost-longest
  size_t longest_piece_ = 0;   // code points in the longest vocabulary entry
  std::unordered_map<int32_t, std::string> by_id_;
  int32_t unk_id_ = -1, cls_id_ = -1, sep_id_ = -1, pad_id_ = 0, max_id_ = -1;
};

}  // namespace rlx
