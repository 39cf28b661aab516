// SentencePiece-style BPE (llama, TinyLlama, Mistral vocabularies) as
// sentencepiece encodes it: spaces become U+2581 with one prepended, adjacent
// symbols merge by the score of the piece they form (highest first, leftmost
// on ties), and what no piece covers falls back to <0xNN> byte tokens.
// Control, unknown and user-defined tokens (GGUF token types 3, 2, 4) are
// split out of the text first as llama.cpp does: user-defined always, the
// others with EncodeOptions::parse_special; the text after each such token
// gets the prepended space again.
// Read from GGUF metadata (tokenizer.ggml.model = "llama").
#pragma once
#include <cstdint>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "tokenizers/special_tokens.h"
#include "tokenizers/text_tokenizer.h"

namespace rlx {

class GgufFile;

class SpmTokenizer : public TextTokenizer {
 public:
  static SpmTokenizer from_gguf(const GgufFile& f);

  using TextTokenizer::encode;
  // BOS first and EOS last when add_special and the vocabulary asks.
  std::vector<int32_t> encode(std::string_view text, const EncodeOptions& o) const override;
  // {add_special = true, parse_special = false}
  EncodeOptions default_encode_options() const override { return {true, false}; }
  // Text as sentencepiece decodes it (byte tokens joined, the prepended space removed).
  std::string decode(const std::vector<int32_t>& ids) const override;
  // The bytes of one token as it continues a text (U+2581 as a space).
  std::string token_bytes(int32_t id) const override;

  int32_t id_of(const std::string& piece) const override;  // -1 when absent
  size_t vocab_size() const override { return pieces_.size(); }
  int32_t bos_id() const override { return bos_id_; }
  int32_t eos_id() const override { return eos_id_; }
  bool add_bos() const { return add_bos_; }
  bool add_eos() const { return add_eos_; }

 private:
  void encode_plain(std::string_view text, std::vector<int32_t>& out) const;

  std::vector<std::string> pieces_;
  std::vector<float> scores_;
  std::vector<int32_t> types_;  // 1 normal, 2 unknown, 3 control, 4 user-defined, 5 unused, 6 byte
  std::unordered_map<std::string, int32_t> vocab_;  // normal and user-defined pieces
  int32_t byte_ids_[256];
  int32_t bos_id_ = -1, eos_id_ = -1, unk_id_ = -1;
  SpecialTokens specials_;
  bool add_bos_ = true, add_eos_ = false, add_space_prefix_ = true;
};

}  // namespace rlx
