// SentencePiece-style BPE (llama, TinyLlama, Mistral vocabularies) as
// sentencepiece encodes it: spaces become U+2581 with one prepended, adjacent
// symbols merge by the score of the piece they form (highest first, leftmost
// on ties), and what no piece covers falls back to <0xNN> byte tokens.
// Read from GGUF metadata (tokenizer.ggml.model = "llama").
#pragma once
#include <cstdint>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

namespace rlx {

class GgufFile;

class SpmTokenizer {
 public:
  static SpmTokenizer from_gguf(const GgufFile& f);

  std::vector<int32_t> encode(std::string_view text) const;  // BOS first when the vocabulary asks
  // Text as sentencepiece decodes it (byte tokens joined, the prepended space removed).
  std::string decode(const std::vector<int32_t>& ids) const;
  // The bytes of one token as it continues a text (U+2581 as a space).
  std::string token_bytes(int32_t id) const;

  int32_t id_of(const std::string& piece) const;  // -1 when absent
  size_t vocab_size() const { return pieces_.size(); }
  int32_t bos_id() const { return bos_id_; }
  int32_t eos_id() const { return eos_id_; }
  bool add_bos() const { return add_bos_; }

 private:
  std::vector<std::string> pieces_;
  std::vector<float> scores_;
  std::vector<int32_t> types_;  // 1 normal, 2 unknown, 3 control, 4 user-defined, 5 unused, 6 byte
  std::unordered_map<std::string, int32_t> vocab_;  // normal and user-defined pieces
  int32_t byte_ids_[256];
  int32_t bos_id_ = -1, eos_id_ = -1, unk_id_ = -1;
  bool add_bos_ = true, add_space_prefix_ = true;
};

}  // namespace rlx
