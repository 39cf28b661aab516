// A reranker recipe built into rlx: how a plain causal LM directory (as its
// authors publish it: config.json, tokenizer files, weights, no
// sentence-transformers files) scores a (query, document) pair, from its
// model card. The pair is rendered by the recipe's chat template (the same
// PairTemplate sentence-transformers' files give, so both paths share the
// tokens, the cut and the score), and scored logit(yes) - logit(no) at the
// last token, sigmoid on top: the model card's softmax over ["no", "yes"].
//
//   qwen3-reranker   Qwen/Qwen3-Reranker-0.6B, -4B, -8B: the system prompt
//                    "Judge whether the Document meets the requirements ...",
//                    <Instruct>/<Query>/<Document> in the user turn, an empty
//                    think block; the prompt (instruction) defaults to "Given
//                    a web search query, retrieve relevant passages that
//                    answer the query"; pairs of at most 8192 tokens.
#pragma once
#include <string>
#include <vector>

namespace rlx {

struct RerankerRecipe {
  std::string name;
  std::vector<std::string> model_types;  // config.json model_type values it was made for
  std::string chat_template;             // Jinja, as PairTemplate renders it
  std::string true_token, false_token;   // vocabulary entries whose logits make the score
  int max_length = 0;                    // tokens per pair, the model card's
};

// The recipe called `name`; throws listing the recipes there are.
const RerankerRecipe& reranker_recipe(const std::string& name);
// "qwen3-reranker", ...: for help texts and errors.
std::string reranker_recipe_names();

}  // namespace rlx
