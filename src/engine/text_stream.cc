#include "engine/text_stream.h"

#include <algorithm>

#include "tokenizers/utf8.h"

namespace rlx {
namespace {

// Length of the longest prefix of s that does not end inside a UTF-8 sequence.
size_t complete_utf8(const std::string& s) {
  const size_t n = s.size();
  for (size_t back = 1; back <= 4 && back <= n; ++back) {
    const unsigned char c = static_cast<unsigned char>(s[n - back]);
    if ((c & 0xC0) == 0x80) continue;  // a continuation byte: look further back
    return utf8_sequence_length(c) > back ? n - back : n;
  }
  return n;
}

}  // namespace

TextStream::TextStream(std::vector<std::string> stop) : stop_(std::move(stop)) {
  stop_.erase(std::remove(stop_.begin(), stop_.end(), std::string()), stop_.end());
}

std::string TextStream::push(const std::string& bytes) {
  if (stopped_) return {};
  pending_ += bytes;
  // The earliest stop string in what is not yet shown ends the text there.
  size_t cut = std::string::npos;
  for (const std::string& s : stop_) cut = std::min(cut, pending_.find(s));
  if (cut != std::string::npos) {
    stopped_ = true;
    std::string out = pending_.substr(0, cut);
    pending_.clear();
    text_ += out;
    return out;
  }
  // Hold back a tail that could still grow into a stop string.
  size_t keep = 0;
  for (const std::string& s : stop_)
    for (size_t k = std::min(s.size() - 1, pending_.size()); k > keep; --k)
      if (pending_.compare(pending_.size() - k, k, s, 0, k) == 0) {
        keep = k;
        break;
      }
  const size_t n = complete_utf8(pending_.substr(0, pending_.size() - keep));
  std::string out = pending_.substr(0, n);
  pending_.erase(0, n);
  text_ += out;
  return out;
}

std::string TextStream::finish() {
  if (stopped_) return {};
  std::string out;
  out.swap(pending_);
  text_ += out;
  return out;
}

}  // namespace rlx
