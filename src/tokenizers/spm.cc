#include "tokenizers/spm.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdio>
#include <optional>

#include "models/gguf.h"
#include "rlx/error.h"
#include "tokenizers/gguf_vocab.h"
#include "tokenizers/metaspace.h"
#include "tokenizers/merge.h"

namespace rlx {
namespace {

const std::string kSpace = "\xe2\x96\x81";  // U+2581, sentencepiece's visible space

}  // namespace

SpmTokenizer SpmTokenizer::from_gguf(const GgufFile& f) {
  const std::string where = "spm: '" + f.path() + "'";
  const std::string model = f.get_string("tokenizer.ggml.model");
  RLX_CHECK(model == "llama", where << ": tokenizer.ggml.model is '" << model << "', not 'llama'");
  SpmTokenizer t;
  t.pieces_ = f.get_string_array("tokenizer.ggml.tokens");
  const size_t n = t.pieces_.size();
  RLX_CHECK(n > 0 && n < (size_t(1) << 24), where << ": vocabulary of " << n << " tokens");
  if (f.has("tokenizer.ggml.scores")) {
    t.scores_ = f.get_float_array("tokenizer.ggml.scores");
    RLX_CHECK(t.scores_.size() == n, where << ": tokenizer.ggml.scores must be " << n << " numbers");
  } else {
    t.scores_.assign(n, 0.f);
  }
  t.types_ = read_token_types(f, n, where);
  std::fill(std::begin(t.byte_ids_), std::end(t.byte_ids_), -1);
  for (size_t i = 0; i < n; ++i) {
    const std::string& p = t.pieces_[i];
    if (t.types_[i] == kTokenByte) {
      uint8_t b = 0;
      RLX_CHECK(parse_byte_token(p, b), where << ": byte token " << i << " is '" << p << "', not <0xNN>");
      t.byte_ids_[b] = int32_t(i);
    } else if (t.types_[i] == kTokenNormal || t.types_[i] == kTokenUserDefined) {
      t.vocab_.emplace(p, int32_t(i));
    } else if (t.types_[i] == kTokenUnknown) {
      t.unk_id_ = int32_t(i);
    }
    if (t.types_[i] == kTokenUnknown || t.types_[i] == kTokenControl || t.types_[i] == kTokenUserDefined)
      t.specials_.add(p, int32_t(i), t.types_[i] != kTokenUserDefined);
  }
  t.specials_.finish();
  check_special_token_ids(f, n, where);
  t.bos_id_ = read_token_id(f, "tokenizer.ggml.bos_token_id", n, where);
  t.eos_id_ = read_token_id(f, "tokenizer.ggml.eos_token_id", n, where);
  if (f.has("tokenizer.ggml.unknown_token_id")) t.unk_id_ = read_token_id(f, "tokenizer.ggml.unknown_token_id", n, where);
  t.add_bos_ = f.get_bool("tokenizer.ggml.add_bos_token", true);
  t.add_eos_ = f.get_bool("tokenizer.ggml.add_eos_token", false);
  t.add_space_prefix_ = f.get_bool("tokenizer.ggml.add_space_prefix", true);
  return t;
}

int32_t SpmTokenizer::id_of(const std::string& piece) const {
  auto it = vocab_.find(piece);
  return it == vocab_.end() ? -1 : it->second;
}

std::vector<int32_t> SpmTokenizer::encode(std::string_view text, const EncodeOptions& o) const {
  std::vector<int32_t> out;
  if (o.add_special && add_bos_ && bos_id_ >= 0) out.push_back(bos_id_);
  size_t plain = 0, i = 0;
  while (i < text.size()) {
    auto [len, id] = specials_.longest_at(text, i, o.parse_special);
    if (len == 0) {
      ++i;
      continue;
    }
    encode_plain(text.substr(plain, i - plain), out);
    out.push_back(id);
    i += len;
    plain = i;
  }
  encode_plain(text.substr(plain), out);
  if (o.add_special && add_eos_ && eos_id_ >= 0) out.push_back(eos_id_);
  return out;
}

void SpmTokenizer::encode_plain(std::string_view text, std::vector<int32_t>& out) const {
  if (text.empty()) return;
  // Every run of text starts with the prepended space: the text's start and
  // the text after a special token alike.
  std::string s = add_space_prefix_ ? kSpace : "";
  for (char c : text) {
    if (c == ' ') s += kSpace;
    else s += c;
  }
  // Merge the pair forming the highest-scored piece, leftmost on ties. The key
  // is the negated score (lower merges first); a NaN score never merges, so
  // the queue's order stays a strict weak order.
  std::string joined;
  auto score = [&](std::string_view l, std::string_view r) -> std::optional<float> {
    joined.assign(l).append(r);
    auto it = vocab_.find(joined);
    if (it == vocab_.end()) return std::nullopt;
    const float sc = scores_[size_t(it->second)];
    if (std::isnan(sc)) return std::nullopt;
    return -sc;
  };
  std::string piece;
  for (std::string_view sv : merge_symbols<float>(s, score)) {
    piece.assign(sv);
    int32_t id = id_of(piece);
    if (id >= 0) {
      out.push_back(id);
      continue;
    }
    for (unsigned char b : piece) {  // byte fallback, else unknown
      if (byte_ids_[b] >= 0) out.push_back(byte_ids_[b]);
      else if (unk_id_ >= 0 && (out.empty() || out.back() != unk_id_)) out.push_back(unk_id_);
    }
  }
}

std::string SpmTokenizer::token_bytes(int32_t id) const {
  RLX_CHECK(id >= 0 && size_t(id) < pieces_.size(),
            "spm: token id " << id << " is out of range (vocabulary of " << pieces_.size() << ")");
  const std::string& p = pieces_[size_t(id)];
  switch (types_[size_t(id)]) {
    case 6: {
      for (int b = 0; b < 256; ++b)
        if (byte_ids_[b] == id) return std::string(1, char(b));
      return "";
    }
    case 2: return " \xe2\x81\x87 ";  // sentencepiece writes unknowns as " ⁇ "
    case 3: return "";                // control tokens (BOS, EOS) print nothing
    default: break;
  }
  return metaspace_to_spaces(p);
}

std::string SpmTokenizer::decode(const std::vector<int32_t>& ids) const {
  std::string out;
  bool first = true;
  for (int32_t id : ids) {
    std::string b = token_bytes(id);
    if (first && !b.empty()) {
      if (add_space_prefix_ && b[0] == ' ' && types_[size_t(id)] != 6) b.erase(0, 1);
      first = false;
    }
    out += b;
  }
  return out;
}

}  // namespace rlx
