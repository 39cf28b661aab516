// The executables of one decoder model over one KV-cache pool: prefill
// graphs (one sequence, a power-of-two bucket of tokens) and decode steps
// (a bucket of sequences, one token each), compiled on first use on one
// arena, so the weights and the pool exist once whatever shapes run. Every
// graph takes each row's cache slot and position as inputs (device memory
// the kernels read), so a recorded graph serves any sequences at any
// positions and is never recorded again.
//
// With tensor_parallel > 1 each graph exists once per rank (llama_shard.h):
// every rank holds its share of the weights and of the KV pool in an arena
// of its own (on its own GPU), and every run runs on all ranks at once, the
// ranks' all_reduce nodes meeting through one group (runtime/collective.h).
// All ranks choose the same tokens; rank 0's outputs are read.
#pragma once
#include <cstdint>
#include <map>
#include <memory>
#include <tuple>
#include <vector>

#include "engine/rank_threads.h"
#include "models/llama.h"
#include "rlx/session.h"

namespace rlx {

struct PoolRunnerOptions {
  Device device = Device::Cpu;
  DType dtype = DType::F32;
  int threads = 0;
  ExecMode mode = ExecMode::Auto;
  int64_t cache_len = 0;      // tokens per slot
  int sequences = 1;          // slots for sequences
  int64_t prefill_chunk = 512;  // the largest prefill bucket
  int device_index = 0;         // CUDA: the GPU (of rank 0)
  int tensor_parallel = 1;      // ranks the model is split over
  // CUDA: the GPU of each rank (empty: device_index, device_index + 1, ...).
  // Named, they make a group even of one rank (its all_reduce nodes on NCCL).
  std::vector<int> devices;
};

class PoolRunner {
 public:
  PoolRunner(const LlamaWeights& weights, const QuantizedWeights& quantized, const PoolRunnerOptions& o);
  ~PoolRunner();

  int64_t cache_len() const { return o_.cache_len; }
  int sequences() const { return o_.sequences; }
  int64_t vocab() const { return cfg_.vocab_size; }
  // Whether window layers keep rings (llama_kv_ring): a slot then holds only
  // the window's keys, and a sequence cut back past its last cached token
  // must run again from its start.
  bool window_rings() const;

  // The next token's argmax, and its logits (f32 [vocab]) when asked for.
  struct Choice {
    int32_t argmax = -1;
    std::vector<float> logits;
  };
  // How many of n tokens one prefill run at position `start` takes.
  int64_t prefill_take(int64_t start, int64_t n) const;
  // tokens (at most prefill_take(start, size)) into `slot` at start...; the
  // choice after the last of them.
  Choice prefill(int slot, const std::vector<int32_t>& tokens, int64_t start, bool logits);
  struct DecodeRow {
    int slot;
    int32_t token;
    int64_t pos;  // where the token goes (the tokens the slot already holds)
  };
  // One decode run for every row (at most sequences()); a choice per row.
  std::vector<Choice> decode(const std::vector<DecodeRow>& rows, bool logits);

  // Compiles every prefill bucket and decode bucket (the greedy graphs) now,
  // so that no request waits for a compile.
  void prepare();

  int tensor_parallel() const { return int(ranks_.size()); }
  uint64_t prefill_runs() const { return prefill_runs_; }
  uint64_t decode_runs() const { return decode_runs_; }
  uint64_t arena_bytes() const;
  uint64_t kv_pool_bytes() const;
  uint64_t weight_bytes() const;
  int compiled_graphs() const { return int(ranks_[0].exes.size()); }
  // The decode executable of a batch bucket (compiled on first use), for
  // tests that assert how it ran (rank 0's, or `rank`'s).
  Executable& decode_executable(int64_t batch, bool logits, int rank = 0);
  int64_t decode_bucket(int64_t rows) const;
  std::string backend_summary();

 private:
  using Key = std::tuple<int64_t, int64_t, bool>;
  // A graph's executable on every rank (compiled on first use); rank 0's.
  Executable& executable(int64_t batch, int64_t seq, bool logits);
  Graph graph(const LlamaConfig& c, int64_t batch, int64_t seq, bool logits) const;
  // One run of a graph on every rank at once; rank 0's outputs.
  std::map<std::string, HostTensor> run(int64_t batch, int64_t seq, bool logits,
                                        const std::map<std::string, HostTensor>& inputs);

  // One rank: its share of the model, its arena and its executables.
  struct Rank {
    LlamaConfig cfg;
    CompileOptions co;
    std::map<Key, std::unique_ptr<Executable>> exes;
    Executable* with_params = nullptr;
  };

  const LlamaWeights& weights_;
  const QuantizedWeights& quantized_;
  LlamaConfig cfg_;  // the whole model's
  PoolRunnerOptions o_;
  int64_t pool_slots_ = 0;  // sequences, plus one that padding rows of a decode bucket write
  std::shared_ptr<Collective> group_;  // null with one rank
  std::vector<Rank> ranks_;
  std::unique_ptr<RankThreads> threads_;
  uint64_t prefill_runs_ = 0, decode_runs_ = 0;
};

}  // namespace rlx
