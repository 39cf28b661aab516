// Hugging Face's longest_first truncation of a text pair to `room` tokens:
// the shorter side keeps what it has unless it is over half, the longer
// side gets the rest. Shared by every tokenizer that encodes pairs.
#pragma once
#include <cstdint>
#include <utility>
#include <vector>

namespace rlx {

// True when tokens were dropped.
inline bool cut_longest_first(std::vector<int32_t>& a, std::vector<int32_t>& b, size_t room) {
  if (a.size() + b.size() <= room) return false;
  size_t n1 = a.size(), n2 = b.size();
  const bool swap = n1 > n2;
  if (swap) std::swap(n1, n2);
  if (n1 > room / 2) {
    n1 = room / 2;
    n2 = n1 + room % 2;
  } else {
    n2 = room - n1;
  }
  if (swap) std::swap(n1, n2);
  a.resize(n1);
  b.resize(n2);
  return true;
}

}  // namespace rlx
