// Added/special tokens matched in raw text: a trie over code points, so
// finding the longest token at a position costs at most the longest token's
// length, and a scan of the whole text is linear in the text.
#pragma once
#include <cstdint>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

namespace rlx {

class TokenTrie {
 public:
  TokenTrie();
  // Adds a non-empty token; a token added twice keeps its first id.
  void add(std::u32string_view token, int32_t id);
  // The longest token starting at text[pos]: {length, id}, or {0, -1}.
  std::pair<size_t, int32_t> longest_at(std::u32string_view text, size_t pos) const;
  bool empty() const { return id_.size() == 1; }

 private:
  static uint64_t key(uint32_t node, char32_t c) { return uint64_t(node) << 32 | uint32_t(c); }
  std::unordered_map<uint64_t, uint32_t> next_;  // (node, code point) -> child node
  std::vector<int32_t> id_;                      // per node: the token ending there, or -1
};

}  // namespace rlx
