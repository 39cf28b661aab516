// Turns the bytes of generated tokens into text pieces that are safe to
// show: whole UTF-8 characters only, and never the start of a stop string
// until it is known not to become one. A stop string found ends the text
// just before it.
#pragma once
#include <string>
#include <vector>

namespace rlx {

class TextStream {
 public:
  explicit TextStream(std::vector<std::string> stop = {});
  // Adds a token's bytes; returns the text now safe to emit.
  std::string push(const std::string& bytes);
  // The rest, once generation ends (an unfinished character included).
  std::string finish();
  bool stopped() const { return stopped_; }
  const std::string& text() const { return text_; }  // everything emitted so far

 private:
  std::vector<std::string> stop_;
  std::string pending_, text_;
  bool stopped_ = false;
};

}  // namespace rlx
