#include "tokenizers/bpe.h"

#include <algorithm>
#include <fstream>
#include <limits>
#include <optional>
#include <nlohmann/json.hpp>

#include "models/gguf.h"
#include "rlx/error.h"
#include "tokenizers/byte_level.h"
#include "tokenizers/merge.h"

namespace rlx {
namespace {

std::string merge_key(const std::string& a, const std::string& b) { return a + '\xff' + b; }

// Splits "a b" (the merges' text form) at its single space.
std::pair<std::string, std::string> split_merge(const std::string& m, const std::string& where) {
  size_t sp = m.find(' ');
  RLX_CHECK(sp != std::string::npos && sp > 0 && sp + 1 < m.size() && m.find(' ', sp + 1) == std::string::npos,
            where << ": merge '" << m << "' is not two tokens separated by one space");
  return {m.substr(0, sp), m.substr(sp + 1)};
}

}  // namespace

BpeTokenizer::BpeTokenizer(std::vector<std::string> tokens,
                           const std::vector<std::pair<std::string, std::string>>& merges,
                           const std::vector<int32_t>& special, BpeOptions opts, int32_t bos_id,
                           int32_t eos_id, const std::vector<int32_t>& user_defined)
    : tokens_(std::move(tokens)), opts_(opts), bos_id_(bos_id), eos_id_(eos_id) {
  RLX_CHECK(!tokens_.empty() && tokens_.size() < size_t(std::numeric_limits<int32_t>::max()),
            "bpe: the vocabulary is empty or too large");
  vocab_.reserve(tokens_.size());
  for (size_t i = 0; i < tokens_.size(); ++i) vocab_.emplace(tokens_[i], int32_t(i));
  merge_rank_.reserve(merges.size());
  for (size_t i = 0; i < merges.size(); ++i)
    merge_rank_.emplace(merge_key(merges[i].first, merges[i].second), int32_t(i));
  special_.assign(tokens_.size(), false);
  std::vector<bool> always(tokens_.size(), false);
  for (int32_t id : user_defined) {
    RLX_CHECK(id >= 0 && size_t(id) < tokens_.size(), "bpe: user-defined token id " << id << " is out of range");
    always[size_t(id)] = true;
  }
  for (int32_t id : special) {
    RLX_CHECK(id >= 0 && size_t(id) < tokens_.size(), "bpe: special token id " << id << " is out of range");
    special_[size_t(id)] = true;
    specials_.add(tokens_[size_t(id)], id, !always[size_t(id)]);
  }
  specials_.finish();
  for (int32_t id : {bos_id_, eos_id_})
    RLX_CHECK(id < int32_t(tokens_.size()), "bpe: bos/eos id " << id << " is out of range");
}

BpeTokenizer BpeTokenizer::from_tokenizer_json(const std::string& path) {
  std::ifstream in(path);
  RLX_CHECK(in, "bpe: cannot open '" << path << "'");
  nlohmann::json j;
  try {
    j = nlohmann::json::parse(in);
  } catch (const nlohmann::json::exception& e) {
    RLX_FAIL("bpe: '" << path << "' is not valid JSON: " << e.what());
  }
  const std::string where = "bpe: '" + path + "'";
  try {
    const auto& m = j.at("model");
    RLX_CHECK(m.value("type", "") == "BPE", where << ": model type is not BPE");
    RLX_CHECK(j.contains("normalizer") && j["normalizer"].is_null(),
              where << ": a normalizer is not supported for byte-level BPE");
    BpeOptions o;
    o.ignore_merges = m.value("ignore_merges", false);
    bool byte_level = false, split = false;
    auto pre_one = [&](const nlohmann::json& p) {
      const std::string t = p.at("type").get<std::string>();
      if (t == "ByteLevel") {
        byte_level = true;
        const bool use_regex = p.value("use_regex", true);
        RLX_CHECK(!(use_regex && split), where << ": a Split followed by ByteLevel's own regex is not supported");
        if (!split) o.split = use_regex ? BpeSplit::Gpt2 : BpeSplit::None;
        o.add_prefix_space = p.value("add_prefix_space", false);
      } else if (t == "Split" && !byte_level && !split) {
        const auto& pat = p.at("pattern");
        const std::string re = pat.contains("Regex") ? pat["Regex"].get<std::string>() : "";
        RLX_CHECK((re == kLlama3Pattern || re == kQwen2Pattern) && p.value("behavior", "") == "Isolated" &&
                      !p.value("invert", false),
                  where << ": Split pre-tokenizer with pattern '" << re
                        << "' is not supported (Llama 3's and Qwen2's are)");
        split = true;
        o.split = re == kLlama3Pattern ? BpeSplit::Llama3 : BpeSplit::Qwen2;
      } else if (t == "Digits" && p.value("individual_digits", false) && !byte_level) {
        o.split_digits = true;
      } else {
        RLX_FAIL(where << ": pre-tokenizer '" << t << "' is not supported");
      }
    };
    const auto& pre = j.at("pre_tokenizer");
    if (pre.value("type", "") == "Sequence") {
      for (const auto& p : pre.at("pretokenizers")) pre_one(p);
    } else {
      pre_one(pre);
    }
    RLX_CHECK(byte_level, where << ": no ByteLevel pre-tokenizer");

    std::vector<std::string> tokens;
    auto put = [&](const std::string& tok, int64_t id) {
      RLX_CHECK(id >= 0 && id < (int64_t(1) << 24), where << ": token '" << tok << "' has id " << id);
      if (size_t(id) >= tokens.size()) tokens.resize(size_t(id) + 1);
      tokens[size_t(id)] = tok;
    };
    for (auto& [tok, id] : m.at("vocab").items()) put(tok, id.get<int64_t>());
    std::vector<int32_t> special, user_defined;
    for (const auto& a : j.value("added_tokens", nlohmann::json::array())) {
      put(a.at("content").get<std::string>(), a.at("id").get<int64_t>());
      special.push_back(a.at("id").get<int32_t>());
      // An added token that is not "special" is matched in any text.
      if (!a.value("special", true)) user_defined.push_back(a.at("id").get<int32_t>());
    }
    std::vector<std::pair<std::string, std::string>> merges;
    for (const auto& mg : m.at("merges")) {
      if (mg.is_string()) merges.push_back(split_merge(mg.get<std::string>(), where));
      else merges.push_back({mg.at(0).get<std::string>(), mg.at(1).get<std::string>()});
    }
    int32_t bos = -1;
    const auto& post = j.value("post_processor", nlohmann::json());
    if (post.is_object() && post.value("type", "") == "TemplateProcessing" && !post.at("single").empty() &&
        post.at("single")[0].contains("SpecialToken")) {
      const std::string name = post.at("single")[0]["SpecialToken"].at("id").get<std::string>();
      for (size_t i = 0; i < tokens.size(); ++i)
        if (tokens[i] == name) bos = int32_t(i);
      o.add_bos = bos >= 0;
    }
    BpeTokenizer t(std::move(tokens), merges, special, o, bos, -1, user_defined);
    if (m.contains("unk_token") && m["unk_token"].is_string()) t.unk_id_ = t.id_of(m["unk_token"]);
    return t;
  } catch (const nlohmann::json::exception& e) {
    RLX_FAIL(where << ": malformed tokenizer: " << e.what());
  }
}

BpeTokenizer BpeTokenizer::from_gguf(const GgufFile& f) {
  const std::string where = "bpe: '" + f.path() + "'";
  const std::string model = f.get_string("tokenizer.ggml.model");
  RLX_CHECK(model == "gpt2", where << ": tokenizer.ggml.model is '" << model
                                   << "'; only byte-level BPE ('gpt2') is read");
  const std::string pre = f.get_string("tokenizer.ggml.pre", "default");
  BpeOptions o;
  // The names llama.cpp gives these rules (command-r splits as starcoder does,
  // gpt-2 as gpt2).
  if (pre == "smollm" || pre == "starcoder" || pre == "refact" || pre == "codeshell" || pre == "command-r") {
    o.split_digits = true;
  } else if (pre == "llama-bpe" || pre == "llama3") {
    o.split = BpeSplit::Llama3;
    o.ignore_merges = true;
    o.add_bos = true;  // llama.cpp's default for Llama 3 when the file does not say
  } else if (pre == "qwen2") {
    o.split = BpeSplit::Qwen2;
  } else if (pre != "gpt2" && pre != "gpt-2" && pre != "default" && pre != "mpt" && pre != "olmo") {
    RLX_FAIL(where << ": pre-tokenizer '" << pre << "' is not supported");
  }
  o.add_bos = f.get_bool("tokenizer.ggml.add_bos_token", o.add_bos);
  o.add_eos = f.get_bool("tokenizer.ggml.add_eos_token", false);
  std::vector<std::string> tokens = f.get_string_array("tokenizer.ggml.tokens");
  std::vector<int32_t> special, user_defined;
  if (f.has("tokenizer.ggml.token_type")) {
    auto types = f.get_int_array("tokenizer.ggml.token_type");
    RLX_CHECK(types.size() == tokens.size(), where << ": tokenizer.ggml.token_type has " << types.size()
                                                   << " entries for " << tokens.size() << " tokens");
    for (size_t i = 0; i < types.size(); ++i) {
      if (types[i] == 3 || types[i] == 4) special.push_back(int32_t(i));  // control, user-defined
      if (types[i] == 4) user_defined.push_back(int32_t(i));
    }
  }
  std::vector<std::pair<std::string, std::string>> merges;
  for (const auto& m : f.get_string_array("tokenizer.ggml.merges")) merges.push_back(split_merge(m, where));
  auto id = [&](const char* key) { return int32_t(f.get_int_or(key, -1, -1, INT32_MAX)); };
  BpeTokenizer t(std::move(tokens), merges, special, o, id("tokenizer.ggml.bos_token_id"),
                 id("tokenizer.ggml.eos_token_id"), user_defined);
  return t;
}

int32_t BpeTokenizer::id_of(const std::string& token) const {
  auto it = vocab_.find(token);
  return it == vocab_.end() ? -1 : it->second;
}

const std::string& BpeTokenizer::token(int32_t id) const {
  RLX_CHECK(id >= 0 && size_t(id) < tokens_.size(), "bpe: token id " << id << " is out of range (vocabulary of "
                                                                      << tokens_.size() << ")");
  return tokens_[size_t(id)];
}

bool BpeTokenizer::is_special(int32_t id) const {
  return id >= 0 && size_t(id) < special_.size() && special_[size_t(id)];
}

void BpeTokenizer::bpe_piece(const std::string& mapped, std::vector<int32_t>& out) const {
  if (opts_.ignore_merges) {
    if (int32_t id = id_of(mapped); id >= 0) {
      out.push_back(id);
      return;
    }
  }
  // Merge the lowest-ranked adjacent pair, leftmost first, until none applies.
  std::string key;
  auto rank = [&](std::string_view l, std::string_view r) -> std::optional<int32_t> {
    key.assign(l).append(1, '\xff').append(r);
    auto it = merge_rank_.find(key);
    if (it == merge_rank_.end()) return std::nullopt;
    return it->second;
  };
  std::string piece;
  for (std::string_view s : merge_symbols<int32_t>(mapped, rank)) {
    piece.assign(s);
    int32_t id = id_of(piece);
    if (id >= 0) out.push_back(id);
    else if (unk_id_ >= 0) out.push_back(unk_id_);
  }
}
void BpeTokenizer::encode_plain(std::string_view text, std::vector<int32_t>& out) const {
  if (text.empty()) return;
  std::string buf;
  if (opts_.add_prefix_space && text[0] != ' ') {
    buf.push_back(' ');
    buf.append(text);
    text = buf;
  }
  std::vector<ByteRange> pieces, split;
  if (opts_.split_digits) split_digits(text, {0, text.size()}, pieces);
  else pieces.push_back({0, text.size()});
  if (opts_.split != BpeSplit::None) {
    for (auto r : pieces) {
      if (opts_.split == BpeSplit::Gpt2) split_gpt2(text, r, split);
      else split_llama3(text, r, split, opts_.split == BpeSplit::Qwen2 ? 1 : 3);
    }
    pieces.swap(split);
  }
  std::string mapped;
  for (auto [b, e] : pieces) {
    mapped.clear();
    for (size_t i = b; i < e; ++i) mapped += byte_to_unicode(uint8_t(text[i]));
    bpe_piece(mapped, out);
  }
}

std::vector<int32_t> BpeTokenizer::encode(std::string_view text, const EncodeOptions& o) const {
  std::vector<int32_t> out;
  if (o.add_special && opts_.add_bos && bos_id_ >= 0) out.push_back(bos_id_);
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
  if (o.add_special && opts_.add_eos && eos_id_ >= 0) out.push_back(eos_id_);
  return out;
}

std::string BpeTokenizer::token_bytes(int32_t id) const {
  const std::string& t = token(id);
  if (is_special(id)) return t;
  std::string out;
  unicode_to_bytes(t, out);
  return out;
}

std::string BpeTokenizer::decode(const std::vector<int32_t>& ids) const {
  std::string out;
  for (int32_t id : ids) out += token_bytes(id);
  return out;
}

}  // namespace rlx
