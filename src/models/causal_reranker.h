// A causal LM used as a cross-encoder, as sentence-transformers'
// CrossEncoder runs one (Qwen3-Reranker): modules.json names the
// Transformer (transformer_task "text-generation", the message modality)
// and then a LogitScore module, whose config.json gives true_token_id and
// false_token_id. Each (query, document) pair becomes the messages
// {query, document} (after a system message holding the prompt, when there
// is one), rendered by the model's chat template (chat_template.jinja, else
// tokenizer_config.json's chat_template) and tokenized without special
// tokens added. A text longer than max_len is cut on the tokenizer's
// truncation side, then, as sentence-transformers' restore_suffix does, the
// template's tail (the tokens after the document, found by rendering the
// pair with two different fillers) is written back over the row's last
// tokens, so the last token is still the template's. The score is
// logit(true) - logit(false) at that last token (logit(true) alone without
// a false token), from the final-normed hidden state and those rows of the
// LM head only; sentence-transformers' activation (sigmoid by default) is
// applied by the caller.
//
// A plain causal LM directory (no sentence-transformers files) is scored
// the same way with a built-in recipe (reranker_recipe.h) in place of
// those files: its template, its yes/no tokens looked up in the
// tokenizer, sigmoid, its length limit.
#pragma once
#include <cstdint>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "models/hf_config.h"
#include "models/pair_template.h"
#include "models/reranker_recipe.h"
#include "rlx/embedder.h"

namespace rlx {

class BpeTokenizer;
class LlamaSafetensors;
struct LlamaConfig;

class CausalReranker {
 public:
  // `s`: the directory's sentence-transformers files (logit_score_dir set);
  // `w`: the decoder's weights, whose LM head gives the score's rows.
  // Throws naming the file and field for a missing or unusable part.
  CausalReranker(const SentenceConfig& s, const LlamaSafetensors& w);
  // `dir`: a plain causal LM directory (config.json, tokenizer.json) that
  // the user says `recipe` scores; the directory's own chat template is
  // left aside (it is the chat model's).
  CausalReranker(const std::string& dir, const RerankerRecipe& recipe, const LlamaSafetensors& w);
  ~CausalReranker();

  // The tokens of the template's tail for pairs rendered with this prompt
  // ("" = none): what restore_suffix writes back over a cut row.
  std::vector<int32_t> suffix(const std::string& prompt) const;
  // A pair as the model reads it, at most max_len tokens.
  TokenizedText encode(const std::string& query, const std::string& document, const std::string& prompt,
                       int max_len, const std::vector<int32_t>& suffix) const;
  // The score (before the activation) from the final-normed hidden state of
  // the last token, hidden_size values.
  float logit(const float* hidden) const;

  BertConfig::ScoreActivation activation() const { return activation_; }
  int32_t true_token() const { return true_id_; }
  int32_t false_token() const { return false_id_; }  // -1: none
  const std::string& chat_template_file() const { return template_file_; }  // "" for a recipe's
  int max_length() const { return max_length_; }  // a recipe's limit on a pair's tokens, 0 = none

 private:
  std::vector<int32_t> tokens(const std::string& text) const;
  void load_tokenizer(const std::filesystem::path& tdir, const LlamaConfig& c);
  // `where` names the template in errors.
  void set_template(const std::string& tmpl, const std::string& where);
  void take_head(const LlamaSafetensors& w);
  std::unique_ptr<BpeTokenizer> tokenizer_;
  std::unique_ptr<PairTemplate> template_;
  std::string template_file_;
  bool truncate_left_ = false;
  int max_length_ = 0;
  int32_t true_id_ = -1, false_id_ = -1;
  std::vector<float> head_;  // the true token's LM head row, then the false token's
  size_t hidden_ = 0;
  float final_softcap_ = 0.f;
  BertConfig::ScoreActivation activation_ = BertConfig::ScoreActivation::Sigmoid;
};

}  // namespace rlx
