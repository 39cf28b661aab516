// Text generation with a LLaMA (a GGUF file or a Hugging Face directory with
// config.json, safetensors and tokenizer.json) on any backend. With the KV
// cache (the default) a prompt is prefilled by a graph per length bucket
// (16, 32, 64, ... tokens; padding after the tokens writes cache rows that
// are overwritten before they are read) and each further token is one run of
// a seq-1 decode graph; all share one arena, one copy of the weights and the
// cache. Without it, the whole prefix is recomputed per token.
//
// Decoding (next_token) advances on the device: every cached run leaves its
// chosen token (the argmax, or a draw with the options' temperature, top-k,
// top-p and seed) and the next position in state, and a token that continues
// the last run's choice is one run of a decode graph with no inputs (fed from
// that state), whose only output is the 4-byte token id.
#pragma once
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "models/llama.h"
#include "models/sampling.h"
#include "rlx/session.h"
#include "tokenizers/text_tokenizer.h"

namespace rlx {

struct GeneratorOptions {
  Device device = Device::Cpu;
  int device_index = 0;  // CUDA: which GPU
  DType dtype = DType::F32;
  int threads = 0;
  bool kv_cache = true;  // false: recompute the whole prefix for every token
  ExecMode mode = ExecMode::Auto;  // CUDA: per-op launches or one recorded graph per run
  SamplingOptions sampling;  // how next_token chooses (default greedy)
  // Matmul weights not stored as Q8_0/Q4_0 are quantized to this at load
  // (llama.cpp's reference rounding); those stored so stay as they are.
  std::optional<QuantType> quantize;
  // A model with a sliding window shorter than its context prefills at most
  // this many tokens a run (rounded up to a length bucket), so its window
  // layers keep a ring of window + that + 32 rows instead of the context.
  int64_t prefill_chunk = 512;
};

// The prefill length bucket of n tokens: 16, 32, 64, ... up to the context
// length (max_positions).
int64_t llama_length_bucket(int64_t n, int64_t max_positions);

// Thread safety: the running methods (reserve, prepare, next_logits,
// next_token, state_fed_executable) are serialised by a mutex, so one
// generator may be shared by threads; its KV cache holds one sequence, so
// threads that interleave different sequences each re-prefill theirs. For
// parallel throughput use one generator per thread (or rlx::LLM).
class LlamaGenerator {
 public:
  // A .gguf file, or a directory holding config.json.
  LlamaGenerator(const std::string& path, GeneratorOptions o = {});
  ~LlamaGenerator();

  const LlamaConfig& config() const { return model_->config(); }
  const GeneratorOptions& options() const { return o_; }
  // Where the weights come from, for other executables of the same model.
  const LlamaWeights& weights() const { return *model_; }
  // Throws when the model came without a tokenizer (a Hugging Face directory
  // without tokenizer.json: token ids in and out only).
  const TextTokenizer& tokenizer() const;
  bool has_tokenizer() const { return tokenizer_ != nullptr; }
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
  // The token after ids as the sampling options choose it, equal to
  // Sampler(options.sampling).next(next_logits(ids), ids.size()) (greedy:
  // the argmax, lowest id on ties). With the KV cache, when ids are the
  // previous call's plus the token it returned, this is one run of the
  // state-fed decode graph (no host->device copy; reads back 4 bytes);
  // otherwise the ids are prefilled (or take a host-fed decode step) and the
  // token comes from that run. Without it, the host samples the logits.
  int32_t next_token(const std::vector<int32_t>& ids);
  // next_token of a greedy generator (throws if it samples).
  int32_t next_greedy(const std::vector<int32_t>& ids);
  // Length buckets compiled so far (for tests and traces).
  std::vector<int64_t> buckets() const;
  // Runs of the decode-step graph so far (0 without the KV cache).
  uint64_t decode_steps() const { return decode_ ? decode_->run_count() : 0; }
  // Device time of the last run (us) where the backend measures it (CUDA
  // under RLX_TRACE=decode), else < 0.
  double last_device_us() const { return last_device_us_; }
  // Runs of the state-fed decode graph so far.
  uint64_t device_steps() const { return state_fed_ ? state_fed_->run_count() : 0; }
  // The state-fed decode executable (compiled on first use), for tests that
  // assert how it ran.
  Executable& state_fed_executable();
  // The matmul weights held quantized (stored so, or by options.quantize).
  const QuantizedWeights& quantized_weights() const { return quantized_; }
  // Rows of the KV cache (0 until the first graph is compiled, or without it).
  int64_t cache_len() const { return cache_len_; }
  // The most tokens one run takes where window layers keep rings (0: none).
  int64_t window_run() const { return window_run_; }

 private:
  int64_t bucket_for(int64_t n) const;
  Executable& executable(int64_t bucket);
  Executable& decode_executable();
  std::unique_ptr<Executable> compile_graph(int64_t seq, LlamaFeed feed = LlamaFeed::Inputs);
  std::map<std::string, HostTensor> prefill(const std::vector<int32_t>& ids, int64_t start);
  // ids[start, end) through one bucket at position start.
  std::map<std::string, HostTensor> prefill_run(const std::vector<int32_t>& ids, int64_t start, int64_t end,
                                                int64_t bucket);
  // One cached run for ids (a host-fed decode step or a prefill); its outputs.
  std::map<std::string, HostTensor> run_cached(const std::vector<int32_t>& ids);
  void check_length(int64_t n) const;

  GeneratorOptions o_;
  Sampler sampler_;  // the host's choice where no cached graph runs
  std::unique_ptr<LlamaWeights> model_;
  QuantizedWeights quantized_;  // the matmul weights held quantized
  std::unique_ptr<TextTokenizer> tokenizer_;
  int32_t eos_id_ = -1;
  std::string chat_template_;
  int64_t max_tokens_ = 0;
  std::shared_ptr<ArenaShare> share_;
  std::map<int64_t, std::unique_ptr<Executable>> exes_;
  std::unique_ptr<Executable> decode_, state_fed_;
  Executable* with_params_ = nullptr;
  std::recursive_mutex mu_;  // see "Thread safety" above
  int64_t cache_len_ = 0;
  int64_t window_run_ = 0;
  std::vector<int32_t> cached_;  // the tokens whose K/V rows the cache holds
  // The token the state's next_token holds (the last run's choice; its
  // next_pos is cached_.size()), or -1 when unknown.
  int32_t state_token_ = -1;
  double last_device_us_ = -1;
};

}  // namespace rlx
