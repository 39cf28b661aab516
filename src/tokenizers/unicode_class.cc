#include "tokenizers/unicode_class.h"

#include <utf8proc.h>

namespace rlx {

CodePoint code_point_at(std::string_view t, size_t i, size_t end) {
  CodePoint c;
  utf8proc_int32_t cp = -1;
  auto n = utf8proc_iterate(reinterpret_cast<const utf8proc_uint8_t*>(t.data() + i), utf8proc_ssize_t(end - i), &cp);
  if (n > 0) {
    c.len = size_t(n);
    c.cp = cp;
  }
  return c;
}

static utf8proc_category_t category(int32_t cp) {
  return cp < 0 ? UTF8PROC_CATEGORY_CN : utf8proc_category(cp);
}

bool is_letter(int32_t cp) {
  switch (category(cp)) {
    case UTF8PROC_CATEGORY_LU: case UTF8PROC_CATEGORY_LL: case UTF8PROC_CATEGORY_LT:
    case UTF8PROC_CATEGORY_LM: case UTF8PROC_CATEGORY_LO:
      return true;
    default:
      return false;
  }
}

bool is_mark(int32_t cp) {
  auto c = category(cp);
  return c == UTF8PROC_CATEGORY_MN || c == UTF8PROC_CATEGORY_MC || c == UTF8PROC_CATEGORY_ME;
}

bool is_number(int32_t cp) {
  auto c = category(cp);
  return c == UTF8PROC_CATEGORY_ND || c == UTF8PROC_CATEGORY_NL || c == UTF8PROC_CATEGORY_NO;
}

bool is_punct(int32_t cp) {
  switch (category(cp)) {
    case UTF8PROC_CATEGORY_PC: case UTF8PROC_CATEGORY_PD: case UTF8PROC_CATEGORY_PS: case UTF8PROC_CATEGORY_PE:
    case UTF8PROC_CATEGORY_PI: case UTF8PROC_CATEGORY_PF: case UTF8PROC_CATEGORY_PO:
      return true;
    default:
      return false;
  }
}

bool is_space(int32_t cp) {
  if ((cp >= 9 && cp <= 13) || cp == 0x85) return true;
  auto c = category(cp);
  return c == UTF8PROC_CATEGORY_ZS || c == UTF8PROC_CATEGORY_ZL || c == UTF8PROC_CATEGORY_ZP;
}

}  // namespace rlx
