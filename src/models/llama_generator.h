// Text generation with a LLaMA (a GGUF file or a Hugging Face directory with
// config.json, safetensors and tokenizer.json) on any backend, for now by recomputing
// the whole prefix for each token: graphs are compiled per length bucket
// (16, 32, 64, ... tokens; a causal mask makes the padding after the tokens
// harmless), all sharing one arena and one copy of the weights.
#pragma once
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "models/llama.h"
#include "rlx/session.h"
#include "tokenizers/bpe.h"

namespace rlx {

struct GeneratorOptions {
  Device device = Device::Cpu;
  DType dtype = DType::F32;
  int threads = 0;
};

class LlamaGenerator {
 public:
  // A .gguf file, or a directory holding config.json.
  LlamaGenerator(const std::string& path, GeneratorOptions o = {});
  ~LlamaGenerator();

  const LlamaConfig& config() const { return model_->config(); }
  const BpeTokenizer& tokenizer() const { return *tokenizer_; }
  int32_t eos_id() const { return eos_id_; }
  // The model's chat template text ("" when it has none).
  const std::string& chat_template() const { return chat_template_; }

  // Sizes the shared arena for sequences up to max_tokens; call before the
  // first next_logits (otherwise the context length is assumed).
  void reserve(int64_t max_tokens);
  // Compiles every bucket up to the reserved length now rather than when a
  // sequence first reaches it (so timings of later tokens hold no compiles).
  void prepare();
  // Logits [vocab] of the token that follows ids.
  std::vector<float> next_logits(const std::vector<int32_t>& ids);
  // Length buckets compiled so far (for tests and traces).
  std::vector<int64_t> buckets() const;

 private:
  int64_t bucket_for(int64_t n) const;
  Executable& executable(int64_t bucket);

  GeneratorOptions o_;
  std::unique_ptr<LlamaWeights> model_;
  std::unique_ptr<BpeTokenizer> tokenizer_;
  int32_t eos_id_ = -1;
  std::string chat_template_;
  int64_t max_tokens_ = 0;
  std::shared_ptr<ArenaShare> share_;
  std::map<int64_t, std::unique_ptr<Executable>> exes_;
  Executable* with_params_ = nullptr;
};

}  // namespace rlx
