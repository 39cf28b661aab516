// The merge loop byte-level BPE and SentencePiece-BPE share: a text split
// into its characters, then the adjacent pair with the best key merged again
// and again (the lowest key first, the leftmost pair among equal keys) until
// no pair has a key. Symbols are a doubly linked list over the text and the
// candidate pairs a priority queue keyed by (key, left position); a merge
// leaves the queue's entries for its old neighbours in place and they are
// skipped when they surface, so n characters cost O(n log n), not the O(n^2)
// of rescanning every pair after each merge.
#pragma once
#include <algorithm>
#include <cstddef>
#include <optional>
#include <cstdint>
#include <queue>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "tokenizers/utf8.h"

namespace rlx {

// key(left, right) -> std::optional<Key>: the priority of merging the two
// adjacent symbols (lower merges first), or nullopt when they do not merge.
// Returns the final symbols, in order, as views into text.
template <class Key, class KeyFn>
std::vector<std::string_view> merge_symbols(std::string_view text, KeyFn&& key) {
  constexpr size_t kNone = size_t(-1);
  struct Sym {
    size_t begin, len, prev, next;
  };
  std::vector<Sym> sym;
  for (size_t i = 0; i < text.size();) {
    const size_t n = std::min(utf8_sequence_length(static_cast<unsigned char>(text[i])), text.size() - i);
    sym.push_back({i, n, sym.empty() ? kNone : sym.size() - 1, sym.size() + 1});
    i += n;
  }
  if (sym.empty()) return {};
  sym.back().next = kNone;

  struct Pair {
    Key key;
    size_t left, right, len;  // len: the two symbols' bytes when the pair was queued
  };
  // std::priority_queue pops the greatest: "greater" is the lower key, then the leftmost.
  auto after = [](const Pair& a, const Pair& b) {
    if (b.key < a.key) return true;
    if (a.key < b.key) return false;
    return a.left > b.left;
  };
  std::priority_queue<Pair, std::vector<Pair>, decltype(after)> queue(after);
  auto view = [&](size_t i) { return text.substr(sym[i].begin, sym[i].len); };
  auto offer = [&](size_t l, size_t r) {
    if (l == kNone || r == kNone) return;
    if (std::optional<Key> k = key(view(l), view(r))) queue.push({*k, l, r, sym[l].len + sym[r].len});
  };
  for (size_t i = 0; i + 1 < sym.size(); ++i) offer(i, i + 1);

  while (!queue.empty()) {
    const Pair p = queue.top();
    queue.pop();
    Sym& l = sym[p.left];
    Sym& r = sym[p.right];
    // Stale: a side was merged away, or grew (then the pair's text changed).
    // A live left symbol whose next is still `right` can only have grown by
    // absorbing `right`, so the byte count tells both cases apart.
    if (l.len == 0 || r.len == 0 || l.next != p.right || l.len + r.len != p.len) continue;
    l.len += r.len;
    r.len = 0;
    l.next = r.next;
    if (r.next != kNone) sym[r.next].prev = p.left;
    offer(l.prev, p.left);
    offer(p.left, l.next);
  }
  std::vector<std::string_view> out;
  for (size_t i = 0; i != kNone; i = sym[i].next) out.push_back(view(i));
  return out;
}

// The key merge_symbols takes from a merge table keyed by left + '\xff' +
// right (a byte UTF-8 never holds): the pair's rank, or nullopt. Holds a
// reference to the table and one key buffer reused for every lookup.
inline auto merge_rank_of(const std::unordered_map<std::string, int32_t>& ranks) {
  return [&ranks, key = std::string()](std::string_view l, std::string_view r) mutable -> std::optional<int32_t> {
    key.assign(l).append(1, '\xff').append(r);
    const auto it = ranks.find(key);
    if (it == ranks.end()) return std::nullopt;
    return it->second;
  };
}

}  // namespace rlx
