#include "tokenizers/byte_level.h"

#include "tokenizers/unicode_class.h"

#include <utf8proc.h>

#include <array>
#include <cstdint>
#include <unordered_map>

namespace rlx {
namespace {

enum class Cls { Letter, Number, Space, Other };

struct Char {
  size_t len = 1;
  int32_t cp = -1;  // -1: a byte that is not valid UTF-8
  Cls cls = Cls::Other;
};

Cls classify(int32_t cp) {
  if (cp < 0) return Cls::Other;
  if ((cp >= 9 && cp <= 13) || cp == 0x85) return Cls::Space;
  switch (utf8proc_category(cp)) {
    case UTF8PROC_CATEGORY_LU: case UTF8PROC_CATEGORY_LL: case UTF8PROC_CATEGORY_LT:
    case UTF8PROC_CATEGORY_LM: case UTF8PROC_CATEGORY_LO:
      return Cls::Letter;
    case UTF8PROC_CATEGORY_ND: case UTF8PROC_CATEGORY_NL: case UTF8PROC_CATEGORY_NO:
      return Cls::Number;
    case UTF8PROC_CATEGORY_ZS: case UTF8PROC_CATEGORY_ZL: case UTF8PROC_CATEGORY_ZP:
      return Cls::Space;
    default:
      return Cls::Other;
  }
}

// marks_are_letters: \p{M} joins \p{L} (Qwen3.5's [\p{L}\p{M}]+) instead of
// being "other".
Char char_at(std::string_view t, size_t i, size_t end, bool marks_are_letters = false) {
  Char c;
  utf8proc_int32_t cp = -1;
  auto n = utf8proc_iterate(reinterpret_cast<const utf8proc_uint8_t*>(t.data() + i),
                            utf8proc_ssize_t(end - i), &cp);
  if (n > 0) {
    c.len = size_t(n);
    c.cp = cp;
  }
  c.cls = classify(c.cp);
  if (marks_are_letters && c.cls == Cls::Other && is_mark(c.cp)) c.cls = Cls::Letter;
  return c;
}

// The contraction ('s 't 're 've 'm 'll 'd) starting at i, or 0.
size_t contraction(std::string_view t, size_t i, size_t end) {
  if (t[i] != '\'') return 0;
  for (std::string_view s : {"s", "t", "re", "ve", "m", "ll", "d"})
    if (end - i - 1 >= s.size() && t.substr(i + 1, s.size()) == s) return 1 + s.size();
  return 0;
}

struct ByteMap {
  std::array<std::string, 256> to_unicode;
  std::unordered_map<int32_t, uint8_t> to_byte;
  ByteMap() {
    int n = 0;
    for (int b = 0; b < 256; ++b) {
      const bool printable = (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE);
      const int32_t cp = printable ? b : 256 + n++;
      utf8proc_uint8_t buf[4];
      auto len = utf8proc_encode_char(cp, buf);
      to_unicode[size_t(b)] = std::string(reinterpret_cast<char*>(buf), size_t(len));
      to_byte[cp] = uint8_t(b);
    }
  }
};

const ByteMap& byte_map() {
  static const ByteMap m;
  return m;
}

}  // namespace

void split_gpt2(std::string_view t, ByteRange r, std::vector<ByteRange>& out) {
  const size_t end = r.second;
  size_t i = r.first;
  // Extends from j over characters of class c; returns the end.
  auto run = [&](size_t j, Cls c) {
    while (j < end) {
      Char ch = char_at(t, j, end);
      if (ch.cls != c) break;
      j += ch.len;
    }
    return j;
  };
  while (i < end) {
    if (size_t n = contraction(t, i, end)) {
      out.push_back({i, i + n});
      i += n;
      continue;
    }
    Char c = char_at(t, i, end);
    // " ?X+" for X in letters, numbers, others: an optional leading space.
    Cls body = c.cls;
    size_t start = i, j = i;
    if (t[i] == ' ' && i + 1 < end) {
      Char next = char_at(t, i + 1, end);
      if (next.cls != Cls::Space) {
        body = next.cls;
        j = i + 1;
      }
    }
    if (body != Cls::Space) {
      j = run(j, body);
      out.push_back({start, j});
      i = j;
      continue;
    }
    // \s+(?!\S) | \s+ : a whitespace run leaves its last character to the
    // next piece when a non-space follows and the run is longer than one.
    size_t last = i;
    j = i;
    while (j < end) {
      Char ch = char_at(t, j, end);
      if (ch.cls != Cls::Space) break;
      last = j;
      j += ch.len;
    }
    if (j < end && last > i) j = last;
    out.push_back({i, j});
    i = j;
  }
}

const char* const kLlama3Pattern =
    "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}{1,3}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|"
    "\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+";

const char* const kQwen35Pattern =
    "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?[\\p{L}\\p{M}]+|\\p{N}| ?[^\\s\\p{L}\\p{M}\\p{N}]+[\\r\\n]*|"
    "\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+";

const char* const kQwen2Pattern =
    "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|"
    "\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+";

void split_llama3(std::string_view t, ByteRange r, std::vector<ByteRange>& out, size_t max_digits,
                  bool marks_are_letters) {
  auto char_at = [marks_are_letters](std::string_view s, size_t i, size_t e) {
    return rlx::char_at(s, i, e, marks_are_letters);
  };
  const size_t end = r.second;
  auto is_nl = [](int32_t cp) { return cp == '\r' || cp == '\n'; };
  auto run = [&](size_t j, Cls c, size_t max_chars) {
    for (size_t n = 0; j < end && n < max_chars; ++n) {
      Char ch = char_at(t, j, end);
      if (ch.cls != c) break;
      j += ch.len;
    }
    return j;
  };
  size_t i = r.first;
  while (i < end) {
    // (?i:'s|'t|'re|'ve|'m|'ll|'d)
    if (t[i] == '\'') {
      size_t n = 0;
      for (std::string_view s : {"s", "t", "re", "ve", "m", "ll", "d"}) {
        if (end - i - 1 < s.size()) continue;
        bool eq = true;
        for (size_t k = 0; k < s.size(); ++k) eq = eq && (t[i + 1 + k] | 0x20) == s[k];
        if (eq) {
          n = 1 + s.size();
          break;
        }
      }
      if (n) {
        out.push_back({i, i + n});
        i += n;
        continue;
      }
    }
    Char c = char_at(t, i, end);
    // [^\r\n\p{L}\p{N}]?\p{L}+
    if (c.cls == Cls::Letter) {
      size_t j = run(i, Cls::Letter, SIZE_MAX);
      out.push_back({i, j});
      i = j;
      continue;
    }
    if (c.cls != Cls::Number && !is_nl(c.cp) && i + c.len < end && char_at(t, i + c.len, end).cls == Cls::Letter) {
      size_t j = run(i + c.len, Cls::Letter, SIZE_MAX);
      out.push_back({i, j});
      i = j;
      continue;
    }
    // \p{N}{1,3} (Qwen2: \p{N})
    if (c.cls == Cls::Number) {
      size_t j = run(i, Cls::Number, max_digits);
      out.push_back({i, j});
      i = j;
      continue;
    }
    //  ?[^\s\p{L}\p{N}]+[\r\n]*
    size_t start = i, j = i;
    if (t[i] == ' ' && i + 1 < end && char_at(t, i + 1, end).cls == Cls::Other) j = i + 1;
    if (char_at(t, j, end).cls == Cls::Other && (j > i || c.cls == Cls::Other)) {
      j = run(j, Cls::Other, SIZE_MAX);
      while (j < end && (t[j] == '\r' || t[j] == '\n')) ++j;
      out.push_back({start, j});
      i = j;
      continue;
    }
    // Whitespace: \s*[\r\n]+ up to the run's last newline, else as in GPT-2.
    size_t last = i, last_nl = SIZE_MAX;
    j = i;
    while (j < end) {
      Char ch = char_at(t, j, end);
      if (ch.cls != Cls::Space) break;
      if (is_nl(ch.cp)) last_nl = j;
      last = j;
      j += ch.len;
    }
    if (last_nl != SIZE_MAX) {
      j = last_nl + 1;
    } else if (j < end && last > i) {
      j = last;
    }
    out.push_back({i, j});
    i = j;
  }
}

void split_digits(std::string_view t, ByteRange r, std::vector<ByteRange>& out) {
  size_t piece = r.first, i = r.first;
  while (i < r.second) {
    Char c = char_at(t, i, r.second);
    if (c.cls == Cls::Number) {
      if (piece < i) out.push_back({piece, i});
      out.push_back({i, i + c.len});
      piece = i + c.len;
    }
    i += c.len;
  }
  if (piece < r.second) out.push_back({piece, r.second});
}

const std::string& byte_to_unicode(uint8_t b) { return byte_map().to_unicode[b]; }

bool unicode_to_bytes(std::string_view token, std::string& out) {
  const auto& m = byte_map().to_byte;
  bool ok = true;
  size_t i = 0;
  while (i < token.size()) {
    Char c = char_at(token, i, token.size());
    auto it = c.cp >= 0 ? m.find(c.cp) : m.end();
    if (it != m.end()) out.push_back(char(it->second));
    else ok = false;
    i += c.len;
  }
  return ok;
}

}  // namespace rlx
