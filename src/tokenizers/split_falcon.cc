#include "tokenizers/pre_tokenizers.h"
#include "tokenizers/unicode_class.h"

namespace rlx {
namespace {

// tokenizers' Punctuation: Unicode \p{P} or ASCII punctuation (which takes
// in the symbols $+<=>^`|~).
bool is_falcon_punct(int32_t cp) {
  const bool ascii = (cp >= '!' && cp <= '/') || (cp >= ':' && cp <= '@') || (cp >= '[' && cp <= '`') ||
                     (cp >= '{' && cp <= '~');
  return ascii || is_punct(cp);
}

// Whether the character GPT-2's byte map gives byte b is numeric (\p{N}):
// the ASCII digits and the Latin-1 '²' '³' '¹' '¼' '½' '¾'.
bool maps_to_number(unsigned char b) {
  return (b >= '0' && b <= '9') || b == 0xB2 || b == 0xB3 || b == 0xB9 || (b >= 0xBC && b <= 0xBE);
}

// An Isolated split over bytes: runs of bytes for which in_run holds, cut
// into runs of exactly `len` when len > 0 (the rest stays with the text around).
template <class Pred>
void split_bytes(std::string_view t, const std::vector<ByteRange>& in, Pred in_run, size_t len,
                 std::vector<ByteRange>& out) {
  for (auto [b, e] : in) {
    size_t piece = b, p = b;
    while (p < e) {
      if (!in_run((unsigned char)t[p])) {
        ++p;
        continue;
      }
      size_t j = p;
      while (j < e && in_run((unsigned char)t[j]) && (len == 0 || j - p < len)) ++j;
      if (len != 0 && j - p < len) {
        p = j;  // too short: part of the text between matches
        continue;
      }
      if (piece < p) out.push_back({piece, p});
      out.push_back({p, j});
      p = piece = j;
    }
    if (piece < e) out.push_back({piece, e});
  }
}

}  // namespace

void split_falcon(std::string_view t, ByteRange r, std::vector<ByteRange>& out) {
  std::vector<ByteRange> punct, words, digits;
  split_isolated(t, {r}, {is_falcon_punct}, punct);
  for (auto p : punct) split_gpt2(t, p, words);
  split_bytes(t, words, maps_to_number, 0, digits);
  split_bytes(t, digits, [](unsigned char b) { return b >= '0' && b <= '9'; }, 3, out);
}

}  // namespace rlx
