// What generation needs of a tokenizer, whichever kind it is (byte-level BPE,
// SentencePiece-style).
#pragma once
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace rlx {

struct EncodeOptions {
  // Prepend BOS and append EOS where the vocabulary asks for them
  // (tokenizer.ggml.add_bos_token / add_eos_token, or the tokenizer.json
  // post-processor; without the key, llama.cpp's default for the vocabulary:
  // BOS for SentencePiece and for Llama 3's byte-level BPE).
  bool add_special = true;
  // Control tokens written in the text (e.g. "<|im_end|>") become their ids.
  // Off, such text is tokenized as ordinary text, so text from a user cannot
  // forge a control token; user-defined tokens are matched either way.
  bool parse_special = false;
};

class TextTokenizer {
 public:
  virtual ~TextTokenizer() = default;
  virtual std::vector<int32_t> encode(std::string_view text, const EncodeOptions& opts) const = 0;
  // encode(text, default_encode_options()): add_special on, and parse_special
  // on for byte-level BPE, off for SentencePiece (how each encoded before the
  // options existed). Text from a user should go through the two-argument
  // form with parse_special off.
  std::vector<int32_t> encode(std::string_view text) const { return encode(text, default_encode_options()); }
  virtual EncodeOptions default_encode_options() const = 0;
  virtual std::string decode(const std::vector<int32_t>& ids) const = 0;
  // The bytes one token adds to a text being streamed.
  virtual std::string token_bytes(int32_t id) const = 0;
  virtual int32_t id_of(const std::string& token) const = 0;  // -1 when absent
  virtual size_t vocab_size() const = 0;
  virtual int32_t bos_id() const = 0;
  virtual int32_t eos_id() const = 0;
};

}  // namespace rlx
