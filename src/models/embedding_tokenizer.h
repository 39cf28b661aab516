// The tokenizer of an embedding model directory behind the installed
// EmbeddingTokenizer interface (rlx/embedder.h).
#pragma once
#include <memory>
#include <string>

#include "models/hf_config.h"
#include "rlx/embedder.h"

namespace rlx {

class GgufFile;

// BERT and DistilBERT: WordPiece from tokenizer.json or vocab.txt (+
// tokenizer_config.json). RoBERTa: byte-level BPE from tokenizer.json with
// its RobertaProcessing special tokens (<s> a </s></s> b </s>). Any family
// whose tokenizer.json holds a Unigram model (XLM-RoBERTa): SentencePiece
// Unigram with its post_processor's special tokens.
std::unique_ptr<EmbeddingTokenizer> load_embedding_tokenizer(const std::string& dir, EncoderFamily family);

// A decoder embedder's (Qwen3-Embedding, gte-Qwen2): byte-level BPE from
// tokenizer.json with its post_processor's template (Qwen3-Embedding
// appends <|endoftext|>; none without a post_processor). Pads follow the
// text (right padding), where a causal mask keeps them from every real
// token, so their id changes nothing.
std::unique_ptr<EmbeddingTokenizer> load_decoder_embedding_tokenizer(const std::string& dir);

// A BERT GGUF's (tokenizer.ggml.model "bert"): WordPiece mapped back to the
// Hugging Face vocabulary (WordPieceText::wordpiece_from_gguf), [CLS] ...
// [SEP] as the Hugging Face tokenizer the file was converted from.
std::unique_ptr<EmbeddingTokenizer> load_gguf_embedding_tokenizer(const GgufFile& f);

}  // namespace rlx
