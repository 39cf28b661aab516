// SentencePiece's visible space, U+2581 ("▁"), which SentencePiece and
// Metaspace pre-tokenizers write in place of ' ' inside their pieces.
#pragma once
#include <string>
#include <string_view>

namespace rlx {

// A piece's text with each U+2581 turned back into a space.
inline std::string metaspace_to_spaces(std::string_view piece) {
  static constexpr std::string_view kSpace = "\xe2\x96\x81";
  std::string out;
  for (size_t i = 0; i < piece.size();) {
    if (piece.compare(i, kSpace.size(), kSpace) == 0) {
      out += ' ';
      i += kSpace.size();
    } else {
      out += piece[i++];
    }
  }
  return out;
}

}  // namespace rlx
