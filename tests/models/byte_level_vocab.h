// A byte-level BPE vocabulary for test GGUFs: the 256 byte symbols of
// GPT-2's bytes_to_unicode, then filler tokens, so that BpeTokenizer reads it
// and a model can be given fewer tokens than its embedding has rows (a
// padded vocabulary).
#pragma once
#include <cstdint>
#include <string>
#include <vector>

namespace rlx::test {

// The 256 byte-level BPE symbols (GPT-2's bytes_to_unicode), then n - 256
// more tokens: a vocabulary of n tokens that BpeTokenizer reads.
inline std::vector<std::string> byte_level_tokens(int n) {
  std::vector<std::string> t;
  int extra = 0;
  for (int b = 0; b < 256; ++b) {
    const bool printable = (b >= 33 && b <= 126) || (b >= 161 && b <= 172) || (b >= 174);
    const uint32_t cp = printable ? uint32_t(b) : uint32_t(256 + extra++);
    std::string s;
    if (cp < 0x80) {
      s += char(cp);
    } else {
      s += char(0xC0 | (cp >> 6));
      s += char(0x80 | (cp & 0x3F));
    }
    t.push_back(s);
  }
  for (int i = 256; i < n; ++i) t.push_back("<extra_" + std::to_string(i) + ">");
  return t;
}

}  // namespace rlx::test
