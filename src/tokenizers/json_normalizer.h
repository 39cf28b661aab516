// A tokenizer.json "normalizer" as Hugging Face's `tokenizers` runs it on
// the text between added tokens: Sequence, Precompiled (SentencePiece's
// character map), Replace (a string, or a regex of one character or class
// repeated: " {2,}", "\s+"), Strip, Prepend and the Unicode forms NFC, NFD,
// NFKC, NFKD. Any other normalizer, or a regex beyond that shape, is
// refused by name when the file is read.
#pragma once
#include <memory>
#include <nlohmann/json_fwd.hpp>
#include <string>
#include <string_view>
#include <vector>

namespace rlx {

class JsonNormalizer {
 public:
  JsonNormalizer() = default;  // none: the text is kept
  // `where` starts every error ("unigram: 'path': ").
  static JsonNormalizer from_json(const nlohmann::json& normalizer, const std::string& where);
  std::string apply(std::string_view text) const;
  bool empty() const { return steps_.empty(); }

  struct Step;

 private:
  std::vector<std::shared_ptr<const Step>> steps_;
};

}  // namespace rlx
