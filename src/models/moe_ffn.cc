// The sparse FFN block of a mixture-of-experts decoder layer (moe.h).
#include "models/moe.h"

namespace rlx {

ValueId build_moe_ffn(Graph& g, const LlamaConfig& c, ValueId h, const std::string& p, DType dt) {
  const Shape s = g.value(h).shape;
  const int64_t H = c.hidden_size, E = c.num_experts, F = c.expert_ffn, rows = numel(s) / H;
  ValueId x = g.reshape(h, {rows, H});
  ValueId logits = g.matmul(x, g.param(p + "ffn_gate_inp.weight", {E, H}, dt), false, true);
  auto [ids, weights] = g.moe_route(logits, MoeRouteAttrs{c.experts_per_token, c.norm_topk_prob});
  // Gate and up experts side by side per expert: [E, 2F, H], one product
  // whose rows are gate then up, read in place by one SwiGLU.
  ValueId gate_up = g.concat({g.param(p + "ffn_gate_exps.weight", {E, F, H}, dt),
                              g.param(p + "ffn_up_exps.weight", {E, F, H}, dt)},
                             1);
  ValueId act = g.swiglu_fused(g.moe_matmul(x, gate_up, ids));
  ValueId y = g.moe_matmul(act, g.param(p + "ffn_down_exps.weight", {E, H, F}, dt), ids, weights);
  return g.reshape(y, s);
}

}  // namespace rlx
