// LLaMA-family decoders (LlamaForCausalLM: TinyLlama, SmolLM2, ...): the
// config from GGUF metadata or a Hugging Face config.json, the graph (built
// with the public builder API) and weights from GGUF, dequantized to f32 at
// load except the Q8_0/Q4_0 matmul weights, which stay quantized. The graph
// recomputes the whole prefix, or runs over a KV cache.
#pragma once
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "models/llama_quant.h"
#include "models/param_sink.h"
#include "models/sampling.h"
#include "rlx/graph.h"
#include "rlx/session.h"

namespace rlx {

class GgufFile;

struct LlamaConfig {
  int vocab_size = 32000;
  int hidden_size = 4096;
  int intermediate_size = 11008;
  int num_layers = 32;
  int num_heads = 32;
  int num_kv_heads = 32;
  int head_dim = 128;
  int rope_dims = 128;          // rotated dims of each head
  float rope_theta = 10000.f;
  float rms_eps = 1e-6f;
  int max_positions = 2048;
  bool tie_embeddings = false;  // the LM head is the token embedding
  // GGUF stores Q and K rows permuted so that rotated pairs are adjacent
  // (dims 2i, 2i+1); Hugging Face weights pair dim i with i + head_dim/2.
  bool rope_interleaved = false;
  // The family (llama, qwen2, qwen3, mistral): what its config named; the
  // differences the graph needs are the flags below.
  std::string family = "llama";
  bool qkv_bias = false;  // Q, K and V products add a bias (Qwen2)
  bool qk_norm = false;   // per-head RMSNorm on q and k before RoPE (Qwen3)
  // One Q|K|V weight (attn_qkv.weight) and one gate|up weight (ffn_up.weight
  // of 2 * intermediate rows), read as they are stored (Phi-3).
  bool fused_qkv_gate_up = false;
  // Empty, or rope_dims/2 divisors of the rotary frequencies (Llama 3 and
  // linear rope scaling; GGUF's rope_freqs.weight).
  std::vector<float> rope_freq_divisors;
  // cos and sin times this (YaRN's mscale, LongRoPE's attention factor).
  float rope_attention_factor = 1.f;
  // LongRoPE (Phi-3): rope_freq_divisors are the short factors; a graph
  // whose context exceeds rope_original_context rotates with these
  // (rope_scaling.h: rope_divisors_for_context).
  std::vector<float> rope_long_divisors;
  int rope_original_context = 0;
  // Gemma 2 / 3 (gemma_config.cc).
  float embed_scale = 0.f;       // > 0: embeddings times this (sqrt(hidden)), rounded to the compute dtype
  bool sandwich_norms = false;   // RMSNorm on the attention and FFN outputs too, before each residual add
  bool gelu_tanh_ffn = false;    // GeGLU: gelu_tanh(gate) * up instead of SwiGLU
  // Hugging Face stores Gemma's norm gains as w and applies (1 + w): the
  // Hugging Face loader adds the 1 to every *norm.weight at load (GGUF files
  // hold 1 + w already: llama.cpp's converter adds it).
  bool norm_adds_one = false;
  float query_scale = 0.f;       // attention's score scale; 0 = 1/sqrt(head_dim)
  float attn_softcap = 0.f;      // > 0: scores s -> cap * tanh(s / cap) before the softmax
  float final_softcap = 0.f;     // > 0: the same on the logits
  // Layers with local_layers[l] attend the last sliding_window keys only.
  int sliding_window = 0;
  std::vector<bool> local_layers;
  // > 0: local layers rotate with this base and no frequency divisors
  // (Gemma 3: rope scaling is the global layers'); 0: as the global ones.
  float local_rope_theta = 0.f;
  // The LM head's rows that can be chosen (0: all of vocab_size). A padded
  // embedding (Qwen2.5: 151936 rows for 151665 tokens) has rows past the
  // tokenizer that are never sampled, as transformers and llama.cpp treat them.
  int output_vocab = 0;
  int chosen_vocab() const { return output_vocab > 0 ? output_vocab : vocab_size; }
  // Mixture of experts (moe_config.cc; Qwen3-MoE, Mixtral): the FFN of a
  // sparse layer is num_experts SwiGLU experts of expert_ffn rows, of which
  // a router picks experts_per_token per token (moe.h). moe_layers empty:
  // every layer is sparse when num_experts > 0; else those marked true.
  int num_experts = 0;
  int experts_per_token = 0;
  int expert_ffn = 0;
  bool norm_topk_prob = true;  // the chosen experts' weights renormalised to sum to 1
  std::vector<bool> moe_layers;
  bool is_moe_layer(int l) const {
    return num_experts > 0 && (moe_layers.empty() || moe_layers[size_t(l)]);
  }
  // 0: the whole model. >= 1: one rank's share of a model split over
  // tp_ranks (llama_rank_config: heads and FFN rows divided); the attention
  // output and FFN down products end in an all_reduce.
  int tp_ranks = 0;
  // With tp_ranks: the LM head's rows (an untied head) split over the ranks
  // too, each rank's logits gathered into the whole vocabulary's.
  bool tp_vocab = false;
};

// The divisors rope_scaling {"rope_type": "llama3", factor, low_freq_factor,
// high_freq_factor, original_max_position_embeddings} gives pair i of
// rope_dims rotated dims (as transformers' _compute_llama3_parameters).
std::vector<float> llama3_rope_divisors(int rope_dims, float theta, float factor, float low_freq_factor,
                                        float high_freq_factor, float original_max_positions);

// <arch>.* metadata of a GGUF whose general.architecture is llama, qwen2 or
// qwen3 (and rope_freqs.weight); throws naming the file and key for anything
// missing, inconsistent or not supported.
LlamaConfig llama_config_from_gguf(const GgufFile& f);
// A Hugging Face config.json (<dir>/config.json or the file itself) of
// model_type llama, mistral, qwen2 or qwen3.
LlamaConfig load_llama_config(const std::string& dir_or_file);

// Graph for a fixed [batch, seq] with a causal mask. Inputs: input_ids i32
// [batch, seq]; positions i32 [seq]; last_index i32 [batch]: for each
// sequence, the flat row (b * seq + position) whose logits to compute.
// Output: logits f32 [batch, vocab]. Params carry the GGUF tensor names
// (token_embd.weight, blk.N.attn_q.weight, ...).
//
// With cache_len > 0 the graph runs over a KV cache: state tensors
// blk.N.kv_cache [batch, cache_len, 2 * kv_heads * head_dim] (a row is K then
// V); the
// input `pos` i32 [batch] (instead of `positions`) is where the seq new tokens
// start. Their K/V rows are written at pos..pos+seq-1 and their queries attend
// the cache up to their own position, so a seq-1 graph is one decode step and
// graphs of other seq (prefill) built with the same cache_len share the cache
// through an arena share.
//
// Every cached graph also carries the decode loop's state, declared first so
// that all graphs of one cache lay it out alike: next_token i32 [batch, 1]
// (the greedy choice after the last token run) and next_pos i32 [batch]
// (where the next token goes). Each run sets both (state updates) and outputs
// next_token i32 [batch]. With feed == State (seq 1) the graph has no inputs
// at all: it runs next_token at next_pos, so greedy decoding is one run per
// token with nothing copied in, and it outputs only next_token.
//
// `sampling` chooses next_token: greedy (temperature <= 0, the default) is
// the argmax; with a temperature it is a `sample` node, whose draw is keyed
// by the seed and the new token's position (next_pos after the run), so the
// token equals Sampler(sampling).next(logits, that position).
//
// The matmul weights named in `quantized` are matmul_q products over their
// W.quants and W.scales params (llama_quant.h); Q/K/V and gate/up, when all
// of a group are quantized alike, are one product over the concatenated
// params (as the sibling-matmul pass merges float weights).
//
// With pool.slots > 0 (the engine's graphs) the caches are a pool shared by
// many sequences: blk.N.kv_cache [pool.slots, cache_len, 2 * kv_dim], and an
// input `slot` i32 [batch] names each batch row's cache row, so one graph
// serves any sequences at any positions (a ragged batch) and every graph of
// one pool lays its state out alike whatever its batch and seq. No decode
// state is declared or updated: the host feeds input_ids, pos, slot and
// last_index each run. Outputs: next_token i32 [batch] (the argmax) and,
// with pool.logits, logits f32 [batch, vocab].
enum class LlamaFeed { Inputs, State };
struct LlamaPool {
  int64_t slots = 0;
  bool logits = true;
};
//
// window_run > 0 (the most tokens any run of this cache takes, seq <=
// window_run): a local layer whose window is shorter than the cache by more
// than that keeps a ring of llama_kv_rows() rows, the key at position t in
// row t mod rows (AttentionAttrs::ring), so its cache does not grow with the
// context. A ring holds only the window's keys: a later run may continue
// the sequence from its last cached token, but not from further back.
Graph build_llama_graph(const LlamaConfig& cfg, int64_t batch, int64_t seq, DType dt, int64_t cache_len = 0,
                        LlamaFeed feed = LlamaFeed::Inputs, const SamplingOptions& sampling = {},
                        const QuantizedWeights& quantized = {}, const LlamaPool& pool = {}, int64_t window_run = 0);
// The K/V rows layer l's cache has under build_llama_graph(..., cache_len,
// ..., window_run): cache_len, or a local layer's ring.
int64_t llama_kv_rows(const LlamaConfig& cfg, int layer, int64_t cache_len, int64_t window_run);
// Whether any layer's cache is a ring under those arguments.
bool llama_kv_ring(const LlamaConfig& cfg, int64_t cache_len, int64_t window_run);

// The decoder as an embedder reads it (Qwen3-Embedding, gte-Qwen2): the
// same stack without the LM head, ending in the final norm. Inputs:
// input_ids i32 [batch, seq] and positions i32 [seq] as above, the causal
// mask the only mask: a row's real tokens come first and its pads after
// them, so no real token sees a pad. LlamaHidden::Rows also takes
// last_index i32 [batch] (the flat row b * seq + position of each
// sequence's token) and outputs embedding f32 [batch, hidden], the normed
// hidden state of those rows only (last-token pooling); LlamaHidden::All
// outputs last_hidden_state f32 [batch, seq, hidden], every row normed.
enum class LlamaHidden { Rows, All };
Graph build_llama_hidden_graph(const LlamaConfig& cfg, int64_t batch, int64_t seq, DType dt, LlamaHidden which);

// Whether load_llama_config reads a config.json of this model_type, and
// the list of those for messages.
bool is_llama_hf_model_type(const std::string& model_type);
const char* llama_hf_model_types();

// Where a LLaMA's config and weights come from (a GGUF file or a Hugging
// Face directory), with params named as build_llama_graph names them.
class LlamaWeights {
 public:
  virtual ~LlamaWeights() = default;
  virtual const LlamaConfig& config() const = 0;
  // Every param of g exists with its shape and a type rlx reads, else
  // rlx::Error naming the file and tensor. With tp.ranks > 1, g is rank
  // tp.rank's graph (llama_shard.h): its split params are checked against
  // the whole tensors and get the rank's share of them.
  virtual void validate(const Graph& g, TpRank tp = {}) const = 0;
  virtual void load_into(Executable& exe, const Graph& g, TpRank tp = {}) const = 0;
  // Limits the logits to the first n rows (the tokenizer's), 0 < n <= vocab_size.
  virtual void set_output_vocab(int n) = 0;
  // The format rlx holds a file tensor in where it stays quantized
  // (GGUF: gguf_held_quant.h), else nullopt.
  virtual std::optional<QuantType> stored_quant(const std::string&) const { return std::nullopt; }
};

// A LLaMA GGUF: its config and its weights; Q8_0/Q4_0 matmul weights stay
// quantized where the graph reads them so, the rest are dequantized at load.
class LlamaGguf : public LlamaWeights {
 public:
  explicit LlamaGguf(const std::string& path);
  ~LlamaGguf() override;
  const LlamaConfig& config() const override { return cfg_; }
  const GgufFile& file() const { return *file_; }
  void validate(const Graph& g, TpRank tp = {}) const override;
  void load_into(Executable& exe, const Graph& g, TpRank tp = {}) const override;
  void set_output_vocab(int n) override { cfg_.output_vocab = n; }
  std::optional<QuantType> stored_quant(const std::string& tensor) const override;

 private:
  std::unique_ptr<GgufFile> file_;
  LlamaConfig cfg_;
};

}  // namespace rlx
