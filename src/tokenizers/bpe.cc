#include "tokenizers/bpe.h"

#include <algorithm>
#include <fstream>
#include <limits>
#include <optional>
#include <nlohmann/json.hpp>

#include "models/gguf.h"
#include "rlx/error.h"
#include "tokenizers/byte_level.h"
#include "tokenizers/gguf_vocab.h"
#include "tokenizers/json_split_sequences.h"
#include "tokenizers/json_token_id.h"
#include "tokenizers/merge.h"
#include "tokenizers/pre_tokenizers.h"

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
                           int32_t eos_id, const std::vector<int32_t>& user_defined, const std::string& where)
    : tokens_(std::move(tokens)), opts_(opts), bos_id_(bos_id), eos_id_(eos_id) {
  RLX_CHECK(!tokens_.empty() && tokens_.size() < size_t(std::numeric_limits<int32_t>::max()),
            "bpe: the vocabulary is empty or too large");
  vocab_.reserve(tokens_.size());
  for (size_t i = 0; i < tokens_.size(); ++i) vocab_.emplace(tokens_[i], int32_t(i));
  // tokenizers' rule (BpeBuilder: MergeTokenOutOfVocabulary): both parts of a
  // merge and what they form are tokens of the vocabulary. llama.cpp keeps
  // such merges (they can only form a token that is then missing); a file
  // holding one is malformed, so it is refused here.
  merge_rank_.reserve(merges.size());
  for (size_t i = 0; i < merges.size(); ++i) {
    const auto& [l, r] = merges[i];
    for (const std::string* part : {&l, &r})
      RLX_CHECK(vocab_.count(*part), where << ": merge " << i << " '" << l << " " << r << "' names '" << *part
                                           << "', which is not in the vocabulary");
    RLX_CHECK(vocab_.count(l + r), where << ": merge " << i << " '" << l << " " << r << "' forms '" << l + r
                                         << "', which is not in the vocabulary");
    merge_rank_.emplace(merge_key(l, r), int32_t(i));
  }
  special_.assign(tokens_.size(), false);
  std::vector<bool> always(tokens_.size(), false);
  for (int32_t id : user_defined) {
    RLX_CHECK(id >= 0 && size_t(id) < tokens_.size(), where << ": user-defined token id " << id << " is out of range");
    always[size_t(id)] = true;
  }
  for (int32_t id : special) {
    RLX_CHECK(id >= 0 && size_t(id) < tokens_.size(), where << ": special token id " << id << " is out of range");
    special_[size_t(id)] = true;
    specials_.add(tokens_[size_t(id)], id, !always[size_t(id)]);
  }
  specials_.finish();
  for (int32_t id : {bos_id_, eos_id_})
    RLX_CHECK(id >= -1 && id < int32_t(tokens_.size()), where << ": bos/eos id " << id << " is out of range");
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
    // No normalizer, an empty Sequence of them (DeepSeek's files), or
    // Unicode forms (Qwen2/3: NFC), alone or in a Sequence.
    const auto& norm = j.contains("normalizer") ? j["normalizer"] : nlohmann::json();
    auto unicode_form = [](const nlohmann::json& n) {
      const std::string t = n.is_object() ? n.value("type", "") : "";
      return t == "NFC" || t == "NFD" || t == "NFKC" || t == "NFKD";
    };
    bool forms_only = norm.is_null() || unicode_form(norm);
    if (norm.is_object() && norm.value("type", "") == "Sequence" && norm.contains("normalizers") &&
        norm["normalizers"].is_array()) {
      forms_only = true;
      for (const auto& n : norm["normalizers"]) forms_only = forms_only && unicode_form(n);
    }
    RLX_CHECK(forms_only, where << ": normalizer '" << (norm.is_object() ? norm.value("type", "") : norm.dump())
                                << "' is not supported for byte-level BPE (none, NFC, NFD, NFKC and NFKD are)");
    BpeOptions o;
    o.ignore_merges = m.value("ignore_merges", false);
    bool byte_level = false, split = false;
    std::string at = "pre_tokenizer";  // where the step being read is, for errors
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
        RLX_CHECK((re == kLlama3Pattern || re == kQwen2Pattern || re == kQwen35Pattern || re == kTekkenPattern) &&
                      p.value("behavior", "") == "Isolated" && !p.value("invert", false),
                  where << ": " << at << ": Split pre-tokenizer with pattern '" << re
                        << "' is not supported (Llama 3's, Qwen2's, Qwen3.5's and Tekken's are; DeepSeek's and "
                           "Falcon's as their whole sequences)");
        split = true;
        o.split = re == kLlama3Pattern   ? BpeSplit::Llama3
                  : re == kQwen2Pattern  ? BpeSplit::Qwen2
                  : re == kQwen35Pattern ? BpeSplit::Qwen35
                                         : BpeSplit::Tekken;
      } else if (t == "Digits" && p.value("individual_digits", false) && !byte_level) {
        o.split_digits = true;
      } else {
        RLX_FAIL(where << ": " << at << ": pre-tokenizer '" << t << "' is not supported here");
      }
    };
    const auto& pre = j.at("pre_tokenizer");
    if (auto known = known_split_sequence(pre)) {  // DeepSeek LLM / Coder, Falcon
      o.split = *known;
      byte_level = true;
    } else if (pre.value("type", "") == "Sequence") {
      const auto& steps = pre.at("pretokenizers");
      for (size_t i = 0; i < steps.size(); ++i) {
        at = "pre_tokenizer.pretokenizers[" + std::to_string(i) + "]";
        pre_one(steps[i]);
      }
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
    for (auto& [tok, id] : m.at("vocab").items()) put(tok, json_token_id(id, where));
    std::vector<int32_t> special, user_defined;
    for (const auto& a : j.value("added_tokens", nlohmann::json::array())) {
      const int64_t id = json_token_id(a.at("id"), where);
      put(a.at("content").get<std::string>(), id);  // checks id's range
      special.push_back(int32_t(id));
      // An added token that is not "special" is matched in any text.
      if (!a.value("special", true)) user_defined.push_back(int32_t(id));
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
    BpeTokenizer t(std::move(tokens), merges, special, o, bos, -1, user_defined, where);
    if (!norm.is_null()) t.normalizer_ = JsonNormalizer::from_json(norm, where + ": normalizer: ");
    if (m.contains("unk_token") && m["unk_token"].is_string()) t.unk_id_ = t.id_of(m["unk_token"]);
    return t;
  } catch (const nlohmann::json::exception& e) {
    RLX_FAIL(where << ": malformed tokenizer: " << e.what());
  }
}

BpeTokenizer BpeTokenizer::from_gguf(const GgufFile& f) {
  const std::string where = "bpe: '" + f.path() + "'";
  const std::string model = f.get_string("tokenizer.ggml.model");
  RLX_CHECK(model == "gpt2" || model == "gemma4",
            where << ": tokenizer.ggml.model is '" << model << "'; only byte-level BPE ('gpt2') and 'gemma4' are read");
  // llama.cpp names Gemma 4's rule after its model; its files say no pre.
  const std::string pre = model == "gemma4" ? "gemma4" : f.get_string("tokenizer.ggml.pre", "default");
  BpeOptions o;
  // The names llama.cpp gives these rules (llama_vocab::impl::load), each
  // with its own splitting rule or one it shares.
  if (pre == "smollm" || pre == "starcoder" || pre == "refact" || pre == "codeshell" || pre == "command-r" ||
      pre == "exaone" || pre == "minerva-7b") {
    o.split_digits = true;
  } else if (pre == "llama-bpe" || pre == "llama3" || pre == "llama-v3" || pre == "falcon3" || pre == "pixtral") {
    o.split = BpeSplit::Llama3;
    o.ignore_merges = true;
    o.add_bos = true;  // llama.cpp's default for Llama 3 when the file does not say
  } else if (pre == "qwen2" || pre == "deepseek-r1-qwen" || pre == "stablelm2") {
    o.split = BpeSplit::Qwen2;
  } else if (pre == "qwen35") {
    o.split = BpeSplit::Qwen35;
  } else if (pre == "deepseek-llm") {
    o.split = BpeSplit::DeepseekLlm;
  } else if (pre == "deepseek-coder") {
    o.split = BpeSplit::DeepseekCoder;
  } else if (pre == "falcon") {
    o.split = BpeSplit::Falcon;
  } else if (pre == "tekken") {
    o.split = BpeSplit::Tekken;
    o.ignore_merges = true;
    o.add_bos = true;  // llama.cpp's default for Tekken
  } else if (pre == "gemma4") {
    o.split = BpeSplit::None;
    o.spm_style = true;
    o.add_bos = true;  // llama.cpp turns BOS on for Gemma 4 even where the file says false
  } else if (pre != "gpt2" && pre != "gpt-2" && pre != "phi-2" && pre != "default" && pre != "mpt" &&
             pre != "olmo" && pre != "exaone4") {
    RLX_FAIL(where << ": pre-tokenizer '" << pre << "' (tokenizer.ggml.pre) is not supported");
  }
  if (pre != "gemma4") o.add_bos = f.get_bool("tokenizer.ggml.add_bos_token", o.add_bos);
  o.add_eos = f.get_bool("tokenizer.ggml.add_eos_token", false);
  std::vector<std::string> tokens = f.get_string_array("tokenizer.ggml.tokens");
  const size_t n = tokens.size();
  RLX_CHECK(n > 0 && n < (size_t(1) << 24), where << ": vocabulary of " << n << " tokens");
  const std::vector<int32_t> types = read_token_types(f, n, where);
  std::vector<int32_t> special, user_defined;
  for (size_t i = 0; i < n; ++i) {
    if (types[i] == kTokenControl || types[i] == kTokenUserDefined) special.push_back(int32_t(i));
    if (types[i] == kTokenUserDefined) user_defined.push_back(int32_t(i));
    uint8_t b = 0;
    RLX_CHECK(types[i] != kTokenByte || parse_byte_token(tokens[i], b),
              where << ": byte token " << i << " is '" << tokens[i] << "', not <0xNN>");
  }
  std::vector<std::pair<std::string, std::string>> merges;
  for (const auto& m : f.get_string_array("tokenizer.ggml.merges")) merges.push_back(split_merge(m, where));
  check_special_token_ids(f, n, where);
  BpeTokenizer t(std::move(tokens), merges, special, o, read_token_id(f, "tokenizer.ggml.bos_token_id", n, where),
                 read_token_id(f, "tokenizer.ggml.eos_token_id", n, where), user_defined, where);
  if (o.spm_style) {
    t.byte_of_.assign(n, -1);
    for (size_t i = 0; i < n; ++i) {
      uint8_t b = 0;
      if (types[i] == kTokenByte && parse_byte_token(t.tokens_[i], b)) t.byte_of_[i] = b;
    }
  }
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
  std::string piece;
  for (std::string_view s : merge_symbols<int32_t>(mapped, merge_rank_of(merge_rank_))) {
    piece.assign(s);
    int32_t id = id_of(piece);
    if (id >= 0) {
      out.push_back(id);
    } else if (opts_.spm_style) {
      // llama.cpp's fallback for raw-UTF-8 BPE: each byte's <0xNN> token, skipped if absent.
      static const char* hex = "0123456789ABCDEF";
      for (unsigned char b : piece) {
        const char buf[7] = {'<', '0', 'x', hex[b >> 4], hex[b & 15], '>', 0};
        if (int32_t bid = id_of(buf); bid >= 0) out.push_back(bid);
      }
    } else if (unk_id_ >= 0) {
      out.push_back(unk_id_);
    }
  }
}

void BpeTokenizer::encode_spm_style(std::string_view text, std::vector<int32_t>& out) const {
  std::string s;
  s.reserve(text.size());
  for (char c : text) {
    if (c == ' ') s += "\xe2\x96\x81";  // U+2581
    else s += c;
  }
  // [^\n]+|[\n]+; a run of newlines that is a token is that token (llama.cpp
  // does so for Gemma 4 rather than merge it pair by pair).
  for (size_t i = 0; i < s.size();) {
    const bool nl = s[i] == '\n';
    size_t j = i;
    while (j < s.size() && (s[j] == '\n') == nl) ++j;
    const std::string run = s.substr(i, j - i);
    int32_t id = nl ? id_of(run) : -1;
    if (id >= 0) out.push_back(id);
    else bpe_piece(run, out);
    i = j;
  }
}
void BpeTokenizer::encode_plain(std::string_view text, std::vector<int32_t>& out) const {
  if (text.empty()) return;
  std::string normalized;
  if (!normalizer_.empty()) {  // as tokenizers: on the text between special tokens, before splitting
    normalized = normalizer_.apply(text);
    text = normalized;
    if (text.empty()) return;
  }
  if (opts_.spm_style) return encode_spm_style(text, out);
  std::string buf;
  if (opts_.add_prefix_space && text[0] != ' ') {
    buf.push_back(' ');
    buf.append(text);
    text = buf;
  }
  const std::vector<ByteRange> pieces = pre_tokenize(text, opts_.split, opts_.split_digits);
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
  specials_.split(text, o.parse_special, [&](std::string_view run) { encode_plain(run, out); }, out);
  if (o.add_special && opts_.add_eos && eos_id_ >= 0) out.push_back(eos_id_);
  return out;
}

std::string BpeTokenizer::token_bytes(int32_t id) const {
  const std::string& t = token(id);
  if (is_special(id)) return t;
  if (opts_.spm_style) {
    if (byte_of_[size_t(id)] >= 0) return std::string(1, char(byte_of_[size_t(id)]));
    std::string out;
    for (size_t i = 0; i < t.size();) {
      if (t.compare(i, 3, "\xe2\x96\x81") == 0) {
        out += ' ';
        i += 3;
      } else {
        out += t[i++];
      }
    }
    return out;
  }
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
