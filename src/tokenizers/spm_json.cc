#include "tokenizers/spm_json.h"

#include <algorithm>
#include <fstream>
#include <nlohmann/json.hpp>
#include <optional>

#include "rlx/error.h"
#include "tokenizers/gguf_vocab.h"
#include "tokenizers/json_token_id.h"
#include "tokenizers/merge.h"
#include "tokenizers/metaspace.h"
#include "tokenizers/utf8.h"

namespace rlx {
namespace {

using json = nlohmann::json;
const std::string kSpace = "\xe2\x96\x81";  // U+2581

json read_json(const std::string& path) {
  std::ifstream in(path);
  RLX_CHECK(in, "tokenizer: cannot open '" << path << "'");
  try {
    return json::parse(in);
  } catch (const json::exception& e) {
    RLX_FAIL("tokenizer: '" << path << "' is not valid JSON: " << e.what());
  }
}

// The steps of a component: a Sequence's list (under `list`) with their
// paths, or the one step itself.
std::vector<std::pair<const json*, std::string>> steps(const json& j, const char* name, const char* list) {
  std::vector<std::pair<const json*, std::string>> out;
  if (j.is_null()) return out;
  RLX_CHECK(j.is_object(), name << " is not an object");
  if (j.value("type", "") == "Sequence") {
    const json& a = j.at(list);
    for (size_t i = 0; i < a.size(); ++i) out.push_back({&a[i], std::string(name) + "." + list + "[" + std::to_string(i) + "]"});
  } else {
    out.push_back({&j, name});
  }
  return out;
}

// A Replace step's plain-string pattern, or nullopt for a regex.
std::optional<std::string> replace_string(const json& s) {
  const json& p = s.at("pattern");
  if (p.contains("String")) return p["String"].get<std::string>();
  return std::nullopt;
}

bool has_byte_level(const json& pre) {
  for (const auto& [s, path] : steps(pre, "pre_tokenizer", "pretokenizers"))
    if (s->value("type", "") == "ByteLevel") return true;
  return false;
}

std::string merge_key(std::string_view a, std::string_view b) {
  std::string k(a);
  k += '\xff';
  k.append(b);
  return k;
}

}  // namespace

bool SpmJsonTokenizer::is_spm_style(const std::string& path) {
  const json j = read_json(path);
  try {
    return j.contains("model") && j["model"].is_object() && j["model"].value("type", "") == "BPE" &&
           !has_byte_level(j.value("pre_tokenizer", json()));
  } catch (const json::exception& e) {  // a Sequence without its list, a type that is no string
    RLX_FAIL("tokenizer: '" << path << "': malformed pre_tokenizer: " << e.what());
  }
}

SpmJsonTokenizer SpmJsonTokenizer::from_tokenizer_json(const std::string& path) {
  const json j = read_json(path);
  const std::string where = "tokenizer: '" + path + "'";
  SpmJsonTokenizer t;
  SpmJsonOptions& o = t.opts_;
  try {
    const json& m = j.at("model");
    RLX_CHECK(m.value("type", "") == "BPE", where << ": model.type is not BPE");
    for (const char* k : {"continuing_subword_prefix", "end_of_word_suffix"})
      RLX_CHECK(!m.contains(k) || m[k].is_null() || m[k] == "",
                where << ": model." << k << " " << m[k].dump() << " is not supported");
    RLX_CHECK(!m.contains("dropout") || m["dropout"].is_null() || m["dropout"] == 0,
              where << ": model.dropout " << m["dropout"].dump() << " is not supported (encoding would be random)");
    o.byte_fallback = m.value("byte_fallback", false);
    o.fuse_unk = m.value("fuse_unk", false);
    o.ignore_merges = m.value("ignore_merges", false);

    const json norm = j.value("normalizer", json());  // named: the loop keeps pointers into it
    for (const auto& [s, at] : steps(norm, "normalizer", "normalizers")) {
      const std::string type = s->value("type", "");
      if (type == "Prepend" && s->value("prepend", "") == kSpace && !o.normalize_prepend) {
        o.normalize_prepend = true;
      } else if (type == "Replace" && replace_string(*s) == " " && s->value("content", "") == kSpace &&
                 !o.normalize_replace) {
        o.normalize_replace = true;
      } else {
        RLX_FAIL(where << ": " << at << ": normalizer '" << type << "' (" << s->dump().substr(0, 120)
                       << ") is not supported (Prepend(\"\xe2\x96\x81\") and Replace(\" \", \"\xe2\x96\x81\") are)");
      }
    }
    const json pre = j.value("pre_tokenizer", json());  // named: the loop keeps pointers into it
    for (const auto& [s, at] : steps(pre, "pre_tokenizer", "pretokenizers")) {
      const std::string type = s->value("type", "");
      RLX_CHECK(type == "Metaspace" && !o.metaspace && s->value("replacement", "") == kSpace,
                where << ": " << at << ": pre-tokenizer '" << type << "' (" << s->dump().substr(0, 120)
                      << ") is not supported with a SentencePiece-style BPE (Metaspace with \"\xe2\x96\x81\" is)");
      o.metaspace = true;
      if (s->contains("prepend_scheme")) {
        const std::string scheme = s->at("prepend_scheme").get<std::string>();
        RLX_CHECK(scheme == "first" || scheme == "always" || scheme == "never",
                  where << ": " << at << ".prepend_scheme '" << scheme << "' is not supported");
        o.metaspace_prepend = scheme == "first"    ? MetaspacePrepend::First
                              : scheme == "always" ? MetaspacePrepend::Always
                                                   : MetaspacePrepend::Never;
      } else {  // tokenizers before 0.15: add_prefix_space
        o.metaspace_prepend = s->value("add_prefix_space", true) ? MetaspacePrepend::Always : MetaspacePrepend::Never;
      }
      o.metaspace_split = s->value("split", true);
    }
    bool metaspace_decoder = false;
    const json dec = j.value("decoder", json());  // named: the loop keeps pointers into it
    for (const auto& [s, at] : steps(dec, "decoder", "decoders")) {
      const std::string type = s->value("type", "");
      if (type == "Replace" && replace_string(*s) == kSpace && s->value("content", "") == " ") continue;
      if (type == "ByteFallback" || type == "Fuse") continue;
      if (type == "Strip" && s->value("content", "") == " " && s->value("stop", 0) == 0) {
        o.strip_start = s->value("start", 0);
        continue;
      }
      if (type == "Metaspace" && s->value("replacement", "") == kSpace) {
        metaspace_decoder = true;
        continue;
      }
      RLX_FAIL(where << ": " << at << ": decoder '" << type << "' (" << s->dump().substr(0, 120)
                     << ") is not supported (Replace, ByteFallback, Fuse, Strip and Metaspace are)");
    }
    // The Metaspace decoder drops the first token's leading space unless it never prepends one.
    if (metaspace_decoder && o.metaspace_prepend != MetaspacePrepend::Never) o.strip_start = std::max(o.strip_start, 1);

    auto put = [&](const std::string& tok, int64_t id) {
      RLX_CHECK(id >= 0 && id < (int64_t(1) << 24), where << ": token '" << tok << "' has id " << id);
      if (size_t(id) >= t.tokens_.size()) t.tokens_.resize(size_t(id) + 1);
      t.tokens_[size_t(id)] = tok;
    };
    for (auto& [tok, id] : m.at("vocab").items()) put(tok, json_token_id(id, where));
    struct Added {
      int32_t id;
      bool special;
    };
    std::vector<Added> added;
    const json added_tokens = j.value("added_tokens", json::array());
    for (size_t i = 0; i < added_tokens.size(); ++i) {
      const json& a = added_tokens[i];
      const std::string at = "added_tokens[" + std::to_string(i) + "]";
      for (const char* k : {"lstrip", "rstrip", "single_word"})
        RLX_CHECK(!a.value(k, false), where << ": " << at << " ('" << a.value("content", "") << "'): " << k
                                            << " is not supported");
      const bool special = a.value("special", false);
      // A normalized non-special token would be matched in the normalized
      // text (after the prepended "▁"): not done here.
      RLX_CHECK(special || !a.value("normalized", false) || (!o.normalize_prepend && !o.normalize_replace),
                where << ": " << at << " ('" << a.value("content", "") << "'): a normalized added token is not "
                      << "supported with a normalizer");
      const int64_t id = json_token_id(a.at("id"), where);
      put(a.at("content").get<std::string>(), id);  // checks id's range
      added.push_back({int32_t(id), special});
    }
    const size_t n = t.tokens_.size();
    RLX_CHECK(n > 0, where << ": empty vocabulary");
    t.kind_.assign(n, 0);
    t.byte_of_.assign(n, -1);
    std::fill(std::begin(t.byte_ids_), std::end(t.byte_ids_), -1);
    t.vocab_.reserve(n);
    for (size_t i = 0; i < n; ++i) {
      t.vocab_.emplace(t.tokens_[i], int32_t(i));
      uint8_t b = 0;
      if (parse_byte_token(t.tokens_[i], b)) {
        t.kind_[i] = 3;
        t.byte_of_[i] = b;
      }
    }
    // byte_fallback looks bytes up as "<0x%02X>", upper-case hex.
    for (int b = 0; b < 256; ++b) {
      static const char* hex = "0123456789ABCDEF";
      const char name[7] = {'<', '0', 'x', hex[b >> 4], hex[b & 15], '>', 0};
      t.byte_ids_[b] = t.id_of(name);
    }
    for (const Added& a : added) {
      t.kind_[size_t(a.id)] = a.special ? 1 : 2;
      t.specials_.add(t.tokens_[size_t(a.id)], a.id, a.special);
    }
    t.specials_.finish();
    const json& merges = m.at("merges");
    t.merge_rank_.reserve(merges.size());
    for (size_t i = 0; i < merges.size(); ++i) {
      std::string l, r;
      if (merges[i].is_string()) {
        const std::string s = merges[i].get<std::string>();
        const size_t sp = s.find(' ');
        RLX_CHECK(sp != std::string::npos && s.find(' ', sp + 1) == std::string::npos,
                  where << ": merge " << i << " '" << s << "' is not two tokens separated by one space");
        l = s.substr(0, sp);
        r = s.substr(sp + 1);
      } else {
        l = merges[i].at(0).get<std::string>();
        r = merges[i].at(1).get<std::string>();
      }
      // tokenizers' rule: both parts and what they form are in the vocabulary.
      RLX_CHECK(t.vocab_.count(l) && t.vocab_.count(r) && t.vocab_.count(l + r),
                where << ": merge " << i << " '" << l << " " << r << "' names a token not in the vocabulary");
      t.merge_rank_.emplace(merge_key(l, r), int32_t(i));  // the first of duplicates wins
    }
    if (m.contains("unk_token") && m["unk_token"].is_string()) {
      t.unk_id_ = t.id_of(m["unk_token"].get<std::string>());
      RLX_CHECK(t.unk_id_ >= 0, where << ": model.unk_token '" << m["unk_token"].get<std::string>()
                                      << "' is not in the vocabulary");
    }

    const json post = j.value("post_processor", json());
    if (!post.is_null()) {
      RLX_CHECK(post.value("type", "") == "TemplateProcessing",
                where << ": post_processor '" << post.value("type", "") << "' is not supported (TemplateProcessing is)");
      bool seen_a = false;
      const json& single = post.at("single");
      for (size_t i = 0; i < single.size(); ++i) {
        const json& piece = single[i];
        if (piece.contains("Sequence")) {
          RLX_CHECK(piece["Sequence"].value("id", "") == "A" && !seen_a,
                    where << ": post_processor.single[" << i << "]: only one sequence $A is supported");
          seen_a = true;
          continue;
        }
        RLX_CHECK(piece.contains("SpecialToken"), where << ": post_processor.single[" << i << "] is not supported");
        const std::string name = piece["SpecialToken"].at("id").get<std::string>();
        const json& ids = post.at("special_tokens").at(name).at("ids");
        for (const json& id : ids) {
          const int64_t v = json_token_id(id, where);
          RLX_CHECK(v >= 0 && size_t(v) < n, where << ": post_processor special token '" << name << "' has id " << v);
          (seen_a ? t.suffix_ : t.prefix_).push_back(int32_t(v));
        }
      }
      RLX_CHECK(seen_a, where << ": post_processor.single has no $A");
    }
    t.bos_id_ = !t.prefix_.empty() ? t.prefix_.front() : -1;
    t.eos_id_ = !t.suffix_.empty() ? t.suffix_.back() : -1;
    for (const char* name : {"<s>", "<bos>"})
      if (t.bos_id_ < 0) t.bos_id_ = t.id_of(name);
    for (const char* name : {"</s>", "<eos>"})
      if (t.eos_id_ < 0) t.eos_id_ = t.id_of(name);
  } catch (const json::exception& e) {
    RLX_FAIL(where << ": malformed tokenizer: " << e.what());
  }
  return t;
}

int32_t SpmJsonTokenizer::id_of(const std::string& token) const {
  auto it = vocab_.find(token);
  return it == vocab_.end() ? -1 : it->second;
}

std::vector<int32_t> SpmJsonTokenizer::encode(std::string_view text, const EncodeOptions& o) const {
  std::vector<int32_t> out;
  if (o.add_special) out = prefix_;
  size_t start = 0, i = 0;
  while (i < text.size()) {
    auto [len, id] = specials_.longest_at(text, i, o.parse_special);
    if (len == 0) {
      i += std::max<size_t>(1, std::min(utf8_sequence_length(static_cast<unsigned char>(text[i])), text.size() - i));
      continue;
    }
    if (i > start) encode_segment(text.substr(start, i - start), start == 0, out);
    out.push_back(id);
    i += len;
    start = i;
  }
  if (start < text.size()) encode_segment(text.substr(start), start == 0, out);
  if (o.add_special) out.insert(out.end(), suffix_.begin(), suffix_.end());
  return out;
}

void SpmJsonTokenizer::encode_segment(std::string_view text, bool at_start, std::vector<int32_t>& out) const {
  // Normalizers (on a non-empty segment): Prepend, then Replace; either
  // order gives the same text.
  std::string s;
  if (opts_.normalize_prepend) s = kSpace;
  for (char c : text) {
    if (c == ' ' && (opts_.normalize_replace || opts_.metaspace)) s += kSpace;
    else s += c;
  }
  if (opts_.metaspace) {
    const bool starts = s.compare(0, kSpace.size(), kSpace) == 0;
    if (!starts && (opts_.metaspace_prepend == MetaspacePrepend::Always ||
                    (opts_.metaspace_prepend == MetaspacePrepend::First && at_start)))
      s.insert(0, kSpace);
    if (opts_.metaspace_split) {
      // Split at each "▁" (a lead byte, so a match is a character), the
      // delimiter merged with the piece after it.
      size_t b = 0;
      for (size_t p = 1; p < s.size(); ++p)
        if (s.compare(p, kSpace.size(), kSpace) == 0) {
          encode_word(std::string_view(s).substr(b, p - b), out);
          b = p;
        }
      encode_word(std::string_view(s).substr(b), out);
      return;
    }
  }
  encode_word(s, out);
}

void SpmJsonTokenizer::encode_word(std::string_view word, std::vector<int32_t>& out) const {
  if (word.empty()) return;
  if (opts_.ignore_merges)
    if (int32_t id = id_of(std::string(word)); id >= 0) {
      out.push_back(id);
      return;
    }
  std::string piece;
  bool last_unk = false;
  for (std::string_view sv : merge_symbols<int32_t>(word, merge_rank_of(merge_rank_))) {
    piece.assign(sv);
    if (int32_t id = id_of(piece); id >= 0) {
      out.push_back(id);
      last_unk = false;
      continue;
    }
    // A character with no token: its bytes' <0xNN> tokens when all exist,
    // else the unknown token (one for a run of them with fuse_unk).
    bool bytes = opts_.byte_fallback;
    for (unsigned char b : piece) bytes = bytes && byte_ids_[b] >= 0;
    if (bytes) {
      for (unsigned char b : piece) out.push_back(byte_ids_[b]);
      last_unk = false;
    } else if (unk_id_ >= 0) {
      if (!(opts_.fuse_unk && last_unk)) out.push_back(unk_id_);
      last_unk = true;
    }
  }
}

std::string SpmJsonTokenizer::token_bytes(int32_t id) const {
  RLX_CHECK(id >= 0 && size_t(id) < tokens_.size(),
            "tokenizer: token id " << id << " is out of range (vocabulary of " << tokens_.size() << ")");
  switch (kind_[size_t(id)]) {
    case 1: return "";  // special tokens (BOS, EOS, control) print nothing
    case 2: return tokens_[size_t(id)];
    case 3: return std::string(1, char(byte_of_[size_t(id)]));
    default: return metaspace_to_spaces(tokens_[size_t(id)]);
  }
}

std::string SpmJsonTokenizer::decode(const std::vector<int32_t>& ids) const {
  std::string out;
  for (int32_t id : ids) out += token_bytes(id);
  // Strip(" ", start, 0) after Fuse: the text's leading spaces, up to start.
  size_t cut = 0;
  while (cut < size_t(opts_.strip_start) && cut < out.size() && out[cut] == ' ') ++cut;
  return out.substr(cut);
}

}  // namespace rlx
