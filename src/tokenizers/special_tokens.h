// Control and added tokens matched verbatim in raw text, before any
// pre-tokenizer sees it. At each position the longest token starting there
// wins; control tokens take part only when the caller asks to parse them,
// user-defined ones always (as llama.cpp and Hugging Face's `tokenizers` split
// added non-special tokens out of any text).
#pragma once
#include <array>
#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace rlx {

class SpecialTokens {
 public:
  // Empty texts are ignored. Call finish() after the last add().
  void add(std::string text, int32_t id, bool control);
  void finish();
  // The longest token starting at text[pos]: {length, id}, or {0, -1}.
  std::pair<size_t, int32_t> longest_at(std::string_view text, size_t pos, bool parse_control) const;
  bool empty() const { return tokens_.empty(); }
  // The tokens found in text, in order, into out; plain(run) encodes each
  // run of text between them (into out too).
  template <class Plain>
  void split(std::string_view text, bool parse_control, Plain&& plain, std::vector<int32_t>& out) const {
    size_t start = 0, i = 0;
    while (i < text.size()) {
      auto [len, id] = longest_at(text, i, parse_control);
      if (len == 0) {
        ++i;
        continue;
      }
      plain(text.substr(start, i - start));
      out.push_back(id);
      i += len;
      start = i;
    }
    plain(text.substr(start));
  }

 private:
  struct Token {
    std::string text;
    int32_t id;
    bool control;
  };
  std::vector<Token> tokens_;                             // longest first, then in the order added
  std::array<std::vector<uint32_t>, 256> by_first_byte_;  // indices into tokens_, same order
};

}  // namespace rlx
