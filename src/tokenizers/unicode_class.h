// Code points and the Unicode classes the pre-tokenizer regexes name
// (\p{L}, \p{M}, \p{N}, \p{P}, \s), read with utf8proc so the splitters
// need no regex engine. A byte that is not valid UTF-8 is one code point of
// its own (cp -1) in no class.
#pragma once
#include <cstddef>
#include <cstdint>
#include <string_view>

namespace rlx {

struct CodePoint {
  size_t len = 1;
  int32_t cp = -1;
};

// The code point starting at text[i], read no further than end.
CodePoint code_point_at(std::string_view text, size_t i, size_t end);

bool is_letter(int32_t cp);  // \p{L}
bool is_mark(int32_t cp);    // \p{M}
bool is_number(int32_t cp);  // \p{N}
bool is_punct(int32_t cp);   // \p{P}
bool is_space(int32_t cp);   // \s: Unicode White_Space

}  // namespace rlx
