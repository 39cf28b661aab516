#include "tokenizers/wordpiece.h"

#include <utf8proc.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "rlx/error.h"

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
    if (id >= 0 && !s.empty()) specials_.push_back({decode_utf8(s), id});
  }
  // Longest first, so a special token that prefixes another never wins.
  std::sort(specials_.begin(), specials_.end(),
            [](auto& a, auto& b) { return a.first.size() > b.first.size(); });
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
  std::ifstream in(path);
  RLX_CHECK(in, "wordpiece: cannot open '" << path << "'");
  nlohmann::json j;
  try {
    j = nlohmann::json::parse(in);
  } catch (const nlohmann::json::exception& e) {
    RLX_FAIL("wordpiece: '" << path << "' is not valid JSON: " << e.what());
  }
  WordPieceOptions o;
  std::unordered_map<std::string, int32_t> vocab;
  std::vector<std::string> specials;
  try {
    const auto& model = j.at("model");
    std::string type = model.value("type", std::string());
    RLX_CHECK(type == "WordPiece", "wordpiece: '" << path << "' holds a '" << type
                                                  << "' model, not WordPiece");
    for (auto& [tok, id] : model.at("vocab").items()) vocab.emplace(tok, id.get<int32_t>());
    o.unk = model.value("unk_token", o.unk);
    o.continuing_prefix = model.value("continuing_subword_prefix", o.continuing_prefix);
    o.max_input_chars_per_word = model.value("max_input_chars_per_word", o.max_input_chars_per_word);
    if (j.contains("normalizer") && j["normalizer"].is_object()) {
      const auto& n = j["normalizer"];
      RLX_CHECK(n.value("type", std::string()) == "BertNormalizer",
                "wordpiece: '" << path << "': only the BertNormalizer is supported");
      o.clean_text = n.value("clean_text", true);
      o.handle_chinese_chars = n.value("handle_chinese_chars", true);
      o.lowercase = n.value("lowercase", true);
      // strip_accents null follows lowercase, as in BERT.
      o.strip_accents = n.contains("strip_accents") && n["strip_accents"].is_boolean()
                            ? n["strip_accents"].get<bool>()
                            : o.lowercase;
    }
    if (j.contains("added_tokens") && j["added_tokens"].is_array())
      for (const auto& t : j["added_tokens"]) specials.push_back(t.at("content").get<std::string>());
    if (j.contains("padding") && j["padding"].is_object())
      o.pad = j["padding"].value("pad_token", o.pad);
  } catch (const nlohmann::json::exception& e) {
    RLX_FAIL("wordpiece: '" << path << "': " << e.what());
  }
  return WordPiece(std::move(vocab), o, specials);
}

WordPiece WordPiece::from_vocab_txt(const std::string& vocab_path, const std::string& config_path) {
  std::ifstream in(vocab_path);
  RLX_CHECK(in, "wordpiece: cannot open '" << vocab_path << "'");
  std::unordered_map<std::string, int32_t> vocab;
  std::string line;
  int32_t id = 0;
  while (std::getline(in, line)) {
    if (!line.empty() && line.back() == '\r') line.pop_back();
    vocab.emplace(line, id++);
  }
  WordPieceOptions o;
  if (!config_path.empty()) {
    std::ifstream cin(config_path);
    RLX_CHECK(cin, "wordpiece: cannot open '" << config_path << "'");
    try {
      nlohmann::json c = nlohmann::json::parse(cin);
      o.lowercase = c.value("do_lower_case", true);
      o.handle_chinese_chars = c.value("tokenize_chinese_chars", true);
      o.strip_accents = c.contains("strip_accents") && c["strip_accents"].is_boolean()
                            ? c["strip_accents"].get<bool>()
                            : o.lowercase;
      for (auto* key : {"unk_token", "cls_token", "sep_token", "pad_token"}) {
        if (!c.contains(key) || !c[key].is_string()) continue;
        std::string v = c[key].get<std::string>();
        std::string k = key;
        (k == "unk_token" ? o.unk : k == "cls_token" ? o.cls : k == "sep_token" ? o.sep : o.pad) = v;
      }
    } catch (const nlohmann::json::exception& e) {
      RLX_FAIL("wordpiece: '" << config_path << "': " << e.what());
    }
  }
  std::vector<std::string> specials = {o.pad, o.unk, o.cls, o.sep, "[MASK]"};
  return WordPiece(std::move(vocab), o, specials);
}

void WordPiece::word_piece(const std::u32string& word, std::vector<int32_t>& out) const {
  if (int(word.size()) > opts_.max_input_chars_per_word) {
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
    size_t end = word.size();
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

void WordPiece::tokenize_plain(std::u32string_view text, std::vector<int32_t>& out) const {
  // Normalize.
  std::u32string norm;
  norm.reserve(text.size());
  for (char32_t c : text) {
    if (opts_.clean_text) {
      if (c == 0 || c == 0xFFFD || is_control(c)) continue;
      if (is_whitespace(c)) c = U' ';
    }
    if (opts_.handle_chinese_chars && is_chinese_char(c)) {
      norm.push_back(U' ');
      norm.push_back(c);
      norm.push_back(U' ');
    } else {
      norm.push_back(c);
    }
  }
  if (opts_.strip_accents) {
    std::u32string d;
    for (char32_t c : norm) decompose(c, d);
    norm.clear();
    for (char32_t c : d)
      if (category(c) != UTF8PROC_CATEGORY_MN) norm.push_back(c);
  }
  if (opts_.lowercase) {
    std::u32string l;
    l.reserve(norm.size());
    for (char32_t c : norm) lowercase(c, l);
    norm = std::move(l);
  }
  // Split on whitespace; each punctuation char is a word of its own.
  std::u32string word;
  auto flush = [&] {
    if (!word.empty()) word_piece(word, out);
    word.clear();
  };
  for (char32_t c : norm) {
    if (is_whitespace(c)) {
      flush();
    } else if (is_punctuation(c)) {
      flush();
      word.push_back(c);
      flush();
    } else {
      word.push_back(c);
    }
  }
  flush();
}

std::vector<int32_t> WordPiece::tokenize(std::string_view text) const {
  std::u32string s = decode_utf8(text);
  std::vector<int32_t> out;
  // Special tokens are found in the raw text, leftmost first.
  size_t pos = 0;
  while (pos <= s.size()) {
    size_t best = std::u32string::npos;
    const std::pair<std::u32string, int32_t>* which = nullptr;
    for (const auto& sp : specials_) {
      size_t at = s.find(sp.first, pos);
      if (at < best) {  // ties keep the longer token (sorted first)
        best = at;
        which = &sp;
      }
    }
    if (!which) {
      tokenize_plain(std::u32string_view(s).substr(pos), out);
      break;
    }
    tokenize_plain(std::u32string_view(s).substr(pos, best - pos), out);
    out.push_back(which->second);
    pos = best + which->first.size();
  }
  return out;
}

Encoding WordPiece::encode(std::string_view text, int max_len) const {
  RLX_CHECK(max_len >= 2, "wordpiece: max_len " << max_len << " leaves no room for [CLS] and [SEP]");
  std::vector<int32_t> toks = tokenize(text);
  if (toks.size() > size_t(max_len - 2)) toks.resize(size_t(max_len - 2));
  Encoding e;
  e.ids.reserve(toks.size() + 2);
  e.ids.push_back(cls_id_);
  e.ids.insert(e.ids.end(), toks.begin(), toks.end());
  e.ids.push_back(sep_id_);
  e.type_ids.assign(e.ids.size(), 0);
  e.attention_mask.assign(e.ids.size(), 1);
  return e;
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
