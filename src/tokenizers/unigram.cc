#include "tokenizers/unigram.h"

#include <algorithm>
#include <cmath>
#include <fstream>
#include <limits>
#include <nlohmann/json.hpp>

#include "rlx/error.h"
#include "tokenizers/gguf_vocab.h"
#include "tokenizers/json_token_id.h"
#include "tokenizers/metaspace.h"
#include "tokenizers/unicode_class.h"
#include "tokenizers/utf8.h"

namespace rlx {
namespace {

const std::string kSpace = "\xe2\x96\x81";  // U+2581
constexpr double kUnkPenalty = 10.0;        // tokenizers' K_UNK_PENALTY

}  // namespace

UnigramTokenizer::UnigramTokenizer(std::vector<std::string> pieces, std::vector<double> scores, int32_t unk_id,
                                   UnigramOptions opts, const std::vector<int32_t>& special, int32_t bos_id,
                                   int32_t eos_id, const std::vector<int32_t>& user_defined,
                                   const std::string& where)
    : pieces_(std::move(pieces)), scores_(std::move(scores)), unk_id_(unk_id), bos_id_(bos_id), eos_id_(eos_id),
      opts_(opts) {
  const size_t n = pieces_.size();
  RLX_CHECK(n > 0 && n < (size_t(1) << 24), where << ": vocabulary of " << n << " pieces");
  RLX_CHECK(scores_.size() == n, where << ": " << scores_.size() << " scores for " << n << " pieces");
  RLX_CHECK(unk_id_ >= 0 && size_t(unk_id_) < n, where << ": the unknown token id " << unk_id_ << " is out of range");
  for (int32_t id : {bos_id_, eos_id_})
    RLX_CHECK(id >= -1 && id < int32_t(n), where << ": bos/eos id " << id << " is out of range");
  double min_score = std::numeric_limits<double>::infinity();
  for (size_t i = 0; i < n; ++i) {
    RLX_CHECK(std::isfinite(scores_[i]), where << ": piece " << i << " '" << pieces_[i] << "' has the score "
                                               << scores_[i]);
    RLX_CHECK(!pieces_[i].empty(), where << ": piece " << i << " is empty");
    min_score = std::min(min_score, scores_[i]);
    vocab_.emplace(pieces_[i], int32_t(i));
    longest_ = std::max(longest_, pieces_[i].size());
  }
  unk_score_ = min_score - kUnkPenalty;
  std::fill(std::begin(byte_ids_), std::end(byte_ids_), -1);
  for (size_t i = 0; i < n; ++i) {
    uint8_t b = 0;
    if (parse_byte_token(pieces_[i], b) && byte_ids_[b] < 0) byte_ids_[b] = int32_t(i);
  }
  special_.assign(n, false);
  control_.assign(n, false);
  strip_.assign(n, 0);
  std::vector<bool> always(n, false);
  for (int32_t id : user_defined) {
    RLX_CHECK(id >= 0 && size_t(id) < n, where << ": user-defined token id " << id << " is out of range");
    always[size_t(id)] = true;
  }
  for (int32_t id : special) {
    RLX_CHECK(id >= 0 && size_t(id) < n, where << ": special token id " << id << " is out of range");
    special_[size_t(id)] = true;
    control_[size_t(id)] = !always[size_t(id)];
    specials_.add(pieces_[size_t(id)], id, !always[size_t(id)]);
  }
  specials_.finish();
}

UnigramTokenizer UnigramTokenizer::from_tokenizer_json(const std::string& path) {
  const std::string where = "unigram: '" + path + "'";
  std::ifstream in(path);
  RLX_CHECK(in, where << ": cannot open");
  nlohmann::json j;
  try {
    j = nlohmann::json::parse(in);
  } catch (const nlohmann::json::exception& e) {
    RLX_FAIL(where << ": not valid JSON: " << e.what());
  }
  return from_tokenizer_json(j, path);
}

UnigramTokenizer UnigramTokenizer::from_tokenizer_json(const nlohmann::json& j, const std::string& path) {
  const std::string where = "unigram: '" + path + "'";
  try {
    const auto& m = j.at("model");
    RLX_CHECK(m.value("type", "") == "Unigram", where << ": model type is not Unigram");
    JsonNormalizer normalizer = JsonNormalizer::from_json(j.value("normalizer", nlohmann::json()), where + ": ");
    UnigramOptions o;
    o.byte_fallback = m.value("byte_fallback", false);
    const nlohmann::json* pre_p = &j.at("pre_tokenizer");
    // transformers 5 writes XLM-R's as WhitespaceSplit then Metaspace.
    if (pre_p->is_object() && pre_p->value("type", "") == "Sequence") {
      const nlohmann::json& list = pre_p->at("pretokenizers");  // a reference: pre_p points into it
      RLX_CHECK(list.is_array() && list.size() == 2 && list[0].is_object() &&
                    list[0].value("type", "") == "WhitespaceSplit",
                where << ": a pre-tokenizer Sequence must be WhitespaceSplit then Metaspace");
      o.whitespace_split = true;
      pre_p = &list[1];
    }
    const auto& pre = *pre_p;
    RLX_CHECK(pre.is_object() && pre.value("type", "") == "Metaspace" && pre.value("replacement", "") == kSpace &&
                  pre.value("split", true),
              where << ": the pre-tokenizer must be Metaspace with replacement U+2581 and split");
    const std::string scheme = pre.value("prepend_scheme", pre.value("add_prefix_space", true) ? "always" : "never");
    RLX_CHECK(scheme == "always" || scheme == "never" || scheme == "first",
              where << ": Metaspace prepend_scheme '" << scheme << "' is not supported");
    o.prepend_space = scheme != "never";
    o.prepend_first_only = scheme == "first";
    std::vector<std::string> pieces;
    std::vector<double> scores;
    for (const auto& v : m.at("vocab")) {
      pieces.push_back(v.at(0).get<std::string>());
      scores.push_back(v.at(1).get<double>());
    }
    const int64_t unk = m.contains("unk_id") ? json_token_id(m["unk_id"], where) : -1;
    RLX_CHECK(unk >= 0 && unk < int64_t(pieces.size()), where << ": unk_id " << unk << " is out of range");
    std::vector<int32_t> special, user_defined;
    std::vector<std::pair<int32_t, uint8_t>> strips;
    for (const auto& a : j.value("added_tokens", nlohmann::json::array())) {
      const int64_t id = json_token_id(a.at("id"), where);
      RLX_CHECK(id >= 0 && id < int64_t(pieces.size()) && pieces[size_t(id)] == a.at("content").get<std::string>(),
                where << ": added token " << a.at("content") << " with id " << id << " is not that vocabulary entry");
      special.push_back(int32_t(id));
      if (!a.value("special", true)) user_defined.push_back(int32_t(id));
      if (a.value("lstrip", false) || a.value("rstrip", false))
        strips.push_back({int32_t(id), uint8_t(a.value("lstrip", false) | a.value("rstrip", false) << 1)});
    }
    UnigramTokenizer t(std::move(pieces), std::move(scores), int32_t(unk), o, special, -1, -1, user_defined, where);
    for (const auto& [id, s] : strips) t.set_strip(id, s & 1, s & 2);
    t.set_normalizer(std::move(normalizer));
    return t;
  } catch (const nlohmann::json::exception& e) {
    RLX_FAIL(where << ": malformed tokenizer: " << e.what());
  }
}

int32_t UnigramTokenizer::id_of(const std::string& piece) const {
  auto it = vocab_.find(piece);
  return it == vocab_.end() ? -1 : it->second;
}

void UnigramTokenizer::viterbi(std::string_view w, std::vector<int32_t>& out) const {
  struct Node {
    double score = 0;
    size_t start = SIZE_MAX;  // SIZE_MAX: not reached
    int32_t id = -1;
  };
  std::vector<Node> best(w.size() + 1);
  best[0].start = 0;
  std::string key;
  for (size_t s = 0; s < w.size();) {
    const size_t ch = std::min(utf8_sequence_length(static_cast<unsigned char>(w[s])), w.size() - s);
    const double here = best[s].score;
    bool single = false;
    auto offer = [&](size_t e, int32_t id, double score) {
      Node& t = best[e];
      if (t.start == SIZE_MAX || here + score > t.score) t = {here + score, s, id};
    };
    for (size_t len = 1; len <= longest_ && s + len <= w.size(); ++len) {
      key.assign(w.substr(s, len));
      auto it = vocab_.find(key);
      // Control tokens come only from the text's special-token split (with
      // parse_special), never from segmentation, as in sentencepiece.
      if (it == vocab_.end() || control_[size_t(it->second)]) continue;
      offer(s + len, it->second, scores_[size_t(it->second)]);
      single = single || len == ch;
    }
    if (!single) offer(s + ch, -1, unk_score_);  // -1: the unknown character
    s += ch;
  }
  // Back from the end; runs of unknown characters fused into one.
  std::vector<std::pair<size_t, int32_t>> path;  // (start, id)
  for (size_t e = w.size(); e > 0; e = best[e].start) path.push_back({best[e].start, best[e].id});
  std::reverse(path.begin(), path.end());
  for (size_t k = 0; k < path.size(); ++k) {
    const auto [start, id] = path[k];
    if (id >= 0) {
      out.push_back(id);
      continue;
    }
    size_t end = k + 1 < path.size() ? path[k + 1].first : w.size();
    while (k + 1 < path.size() && path[k + 1].second < 0) {
      ++k;
      end = k + 1 < path.size() ? path[k + 1].first : w.size();
    }
    bool bytes = opts_.byte_fallback;
    for (size_t i = start; bytes && i < end; ++i) bytes = byte_ids_[static_cast<unsigned char>(w[i])] >= 0;
    if (bytes) {
      for (size_t i = start; i < end; ++i) out.push_back(byte_ids_[static_cast<unsigned char>(w[i])]);
    } else {
      out.push_back(unk_id_);
    }
  }
}

void UnigramTokenizer::encode_plain(std::string_view raw, bool first, std::vector<int32_t>& out) const {
  const std::string normalized = normalizer_.empty() ? std::string() : normalizer_.apply(raw);
  const std::string_view text = normalizer_.empty() ? raw : std::string_view(normalized);
  if (!opts_.whitespace_split) return metaspace(text, first, out);
  // WhitespaceSplit: words between Unicode whitespace, each its own
  // Metaspace run ("first": only a word at the very start of the text).
  size_t b = 0;
  for (size_t i = 0; i <= text.size();) {
    const CodePoint c = i < text.size() ? code_point_at(text, i, text.size()) : CodePoint{};
    if (i == text.size() || (c.cp >= 0 && is_space(c.cp))) {
      if (i > b) metaspace(text.substr(b, i - b), first && b == 0, out);
      if (i == text.size()) break;
      b = i + c.len;
    }
    i += c.len;
  }
}

void UnigramTokenizer::metaspace(std::string_view text, bool first, std::vector<int32_t>& out) const {
  if (text.empty()) return;
  std::string s;
  // prepend_scheme "always": every run of text between special tokens gets
  // the U+2581 unless it already starts with one or a space ("first": only
  // the run the text starts with).
  if (opts_.prepend_space && text[0] != ' ' && text.substr(0, kSpace.size()) != kSpace &&
      (first || !opts_.prepend_first_only))
    s = kSpace;
  for (char c : text) {
    if (c == ' ') s += kSpace;
    else s += c;
  }
  // Metaspace's split: a word starts at each U+2581.
  size_t b = 0;
  for (size_t i = 1; i <= s.size(); ++i) {
    if (i == s.size() || s.compare(i, kSpace.size(), kSpace) == 0) {
      if (i > b) viterbi(std::string_view(s).substr(b, i - b), out);
      b = i;
    }
  }
}

void UnigramTokenizer::set_strip(int32_t id, bool left, bool right) {
  RLX_CHECK(id >= 0 && size_t(id) < strip_.size(), "unigram: added token id " << id << " is out of range");
  strip_[size_t(id)] = uint8_t(left | right << 1);
}

namespace {

std::string_view trim_space(std::string_view s, bool left, bool right) {
  while (left && !s.empty()) {
    const CodePoint c = code_point_at(s, 0, s.size());
    if (c.cp < 0 || !is_space(c.cp)) break;
    s.remove_prefix(c.len);
  }
  while (right && !s.empty()) {
    size_t k = s.size() - 1;
    while (k > 0 && (static_cast<unsigned char>(s[k]) & 0xC0) == 0x80) --k;
    const CodePoint c = code_point_at(s, k, s.size());
    if (c.cp < 0 || k + c.len != s.size() || !is_space(c.cp)) break;
    s.remove_suffix(c.len);
  }
  return s;
}

}  // namespace

std::vector<int32_t> UnigramTokenizer::encode(std::string_view text, const EncodeOptions& o) const {
  std::vector<int32_t> out;
  if (o.add_special && opts_.add_bos && bos_id_ >= 0) out.push_back(bos_id_);
  // The runs between added tokens (one more than the tokens), each cut of
  // the whitespace an lstrip token after it or an rstrip token before it takes.
  std::vector<std::string_view> runs;
  std::vector<int32_t> found;
  specials_.split(text, o.parse_special, [&](std::string_view run) { runs.push_back(run); }, found);
  for (size_t k = 0; k < runs.size(); ++k) {
    const bool lstrip_next = k < found.size() && (strip_[size_t(found[k])] & 1);
    const bool rstrip_prev = k > 0 && (strip_[size_t(found[k - 1])] & 2);
    encode_plain(trim_space(runs[k], rstrip_prev, lstrip_next), k == 0, out);
    if (k < found.size()) out.push_back(found[k]);
  }
  if (o.add_special && opts_.add_eos && eos_id_ >= 0) out.push_back(eos_id_);
  return out;
}

std::string UnigramTokenizer::token_bytes(int32_t id) const {
  RLX_CHECK(id >= 0 && size_t(id) < pieces_.size(),
            "unigram: token id " << id << " is out of range (vocabulary of " << pieces_.size() << ")");
  const std::string& p = pieces_[size_t(id)];
  if (special_[size_t(id)]) return p;
  uint8_t b = 0;
  if (opts_.byte_fallback && parse_byte_token(p, b)) return std::string(1, char(b));
  return metaspace_to_spaces(p);
}

std::string UnigramTokenizer::decode(const std::vector<int32_t>& ids) const {
  std::string out;
  for (int32_t id : ids) out += token_bytes(id);
  // Metaspace's decoder drops the space it prepended.
  if (opts_.prepend_space && !out.empty() && out[0] == ' ') out.erase(0, 1);
  return out;
}

}  // namespace rlx
