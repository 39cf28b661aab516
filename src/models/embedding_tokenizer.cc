#include "models/embedding_tokenizer.h"

#include "tokenizers/wordpiece.h"

namespace rlx {
namespace {

TokenizedText from_encoding(Encoding e) {
  return {std::move(e.ids), std::move(e.type_ids), e.truncated};
}

class WordPieceTokenizer : public EmbeddingTokenizer {
 public:
  explicit WordPieceTokenizer(WordPiece wp) : wp_(std::move(wp)) {}
  std::string kind() const override { return "wordpiece"; }
  TokenizedText encode(std::string_view text, int max_len) const override {
    return from_encoding(wp_.encode(text, max_len));
  }
  TokenizedText encode_pair(std::string_view a, std::string_view b, int max_len) const override {
    return from_encoding(wp_.encode_pair(a, b, max_len));
  }
  std::string decode(const std::vector<int32_t>& ids) const override { return wp_.decode(ids); }
  std::string token_text(int32_t id) const override { return wp_.token(id); }
  int32_t token_id(const std::string& token) const override { return wp_.id_of(token); }
  // The number of ids, so that every id the tokenizer gives is below it.
  size_t vocab_size() const override { return size_t(wp_.max_id()) + 1; }
  int32_t pad_id() const override {
    int32_t id = wp_.id_of(wp_.options().pad);
    return id >= 0 ? id : 0;
  }

 private:
  WordPiece wp_;
};

}  // namespace

std::unique_ptr<EmbeddingTokenizer> load_wordpiece_tokenizer(const std::string& dir) {
  return std::make_unique<WordPieceTokenizer>(WordPiece::from_dir(dir));
}

}  // namespace rlx
