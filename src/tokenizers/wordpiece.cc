#include "tokenizers/wordpiece.h"

#include <mutex>

#include <utf8proc.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <limits>
#include <nlohmann/json.hpp>

#include "models/json_read.h"
#include "rlx/error.h"
#include "tokenizers/pair_truncation.h"

namespace rlx {
namespace fs = std::filesystem;
namespace {

std::u32string decode_utf8(std::string_view s) {
  std::u32string out;
  out.reserve(s.size());
  auto* p = reinterpret_cast<const utf8proc_uint8_t*>(s.data());
  utf8proc_ssize_t left = utf8proc_ssize_t(s.size());
  while (left > 0) {
    utf8proc_int32_t cp;
    utf8proc_ssize_t n = utf8proc_iterate(p, left, &cp);
    if (n <= 0) {  // invalid byte: becomes U+FFFD, which cleaning removes
      out.push_back(0xFFFD);
      ++p;
      --left;
      continue;
    }
    out.push_back(char32_t(cp));
    p += n;
    left -= n;
  }
  return out;
}

void append_utf8(std::string& out, char32_t c) {
  utf8proc_uint8_t buf[4];
  utf8proc_ssize_t n = utf8proc_encode_char(utf8proc_int32_t(c), buf);
  out.append(reinterpret_cast<const char*>(buf), size_t(n));
}

// Unicode White_Space, as Rust's char::is_whitespace defines it.
bool is_whitespace(char32_t c) {
  return (c >= 0x09 && c <= 0x0D) || c == 0x20 || c == 0x85 || c == 0xA0 || c == 0x1680 ||
         (c >= 0x2000 && c <= 0x200A) || c == 0x2028 || c == 0x2029 || c == 0x202F ||
         c == 0x205F || c == 0x3000;
}

utf8proc_category_t category(char32_t c) {
  return utf8proc_category(utf8proc_int32_t(c));
}

// "Other" categories (Cc, Cf, Cn, Co, Cs), except the whitespace controls.
bool is_control(char32_t c) {
  if (c == '\t' || c == '\n' || c == '\r') return false;
  switch (category(c)) {
    case UTF8PROC_CATEGORY_CC: case UTF8PROC_CATEGORY_CF: case UTF8PROC_CATEGORY_CN:
    case UTF8PROC_CATEGORY_CO: case UTF8PROC_CATEGORY_CS:
      return true;
    default:
      return false;
  }
}

// ASCII symbols count as punctuation too ("$", "+", "^", "`" ...).
bool is_punctuation(char32_t c) {
  if ((c >= 33 && c <= 47) || (c >= 58 && c <= 64) || (c >= 91 && c <= 96) || (c >= 123 && c <= 126))
    return true;
  switch (category(c)) {
    case UTF8PROC_CATEGORY_PC: case UTF8PROC_CATEGORY_PD: case UTF8PROC_CATEGORY_PS:
    case UTF8PROC_CATEGORY_PE: case UTF8PROC_CATEGORY_PI: case UTF8PROC_CATEGORY_PF:
    case UTF8PROC_CATEGORY_PO:
      return true;
    default:
      return false;
  }
}

// CJK ideograph blocks that BERT surrounds with spaces.
bool is_chinese_char(char32_t c) {
  return (c >= 0x4E00 && c <= 0x9FFF) || (c >= 0x3400 && c <= 0x4DBF) ||
         (c >= 0x20000 && c <= 0x2A6DF) || (c >= 0x2A700 && c <= 0x2B73F) ||
         (c >= 0x2B740 && c <= 0x2B81F) || (c >= 0x2B920 && c <= 0x2CEAF) ||
         (c >= 0xF900 && c <= 0xFAFF) || (c >= 0x2F800 && c <= 0x2FA1F);
}

// Canonical decomposition of one code point (NFD of a single char).
void decompose(char32_t c, std::u32string& out) {
  utf8proc_int32_t buf[32];
  int last = 0;
  utf8proc_ssize_t n = utf8proc_decompose_char(utf8proc_int32_t(c), buf, 32,
                                               UTF8PROC_DECOMPOSE, &last);
  if (n < 0 || n > 32) {
    out.push_back(c);
    return;
  }
  for (utf8proc_ssize_t i = 0; i < n; ++i) out.push_back(char32_t(buf[i]));
}

// Full lowercase mapping of one code point (U+0130 is the one that grows).
void lowercase(char32_t c, std::u32string& out) {
  if (c == 0x130) {
    out.push_back(U'i');
    out.push_back(0x307);
    return;
  }
  out.push_back(char32_t(utf8proc_tolower(utf8proc_int32_t(c))));
}

}  // namespace

size_t Encoding::tokens() const {
  return size_t(std::count(attention_mask.begin(), attention_mask.end(), 1));
}

WordPiece::WordPiece(std::unordered_map<std::string, int32_t> vocab, WordPieceOptions opts,
                     std::vector<std::string> special_tokens)
    : vocab_(std::move(vocab)), opts_(std::move(opts)) {
  RLX_CHECK(opts_.max_input_chars_per_word >= 1 && opts_.max_input_chars_per_word <= kMaxWordChars,
            "wordpiece: max_input_chars_per_word " << opts_.max_input_chars_per_word
                                                   << " is outside [1, " << kMaxWordChars << "]");
  for (const auto& [tok, id] : vocab_) {
    RLX_CHECK(id >= 0, "wordpiece: token '" << tok << "' has the negative id " << id);
    max_id_ = std::max(max_id_, id);
    by_id_.emplace(id, tok);
    size_t chars = 0;
    for (unsigned char c : tok) chars += (c & 0xC0) != 0x80;  // UTF-8 lead bytes
    longest_piece_ = std::max(longest_piece_, chars);
  }
  unk_id_ = id_of(opts_.unk);
  cls_id_ = id_of(opts_.cls);
  sep_id_ = id_of(opts_.sep);
  int32_t pad = id_of(opts_.pad);
  pad_id_ = pad >= 0 ? pad : 0;
  RLX_CHECK(unk_id_ >= 0, "wordpiece: vocabulary has no unknown token '" << opts_.unk << "'");
  RLX_CHECK(cls_id_ >= 0 && sep_id_ >= 0,
            "wordpiece: vocabulary lacks '" << opts_.cls << "' or '" << opts_.sep << "'");
  for (const auto& s : special_tokens) {
    int32_t id = id_of(s);
    if (id < 0 || s.empty()) continue;
    std::u32string u = decode_utf8(s);
    RLX_CHECK(u.size() <= kMaxSpecialChars, "wordpiece: added token '" << s.substr(0, 32) << "...' is "
                                                << u.size() << " characters long, more than "
                                                << kMaxSpecialChars);
    specials_.add(u, id);
  }
}

int32_t WordPiece::id_of(const std::string& token) const {
  auto it = vocab_.find(token);
  return it == vocab_.end() ? -1 : it->second;
}

WordPiece WordPiece::from_dir(const std::string& dir) {
  fs::path d(dir);
  if (fs::exists(d / "tokenizer.json")) return from_tokenizer_json((d / "tokenizer.json").string());
  RLX_CHECK(fs::exists(d / "vocab.txt"),
            "wordpiece: '" << dir << "' has neither tokenizer.json nor vocab.txt");
  fs::path cfg = d / "tokenizer_config.json";
  return from_vocab_txt((d / "vocab.txt").string(), fs::exists(cfg) ? cfg.string() : "");
}

WordPiece WordPiece::from_tokenizer_json(const std::string& path) {
  nlohmann::json doc = read_json_file(path);
  JsonField j(doc, path);
  j.object();
  WordPieceOptions o;
  std::unordered_map<std::string, int32_t> vocab;
  std::vector<std::string> specials;
  JsonField model = j.at("model").object();
  std::string type = model.string_or("type", "");
  RLX_CHECK(type == "WordPiece", "wordpiece: '" << path << "' holds a '" << type
                                                << "' model, not WordPiece");
  model.at("vocab").for_each_member([&](const std::string& tok, const JsonField& id) {
    vocab.emplace(tok, int32_t(id.integer(0, std::numeric_limits<int32_t>::max() - 1)));
  });
  o.unk = model.string_or("unk_token", o.unk);
  o.continuing_prefix = model.string_or("continuing_subword_prefix", o.continuing_prefix);
  o.max_input_chars_per_word =
      int(model.integer_or("max_input_chars_per_word", o.max_input_chars_per_word, 1, kMaxWordChars));
  if (j.has("normalizer")) {
    JsonField n = j.at("normalizer").object();
    RLX_CHECK(n.string_or("type", "") == "BertNormalizer",
              "wordpiece: '" << path << "': only the BertNormalizer is supported");
    o.clean_text = n.boolean_or("clean_text", true);
    o.handle_chinese_chars = n.boolean_or("handle_chinese_chars", true);
    o.lowercase = n.boolean_or("lowercase", true);
    // strip_accents null follows lowercase, as in BERT.
    o.strip_accents = n.boolean_or("strip_accents", o.lowercase);
  }
  if (j.has("added_tokens")) {
    JsonField added = j.at("added_tokens");
    for (size_t i = 0; i < added.size(); ++i) specials.push_back(added.at(i).at("content").string());
  }
  if (j.has("padding")) o.pad = j.at("padding").object().string_or("pad_token", o.pad);
  try {
    return WordPiece(std::move(vocab), o, specials);
  } catch (const Error& e) {
    RLX_FAIL("'" << path << "': " << e.what());
  }
}

WordPiece WordPiece::from_vocab_txt(const std::string& vocab_path, const std::string& config_path) {
  std::error_code ec;
  RLX_CHECK(fs::is_regular_file(vocab_path, ec), "wordpiece: '" << vocab_path << "' is not a regular file");
  std::ifstream in(vocab_path);
  RLX_CHECK(in, "wordpiece: cannot open '" << vocab_path << "'");
  std::unordered_map<std::string, int32_t> vocab;
  std::string line;
  int32_t id = 0;
  while (std::getline(in, line)) {
    RLX_CHECK(id < std::numeric_limits<int32_t>::max(), "wordpiece: '" << vocab_path << "' has too many lines");
    if (!line.empty() && line.back() == '\r') line.pop_back();
    vocab.emplace(line, id++);
  }
  WordPieceOptions o;
  if (!config_path.empty()) {
    nlohmann::json doc = read_json_file(config_path);
    JsonField c(doc, config_path);
    c.object();
    o.lowercase = c.boolean_or("do_lower_case", true);
    o.handle_chinese_chars = c.boolean_or("tokenize_chinese_chars", true);
    o.strip_accents = c.boolean_or("strip_accents", o.lowercase);
    for (auto* key : {"unk_token", "cls_token", "sep_token", "pad_token"}) {
      // Newer files write special tokens as objects; those keep the defaults.
      if (!c.has(key) || !c.at(key).json().is_string()) continue;
      std::string v = c.at(key).string();
      std::string k = key;
      (k == "unk_token" ? o.unk : k == "cls_token" ? o.cls : k == "sep_token" ? o.sep : o.pad) = v;
    }
  }
  std::vector<std::string> specials = {o.pad, o.unk, o.cls, o.sep, "[MASK]"};
  try {
    return WordPiece(std::move(vocab), o, specials);
  } catch (const Error& e) {
    RLX_FAIL("'" << vocab_path << "': " << e.what());
  }
}

void WordPiece::word_piece(const std::u32string& word, std::vector<int32_t>& out) const {
  if (word.size() > size_t(opts_.max_input_chars_per_word)) {
    out.push_back(unk_id_);
    return;
  }
  std::string utf8;
  std::vector<size_t> offset;  // byte offset of each char, plus the end
  for (char32_t c : word) {
    offset.push_back(utf8.size());
    append_utf8(utf8, c);
  }
  offset.push_back(utf8.size());
  size_t first = out.size();
  size_t start = 0;
  std::string piece;
  while (start < word.size()) {
    int32_t found = -1;
    // No vocabulary entry is longer than longest_piece_, so longer candidates cannot match.
    size_t end = std::min(word.size(), start + longest_piece_);
    for (; end > start; --end) {
      piece.clear();
      if (start > 0) piece = opts_.continuing_prefix;
      piece.append(utf8, offset[start], offset[end] - offset[start]);
      found = id_of(piece);
      if (found >= 0) break;
    }
    if (found < 0) {  // no piece matches: the whole word is unknown
      out.resize(first);
      out.push_back(unk_id_);
      return;
    }
    out.push_back(found);
    start = end;
  }
}

// BERT normalization of one code point (clean text, CJK spacing, accent
// stripping, lowercasing): each step maps code points independently.
void WordPiece::normalize(char32_t c, std::u32string& out) const {
  if (opts_.clean_text) {
    if (c == 0 || c == 0xFFFD || is_control(c)) return;
    if (is_whitespace(c)) c = U' ';
  }
  char32_t spaced[3] = {U' ', c, U' '};
  bool cjk = opts_.handle_chinese_chars && is_chinese_char(c);
  std::u32string d;
  for (char32_t x : cjk ? std::u32string_view(spaced, 3) : std::u32string_view(&c, 1)) {
    d.clear();
    if (opts_.strip_accents) decompose(x, d);
    else d.push_back(x);
    for (char32_t y : d) {
      if (opts_.strip_accents && category(y) == UTF8PROC_CATEGORY_MN) continue;
      if (opts_.lowercase) lowercase(y, out);
      else out.push_back(y);
    }
  }
}

bool WordPiece::tokenize_plain(std::u32string_view text, size_t limit, std::vector<int32_t>& out) const {
  // Split on whitespace; each punctuation char is a word of its own. A word
  // longer than max_input_chars_per_word is [UNK] whatever its content, so
  // only one char past the limit is kept.
  std::u32string word, norm;
  bool word_too_long = false;
  auto flush = [&] {
    if (word_too_long) out.push_back(unk_id_);
    else if (!word.empty()) word_piece(word, out);
    word.clear();
    word_too_long = false;
    return out.size() < limit;
  };
  for (char32_t raw : text) {
    norm.clear();
    normalize(raw, norm);
    for (char32_t c : norm) {
      if (is_whitespace(c)) {
        if (!flush()) return false;
      } else if (is_punctuation(c)) {
        if (!flush()) return false;
        word.push_back(c);
        if (!flush()) return false;
      } else if (word.size() < size_t(opts_.max_input_chars_per_word)) {
        word.push_back(c);
      } else {
        word_too_long = true;
      }
    }
  }
  return flush();
}

std::vector<int32_t> WordPiece::tokenize(std::string_view text, size_t limit) const {
  std::u32string s = decode_utf8(text);
  std::u32string_view v(s);
  std::vector<int32_t> out;
  if (limit == 0) return out;
  // Special tokens are found in the raw text, leftmost-longest; the text
  // between them is tokenized normally.
  size_t plain = 0;
  for (size_t pos = 0; pos < v.size();) {
    auto [len, id] = specials_.empty() ? std::pair<size_t, int32_t>{0, -1} : specials_.longest_at(v, pos);
    if (len == 0) {
      ++pos;
      continue;
    }
    if (!tokenize_plain(v.substr(plain, pos - plain), limit, out)) return out;
    out.push_back(id);
    if (out.size() >= limit) return out;
    pos += len;
    plain = pos;
  }
  tokenize_plain(v.substr(plain), limit, out);
  return out;
}

Encoding WordPiece::encode(std::string_view text, int max_len) const {
  RLX_CHECK(max_len >= 2, "wordpiece: max_len " << max_len << " leaves no room for [CLS] and [SEP]");
  const size_t room = size_t(max_len - 2);
  std::vector<int32_t> toks = tokenize(text, room + 1);  // one more shows whether any were dropped
  Encoding e;
  e.truncated = toks.size() > room;
  if (e.truncated) toks.resize(room);
  e.ids.reserve(toks.size() + 2);
  e.ids.push_back(cls_id_);
  e.ids.insert(e.ids.end(), toks.begin(), toks.end());
  e.ids.push_back(sep_id_);
  e.type_ids.assign(e.ids.size(), 0);
  e.attention_mask.assign(e.ids.size(), 1);
  return e;
}

Encoding WordPiece::encode_pair(std::string_view a, std::string_view b, int max_len) const {
  RLX_CHECK(max_len >= 3, "wordpiece: max_len " << max_len << " leaves no room for [CLS] and two [SEP]");
  const size_t room = size_t(max_len - 3);
  // Whole: which side is longer decides the split, as in Hugging Face.
  std::vector<int32_t> ta = tokenize(a), tb = tokenize(b);
  Encoding e;
  e.truncated = cut_longest_first(ta, tb, room);  // Hugging Face's longest_first
  e.ids.push_back(cls_id_);
  e.ids.insert(e.ids.end(), ta.begin(), ta.end());
  e.ids.push_back(sep_id_);
  e.type_ids.assign(e.ids.size(), 0);
  e.ids.insert(e.ids.end(), tb.begin(), tb.end());
  e.ids.push_back(sep_id_);
  e.type_ids.resize(e.ids.size(), 1);
  e.attention_mask.assign(e.ids.size(), 1);
  return e;
}

const std::string& WordPiece::token(int32_t id) const {
  static const std::string none;
  auto it = by_id_.find(id);
  return it == by_id_.end() ? none : it->second;
}

std::string WordPiece::decode(const std::vector<int32_t>& ids) const {
  // As BertTokenizerFast.decode(skip_special_tokens=True): pieces joined by
  // spaces, continuation pieces glued to the one before.
  std::string out;
  const std::string& pre = opts_.continuing_prefix;
  for (int32_t id : ids) {
    if (id == cls_id_ || id == sep_id_ || id == pad_id_) continue;
    const std::string& t = token(id);
    if (!pre.empty() && t.rfind(pre, 0) == 0) {
      out += t.substr(pre.size());
    } else {
      if (!out.empty()) out += ' ';
      out += t;
    }
  }
  return out;
}

void WordPiece::pad(Encoding& e, size_t length) const {
  if (e.ids.size() >= length) return;
  e.ids.resize(length, pad_id_);
  e.type_ids.resize(length, 0);
  e.attention_mask.resize(length, 0);
}

std::vector<Encoding> WordPiece::encode_batch(const std::vector<std::string>& texts, int max_len,
                                              int pad_to) const {
  std::vector<Encoding> out;
  out.reserve(texts.size());
  size_t longest = pad_to > 0 ? size_t(pad_to) : 0;
  for (const auto& t : texts) {
    out.push_back(encode(t, max_len));
    longest = std::max(longest, out.back().size());
  }
  for (auto& e : out) pad(e, longest);
  return out;
}

}  // namespace rlx
