// The one place that picks a tokenizer for a file: a GGUF file's
// tokenizer.ggml.model, or a Hugging Face directory's tokenizer.json model.
#pragma once
#include <memory>
#include <string>

#include "tokenizers/text_tokenizer.h"

namespace rlx {

class GgufFile;

// "llama" (SentencePiece), "gpt2" and "gemma4" (BPE), "bert" (WordPiece);
// throws naming the file and the model for any other.
std::unique_ptr<TextTokenizer> tokenizer_from_gguf(const GgufFile& f);

// A .gguf file (a vocabulary-only one too) or a directory with
// tokenizer.json (BPE, WordPiece or Unigram) or vocab.txt.
std::unique_ptr<TextTokenizer> open_tokenizer(const std::string& path);

}  // namespace rlx
