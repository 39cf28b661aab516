#include "tokenizers/tokenizer_files.h"

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "models/gguf.h"
#include "rlx/error.h"
#include "tokenizers/bpe.h"
#include "tokenizers/spm.h"
#include "tokenizers/spm_json.h"
#include "tokenizers/unigram.h"
#include "tokenizers/wordpiece_text.h"

namespace rlx {

std::unique_ptr<TextTokenizer> tokenizer_from_gguf(const GgufFile& f) {
  RLX_CHECK(f.has("tokenizer.ggml.model"), "tokenizer: '" << f.path() << "' has no tokenizer.ggml.model");
  const std::string model = f.get_string("tokenizer.ggml.model");
  if (model == "llama") return std::make_unique<SpmTokenizer>(SpmTokenizer::from_gguf(f));
  if (model == "gpt2" || model == "gemma4") return std::make_unique<BpeTokenizer>(BpeTokenizer::from_gguf(f));
  if (model == "bert") return std::make_unique<WordPieceText>(WordPieceText::from_gguf(f));
  RLX_FAIL("tokenizer: '" << f.path() << "': tokenizer.ggml.model is '" << model
                          << "', not supported (llama, gpt2, gemma4 and bert are)");
}

std::unique_ptr<TextTokenizer> open_tokenizer(const std::string& path) {
  namespace fs = std::filesystem;
  if (!fs::is_directory(path)) {
    RLX_CHECK(fs::is_regular_file(path), "tokenizer: '" << path << "' is neither a GGUF file nor a directory");
    GgufFile f(path);
    return tokenizer_from_gguf(f);
  }
  const fs::path json = fs::path(path) / "tokenizer.json";
  if (fs::exists(json)) {
    std::ifstream in(json);
    nlohmann::json j;
    try {
      j = nlohmann::json::parse(in);
    } catch (const nlohmann::json::exception& e) {
      RLX_FAIL("tokenizer: '" << json.string() << "' is not valid JSON: " << e.what());
    }
    const std::string type =
        j.contains("model") && j["model"].is_object() ? j["model"].value("type", std::string()) : std::string();
    if (type == "BPE" && SpmJsonTokenizer::is_spm_style(json.string()))
      return std::make_unique<SpmJsonTokenizer>(SpmJsonTokenizer::from_tokenizer_json(json.string()));
    if (type == "BPE") return std::make_unique<BpeTokenizer>(BpeTokenizer::from_tokenizer_json(json.string()));
    if (type == "WordPiece") return std::make_unique<WordPieceText>(WordPieceText::from_dir(path));
    if (type == "Unigram")
      return std::make_unique<UnigramTokenizer>(UnigramTokenizer::from_tokenizer_json(json.string()));
    RLX_FAIL("tokenizer: '" << json.string() << "': model type '" << type
                            << "' is not supported (BPE, WordPiece and Unigram are)");
  }
  RLX_CHECK(fs::exists(fs::path(path) / "vocab.txt"),
            "tokenizer: '" << path << "' holds neither tokenizer.json nor vocab.txt");
  return std::make_unique<WordPieceText>(WordPieceText::from_dir(path));
}

}  // namespace rlx
