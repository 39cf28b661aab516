#include "models/llama_model_files.h"

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "models/gguf.h"
#include "models/llama_hf.h"
#include "rlx/error.h"
#include "tokenizers/bpe.h"
#include "tokenizers/spm_json.h"
#include "tokenizers/spm.h"
#include "tokenizers/tokenizer_files.h"

namespace rlx {
namespace {

// A JSON file of a Hugging Face directory, or null when it is absent.
nlohmann::json read_json_if_present(const std::filesystem::path& p) {
  if (!std::filesystem::exists(p)) return nullptr;
  std::ifstream in(p);
  try {
    return nlohmann::json::parse(in);
  } catch (const nlohmann::json::exception& e) {
    RLX_FAIL("llama: '" << p.string() << "' is not valid JSON: " << e.what());
  }
}

}  // namespace

LlamaModelFiles open_llama_model(const std::string& path) {
  namespace fs = std::filesystem;
  LlamaModelFiles m;
  if (fs::is_directory(path)) {
    m.weights = std::make_unique<LlamaSafetensors>(path);
    // Without tokenizer.json the model still runs on token ids.
    // Byte-level BPE, or SentencePiece-style BPE (Llama 2, Mistral, Gemma).
    if (const std::string tj = (fs::path(path) / "tokenizer.json").string(); fs::exists(tj)) {
      if (SpmJsonTokenizer::is_spm_style(tj))
        m.tokenizer = std::make_unique<SpmJsonTokenizer>(SpmJsonTokenizer::from_tokenizer_json(tj));
      else
        m.tokenizer = std::make_unique<BpeTokenizer>(BpeTokenizer::from_tokenizer_json(tj));
    }
    nlohmann::json cfg = read_json_if_present(fs::path(path) / "config.json");
    const auto& eos = cfg.contains("eos_token_id") ? cfg["eos_token_id"] : nlohmann::json();
    if (eos.is_number_integer()) m.eos_id = eos.get<int32_t>();
    else if (eos.is_array() && !eos.empty() && eos[0].is_number_integer()) m.eos_id = eos[0].get<int32_t>();
    nlohmann::json tc = read_json_if_present(fs::path(path) / "tokenizer_config.json");
    if (tc.is_object() && tc.contains("chat_template") && tc["chat_template"].is_string())
      m.chat_template = tc["chat_template"].get<std::string>();
  } else {
    auto gguf = std::make_unique<LlamaGguf>(path);
    const GgufFile& f = gguf->file();
    // Without a vocabulary the model still runs on token ids.
    if (!f.has("tokenizer.ggml.model"))
      ;
    else
      m.tokenizer = tokenizer_from_gguf(f);
    if (m.tokenizer) m.eos_id = m.tokenizer->eos_id();
    m.chat_template = f.get_string("tokenizer.chat_template", "");
    m.weights = std::move(gguf);
  }
  const LlamaConfig& c = m.weights->config();
  RLX_CHECK(!m.tokenizer || int64_t(m.tokenizer->vocab_size()) <= c.vocab_size,
            "llama: '" << path << "': the tokenizer has " << m.tokenizer->vocab_size()
                       << " tokens, more than the model's vocab_size " << c.vocab_size);
  // A padded vocabulary: the rows past the tokenizer's are never chosen.
  if (m.tokenizer && int64_t(m.tokenizer->vocab_size()) < c.vocab_size)
    m.weights->set_output_vocab(int(m.tokenizer->vocab_size()));
  return m;
}

}  // namespace rlx
