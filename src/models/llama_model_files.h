// What a LLaMA-family model path holds: its weights (GGUF file or Hugging
// Face directory), its tokenizer where it has one, its end-of-sequence id
// and chat template. One reader for every user of a decoder model.
#pragma once
#include <cstdint>
#include <memory>
#include <string>

#include "models/llama.h"
#include "tokenizers/text_tokenizer.h"

namespace rlx {

struct LlamaModelFiles {
  std::unique_ptr<LlamaWeights> weights;
  std::unique_ptr<TextTokenizer> tokenizer;  // null: a directory without tokenizer.json
  int32_t eos_id = -1;
  std::string chat_template;  // "" when the model has none
};

// A .gguf file, or a directory holding config.json; throws naming the path.
LlamaModelFiles open_llama_model(const std::string& path);

}  // namespace rlx
