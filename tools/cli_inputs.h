// Texts from the command line: positional arguments, then the lines of
// --file (or stdin). One text per input line, blank lines included, so
// output row i is always input i; each text knows where it came from.
#pragma once
#include <cstddef>
#include <string>
#include <vector>

struct CliInputs {
  std::vector<std::string> texts;
  size_t positional = 0;  // texts[0, positional) came from arguments
  std::string file;       // where the rest came from ("stdin" for -)
  // "argument 2", "line 290 of notes.txt": 1-based, as an editor counts.
  std::string where(size_t i) const;
};

// `sentences` of "-" alone reads stdin; --file "-" reads stdin too. A
// trailing "\r" (CRLF files) is dropped from each line.
CliInputs read_cli_inputs(const std::vector<std::string>& sentences, const std::string& file);
