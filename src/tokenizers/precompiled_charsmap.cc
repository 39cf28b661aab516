#include "tokenizers/precompiled_charsmap.h"

#include <utf8proc.h>

#include <cstring>

#include "rlx/error.h"
#include "tokenizers/unicode_class.h"

namespace rlx {
namespace {

// A Darts double-array unit: a label byte (bit 31 set on leaf units so no
// byte matches them), a has-leaf flag, an offset to the children and, on a
// leaf unit, the value in the low 31 bits.
bool has_leaf(uint32_t u) { return (u >> 8) & 1; }
uint32_t value(uint32_t u) { return u & 0x7fffffffu; }
uint32_t label(uint32_t u) { return u & (0x80000000u | 0xffu); }
size_t offset(uint32_t u) { return size_t(u >> 10) << ((u & (1u << 9)) >> 6); }

int base64_value(char c) {
  if (c >= 'A' && c <= 'Z') return c - 'A';
  if (c >= 'a' && c <= 'z') return c - 'a' + 26;
  if (c >= '0' && c <= '9') return c - '0' + 52;
  if (c == '+') return 62;
  if (c == '/') return 63;
  return -1;
}

}  // namespace

std::string base64_decode(std::string_view t, const std::string& where) {
  while (!t.empty() && t.back() == '=') t.remove_suffix(1);
  RLX_CHECK(t.size() % 4 != 1, where << "base64 text of " << t.size() << " characters is cut short");
  std::string out;
  out.reserve(t.size() / 4 * 3 + 2);
  uint32_t acc = 0;
  int bits = 0;
  for (size_t i = 0; i < t.size(); ++i) {
    const int v = base64_value(t[i]);
    RLX_CHECK(v >= 0, where << "byte " << i << " of the base64 text is not a base64 character");
    acc = (acc << 6) | uint32_t(v);
    bits += 6;
    if (bits >= 8) {
      bits -= 8;
      out += char((acc >> bits) & 0xff);
    }
  }
  return out;
}

PrecompiledCharsmap::PrecompiledCharsmap(std::string_view blob, const std::string& where) : where_(where) {
  RLX_CHECK(blob.size() >= 4, where << "precompiled_charsmap of " << blob.size() << " bytes has no trie size");
  uint32_t size = 0;
  for (int i = 3; i >= 0; --i) size = (size << 8) | static_cast<unsigned char>(blob[size_t(i)]);
  RLX_CHECK(size >= 4 && size % 4 == 0 && size <= blob.size() - 4,
            where << "precompiled_charsmap: a trie of " << size << " bytes does not fit in " << blob.size() - 4);
  units_.resize(size / 4);
  for (size_t i = 0; i < units_.size(); ++i) {
    const auto* p = reinterpret_cast<const unsigned char*>(blob.data() + 4 + 4 * i);
    units_[i] = uint32_t(p[0]) | uint32_t(p[1]) << 8 | uint32_t(p[2]) << 16 | uint32_t(p[3]) << 24;
  }
  strings_.assign(blob.substr(4 + size));
  // The replacements are text (`tokenizers` refuses a map whose are not).
  for (size_t i = 0; i < strings_.size();) {
    utf8proc_int32_t cp = -1;
    auto n = utf8proc_iterate(reinterpret_cast<const utf8proc_uint8_t*>(strings_.data() + i),
                              utf8proc_ssize_t(strings_.size() - i), &cp);
    RLX_CHECK(n > 0, where << "precompiled_charsmap: replacement byte " << i << " is not UTF-8");
    i += size_t(n);
  }
}

PrecompiledCharsmap PrecompiledCharsmap::from_base64(std::string_view text, const std::string& where) {
  return PrecompiledCharsmap(base64_decode(text, where + "precompiled_charsmap: "), where);
}

std::optional<std::string_view> PrecompiledCharsmap::transform(std::string_view chunk) const {
  size_t node = offset(units_[0]);
  for (char ch : chunk) {
    const auto c = static_cast<unsigned char>(ch);
    if (c == 0) break;
    node ^= c;
    if (node >= units_.size() || label(units_[node]) != c) return std::nullopt;
    const uint32_t unit = units_[node];
    node ^= offset(unit);
    if (!has_leaf(unit)) continue;
    // The first key found is the shortest: `tokenizers` takes it.
    RLX_CHECK(node < units_.size(), where_ << "precompiled_charsmap: a leaf points outside the trie");
    const size_t begin = value(units_[node]);
    RLX_CHECK(begin <= strings_.size(), where_ << "precompiled_charsmap: a replacement at byte " << begin
                                               << " lies past the " << strings_.size() << " bytes of text");
    const size_t end = std::min(strings_.find('\0', begin), strings_.size());
    return std::string_view(strings_).substr(begin, end - begin);
  }
  return std::nullopt;
}

std::string PrecompiledCharsmap::normalize(std::string_view text) const {
  std::string out;
  out.reserve(text.size());
  auto one_by_one = [&](std::string_view g) {
    for (size_t i = 0; i < g.size();) {
      const size_t n = code_point_at(g, i, g.size()).len;
      const std::string_view c = g.substr(i, n);
      const auto t = transform(c);
      out += t ? *t : c;
      i += n;
    }
  };
  // Extended grapheme clusters, as Rust's unicode-segmentation cuts them; a
  // byte that is not UTF-8 stands alone.
  utf8proc_int32_t state = 0, prev = -1;
  size_t start = 0;
  auto cluster = [&](size_t end) {
    if (end == start) return;
    const std::string_view g = text.substr(start, end - start);
    const auto t = g.size() < 6 ? transform(g) : std::nullopt;
    if (t) out += *t;
    else one_by_one(g);
    start = end;
  };
  for (size_t i = 0; i < text.size();) {
    const CodePoint c = code_point_at(text, i, text.size());
    if (c.cp < 0) {
      cluster(i);
      cluster(i + c.len);
      prev = -1;
      state = 0;
    } else {
      if (prev >= 0 && utf8proc_grapheme_break_stateful(prev, c.cp, &state)) cluster(i);
      prev = c.cp;
    }
    i += c.len;
  }
  cluster(text.size());
  return out;
}

}  // namespace rlx
