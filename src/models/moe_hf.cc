// Stacked expert params from the layouts Hugging Face checkpoints use (moe.h).
#include "models/moe.h"
#include "rlx/error.h"

namespace rlx {
namespace {

bool ends_with(const std::string& s, const std::string& tail) {
  return s.size() >= tail.size() && s.compare(s.size() - tail.size(), tail.size(), tail) == 0;
}

}  // namespace

bool is_expert_param(const std::string& p) {
  return p.rfind("blk.", 0) == 0 &&
         (ends_with(p, ".ffn_gate_exps.weight") || ends_with(p, ".ffn_up_exps.weight") ||
          ends_with(p, ".ffn_down_exps.weight"));
}

std::string hf_router_name(const std::string& family) {
  return family == "mixtral" ? "block_sparse_moe.gate.weight" : "mlp.gate.weight";
}

ExpertRows hf_expert_rows(const std::string& param, const std::string& layer, const std::string& family,
                          int64_t experts, int64_t rows, const std::function<bool(const std::string&)>& has) {
  RLX_CHECK(is_expert_param(param), "moe: '" << param << "' is no expert param");
  const bool gate = ends_with(param, ".ffn_gate_exps.weight"), up = ends_with(param, ".ffn_up_exps.weight");
  ExpertRows r;
  // Mixtral's own checkpoints: w1 gate, w3 up, w2 down; else the layouts below.
  if (family == "mixtral" && has(layer + "block_sparse_moe.experts.0.w1.weight")) {
    const char* w = gate ? "w1" : up ? "w3" : "w2";
    for (int64_t e = 0; e < experts; ++e)
      r.tensors.push_back(layer + "block_sparse_moe.experts." + std::to_string(e) + "." + w + ".weight");
    return r;
  }
  // transformers 5 keeps an MoE block's experts stacked: gate_up_proj [E,
  // 2F, H] (gate's rows first) and down_proj [E, H, F].
  const std::string stacked = layer + "mlp.experts." + (gate || up ? "gate_up_proj" : "down_proj");
  if (has(stacked) || has(stacked + ".weight")) {
    r.tensors = {has(stacked) ? stacked : stacked + ".weight"};
    r.stacked = true;
    r.row0 = up ? rows : 0;
    return r;
  }
  const char* w = gate ? "gate_proj" : up ? "up_proj" : "down_proj";
  for (int64_t e = 0; e < experts; ++e)
    r.tensors.push_back(layer + "mlp.experts." + std::to_string(e) + "." + w + ".weight");
  return r;
}

}  // namespace rlx
