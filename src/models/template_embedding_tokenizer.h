// An embedding tokenizer made of a subword model and the tokenizer.json
// post_processor's template around its pieces ([CLS] $A [SEP], pairs
// [CLS] $A [SEP] $B [SEP]): ModernBERT's byte-level BPE and XLM-R's Unigram
// differ only in the model. Added tokens written in the text count as
// themselves, as in Hugging Face; decode drops the template's tokens and pad.
#pragma once
#include <algorithm>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "models/embedding_tokenizer.h"
#include "models/post_template.h"
#include "tokenizers/bpe.h"
#include "tokenizers/unigram.h"

namespace rlx {

// The vocabulary's string for an id ("" outside it).
inline std::string piece_text(const BpeTokenizer& m, int32_t id) {
  return id >= 0 && size_t(id) < m.vocab_size() ? m.token(id) : "";
}
inline std::string piece_text(const UnigramTokenizer& m, int32_t id) {
  return id >= 0 && size_t(id) < m.vocab_size() ? m.piece(id) : "";
}

template <class Model>
class TemplateEmbeddingTokenizer : public EmbeddingTokenizer {
 public:
  TemplateEmbeddingTokenizer(std::string kind, Model m, PostTemplate t, int32_t pad)
      : kind_(std::move(kind)), m_(std::move(m)), t_(std::move(t)), special_(t_.special_ids()), pad_(pad) {
    special_.push_back(pad_);
  }
  std::string kind() const override { return kind_; }
  TokenizedText encode(std::string_view text, int max_len) const override {
    return t_.apply(pieces(text), {}, false, max_len);
  }
  TokenizedText encode_pair(std::string_view a, std::string_view b, int max_len) const override {
    return t_.apply(pieces(a), pieces(b), true, max_len);
  }
  std::string decode(const std::vector<int32_t>& ids) const override {
    std::vector<int32_t> plain;
    for (int32_t id : ids)
      if (std::find(special_.begin(), special_.end(), id) == special_.end()) plain.push_back(id);
    return m_.decode(plain);
  }
  std::string token_text(int32_t id) const override { return piece_text(m_, id); }
  int32_t token_id(const std::string& token) const override { return m_.id_of(token); }
  size_t vocab_size() const override { return m_.vocab_size(); }
  int32_t pad_id() const override { return pad_; }

 private:
  std::vector<int32_t> pieces(std::string_view text) const { return m_.encode(text, {false, true}); }
  std::string kind_;
  Model m_;
  PostTemplate t_;
  std::vector<int32_t> special_;
  int32_t pad_;
};

}  // namespace rlx
