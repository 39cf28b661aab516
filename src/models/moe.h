// Mixture-of-experts decoders (Qwen3-MoE, Mixtral): the sparse FFN block of
// the LLaMA graph, the config fields of the families (moe_config.cc) and the
// stacked expert weights of Hugging Face checkpoints (moe_hf.cc).
#pragma once
#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "models/llama.h"
#include "rlx/graph.h"

namespace rlx {

class GgufFile;
class JsonField;

// The params of a sparse layer (GGUF's names): blk.N.ffn_gate_inp.weight
// [experts, hidden] (the router), blk.N.ffn_{gate,up}_exps.weight [experts,
// expert_ffn, hidden] and blk.N.ffn_down_exps.weight [experts, hidden,
// expert_ffn]. h [batch, seq, hidden] -> [batch, seq, hidden]: router logits,
// moe_route, one moe_matmul over gate|up (a param group: laid side by side at
// load), SwiGLU, and a moe_matmul over down that weights and sums the
// chosen experts' outputs.
// Experts named in `quantized` (QuantizedWeights: llama_quant.h) are
// moe_matmul_q products over their quants and scales (gate and up quantized
// alike, or both stay floats).
ValueId build_moe_ffn(Graph& g, const LlamaConfig& c, ValueId h, const std::string& layer_prefix, DType dt,
                      const std::map<std::string, QuantType>& quantized = {});

// Hugging Face model types with experts: qwen3_moe, mixtral.
bool is_moe_model_type(const std::string& model_type);
// Reads num_experts (num_local_experts), num_experts_per_tok,
// moe_intermediate_size, norm_topk_prob, decoder_sparse_step and
// mlp_only_layers into c; refuses what the graph lacks (shared experts,
// router biases), naming the field.
void read_moe_hf(const JsonField& j, const std::string& model_type, LlamaConfig& c);
// <arch>.expert_count, expert_used_count, expert_feed_forward_length and
// expert_weights_norm; the sparse layers are those holding
// blk.N.ffn_gate_inp.weight. Only called when expert_count is present.
void read_moe_gguf(const GgufFile& f, const std::string& arch, LlamaConfig& c);

// blk.N.ffn_{gate,up,down}_exps.weight: a param stacked from a checkpoint's
// experts.
bool is_expert_param(const std::string& param);
// Where a stacked expert param's rows are in a Hugging Face checkpoint:
// tensor and, per expert e, the rows [row0, row0 + rows) of the tensor's
// block e (stacked: [experts, rows_total, cols]), or all of tensor e (one
// tensor per expert). `layer` is the checkpoint's "model.layers.N." prefix;
// `has` says whether the checkpoint holds a tensor. Formats: per expert
// (mlp.experts.E.gate_proj.weight: Qwen3-MoE checkpoints), stacked
// (mlp.experts.gate_up_proj, mlp.experts.down_proj: transformers 5) and
// Mixtral's block_sparse_moe.experts.E.w1/w3/w2.weight.
struct ExpertRows {
  std::vector<std::string> tensors;  // one (stacked) or one per expert
  bool stacked = false;
  int64_t row0 = 0;  // stacked: the first row of each expert's block this param takes
};
ExpertRows hf_expert_rows(const std::string& param, const std::string& layer, const std::string& family,
                          int64_t experts, int64_t rows, const std::function<bool(const std::string&)>& has);
// The Hugging Face name of a sparse layer's router (blk.N.ffn_gate_inp.weight)
// below the layer prefix: mlp.gate.weight, Mixtral's block_sparse_moe.gate.weight.
std::string hf_router_name(const std::string& family);

}  // namespace rlx
