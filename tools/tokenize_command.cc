// `rlx tokenize`: the ids and pieces a model's tokenizer makes of a text, as
// llama.cpp's llama-tokenize prints them.
#include <fstream>
#include <iostream>
#include <iterator>

#include "rlx/error.h"
#include "tokenizers/tokenizer_files.h"
#include "tools/commands.h"

namespace {

// A piece printed between quotes: control bytes escaped so one token is one line.
std::string printable(const std::string& s) {
  std::string out;
  for (unsigned char c : s) {
    if (c == '\n') out += "\\n";
    else if (c == '\t') out += "\\t";
    else if (c == '\r') out += "\\r";
    else if (c == '\\') out += "\\\\";
    else if (c == '\'') out += "\\'";
    else if (c < 0x20 || c == 0x7F) {
      char buf[8];
      std::snprintf(buf, sizeof buf, "\\x%02x", c);
      out += buf;
    } else {
      out += char(c);
    }
  }
  return out;
}

}  // namespace

void add_tokenize_command(CLI::App& app) {
  auto* cmd = app.add_subcommand("tokenize", "Print the tokens a model's tokenizer makes of a text");
  struct Args {
    std::string model, text, file;
    bool ids = false, pieces = false, no_bos = false, parse_special = false;
  };
  auto a = std::make_shared<Args>();
  cmd->add_option("--model,-m", a->model, "a GGUF file (vocabulary-only ones too) or a Hugging Face directory")
      ->required();
  auto* text = cmd->add_option("text", a->text, "the text to tokenize");
  auto* file = cmd->add_option("--file,-f", a->file, "read the text from this file instead");
  text->excludes(file);
  auto* ids = cmd->add_flag("--ids", a->ids, "print only the ids, as a list: [1, 2, 3]");
  cmd->add_flag("--pieces", a->pieces, "print only the pieces, one per line")->excludes(ids);
  cmd->add_flag("--no-bos", a->no_bos, "add no BOS/EOS (or [CLS]/[SEP]) even where the vocabulary asks");
  cmd->add_flag("--parse-special", a->parse_special,
                "turn control-token text such as <|im_end|> into its token (off: tokenized as text)");
  cmd->callback([a, text, file] {
    RLX_CHECK(text->count() || file->count(), "tokenize: give the text, or --file");
    std::string input = a->text;
    if (file->count()) {
      std::ifstream in(a->file, std::ios::binary);
      RLX_CHECK(in, "tokenize: cannot read '" << a->file << "'");
      input.assign(std::istreambuf_iterator<char>(in), {});
    }
    auto tok = rlx::open_tokenizer(a->model);
    const std::vector<int32_t> got = tok->encode(input, {.add_special = !a->no_bos, .parse_special = a->parse_special});
    if (a->ids) {
      std::cout << "[";
      for (size_t i = 0; i < got.size(); ++i) std::cout << (i ? ", " : "") << got[i];
      std::cout << "]\n";
      return;
    }
    for (int32_t id : got) {
      const std::string piece = printable(tok->token_bytes(id));
      if (a->pieces) std::cout << "'" << piece << "'\n";
      else std::cout << id << " -> '" << piece << "'\n";
    }
  });
}
