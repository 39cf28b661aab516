#include "tools/cli_inputs.h"

#include <iostream>

#include "rlx/error.h"

CliInputs::CliInputs(const std::vector<std::string>& sentences, const std::string& file) {
  if (file.empty() && sentences.size() == 1 && sentences[0] == "-") {
    file_ = "stdin";
    in_ = &std::cin;
    return;
  }
  args_ = sentences;
  if (file == "-") {
    file_ = "stdin";
    in_ = &std::cin;
  } else if (!file.empty()) {
    stream_.open(file, std::ios::binary);
    RLX_CHECK(stream_, "cannot open --file '" << file << "'");
    file_ = file;
    in_ = &stream_;
  }
}

bool CliInputs::next(std::vector<std::string>& out, size_t n) {
  out.clear();
  while (out.size() < n && read_ < args_.size()) out.push_back(args_[read_++]);
  std::string line;
  while (out.size() < n && in_ && std::getline(*in_, line)) {
    if (!line.empty() && line.back() == '\r') line.pop_back();
    out.push_back(std::move(line));  // blank lines too: one row per line
    ++read_;
  }
  return !out.empty();
}

std::string CliInputs::where(size_t i) const {
  if (i < args_.size()) return "argument " + std::to_string(i + 1);
  return "line " + std::to_string(i - args_.size() + 1) + " of " + file_;
}

std::vector<std::string> read_all_inputs(CliInputs& in) {
  std::vector<std::string> all, part;
  while (in.next(part, 4096)) all.insert(all.end(), part.begin(), part.end());
  return all;
}
