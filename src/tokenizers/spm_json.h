// SentencePiece-style BPE from a Hugging Face tokenizer.json (Llama 2,
// Mistral, Gemma directories), as the `tokenizers` library runs it:
//  - added tokens split out of the raw text first (special ones only with
//    EncodeOptions::parse_special; non-special ones always), each segment
//    between them then normalized on its own;
//  - normalizers Prepend("▁") and Replace(" " -> "▁") (Llama 2 / Mistral,
//    Gemma), or none;
//  - the Metaspace pre-tokenizer (replacement "▁", prepend_scheme first /
//    always / never or the older add_prefix_space, split true / false), or
//    none (the whole segment is one word);
//  - the BPE model: characters merged by the rank of their merge, with
//    byte_fallback (a character not in the vocabulary becomes its <0xNN>
//    tokens) and fuse_unk;
//  - BOS/EOS from a TemplateProcessing post-processor's single template;
//  - decoders Replace("▁" -> " "), ByteFallback, Fuse, Strip and Metaspace.
// Any other step is refused naming its type and where it is in the file.
#pragma once
#include <cstdint>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "tokenizers/special_tokens.h"
#include "tokenizers/text_tokenizer.h"


namespace rlx {

enum class MetaspacePrepend { Never, First, Always };

struct SpmJsonOptions {
  bool normalize_prepend = false;  // normalizer Prepend("▁")
  bool normalize_replace = false;  // normalizer Replace(" ", "▁")
  bool metaspace = false;          // pre-tokenizer Metaspace
  MetaspacePrepend metaspace_prepend = MetaspacePrepend::Always;
  bool metaspace_split = true;
  bool byte_fallback = false, fuse_unk = false, ignore_merges = false;
  int strip_start = 0;             // decoder Strip(" ", start, 0): leading spaces removed from the text
};

class SpmJsonTokenizer : public TextTokenizer {
 public:
  // True when a tokenizer.json's BPE model is SentencePiece-style (no
  // ByteLevel pre-tokenizer): this class reads it, else BpeTokenizer.
  static bool is_spm_style(const std::string& path);
  static SpmJsonTokenizer from_tokenizer_json(const std::string& path);

  using TextTokenizer::encode;
  std::vector<int32_t> encode(std::string_view text, const EncodeOptions& o) const override;
  // {add_special = true, parse_special = false}, as SpmTokenizer.
  EncodeOptions default_encode_options() const override { return {true, false}; }
  // The decoders' text; special added tokens print nothing.
  std::string decode(const std::vector<int32_t>& ids) const override;
  std::string token_bytes(int32_t id) const override;
  int32_t id_of(const std::string& token) const override;
  size_t vocab_size() const override { return tokens_.size(); }
  int32_t bos_id() const override { return bos_id_; }
  int32_t eos_id() const override { return eos_id_; }
  const SpmJsonOptions& options() const { return opts_; }

 private:
  // One segment between added tokens; at_start: it begins the original text.
  void encode_segment(std::string_view text, bool at_start, std::vector<int32_t>& out) const;
  void encode_word(std::string_view word, std::vector<int32_t>& out) const;

  std::vector<std::string> tokens_;
  std::unordered_map<std::string, int32_t> vocab_;
  std::unordered_map<std::string, int32_t> merge_rank_;  // left + '\xff' + right
  SpecialTokens specials_;
  std::vector<uint8_t> kind_;  // 0 normal, 1 special added, 2 other added, 3 byte
  std::vector<int16_t> byte_of_;
  int32_t byte_ids_[256];
  std::vector<int32_t> prefix_, suffix_;  // the post-processor's single template around $A
  SpmJsonOptions opts_;
  int32_t bos_id_ = -1, eos_id_ = -1, unk_id_ = -1;
};

}  // namespace rlx
