// SentencePiece's precompiled normalisation map (a normalizer_spec's
// precompiled_charsmap; tokenizer.json's "Precompiled" normalizer, base64):
// a little-endian u32 byte size of a Darts double-array trie, the trie's u32
// units, then the replacement strings, each ended by a NUL. A key found in
// the trie leads to the offset of its replacement.
//
// normalize() is what Hugging Face's `tokenizers` does with it, not what
// sentencepiece does: the text is cut into extended grapheme clusters; a
// cluster under 6 bytes is replaced whole by the first (shortest) key that
// prefixes it, if any (so "a" + U+0308 + U+0301 becomes "ä": the acute is
// dropped); otherwise each code point is looked up on its own.
#pragma once
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace rlx {

class PrecompiledCharsmap {
 public:
  // The raw map; throws rlx::Error (starting with `where`) for a size that
  // does not fit, an empty trie or replacement text that is not UTF-8.
  PrecompiledCharsmap(std::string_view blob, const std::string& where);
  // The map as tokenizer.json holds it, in standard base64.
  static PrecompiledCharsmap from_base64(std::string_view text, const std::string& where);

  // The replacement of the shortest key that prefixes chunk (the search
  // stops at a NUL byte), or nothing.
  std::optional<std::string_view> transform(std::string_view chunk) const;
  std::string normalize(std::string_view text) const;

 private:
  std::vector<uint32_t> units_;
  std::string strings_;
  std::string where_;
};

// Standard base64 (padding optional, no whitespace); throws naming `where`.
std::string base64_decode(std::string_view text, const std::string& where);

}  // namespace rlx
