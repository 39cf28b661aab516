// Tekken's regex (Mistral NeMo / Pixtral; GGUF pre "tekken"):
//   [^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+
//  |[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*
//  |\p{N}| ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+
// A word is an upper-case run then a lower-case run, so "HelloWorld" is two
// pieces. The two letter classes overlap (Lm, Lo, M are in both), which is
// where the regex backtracks; that is worked out below without a regex engine.
#include <utf8proc.h>

#include "tokenizers/pre_tokenizers.h"
#include "tokenizers/unicode_class.h"

namespace rlx {
namespace {

bool is_upperish(int32_t cp) {  // [\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]
  if (cp < 0) return false;
  auto c = utf8proc_category(cp);
  return c == UTF8PROC_CATEGORY_LU || c == UTF8PROC_CATEGORY_LT || c == UTF8PROC_CATEGORY_LM ||
         c == UTF8PROC_CATEGORY_LO || is_mark(cp);
}

bool is_lowerish(int32_t cp) {  // [\p{Ll}\p{Lm}\p{Lo}\p{M}]
  if (cp < 0) return false;
  auto c = utf8proc_category(cp);
  return c == UTF8PROC_CATEGORY_LL || c == UTF8PROC_CATEGORY_LM || c == UTF8PROC_CATEGORY_LO || is_mark(cp);
}

bool is_prefix(int32_t cp) {  // [^\r\n\p{L}\p{N}]
  return cp != '\r' && cp != '\n' && !is_letter(cp) && !is_number(cp);
}

bool is_other(int32_t cp) {  // [^\s\p{L}\p{N}]
  return !is_space(cp) && !is_letter(cp) && !is_number(cp);
}

struct Scanner {
  std::string_view t;
  size_t end;
  CodePoint at(size_t i) const { return code_point_at(t, i, end); }
  // End of the run of characters in set starting at i.
  size_t run(size_t i, bool (*set)(int32_t)) const {
    while (i < end) {
      CodePoint c = at(i);
      if (!set(c.cp)) break;
      i += c.len;
    }
    return i;
  }
  // Upper* Lower+ from j: the end of the match, or npos. Upper* takes its
  // whole run first; with no lower-case character after it, it gives back
  // characters until one it gave back is lower-case too (Lm, Lo, M).
  size_t upper_then_lower(size_t j) const {
    const size_t k = run(j, is_upperish);
    if (k < end && is_lowerish(at(k).cp)) return run(k, is_lowerish);
    size_t last = std::string_view::npos;  // the last lower-case character in [j, k)
    for (size_t p = j; p < k;) {
      CodePoint c = at(p);
      if (is_lowerish(c.cp)) last = p + c.len;
      p += c.len;
    }
    return last;
  }
  // Upper+ Lower* from j, or npos.
  size_t upper_then_maybe_lower(size_t j) const {
    const size_t k = run(j, is_upperish);
    if (k == j) return std::string_view::npos;
    return run(k, is_lowerish);
  }
};

}  // namespace

const char* const kTekkenPattern =
    "[^\\r\\n\\p{L}\\p{N}]?[\\p{Lu}\\p{Lt}\\p{Lm}\\p{Lo}\\p{M}]*[\\p{Ll}\\p{Lm}\\p{Lo}\\p{M}]+|"
    "[^\\r\\n\\p{L}\\p{N}]?[\\p{Lu}\\p{Lt}\\p{Lm}\\p{Lo}\\p{M}]+[\\p{Ll}\\p{Lm}\\p{Lo}\\p{M}]*|"
    "\\p{N}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n/]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+";

void split_tekken(std::string_view t, ByteRange r, std::vector<ByteRange>& out) {
  const Scanner s{t, r.second};
  constexpr size_t npos = std::string_view::npos;
  size_t i = r.first;
  while (i < s.end) {
    const CodePoint c = s.at(i);
    const bool prefix = is_prefix(c.cp);
    size_t j = npos;
    // The two word alternatives, each with its optional prefix taken first.
    if (prefix && i + c.len < s.end) j = s.upper_then_lower(i + c.len);
    if (j == npos) j = s.upper_then_lower(i);
    if (j == npos && prefix && i + c.len < s.end) j = s.upper_then_maybe_lower(i + c.len);
    if (j == npos) j = s.upper_then_maybe_lower(i);
    if (j == npos && is_number(c.cp)) j = i + c.len;  // \p{N}
    if (j == npos) {  //  ?[^\s\p{L}\p{N}]+[\r\n/]*
      size_t k = i;
      if (t[i] == ' ' && i + 1 < s.end && is_other(s.at(i + 1).cp)) k = i + 1;
      if (is_other(s.at(k).cp)) {
        k = s.run(k, is_other);
        while (k < s.end && (t[k] == '\r' || t[k] == '\n' || t[k] == '/')) ++k;
        j = k;
      }
    }
    if (j == npos) {  // whitespace: \s*[\r\n]+, else \s+(?!\S), else \s+
      size_t last = i, last_nl = npos, k = i;
      while (k < s.end) {
        CodePoint d = s.at(k);
        if (!is_space(d.cp)) break;
        if (d.cp == '\r' || d.cp == '\n') last_nl = k;
        last = k;
        k += d.len;
      }
      if (last_nl != npos) j = last_nl + 1;
      else if (k < s.end && last > i) j = last;
      else j = k > i ? k : i + c.len;
    }
    out.push_back({i, j});
    i = j;
  }
}

}  // namespace rlx
