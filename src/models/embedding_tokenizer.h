// The tokenizer of an embedding model directory behind the installed
// EmbeddingTokenizer interface (rlx/embedder.h).
#pragma once
#include <memory>
#include <string>

#include "rlx/embedder.h"

namespace rlx {

// tokenizer.json or vocab.txt (+ tokenizer_config.json) of a BERT-family model.
std::unique_ptr<EmbeddingTokenizer> load_wordpiece_tokenizer(const std::string& dir);

}  // namespace rlx
