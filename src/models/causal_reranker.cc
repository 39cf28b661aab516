#include "models/causal_reranker.h"

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "models/json_read.h"
#include "models/llama_hf.h"
#include "rlx/error.h"
#include "tokenizers/bpe.h"
#include "tokenizers/spm_json.h"

namespace rlx {
namespace fs = std::filesystem;
namespace {

// The chat template transformers loads for the tokenizer: chat_template.jinja
// beside it, else tokenizer_config.json's chat_template (a string, or named
// templates of which "default" is the one used). `file` gets where it was.
std::string chat_template_of(const fs::path& dir, std::string* file) {
  const fs::path jinja = dir / "chat_template.jinja";
  if (fs::exists(jinja)) {
    std::ifstream in(jinja, std::ios::binary);
    RLX_CHECK(in, "cross-encoder: cannot read '" << jinja.string() << "'");
    std::ostringstream ss;
    ss << in.rdbuf();
    *file = jinja.string();
    return ss.str();
  }
  const fs::path tc = dir / "tokenizer_config.json";
  if (fs::exists(tc)) {
    const nlohmann::json doc = read_json_file(tc);
    JsonField j(doc, tc.string());
    j.object();
    if (j.has("chat_template")) {
      JsonField t = j.at("chat_template");
      if (t.json().is_string()) {
        *file = tc.string();
        return t.string();
      }
      t.array();
      for (size_t i = 0; i < t.size(); ++i) {
        JsonField named = t.at(i).object();
        if (named.at("name").string() == "default") {
          *file = tc.string();
          return named.at("template").string();
        }
      }
      RLX_FAIL(t.where() << "none of the named chat templates is 'default'");
    }
  }
  RLX_FAIL("cross-encoder: '" << dir.string()
                              << "' has no chat template (chat_template.jinja, or chat_template in "
                                 "tokenizer_config.json): sentence-transformers renders a causal-LM cross-encoder's "
                                 "pairs through it");
}

// sentence-transformers' guess of the message format from the template
// (InputFormatter._infer_format): content as a list of typed parts, or flat.
bool looks_structured(const std::string& t) {
  for (const char* p : {"content[0]", ".type", "'type'", "\"type\"", "item.type", "message.content["})
    if (t.find(p) != std::string::npos) return true;
  return false;
}

}  // namespace

CausalReranker::CausalReranker(const SentenceConfig& s, const LlamaSafetensors& w) {
  const fs::path tdir = s.transformer_dir;
  const std::string sbc = (tdir / "sentence_bert_config.json").string();
  RLX_CHECK(s.transformer_task.empty() || s.transformer_task == "text-generation",
            "cross-encoder: '" << sbc << "': transformer_task '" << s.transformer_task
                               << "' does not give the causal LM's logits that LogitScore reads "
                                  "(text-generation does)");

  // LogitScore: which logits make the score.
  const fs::path lc = fs::path(s.logit_score_dir) / "config.json";
  const nlohmann::json ldoc = read_json_file(lc);
  JsonField l(ldoc, lc.string());
  l.object();
  RLX_CHECK(l.has("true_token_id"), l.where() << "true_token_id is missing (the token whose logit is the score; "
                                                 "Qwen3-Reranker's is the id of \"yes\")");
  const LlamaConfig& c = w.config();
  true_id_ = int32_t(l.at("true_token_id").integer(0, c.vocab_size - 1));
  if (l.has("false_token_id")) false_id_ = int32_t(l.at("false_token_id").integer(0, c.vocab_size - 1));
  const std::string input = l.string_or("module_input_name", "causal_logits");
  RLX_CHECK(input == "causal_logits", l.where() << "module_input_name '" << input
                                                << "' is not the Transformer's causal_logits");

  load_tokenizer(tdir, c);
  const std::string tj = (tdir / "tokenizer.json").string();
  for (int32_t id : {true_id_, false_id_})
    RLX_CHECK(id < 0 || size_t(id) < tokenizer_->vocab_size(),
              l.where() << "token " << id << " is not in the tokenizer ('" << tj << "')");

  // The chat template, and the message format it takes.
  const std::string tmpl = chat_template_of(tdir, &template_file_);
  RLX_CHECK(!s.modality_config_given || s.message_modality,
            "cross-encoder: '" << sbc << "': modality_config has no 'message' entry, so sentence-transformers "
                               << "would tokenize a pair as two plain texts; rlx runs a causal-LM cross-encoder "
                                  "through its chat template only");
  const std::string format = s.message_format.empty() || s.message_format == "auto"
                                 ? (looks_structured(tmpl) ? "structured" : "flat")
                                 : s.message_format;
  RLX_CHECK(format == "flat", "cross-encoder: '" << sbc << "': the message format is '" << format
                                                 << "'; rlx renders flat messages ({role, content: text}) only");
  set_template(tmpl, "'" + template_file_ + "'");

  // The activation: config_sentence_transformers.json's activation_fn, else
  // config.json's sentence_transformers.activation_fn, else sigmoid (one label).
  const fs::path cst = fs::path(s.logit_score_dir).parent_path() / "config_sentence_transformers.json";
  if (!s.activation_fn.empty()) {
    std::ostringstream at;
    at << "'" << cst.string() << "': activation_fn: ";
    activation_ = parse_score_activation(s.activation_fn, at.str());
  } else {
    const fs::path cj = tdir / "config.json";
    const nlohmann::json doc = read_json_file(cj);
    JsonField j(doc, cj.string());
    if (j.has("sentence_transformers")) {
      JsonField st = j.at("sentence_transformers").object();
      if (st.has("activation_fn")) activation_ = parse_score_activation(st.at("activation_fn").string(), st.where());
    }
  }
  take_head(w);
}

CausalReranker::CausalReranker(const std::string& dir, const RerankerRecipe& recipe, const LlamaSafetensors& w) {
  const LlamaConfig& c = w.config();
  const fs::path cj = fs::path(dir) / "config.json";
  const auto& types = recipe.model_types;
  std::string wanted;
  for (const std::string& t : types) wanted += (wanted.empty() ? "" : ", ") + t;
  RLX_CHECK(std::find(types.begin(), types.end(), c.family) != types.end(),
            "cross-encoder: '" << cj.string() << "': model_type '" << c.family << "' is not what the "
                               << recipe.name << " recipe was made for (" << wanted << ")");
  load_tokenizer(dir, c);
  const std::string tj = (fs::path(dir) / "tokenizer.json").string();
  auto id_of = [&](const std::string& token) {
    const int32_t id = tokenizer_->id_of(token);
    RLX_CHECK(id >= 0, "cross-encoder: '" << tj << "' has no token \"" << token << "\", whose logit the "
                                          << recipe.name << " recipe scores");
    return id;
  };
  true_id_ = id_of(recipe.true_token);
  false_id_ = id_of(recipe.false_token);
  // The directory's own chat template is the chat model's, not the pairs':
  // the recipe's is used.
  set_template(recipe.chat_template, "the " + recipe.name + " recipe's");
  activation_ = BertConfig::ScoreActivation::Sigmoid;
  max_length_ = recipe.max_length;
  take_head(w);
}

void CausalReranker::load_tokenizer(const fs::path& tdir, const LlamaConfig& c) {
  // As apply_chat_template runs it: no special tokens added, control tokens
  // in the rendered text matched.
  const fs::path tj = tdir / "tokenizer.json";
  RLX_CHECK(fs::exists(tj), "cross-encoder: '" << tdir.string() << "' has no tokenizer.json (byte-level BPE)");
  RLX_CHECK(!SpmJsonTokenizer::is_spm_style(tj.string()),
            "cross-encoder: '" << tj.string() << "': SentencePiece-style BPE is not supported for a causal-LM "
                                                 "cross-encoder (byte-level BPE is)");
  tokenizer_ = std::make_unique<BpeTokenizer>(BpeTokenizer::from_tokenizer_json(tj.string()));
  RLX_CHECK(int64_t(tokenizer_->vocab_size()) <= c.vocab_size,
            "cross-encoder: '" << tj.string() << "' has " << tokenizer_->vocab_size()
                               << " tokens, more than the model's vocab_size " << c.vocab_size);
  const fs::path tc = tdir / "tokenizer_config.json";
  if (fs::exists(tc)) {
    const nlohmann::json doc = read_json_file(tc);
    JsonField j(doc, tc.string());
    j.object();
    const std::string side = j.string_or("truncation_side", "right");
    RLX_CHECK(side == "right" || side == "left", j.where() << "truncation_side '" << side
                                                           << "' is neither right nor left");
    truncate_left_ = side == "left";
  }
}

void CausalReranker::set_template(const std::string& tmpl, const std::string& where) {
  template_ = std::make_unique<PairTemplate>(tmpl, where);
  // As sentence-transformers checks: both halves of a pair must reach the prompt.
  const std::string base = template_->render(PairTemplate::pair_messages("alpha", "bravo"));
  RLX_CHECK(template_->render(PairTemplate::pair_messages("charlie", "bravo")) != base,
            "cross-encoder: the chat template (" << where << ") does not write the 'query' message's content");
  RLX_CHECK(template_->render(PairTemplate::pair_messages("alpha", "foxtrot")) != base,
            "cross-encoder: the chat template (" << where << ") does not write the 'document' message's content");
}

void CausalReranker::take_head(const LlamaSafetensors& w) {
  std::vector<int32_t> rows{true_id_};
  if (false_id_ >= 0) rows.push_back(false_id_);
  head_ = w.head_rows(rows);
  hidden_ = size_t(w.config().hidden_size);
  final_softcap_ = w.config().final_softcap;
}

CausalReranker::~CausalReranker() = default;

std::vector<int32_t> CausalReranker::tokens(const std::string& text) const {
  return tokenizer_->encode(text, EncodeOptions{false, true});
}

std::vector<int32_t> CausalReranker::suffix(const std::string& prompt) const {
  // sentence-transformers' _chat_template_suffix_ids: the pair rendered with
  // two fillers (system messages kept); their longest common token suffix
  // is the template's, unless the renders never differ.
  const std::vector<int32_t> a = tokens(template_->render(PairTemplate::pair_messages("0", "0", prompt)));
  const std::vector<int32_t> b =
      tokens(template_->render(PairTemplate::pair_messages("1 2 3 4", "1 2 3 4", prompt)));
  size_t n = 0;
  while (n < a.size() && n < b.size() && a[a.size() - 1 - n] == b[b.size() - 1 - n]) ++n;
  if (n == 0 || n >= std::min(a.size(), b.size())) return {};
  return std::vector<int32_t>(a.end() - long(n), a.end());
}

TokenizedText CausalReranker::encode(const std::string& query, const std::string& document,
                                     const std::string& prompt, int max_len,
                                     const std::vector<int32_t>& suffix) const {
  TokenizedText t;
  t.ids = tokens(template_->render(PairTemplate::pair_messages(query, document, prompt)));
  const size_t limit = size_t(max_len);
  if (t.ids.size() > limit) {
    t.truncated = true;
    if (truncate_left_) t.ids.erase(t.ids.begin(), t.ids.end() - long(limit));
    else t.ids.resize(limit);
  }
  // Every row that reached max_len (cut or not) gets the tail back.
  if (t.ids.size() >= limit) {
    const size_t keep = std::min(suffix.size(), t.ids.size());
    std::copy(suffix.end() - long(keep), suffix.end(), t.ids.end() - long(keep));
  }
  t.type_ids.assign(t.ids.size(), 0);
  return t;
}

float CausalReranker::logit(const float* hidden) const {
  auto dot = [&](size_t row) {
    double s = 0;
    for (size_t k = 0; k < hidden_; ++k) s += double(hidden[k]) * head_[row * hidden_ + k];
    if (final_softcap_ > 0) s = final_softcap_ * std::tanh(s / final_softcap_);
    return s;
  };
  const double score = false_id_ >= 0 ? dot(0) - dot(1) : dot(0);
  return float(score);
}

}  // namespace rlx
