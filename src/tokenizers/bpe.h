// Byte-level BPE (GPT-2, SmolLM2, StarCoder, Llama 3 style) as Hugging Face's
// `tokenizers` does it: special tokens split out of the raw text first (control
// tokens only with EncodeOptions::parse_special), then
// the pre-tokenizer (optional Digits split, then GPT-2's or Llama 3's regex), each piece's
// bytes mapped to printable characters, merges applied by rank, pieces looked
// up in the vocabulary. Decoding maps the characters back to bytes.
#pragma once
#include <cstdint>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "tokenizers/json_normalizer.h"
#include "tokenizers/pre_tokenizers.h"
#include "tokenizers/special_tokens.h"
#include "tokenizers/text_tokenizer.h"

namespace rlx {

class GgufFile;

struct BpeOptions {
  bool split_digits = false;  // Digits(individual_digits=true) before the regex
  BpeSplit split = BpeSplit::Gpt2;  // Gpt2: ByteLevel's use_regex; Llama3: a Split with its pattern
  bool ignore_merges = false;  // a piece already in the vocabulary is one token
  bool add_prefix_space = false;
  bool add_bos = false;       // prepend bos_id when encoding with add_special
  bool add_eos = false;       // append eos_id when encoding with add_special
  // SentencePiece-style BPE over raw UTF-8 (GGUF tokenizer.ggml.model "gemma4"):
  // spaces written as U+2581, no byte-to-character map, the text split only
  // into runs of newlines and runs of the rest, and what no token covers
  // falls back to <0xNN> byte tokens.
  bool spm_style = false;
};

class BpeTokenizer : public TextTokenizer {
 public:
  // tokens[i] is id i; merges are pairs of tokens, highest priority first.
  // special: ids matched verbatim in the raw text (control and added tokens),
  // with EncodeOptions::parse_special; those also in user_defined are matched
  // without it too.
  BpeTokenizer(std::vector<std::string> tokens, const std::vector<std::pair<std::string, std::string>>& merges,
               const std::vector<int32_t>& special, BpeOptions opts, int32_t bos_id, int32_t eos_id,
               const std::vector<int32_t>& user_defined = {}, const std::string& where = "bpe");

  // A Hugging Face tokenizer.json with a BPE model and a ByteLevel
  // pre-tokenizer, and no normalizer or a Unicode form (Qwen's NFC) run on
  // the text between special tokens; throws naming the file for anything
  // else.
  static BpeTokenizer from_tokenizer_json(const std::string& path);
  // GGUF metadata with tokenizer.ggml.model = "gpt2" (or "gemma4").
  static BpeTokenizer from_gguf(const GgufFile& f);

  using TextTokenizer::encode;
  std::vector<int32_t> encode(std::string_view text, const EncodeOptions& o) const override;
  // {add_special = true, parse_special = true}
  EncodeOptions default_encode_options() const override { return {true, true}; }
  // The bytes ids stand for (special tokens as their text).
  std::string decode(const std::vector<int32_t>& ids) const override;
  std::string token_bytes(int32_t id) const override;

  int32_t id_of(const std::string& token) const override;  // -1 when absent
  const std::string& token(int32_t id) const;
  size_t vocab_size() const override { return tokens_.size(); }
  int32_t bos_id() const override { return bos_id_; }
  int32_t eos_id() const override { return eos_id_; }
  bool is_special(int32_t id) const;
  const BpeOptions& options() const { return opts_; }

 private:
  void encode_plain(std::string_view text, std::vector<int32_t>& out) const;
  void encode_spm_style(std::string_view text, std::vector<int32_t>& out) const;
  void bpe_piece(const std::string& mapped, std::vector<int32_t>& out) const;

  std::vector<std::string> tokens_;
  std::unordered_map<std::string, int32_t> vocab_;
  std::unordered_map<std::string, int32_t> merge_rank_;  // left + '\xff' + right
  SpecialTokens specials_;
  std::vector<bool> special_;
  std::vector<int16_t> byte_of_;  // spm_style: the byte a <0xNN> token stands for, else -1
  BpeOptions opts_;
  JsonNormalizer normalizer_;  // tokenizer.json's NFC/NFD/NFKC/NFKD, none for GGUF
  int32_t bos_id_ = -1, eos_id_ = -1, unk_id_ = -1;
};

}  // namespace rlx
