#include <algorithm>
#include <iterator>

#include "tokenizers/pre_tokenizers.h"
#include "tokenizers/unicode_class.h"

namespace rlx {
namespace {

struct Range {
  int32_t lo, hi;
};

template <size_t N>
bool in_ranges(const Range (&r)[N], int32_t cp) {
  // The tables are sorted by lo and do not overlap.
  auto it = std::upper_bound(std::begin(r), std::end(r), cp, [](int32_t c, const Range& x) { return c < x.lo; });
  return it != std::begin(r) && cp <= std::prev(it)->hi;
}

bool is_cr_or_lf(int32_t cp) { return cp == '\r' || cp == '\n'; }

// The letters of DeepSeek LLM's second regex, as its tokenizer.json lists them.
const Range kDeepseekLetters[] = {
    {0x41, 0x5A}, {0x61, 0x7A}, {0xB5, 0xB5}, {0xC0, 0xD6}, {0xD8, 0xF6}, {0xF8, 0x1BA}, {0x1BC, 0x1BF},
    {0x1C4, 0x293}, {0x295, 0x2AF}, {0x370, 0x373}, {0x376, 0x377}, {0x37B, 0x37D}, {0x37F, 0x37F},
    {0x386, 0x386}, {0x388, 0x38A}, {0x38C, 0x38C}, {0x38E, 0x3A1}, {0x3A3, 0x3F5}, {0x3F7, 0x481},
    {0x48A, 0x52F}, {0x531, 0x556}, {0x10A0, 0x10C5}, {0x13A0, 0x13F5}, {0x13F8, 0x13FD}, {0x1C90, 0x1CBA},
    {0x1CBD, 0x1CBF}, {0x1D00, 0x1D2B}, {0x1D6B, 0x1D77}, {0x1D79, 0x1D9A}, {0x1E00, 0x1F15}, {0x1F18, 0x1F1D},
    {0x1F20, 0x1F45}, {0x1F48, 0x1F4D}, {0x1F50, 0x1F57}, {0x1F59, 0x1F59}, {0x1F5B, 0x1F5B}, {0x1F5D, 0x1F5D},
    {0x1F5F, 0x1F7D}, {0x1F80, 0x1FB4}, {0x1FB6, 0x1FBC}, {0x1FBE, 0x1FBE}, {0x1FC2, 0x1FC4}, {0x1FC6, 0x1FCC},
    {0x1FD0, 0x1FD3}, {0x1FD6, 0x1FDB}, {0x1FE0, 0x1FEC}, {0x1FF2, 0x1FF4}, {0x1FF6, 0x1FFC}, {0x2102, 0x2102},
    {0x2107, 0x2107}, {0x210A, 0x2113}, {0x2115, 0x2115}, {0x2119, 0x211D}, {0x2124, 0x2124}, {0x2126, 0x2126},
    {0x2128, 0x2128}, {0x212A, 0x212D}, {0x212F, 0x2134}, {0x2139, 0x2139}, {0x213C, 0x213F}, {0x2145, 0x2149},
    {0x214E, 0x214E}, {0x2183, 0x2184}, {0x2C00, 0x2C7B}, {0x2C7E, 0x2CE4}, {0x2CEB, 0x2CEE}, {0x2CF2, 0x2CF3},
    {0xA640, 0xA66D}, {0xA680, 0xA69B}, {0xA722, 0xA76F}, {0xA771, 0xA787}, {0xA78B, 0xA78E}, {0xAB70, 0xABBF},
    {0xFB00, 0xFB06}, {0xFB13, 0xFB17}, {0xFF21, 0xFF3A}, {0xFF41, 0xFF5A}, {0x10400, 0x1044F},
    {0x104B0, 0x104D3}, {0x104D8, 0x104FB}, {0x10C80, 0x10CB2}, {0x10CC0, 0x10CF2}, {0x118A0, 0x118DF},
    {0x1E900, 0x1E943},
};
bool is_deepseek_letter(int32_t cp) { return in_ranges(kDeepseekLetters, cp); }

// [!-/:-~！-／：-～‘-‟　-。]: ASCII punctuation and what lies between (the
// range :-~ holds the ASCII letters too), full-width forms, quotes, CJK stops.
const Range kDeepseekPunct[] = {{0x21, 0x2F},     {0x3A, 0x7E},     {0x2018, 0x201F},
                                {0x3000, 0x3002}, {0xFF01, 0xFF0F}, {0xFF1A, 0xFF5E}};
bool is_deepseek_punct(int32_t cp) { return in_ranges(kDeepseekPunct, cp); }

// [一-龥ࠀ-一가-퟿]
const Range kDeepseekCjk[] = {{0x0800, 0x9FA5}, {0xAC00, 0xD7FF}};
bool is_deepseek_cjk(int32_t cp) { return in_ranges(kDeepseekCjk, cp); }

// Applies the steps in order, each to every piece the last one left.
void run_steps(std::string_view t, ByteRange r, std::vector<ByteRange>& out,
               std::initializer_list<RunRule> steps, bool trailing_space_after_second) {
  std::vector<ByteRange> cur{r}, next;
  size_t k = 0;
  for (const RunRule& s : steps) {
    next.clear();
    split_isolated(t, cur, s, next);
    cur.swap(next);
    if (++k == 3 && trailing_space_after_second) {
      next.clear();
      split_trailing_space(t, cur, next);
      cur.swap(next);
    }
  }
  out.insert(out.end(), cur.begin(), cur.end());
}

}  // namespace

void split_deepseek_llm(std::string_view t, ByteRange r, std::vector<ByteRange>& out) {
  run_steps(t, r, out,
            {{is_cr_or_lf, false, 1, 1},
             {is_deepseek_letter, true},
             {is_deepseek_punct, true},
             // \s+$ comes here
             {is_deepseek_cjk},
             {is_number}},
            true);
}

void split_deepseek_coder(std::string_view t, ByteRange r, std::vector<ByteRange>& out) {
  run_steps(t, r, out,
            {{is_cr_or_lf, false, 1, 1}, {is_letter, true}, {is_punct, true}, {is_deepseek_cjk}, {is_number, false, 1, 1}},
            false);
}

}  // namespace rlx
