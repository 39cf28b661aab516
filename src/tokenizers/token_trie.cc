#include "tokenizers/token_trie.h"

namespace rlx {

TokenTrie::TokenTrie() : id_(1, -1) {}

void TokenTrie::add(std::u32string_view token, int32_t id) {
  if (token.empty()) return;
  uint32_t node = 0;
  for (char32_t c : token) {
    auto [it, fresh] = next_.try_emplace(key(node, c), uint32_t(id_.size()));
    if (fresh) id_.push_back(-1);
    node = it->second;
  }
  if (id_[node] < 0) id_[node] = id;
}

std::pair<size_t, int32_t> TokenTrie::longest_at(std::u32string_view text, size_t pos) const {
  std::pair<size_t, int32_t> best{0, -1};
  uint32_t node = 0;
  for (size_t i = pos; i < text.size(); ++i) {
    auto it = next_.find(key(node, text[i]));
    if (it == next_.end()) break;
    node = it->second;
    if (id_[node] >= 0) best = {i - pos + 1, id_[node]};
  }
  return best;
}

}  // namespace rlx
