// Text generation with a LLaMA (a GGUF file or a Hugging Face directory with
// config.json, safetensors and tokenizer.json) on any backend. With the KV
// cache (the default) a prompt is prefilled by a graph per length bucket
// (16, 32, 64, ... tokens; padding after the tokens writes cache rows that
// are overwritten before they are read) and each further token is one run of
// a seq-1 decode graph; all share one arena, one copy of the weights and the
// cache. Without it, the whole prefix is recomputed per token.
#pragma once
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "models/llama.h"
#include "rlx/session.h"
#include "tokenizers/text_tokenizer.h"

namespace rlx {

struct GeneratorOptions {
  Device device = Device::Cpu;
  DType dtype = DType::F32;
  int threads = 0;
  bool kv_cache = true;  // false: recompute the whole prefix for every token
};

class LlamaGenerator {
 public:
  // A .gguf file, or a directory holding config.json.
  LlamaGenerator(const std::string& path, GeneratorOptions o = {});
  ~LlamaGenerator();

  const LlamaConfig& config() const { return model_->config(); }
  const TextTokenizer& tokenizer() const { return *tokenizer_; }
  int32_t eos_id() const { return eos_id_; }
  // The model's chat template text ("" when it has none).
  const std::string& chat_template() const { return chat_template_; }

  // Sizes the shared arena for sequences up to max_tokens; call before the
  // first next_logits (otherwise the context length is assumed).
  void reserve(int64_t max_tokens);
  // Compiles every bucket up to the reserved length now rather than when a
  // sequence first reaches it (so timings of later tokens hold no compiles).
  void prepare();
  // Logits [vocab] of the token that follows ids. With the KV cache, ids
  // that extend the previous call's by one token take one decode step; any
  // other ids are prefilled (after the cached prefix they extend, if any).
  std::vector<float> next_logits(const std::vector<int32_t>& ids);
  // Length buckets compiled so far (for tests and traces).
  std::vector<int64_t> buckets() const;
  // Runs of the decode-step graph so far (0 without the KV cache).
  uint64_t decode_steps() const { return decode_ ? decode_->run_count() : 0; }
  // Rows of the KV cache (0 until the first graph is compiled, or without it).
  int64_t cache_len() const { return cache_len_; }

 private:
  int64_t bucket_for(int64_t n) const;
  Executable& executable(int64_t bucket);
  Executable& decode_executable();
  std::unique_ptr<Executable> compile_graph(int64_t seq);
  std::vector<float> prefill(const std::vector<int32_t>& ids, int64_t start);

  GeneratorOptions o_;
  std::unique_ptr<LlamaWeights> model_;
  std::unique_ptr<TextTokenizer> tokenizer_;
  int32_t eos_id_ = -1;
  std::string chat_template_;
  int64_t max_tokens_ = 0;
  std::shared_ptr<ArenaShare> share_;
  std::map<int64_t, std::unique_ptr<Executable>> exes_;
  std::unique_ptr<Executable> decode_;
  Executable* with_params_ = nullptr;
  int64_t cache_len_ = 0;
  std::vector<int32_t> cached_;  // the tokens whose K/V rows the cache holds
};

}  // namespace rlx
