// The mixture-of-experts families' config fields (Qwen3-MoE, Mixtral) from
// config.json and GGUF metadata, onto LlamaConfig.
#include <set>

#include "models/gguf.h"
#include "models/json_read.h"
#include "models/llama_limits.h"
#include "models/moe.h"
#include "rlx/error.h"

namespace rlx {
namespace {

constexpr int kMaxExperts = 1 << 16;

void check_moe(const LlamaConfig& c, const std::string& where) {
  RLX_CHECK(c.num_experts >= 1 && c.experts_per_token >= 1 && c.experts_per_token <= c.num_experts &&
                c.experts_per_token <= kMaxMoeTopK && c.expert_ffn >= 1,
            where << "experts " << c.num_experts << ", experts per token " << c.experts_per_token
                  << " (at most " << kMaxMoeTopK << ") and expert FFN " << c.expert_ffn << " are inconsistent");
}

}  // namespace

bool is_moe_model_type(const std::string& t) { return t == "qwen3_moe" || t == "mixtral"; }

void read_moe_hf(const JsonField& j, const std::string& type, LlamaConfig& c) {
  const LlamaLimits L;
  if (type == "mixtral") {
    // MixtralSparseMoeBlock: top-k of the router's softmax, renormalised
    // (the softmax over the k largest logits); every layer sparse.
    c.num_experts = int(j.at("num_local_experts").integer(1, kMaxExperts));
    c.experts_per_token = int(j.at("num_experts_per_tok").integer(1, kMaxMoeTopK));
    c.expert_ffn = c.intermediate_size;
    c.norm_topk_prob = true;
    check_moe(c, j.where());
    return;
  }
  RLX_CHECK(type == "qwen3_moe", j.where() << "model_type '" << type << "' has no experts rlx reads");
  // transformers 5 writes Qwen3MoeConfig.num_experts as num_local_experts.
  const char* count = j.has("num_experts") ? "num_experts" : "num_local_experts";
  c.num_experts = int(j.at(count).integer(0, kMaxExperts));
  RLX_CHECK(c.num_experts > 0, j.where() << count << " is 0 (a dense qwen3 config)");
  c.experts_per_token = int(j.at("num_experts_per_tok").integer(1, kMaxMoeTopK));
  c.expert_ffn = int(j.at("moe_intermediate_size").integer(1, L.intermediate_size));
  // Qwen3MoeConfig's default is false; the released checkpoints say true.
  c.norm_topk_prob = j.boolean_or("norm_topk_prob", false);
  RLX_CHECK(j.integer_or("shared_expert_intermediate_size", 0, 0, L.intermediate_size) == 0,
            j.where() << "shared_expert_intermediate_size (a shared expert, Qwen2-MoE's) is not supported");
  const int64_t step = j.integer_or("decoder_sparse_step", 1, 1, L.layers);
  std::set<int64_t> dense;
  if (j.has("mlp_only_layers")) {
    const JsonField only = j.at("mlp_only_layers");
    only.array();
    for (size_t i = 0; i < only.size(); ++i) dense.insert(only.at(i).integer(0, c.num_layers - 1));
  }
  // Qwen3MoeDecoderLayer: sparse unless listed in mlp_only_layers, on every
  // decoder_sparse_step-th layer.
  c.moe_layers.assign(size_t(c.num_layers), false);
  for (int l = 0; l < c.num_layers; ++l) c.moe_layers[size_t(l)] = !dense.count(l) && (l + 1) % step == 0;
  check_moe(c, j.where());
}

void read_moe_gguf(const GgufFile& f, const std::string& arch, LlamaConfig& c) {
  const std::string k = arch + ".";
  const std::string where = "llama: '" + f.path() + "': ";
  c.num_experts = int(f.get_int(k + "expert_count", 1, kMaxExperts));
  c.experts_per_token = int(f.get_int(k + "expert_used_count", 1, kMaxMoeTopK));
  // Mixtral's GGUFs (architecture llama) have no expert FFN key: its experts
  // are the FFN.
  c.expert_ffn = int(f.get_int_or(k + "expert_feed_forward_length", c.intermediate_size, 1, LlamaLimits{}.intermediate_size));
  // llama.cpp renormalises the chosen weights for both families.
  c.norm_topk_prob = f.get_bool(k + "expert_weights_norm", true);
  RLX_CHECK(!f.has(k + "expert_shared_count") || f.get_int(k + "expert_shared_count") == 0,
            where << k << "expert_shared_count: shared experts are not supported");
  const std::string gating = k + "expert_gating_func";
  RLX_CHECK(!f.has(gating) || f.get_int(gating) == 1,
            where << gating << " " << f.get_int(gating) << " is not supported (1, softmax, is)");
  RLX_CHECK(!f.has_tensor("blk.0.ffn_gate.0.weight"),
            where << "one tensor per expert (blk.N.ffn_gate.E.weight, an older Mixtral layout) is not supported: "
                     "convert it again to stacked blk.N.ffn_gate_exps.weight");
  c.moe_layers.assign(size_t(c.num_layers), false);
  for (int l = 0; l < c.num_layers; ++l)
    c.moe_layers[size_t(l)] = f.has_tensor("blk." + std::to_string(l) + ".ffn_gate_inp.weight");
  check_moe(c, where);
}

}  // namespace rlx
