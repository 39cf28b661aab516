// What generation needs of a tokenizer, whichever kind it is (byte-level BPE,
// SentencePiece-style).
#pragma once
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace rlx {

class TextTokenizer {
 public:
  virtual ~TextTokenizer() = default;
  virtual std::vector<int32_t> encode(std::string_view text) const = 0;
  virtual std::string decode(const std::vector<int32_t>& ids) const = 0;
  // The bytes one token adds to a text being streamed.
  virtual std::string token_bytes(int32_t id) const = 0;
  virtual int32_t id_of(const std::string& token) const = 0;  // -1 when absent
  virtual size_t vocab_size() const = 0;
  virtual int32_t bos_id() const = 0;
  virtual int32_t eos_id() const = 0;
};

}  // namespace rlx
