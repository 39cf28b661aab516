// Greedy decoding of several sequences at once with a LLaMA. B prompts (of
// any lengths) are prefilled together by one batch-B graph, right-padded to a
// length bucket; then every step is one run of a batch-B decode graph fed
// from state (next_token [B, 1] and next_pos [B] advance on the device, each
// sequence at its own position), so n new tokens for each of the B sequences
// take one prefill run and n - 1 decode runs. On CUDA in graph mode the step
// is one recorded graph, replayed per step with nothing copied in and B token
// ids read back.
//
// The model is a LlamaGenerator's (its weights and options: device, dtype,
// threads, execution mode, quantization); the batch's executables share an
// arena of their own (weights, and a KV cache [B, cache_len, 2 * kv_dim] per
// layer), apart from the generator's.
#pragma once
#include <map>
#include <memory>
#include <vector>

#include "models/llama_generator.h"
#include "rlx/session.h"

namespace rlx {

class LlamaBatchGenerator {
 public:
  // `batch` sequences of up to max_tokens tokens each (prompt and new
  // tokens). `model` must outlive this and choose greedily (temperature 0).
  LlamaBatchGenerator(const LlamaGenerator& model, int64_t batch, int64_t max_tokens);
  ~LlamaBatchGenerator();

  int64_t batch() const { return batch_; }
  // Rows of each sequence's KV cache (the length bucket of max_tokens).
  int64_t cache_len() const { return cache_len_; }
  // Compiles the prefill graph for prompts of up to prompt_len tokens and
  // the decode step now (so later timings hold no compiles).
  void prepare(int64_t prompt_len);

  // Prefills `batch` prompts (1 to max_tokens - 1 tokens each) in one run;
  // each sequence's first new token.
  std::vector<int32_t> start(const std::vector<std::vector<int32_t>>& prompts);
  // One decode step of all sequences: each one's token after the one that
  // start() or the last step chose (fed back on the device).
  std::vector<int32_t> step();
  // Up to n new tokens after each prompt: start(), then step() until every
  // sequence has n tokens or has chosen `stop` (not included; -1: never
  // stops). Each prompt's length + n must be at most max_tokens.
  std::vector<std::vector<int32_t>> generate(const std::vector<std::vector<int32_t>>& prompts, int n,
                                             int32_t stop = -1);

  // Runs of the prefill graphs and of the decode step so far.
  uint64_t prefill_runs() const;
  uint64_t decode_steps() const { return step_ ? step_->run_count() : 0; }
  // The state-fed batch decode executable (compiled on first use), for tests
  // that assert how it ran.
  Executable& decode_executable();
  // Prefill length buckets compiled so far.
  std::vector<int64_t> buckets() const;

 private:
  std::unique_ptr<Executable> compile_graph(int64_t seq, LlamaFeed feed);
  Executable& prefill_executable(int64_t bucket);

  const LlamaGenerator& model_;
  int64_t batch_, max_tokens_, cache_len_;
  std::shared_ptr<ArenaShare> share_;
  std::map<int64_t, std::unique_ptr<Executable>> prefill_;
  std::unique_ptr<Executable> step_;
  Executable* with_params_ = nullptr;
  // Where each sequence's next cache row goes (the state's next_pos, kept on
  // the host only to refuse a step past the cache); empty before start().
  std::vector<int64_t> pos_;
};

}  // namespace rlx
