// The tokenizer of an embedding model directory behind the installed
// EmbeddingTokenizer interface (rlx/embedder.h).
#pragma once
#include <memory>
#include <string>

#include "models/hf_config.h"
#include "rlx/embedder.h"

namespace rlx {

// BERT and DistilBERT: WordPiece from tokenizer.json or vocab.txt (+
// tokenizer_config.json). RoBERTa: byte-level BPE from tokenizer.json with
// its RobertaProcessing special tokens (<s> a </s></s> b </s>). Any family
// whose tokenizer.json holds a Unigram model (XLM-RoBERTa): SentencePiece
// Unigram with its post_processor's special tokens.
std::unique_ptr<EmbeddingTokenizer> load_embedding_tokenizer(const std::string& dir, EncoderFamily family);

}  // namespace rlx
