#include "models/embedding_tokenizer.h"

#include <filesystem>
#include <nlohmann/json.hpp>

#include "models/json_read.h"
#include "models/post_template.h"
#include "models/template_embedding_tokenizer.h"
#include "models/unigram_embedding_tokenizer.h"
#include "rlx/error.h"
#include "tokenizers/bpe.h"
#include "tokenizers/pair_truncation.h"
#include "tokenizers/spm_json.h"
#include "tokenizers/wordpiece.h"
#include "tokenizers/wordpiece_text.h"

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


// Byte-level BPE with RoBERTa's special tokens; token types are all 0
// (RoBERTa has one).
class RobertaTokenizer : public EmbeddingTokenizer {
 public:
  RobertaTokenizer(BpeTokenizer bpe, int32_t cls, int32_t sep, int32_t pad)
      : bpe_(std::move(bpe)), cls_(cls), sep_(sep), pad_(pad) {}
  std::string kind() const override { return "bpe"; }
  TokenizedText encode(std::string_view text, int max_len) const override {
    RLX_CHECK(max_len >= 2, "roberta tokenizer: max_len " << max_len << " leaves no room for <s> and </s>");
    std::vector<int32_t> t = pieces(text);
    TokenizedText out;
    out.truncated = t.size() > size_t(max_len - 2);
    if (out.truncated) t.resize(size_t(max_len - 2));
    out.ids.push_back(cls_);
    out.ids.insert(out.ids.end(), t.begin(), t.end());
    out.ids.push_back(sep_);
    out.type_ids.assign(out.ids.size(), 0);
    return out;
  }
  TokenizedText encode_pair(std::string_view a, std::string_view b, int max_len) const override {
    RLX_CHECK(max_len >= 4, "roberta tokenizer: max_len " << max_len << " leaves no room for a pair");
    std::vector<int32_t> ta = pieces(a), tb = pieces(b);
    TokenizedText out;
    out.truncated = cut_longest_first(ta, tb, size_t(max_len - 4));
    out.ids.push_back(cls_);
    out.ids.insert(out.ids.end(), ta.begin(), ta.end());
    out.ids.push_back(sep_);
    out.ids.push_back(sep_);
    out.ids.insert(out.ids.end(), tb.begin(), tb.end());
    out.ids.push_back(sep_);
    out.type_ids.assign(out.ids.size(), 0);
    return out;
  }
  std::string decode(const std::vector<int32_t>& ids) const override {
    std::vector<int32_t> plain;
    for (int32_t id : ids)
      if (id != cls_ && id != sep_ && id != pad_) plain.push_back(id);
    return bpe_.decode(plain);
  }
  std::string token_text(int32_t id) const override {
    return id >= 0 && size_t(id) < bpe_.vocab_size() ? bpe_.token(id) : "";
  }
  int32_t token_id(const std::string& token) const override { return bpe_.id_of(token); }
  size_t vocab_size() const override { return bpe_.vocab_size(); }
  int32_t pad_id() const override { return pad_; }

 private:
  // Added tokens written in the text count as themselves, as in Hugging Face.
  std::vector<int32_t> pieces(std::string_view text) const { return bpe_.encode(text, {false, true}); }
  BpeTokenizer bpe_;
  int32_t cls_, sep_, pad_;
};

std::unique_ptr<EmbeddingTokenizer> load_roberta_tokenizer(const std::string& dir) {
  const std::filesystem::path file = std::filesystem::path(dir) / "tokenizer.json";
  RLX_CHECK(std::filesystem::exists(file),
            "'" << dir << "': a RoBERTa model needs tokenizer.json (vocab.json + merges.txt alone are not read)");
  BpeTokenizer bpe = BpeTokenizer::from_tokenizer_json(file.string());
  nlohmann::json doc = read_json_file(file);
  JsonField j(doc, file.string());
  JsonField post = j.at("post_processor").object();
  const std::string type = post.at("type").string();
  RLX_CHECK(type == "RobertaProcessing",
            post.where() << "post_processor '" << type << "' is not supported for RoBERTa (RobertaProcessing is)");
  auto special = [&](const char* key) {
    int32_t id = int32_t(post.at(key).at(1).integer(0, int64_t(bpe.vocab_size()) - 1));
    return id;
  };
  int32_t pad = bpe.id_of("<pad>");
  return std::make_unique<RobertaTokenizer>(std::move(bpe), special("cls"), special("sep"), pad >= 0 ? pad : 1);
}

std::unique_ptr<EmbeddingTokenizer> load_bpe_template_tokenizer(const std::string& dir, const nlohmann::json& doc) {
  const std::string file = (std::filesystem::path(dir) / "tokenizer.json").string();
  BpeTokenizer bpe = BpeTokenizer::from_tokenizer_json(file);
  JsonField j(doc, file);
  RLX_CHECK(j.has("post_processor"),
            j.where() << "post_processor is missing: the model's special tokens ([CLS] ... [SEP]) are unknown");
  PostTemplate t = PostTemplate::from_json(j.at("post_processor"), bpe.vocab_size());
  const int32_t pad = bpe.id_of("[PAD]");
  // ModernBERT: [CLS] $A [SEP], pairs [CLS] $A [SEP] $B [SEP].
  return std::make_unique<TemplateEmbeddingTokenizer<BpeTokenizer>>("bpe", std::move(bpe), std::move(t),
                                                                    pad >= 0 ? pad : 0);
}

// The model type of a parsed tokenizer.json ("" when it names none).
std::string tokenizer_model_type(const nlohmann::json& doc) {
  const nlohmann::json* model = doc.is_object() && doc.contains("model") ? &doc["model"] : nullptr;
  return model && model->is_object() && model->contains("type") && (*model)["type"].is_string()
             ? (*model)["type"].get<std::string>()
             : "";
}

}  // namespace

std::unique_ptr<EmbeddingTokenizer> load_decoder_embedding_tokenizer(const std::string& dir) {
  const std::filesystem::path file = std::filesystem::path(dir) / "tokenizer.json";
  RLX_CHECK(std::filesystem::exists(file),
            "'" << dir << "': a decoder embedder needs tokenizer.json (byte-level BPE)");
  nlohmann::json doc = read_json_file(file);
  const std::string type = tokenizer_model_type(doc);
  RLX_CHECK(type == "BPE" && !SpmJsonTokenizer::is_spm_style(file.string()),
            "'" << file.string() << "': model '" << type
                << "' is not supported for a decoder embedder (byte-level BPE is; SentencePiece-style BPE "
                   "and Unigram are not)");
  BpeTokenizer bpe = BpeTokenizer::from_tokenizer_json(file.string());
  JsonField j(doc, file.string());
  const bool plain = !j.has("post_processor") || j.at("post_processor").json().is_null();
  PostTemplate t = plain ? PostTemplate::none() : PostTemplate::from_json(j.at("post_processor"), bpe.vocab_size());
  std::vector<int32_t> specials = t.special_ids();
  const int32_t pad = specials.empty() ? 0 : specials.back();
  return std::make_unique<TemplateEmbeddingTokenizer<BpeTokenizer>>("bpe", std::move(bpe), std::move(t), pad);
}

std::unique_ptr<EmbeddingTokenizer> load_gguf_embedding_tokenizer(const GgufFile& f) {
  return std::make_unique<WordPieceTokenizer>(WordPieceText::wordpiece_from_gguf(f));
}

std::unique_ptr<EmbeddingTokenizer> load_embedding_tokenizer(const std::string& dir, EncoderFamily family) {
  // SentencePiece Unigram (XLM-RoBERTa) in whichever family's directory;
  // read once, since XLM-R's file is 17 MB.
  const std::filesystem::path file = std::filesystem::path(dir) / "tokenizer.json";
  if (std::filesystem::exists(file)) {
    nlohmann::json doc = read_json_file(file);
    if (tokenizer_model_type(doc) == "Unigram") return load_unigram_embedding_tokenizer(doc, file.string());
    if (family == EncoderFamily::ModernBert) return load_bpe_template_tokenizer(dir, doc);
  }
  RLX_CHECK(family != EncoderFamily::ModernBert,
            "'" << dir << "': a ModernBERT model needs tokenizer.json (byte-level BPE)");
  if (family == EncoderFamily::Roberta) return load_roberta_tokenizer(dir);
  return std::make_unique<WordPieceTokenizer>(WordPiece::from_dir(dir));
}

}  // namespace rlx
