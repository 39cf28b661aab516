#include "tokenizers/pre_tokenizers.h"
#include "tokenizers/unicode_class.h"

namespace rlx {

std::vector<ByteRange> pre_tokenize(std::string_view text, BpeSplit how, bool digits) {
  std::vector<ByteRange> pieces, split;
  if (digits) split_digits(text, {0, text.size()}, pieces);
  else pieces.push_back({0, text.size()});
  if (how == BpeSplit::None) return pieces;
  for (auto r : pieces) {
    switch (how) {
      case BpeSplit::Gpt2: split_gpt2(text, r, split); break;
      case BpeSplit::Llama3: split_llama3(text, r, split, 3); break;
      case BpeSplit::Qwen2: split_llama3(text, r, split, 1); break;
      case BpeSplit::Qwen35: split_llama3(text, r, split, 1, true); break;
      case BpeSplit::DeepseekLlm: split_deepseek_llm(text, r, split); break;
      case BpeSplit::DeepseekCoder: split_deepseek_coder(text, r, split); break;
      case BpeSplit::Falcon: split_falcon(text, r, split); break;
      case BpeSplit::Tekken: split_tekken(text, r, split); break;
      case BpeSplit::None: break;
    }
  }
  return split;
}

void split_isolated(std::string_view t, const std::vector<ByteRange>& in, const RunRule& rule,
                    std::vector<ByteRange>& out) {
  for (auto [b, e] : in) {
    size_t piece = b, p = b;
    while (p < e) {
      CodePoint c = code_point_at(t, p, e);
      // Leftmost match, the regex's way: \s? takes the space when a run follows it.
      size_t run = SIZE_MAX;
      if (rule.space_prefix && is_space(c.cp) && p + c.len < e && rule.set(code_point_at(t, p + c.len, e).cp))
        run = p + c.len;
      else if (rule.set(c.cp))
        run = p;
      if (run != SIZE_MAX) {
        size_t j = run, n = 0;
        while (j < e && n < rule.max_chars) {
          CodePoint d = code_point_at(t, j, e);
          if (!rule.set(d.cp)) break;
          j += d.len;
          ++n;
        }
        if (n >= rule.min_chars) {
          if (piece < p) out.push_back({piece, p});
          out.push_back({p, j});
          p = piece = j;
          continue;
        }
      }
      p += c.len;
    }
    if (piece < e) out.push_back({piece, e});
  }
}

void split_trailing_space(std::string_view t, const std::vector<ByteRange>& in, std::vector<ByteRange>& out) {
  for (auto [b, e] : in) {
    size_t tail = e;  // start of the trailing whitespace run
    for (size_t p = b; p < e;) {
      CodePoint c = code_point_at(t, p, e);
      if (!is_space(c.cp)) tail = e;
      else if (tail == e) tail = p;
      p += c.len;
    }
    if (b < tail) out.push_back({b, tail});
    if (tail < e) out.push_back({tail, e});
  }
}

}  // namespace rlx
