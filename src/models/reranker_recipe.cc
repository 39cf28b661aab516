#include "models/reranker_recipe.h"

#include "rlx/error.h"

namespace rlx {
namespace {

// Qwen3-Reranker's model card lays a pair out as
//   prefix + "<Instruct>: {instruction}\n<Query>: {query}\n<Document>: {doc}" + suffix
// with the instruction defaulting to the web-search one; this is that text
// as the chat template sentence-transformers renders for it (the
// instruction is the system message, when there is one).
const char* const kQwen3Template =
    "{%- set instruction = messages | selectattr(\"role\", \"eq\", \"system\") | map(attribute=\"content\") | first "
    "| default(\"Given a web search query, retrieve relevant passages that answer the query\") -%}\n"
    "{%- set query_text = messages | selectattr(\"role\", \"eq\", \"query\") | map(attribute=\"content\") | first "
    "-%}\n"
    "{%- set document_text = messages | selectattr(\"role\", \"eq\", \"document\") | map(attribute=\"content\") | "
    "first -%}\n"
    "<|im_start|>system\nJudge whether the Document meets the requirements based on the Query and the Instruct "
    "provided. Note that the answer can only be \"yes\" or \"no\".<|im_end|>\n"
    "<|im_start|>user\n<Instruct>: {{ instruction }}\n<Query>: {{ query_text }}\n"
    "<Document>: {{ document_text }}<|im_end|>\n<|im_start|>assistant\n<think>\n\n</think>\n\n\n";

const std::vector<RerankerRecipe>& recipes() {
  static const std::vector<RerankerRecipe> all{
      {"qwen3-reranker", {"qwen3"}, kQwen3Template, "yes", "no", 8192},
  };
  return all;
}

}  // namespace

std::string reranker_recipe_names() {
  std::string names;
  for (const RerankerRecipe& r : recipes()) names += (names.empty() ? "" : ", ") + r.name;
  return names;
}

const RerankerRecipe& reranker_recipe(const std::string& name) {
  for (const RerankerRecipe& r : recipes())
    if (r.name == name) return r;
  RLX_FAIL("reranker_recipe '" << name << "' is not a recipe rlx has (" << reranker_recipe_names() << ")");
}

}  // namespace rlx
