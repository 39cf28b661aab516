// tokenizer.json's post_processor as an embedding model applies it: the
// special tokens around one text or a pair (TemplateProcessing,
// RobertaProcessing, BertProcessing), with truncation to a length that
// counts them, longest-first for pairs, as Hugging Face's `tokenizers` cuts.
#pragma once
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "models/json_read.h"
#include "rlx/embedder.h"

namespace rlx {

class PostTemplate {
 public:
  struct Item {
    std::vector<int32_t> ids;  // a special token's ids; empty for a sequence
    int sequence = -1;         // 0: the first text, 1: the second; -1: special
    int32_t type_id = 0;
  };
  // `post` is the post_processor object; ids must lie below vocab_size.
  // RobertaProcessing's types are all 0 (RoBERTa has one token type).
  // ByteLevel adds no token (it only trims offsets); a Sequence is read as
  // its one template-adding step among ByteLevel steps (Qwen3-Embedding:
  // $A <|endoftext|>).
  static PostTemplate from_json(const JsonField& post, size_t vocab_size);
  // No special tokens: the texts as they are (a null post_processor).
  static PostTemplate none();

  // The special tokens the template adds to one text or to a pair.
  size_t added(bool pair) const;
  // a (and b, when pair) between the template's tokens, cut so the whole
  // fits max_len; throws when max_len leaves no room for the template.
  TokenizedText apply(std::vector<int32_t> a, std::vector<int32_t> b, bool pair, int max_len) const;
  // Every id the template adds.
  std::vector<int32_t> special_ids() const;

 private:
  std::vector<Item> single_, pair_;
};

}  // namespace rlx
