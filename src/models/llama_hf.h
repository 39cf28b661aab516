// LLaMA weights from a Hugging Face directory: config.json and
// model.safetensors, or shards listed in model.safetensors.index.json.
// Tensors keep Hugging Face's layout (RoPE rotates halves).
#pragma once
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "models/llama.h"
#include "models/moe.h"
#include "models/safetensors.h"

namespace rlx {

// The Hugging Face name of a graph param ("blk.3.attn_q.weight" ->
// "model.layers.3.self_attn.q_proj.weight") in a family's checkpoints
// (Phi-3's blk.N.ffn_up.weight is its fused mlp.gate_up_proj.weight;
// Gemma's ffn_norm is pre_feedforward_layernorm, beside its post-norms).
std::string llama_hf_name(const std::string& param, const std::string& family = "llama");

class LlamaSafetensors : public LlamaWeights {
 public:
  explicit LlamaSafetensors(const std::string& dir);
  const LlamaConfig& config() const override { return cfg_; }
  void validate(const Graph& g, TpRank tp = {}) const override;
  void load_into(Executable& exe, const Graph& g, TpRank tp = {}) const override;
  void set_output_vocab(int n) override { cfg_.output_vocab = n; }
  // Rows of the LM head (lm_head.weight, or the token embedding when the
  // config ties them), f32, [tokens.size(), hidden_size] row-major: what a
  // score from a few logits needs, without the rest of the vocabulary.
  // Throws naming the file and tensor for a missing or misshapen head or a
  // token outside it.
  std::vector<float> head_rows(const std::vector<int32_t>& tokens) const;

 private:
  const SafetensorsFile& file_of(const std::string& hf_name) const;
  // The checkpoint's name of a param: llama_hf_name, its "model." prefix
  // replaced by where a multimodal Gemma 3 keeps its language model.
  std::string name_of(const std::string& param) const;
  // Stacked expert params (moe.h): where their rows are, checked, copied.
  ExpertRows expert_rows(const LlamaParamSource& s) const;
  void validate_experts(const LlamaParamSource& s) const;
  void load_experts(const ParamSink& sink, const LlamaParamSource& s) const;
  std::string dir_;
  std::string model_prefix_ = "model.";
  LlamaConfig cfg_;
  std::vector<std::unique_ptr<SafetensorsFile>> shards_;
  std::map<std::string, size_t> shard_of_;  // tensor name -> shard
};

}  // namespace rlx
