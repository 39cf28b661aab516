#include "models/unigram_embedding_tokenizer.h"

#include <algorithm>

#include "models/json_read.h"
#include "models/post_template.h"
#include "rlx/error.h"
#include "tokenizers/unigram.h"

namespace rlx {
namespace {

class UnigramEmbeddingTokenizer : public EmbeddingTokenizer {
 public:
  UnigramEmbeddingTokenizer(UnigramTokenizer u, PostTemplate t) : u_(std::move(u)), t_(std::move(t)) {
    special_ = t_.special_ids();
    pad_ = u_.id_of("<pad>");
    if (pad_ < 0) pad_ = 0;
    special_.push_back(pad_);
  }
  std::string kind() const override { return "unigram"; }
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
    return u_.decode(plain);
  }
  std::string token_text(int32_t id) const override {
    return id >= 0 && size_t(id) < u_.vocab_size() ? u_.piece(id) : "";
  }
  int32_t token_id(const std::string& token) const override { return u_.id_of(token); }
  size_t vocab_size() const override { return u_.vocab_size(); }
  int32_t pad_id() const override { return pad_; }

 private:
  // Added tokens written in the text count as themselves, as in Hugging Face.
  std::vector<int32_t> pieces(std::string_view text) const { return u_.encode(text, {false, true}); }
  UnigramTokenizer u_;
  PostTemplate t_;
  std::vector<int32_t> special_;
  int32_t pad_ = 0;
};

}  // namespace

std::unique_ptr<EmbeddingTokenizer> load_unigram_embedding_tokenizer(const nlohmann::json& doc,
                                                                     const std::string& path) {
  UnigramTokenizer u = UnigramTokenizer::from_tokenizer_json(doc, path);
  JsonField j(doc, path);
  RLX_CHECK(j.has("post_processor"),
            j.where() << "post_processor is missing: the model's special tokens (<s> ... </s>) are unknown");
  PostTemplate t = PostTemplate::from_json(j.at("post_processor"), u.vocab_size());
  return std::make_unique<UnigramEmbeddingTokenizer>(std::move(u), std::move(t));
}

}  // namespace rlx
