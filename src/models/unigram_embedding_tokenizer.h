// The embedding tokenizer of a SentencePiece Unigram model (XLM-RoBERTa:
// multilingual-e5, bge-m3, paraphrase-multilingual) from tokenizer.json: its
// normalizer, Metaspace, the Unigram model and the post_processor's special
// tokens (<s> A </s></s> B </s>).
#pragma once
#include <memory>
#include <nlohmann/json_fwd.hpp>
#include <string>

#include "rlx/embedder.h"

namespace rlx {

// doc: tokenizer.json as parsed; path names it in errors.
std::unique_ptr<EmbeddingTokenizer> load_unigram_embedding_tokenizer(const nlohmann::json& doc,
                                                                     const std::string& path);

}  // namespace rlx
