// Texts from the command line: positional arguments, then the lines of
// --file (or stdin), read a chunk at a time so memory does not grow with
// the file. One text per input line, blank lines included, so output row i
// is always input i; each text knows where it came from.
#pragma once
#include <cstddef>
#include <fstream>
#include <istream>
#include <string>
#include <vector>

class CliInputs {
 public:
  // `sentences` of "-" alone reads stdin; --file "-" reads stdin too.
  CliInputs(const std::vector<std::string>& sentences, const std::string& file);
  // The next texts (at most n) into `out`; false when there are none left.
  // A trailing "\r" (CRLF files) is dropped from each line.
  bool next(std::vector<std::string>& out, size_t n);
  // "argument 2", "line 290 of notes.txt": 1-based, as an editor counts.
  std::string where(size_t i) const;
  size_t read() const { return read_; }  // texts handed out so far

 private:
  std::vector<std::string> args_;
  std::string file_;  // "stdin" for -
  std::ifstream stream_;
  std::istream* in_ = nullptr;
  size_t read_ = 0;
};

// Every text at once, for commands that need them together (rerank).
std::vector<std::string> read_all_inputs(CliInputs& in);
