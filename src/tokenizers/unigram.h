// Unigram (SentencePiece's unigram model: T5, XLM-R, ALBERT style) as
// Hugging Face's `tokenizers` encodes it: Metaspace turns spaces into U+2581
// (prepended to the text) and splits before each, then every word is cut by
// Viterbi over the vocabulary's log-probabilities; a character no piece
// covers is the unknown token at the lowest score minus 10, runs of
// unknowns fused into one, or (byte_fallback) spelled as <0xNN> tokens.
// Special tokens (added tokens) are split out of the text first, control
// tokens only with EncodeOptions::parse_special; then tokenizer.json's
// normalizer (XLM-R: SentencePiece's Precompiled map, whitespace runs to one
// space) runs on the text between them.
#pragma once
#include <cstdint>
#include <nlohmann/json_fwd.hpp>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "tokenizers/json_normalizer.h"
#include "tokenizers/special_tokens.h"
#include "tokenizers/text_tokenizer.h"

namespace rlx {

struct UnigramOptions {
  bool prepend_space = true;  // Metaspace prepend_scheme "always" (false: "never")
  bool prepend_first_only = false;  // prepend_scheme "first": only to the text's first run
  bool whitespace_split = false;    // a WhitespaceSplit pre-tokenizer before Metaspace
  bool byte_fallback = false;
  bool add_bos = false, add_eos = false;  // with EncodeOptions::add_special
};

class UnigramTokenizer : public TextTokenizer {
 public:
  // pieces[i] with score scores[i] is id i; special: ids matched in the raw
  // text (with parse_special unless also in user_defined).
  UnigramTokenizer(std::vector<std::string> pieces, std::vector<double> scores, int32_t unk_id,
                   UnigramOptions opts, const std::vector<int32_t>& special, int32_t bos_id, int32_t eos_id,
                   const std::vector<int32_t>& user_defined = {}, const std::string& where = "unigram");

  // tokenizer.json with a Unigram model, a Metaspace pre-tokenizer and any
  // normalizer JsonNormalizer runs (others are refused, naming them).
  static UnigramTokenizer from_tokenizer_json(const std::string& path);
  // The same from the parsed file (`path` names it in errors).
  static UnigramTokenizer from_tokenizer_json(const nlohmann::json& j, const std::string& path);
  void set_normalizer(JsonNormalizer n) { normalizer_ = std::move(n); }
  // An added token that takes the whitespace before it (lstrip) or after it
  // (rstrip) out of the text, as XLM-R's <mask> does.
  void set_strip(int32_t id, bool left, bool right);

  using TextTokenizer::encode;
  std::vector<int32_t> encode(std::string_view text, const EncodeOptions& o) const override;
  EncodeOptions default_encode_options() const override { return {true, false}; }
  std::string decode(const std::vector<int32_t>& ids) const override;
  std::string token_bytes(int32_t id) const override;
  int32_t id_of(const std::string& piece) const override;
  const std::string& piece(int32_t id) const { return pieces_.at(size_t(id)); }
  size_t vocab_size() const override { return pieces_.size(); }
  int32_t bos_id() const override { return bos_id_; }
  int32_t eos_id() const override { return eos_id_; }

 private:
  void encode_plain(std::string_view text, bool first, std::vector<int32_t>& out) const;
  // Metaspace on one run: spaces to U+2581, the prepended one, a word per U+2581.
  void metaspace(std::string_view text, bool first, std::vector<int32_t>& out) const;
  void viterbi(std::string_view word, std::vector<int32_t>& out) const;

  std::vector<std::string> pieces_;
  std::vector<double> scores_;  // log-probabilities, summed in double as tokenizers does
  std::unordered_map<std::string, int32_t> vocab_;
  std::vector<bool> special_, control_;
  SpecialTokens specials_;
  size_t longest_ = 0;  // bytes of the longest piece
  double unk_score_ = 0;
  int32_t byte_ids_[256];
  int32_t unk_id_, bos_id_, eos_id_;
  UnigramOptions opts_;
  JsonNormalizer normalizer_;
  std::vector<uint8_t> strip_;  // per id: 1 lstrip, 2 rstrip
};

}  // namespace rlx
