// UTF-8 helpers shared by the tokenizers.
#pragma once
#include <cstddef>

namespace rlx {

// Bytes of the UTF-8 sequence a lead byte starts (1 for a stray byte).
inline size_t utf8_sequence_length(unsigned char lead) {
  if (lead < 0x80) return 1;
  if ((lead >> 5) == 6) return 2;
  if ((lead >> 4) == 14) return 3;
  if ((lead >> 3) == 30) return 4;
  return 1;
}

}  // namespace rlx
