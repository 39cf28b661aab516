#include "tokenizers/wordpiece_text.h"

#include <unordered_map>

#include "models/gguf.h"
#include "rlx/error.h"
#include "tokenizers/gguf_vocab.h"

namespace rlx {
namespace {

const std::string kSpace = "\xe2\x96\x81";  // U+2581

bool bracketed(const std::string& t) { return t.size() >= 2 && t.front() == '[' && t.back() == ']'; }

// A GGUF's WordPiece vocabulary in Hugging Face's spelling.
struct GgufWordPiece {
  std::vector<std::string> tokens;  // as the file spells them
  std::unordered_map<std::string, int32_t> vocab;
  std::vector<std::string> controls;
  WordPieceOptions options;
};

GgufWordPiece read_gguf_wordpiece(const GgufFile& f) {
  const std::string where = "wordpiece: '" + f.path() + "'";
  const std::string model = f.get_string("tokenizer.ggml.model");
  RLX_CHECK(model == "bert", where << ": tokenizer.ggml.model is '" << model << "', not 'bert'");
  std::vector<std::string> tokens = f.get_string_array("tokenizer.ggml.tokens");
  const size_t n = tokens.size();
  RLX_CHECK(n > 0 && n < (size_t(1) << 24), where << ": vocabulary of " << n << " tokens");
  const std::vector<int32_t> types = read_token_types(f, n, where);
  check_special_token_ids(f, n, where);
  // The inverse of llama.cpp's convert_hf_to_gguf.py phantom-space mapping.
  std::unordered_map<std::string, int32_t> vocab;
  std::vector<std::string> controls;
  for (size_t i = 0; i < n; ++i) {
    const std::string& t = tokens[i];
    std::string hf;
    if (t.compare(0, kSpace.size(), kSpace) == 0) hf = t.substr(kSpace.size());
    else if (bracketed(t) || types[i] == kTokenControl) hf = t;
    else hf = "##" + t;
    RLX_CHECK(vocab.emplace(hf, int32_t(i)).second,
              where << ": tokens " << vocab[hf] << " and " << i << " are both WordPiece '" << hf << "'");
    if (types[i] == kTokenControl) controls.push_back(hf);
  }
  auto name = [&](const char* key, const char* fallback) {
    const int32_t id = read_token_id(f, key, n, where);
    return id >= 0 ? tokens[size_t(id)] : std::string(fallback);
  };
  WordPieceOptions o;
  o.unk = name("tokenizer.ggml.unknown_token_id", "[UNK]");
  o.cls = name("tokenizer.ggml.cls_token_id", "[CLS]");
  o.sep = name("tokenizer.ggml.seperator_token_id", "[SEP]");
  o.pad = name("tokenizer.ggml.padding_token_id", "[PAD]");
  // llama.cpp's BertNormalizer options: lowercase, and strip accents as lowercase says.
  o.lowercase = f.get_bool("tokenizer.ggml.normalizer.lowercase", true);
  o.strip_accents = f.get_bool("tokenizer.ggml.normalizer.strip_accents", o.lowercase);
  return {std::move(tokens), std::move(vocab), std::move(controls), std::move(o)};
}

}  // namespace

WordPiece WordPieceText::wordpiece_from_gguf(const GgufFile& f) {
  GgufWordPiece p = read_gguf_wordpiece(f);
  return WordPiece(std::move(p.vocab), p.options, p.controls);
}

WordPieceText WordPieceText::from_gguf(const GgufFile& f) {
  GgufWordPiece p = read_gguf_wordpiece(f);
  std::vector<std::string>& tokens = p.tokens;
  const WordPieceOptions& o = p.options;
  WordPiece with(p.vocab, o, p.controls), plain(std::move(p.vocab), o, {});
  const int32_t cls = with.id_of(o.cls), sep = with.id_of(o.sep);
  WordPieceText t(std::move(tokens), std::move(with), std::move(plain), cls, sep);
  t.gguf_spelling_ = true;
  // llama.cpp's defaults for WordPiece: [CLS] (its BOS) and [SEP] both added.
  t.add_cls_ = f.get_bool("tokenizer.ggml.add_bos_token", true);
  t.add_sep_ = f.get_bool("tokenizer.ggml.add_sep_token", true);
  return t;
}

WordPieceText WordPieceText::from_dir(const std::string& dir) {
  WordPiece with = WordPiece::from_dir(dir);
  std::vector<std::string> tokens(size_t(with.max_id()) + 1);
  for (size_t i = 0; i < tokens.size(); ++i) tokens[i] = with.token(int32_t(i));
  const WordPieceOptions& o = with.options();
  std::unordered_map<std::string, int32_t> vocab;
  for (size_t i = 0; i < tokens.size(); ++i)
    if (!tokens[i].empty()) vocab.emplace(tokens[i], int32_t(i));
  WordPiece plain(std::move(vocab), o, {});
  const int32_t cls = with.id_of(o.cls), sep = with.id_of(o.sep);
  return WordPieceText(std::move(tokens), std::move(with), std::move(plain), cls, sep);
}

std::vector<int32_t> WordPieceText::encode(std::string_view text, const EncodeOptions& o) const {
  std::vector<int32_t> out;
  if (o.add_special && add_cls_) out.push_back(cls_id_);
  std::vector<int32_t> ids = (o.parse_special ? with_specials_ : plain_).tokenize(text);
  out.insert(out.end(), ids.begin(), ids.end());
  if (o.add_special && add_sep_) out.push_back(sep_id_);
  return out;
}

std::string WordPieceText::decode(const std::vector<int32_t>& ids) const { return plain_.decode(ids); }

std::string WordPieceText::token_bytes(int32_t id) const {
  RLX_CHECK(id >= 0 && size_t(id) < tokens_.size(),
            "wordpiece: token id " << id << " is out of range (vocabulary of " << tokens_.size() << ")");
  const std::string& t = tokens_[size_t(id)];
  std::string out;
  if (gguf_spelling_ && t.compare(0, kSpace.size(), kSpace) == 0) out.append(1, ' ').append(t, kSpace.size());
  else if (!gguf_spelling_ && t.compare(0, 2, "##") == 0) out.append(t, 2);
  else if (!gguf_spelling_ && !bracketed(t)) out.append(1, ' ').append(t);
  else out = t;
  return out;
}

int32_t WordPieceText::id_of(const std::string& token) const {
  for (size_t i = 0; i < tokens_.size(); ++i)
    if (tokens_[i] == token) return int32_t(i);
  return -1;
}

}  // namespace rlx
