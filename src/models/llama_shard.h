// Tensor parallelism for LLaMA-family decoders, split as Megatron-LM splits
// them: each rank holds num_heads / ranks query heads and num_kv_heads /
// ranks KV heads (their Q, K, V rows, their KV cache, their columns of the
// attention output product) and intermediate_size / ranks FFN rows (gate
// and up rows, down columns). With fewer KV heads than ranks, ranks share
// KV heads: each holds one (vLLM's rule), the ranks of its query heads;
// in a sparse layer, expert_ffn / ranks rows of
// every expert (the router whole on every rank, so each rank routes alike). The two products that end a block (attention
// output, FFN down) then give partial sums, which an all_reduce adds before
// the residual. Embeddings and norms are whole on every rank; an untied LM
// head is split by vocabulary rows and the logits gathered, so every rank
// holds the same logits and chooses the same token.
#pragma once
#include <map>
#include <string>
#include <vector>

#include "models/llama.h"
#include "models/llama_quant.h"
#include "models/param_sink.h"

namespace rlx {

// The config a rank's graph is built from (tp_ranks = ranks, heads and FFN
// rows divided; one rank: the whole model's, its products still ending in
// all_reduce); rlx::Error naming the config field that does not divide, or
// the layers that cannot be split (mixture of experts).
LlamaConfig llama_rank_config(const LlamaConfig& whole, int ranks, const QuantizedWeights& quantized = {});

// Whether the LM head's rows are split too: an untied head whose vocabulary
// divides over the ranks (each rank's logits then gathered: all_gather). A
// tied head stays whole on every rank, as the embedding it is.
bool llama_splits_vocab(const LlamaConfig& whole, int ranks);

// How each split weight of the whole model is cut over `ranks` (by tensor name).
std::map<std::string, ParamSlice> llama_param_slices(const LlamaConfig& whole, int ranks);

// The sources of a rank's graph with the whole tensors' shapes (what the
// files hold), and the sink that writes the rank's share of each.
std::vector<LlamaParamSource> llama_whole_sources(const Graph& g, const LlamaConfig& whole, TpRank tp);
ParamSink llama_param_sink(Executable& exe, const LlamaConfig& whole, TpRank tp);

}  // namespace rlx
