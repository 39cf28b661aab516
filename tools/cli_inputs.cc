#include "tools/cli_inputs.h"

#include <fstream>
#include <iostream>

#include "rlx/error.h"

namespace {

void read_lines(std::istream& in, std::vector<std::string>& out) {
  std::string line;
  while (std::getline(in, line)) {
    if (!line.empty() && line.back() == '\r') line.pop_back();
    out.push_back(line);  // blank lines too: one row per line
  }
}

}  // namespace

std::string CliInputs::where(size_t i) const {
  if (i < positional) return "argument " + std::to_string(i + 1);
  return "line " + std::to_string(i - positional + 1) + " of " + file;
}

CliInputs read_cli_inputs(const std::vector<std::string>& sentences, const std::string& file) {
  CliInputs in;
  if (file.empty() && sentences.size() == 1 && sentences[0] == "-") {
    in.file = "stdin";
    read_lines(std::cin, in.texts);
    return in;
  }
  in.texts = sentences;
  in.positional = sentences.size();
  if (file == "-") {
    in.file = "stdin";
    read_lines(std::cin, in.texts);
  } else if (!file.empty()) {
    std::ifstream f(file, std::ios::binary);
    RLX_CHECK(f, "cannot open --file '" << file << "'");
    in.file = file;
    read_lines(f, in.texts);
  }
  return in;
}
