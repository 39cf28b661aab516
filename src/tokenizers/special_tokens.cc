#include "tokenizers/special_tokens.h"

#include <algorithm>

namespace rlx {

void SpecialTokens::add(std::string text, int32_t id, bool control) {
  if (text.empty()) return;
  tokens_.push_back({std::move(text), id, control});
}

void SpecialTokens::finish() {
  std::stable_sort(tokens_.begin(), tokens_.end(),
                   [](const Token& a, const Token& b) { return a.text.size() > b.text.size(); });
  for (auto& b : by_first_byte_) b.clear();
  for (size_t i = 0; i < tokens_.size(); ++i)
    by_first_byte_[static_cast<unsigned char>(tokens_[i].text[0])].push_back(uint32_t(i));
}

std::pair<size_t, int32_t> SpecialTokens::longest_at(std::string_view text, size_t pos, bool parse_control) const {
  if (pos >= text.size()) return {0, -1};
  for (uint32_t i : by_first_byte_[static_cast<unsigned char>(text[pos])]) {
    const Token& t = tokens_[i];
    if (t.control && !parse_control) continue;
    if (text.compare(pos, t.text.size(), t.text) == 0) return {t.text.size(), t.id};
  }
  return {0, -1};
}

}  // namespace rlx
