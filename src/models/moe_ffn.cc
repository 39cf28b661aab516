// The sparse FFN block of a mixture-of-experts decoder layer (moe.h).
#include "models/moe.h"

#include "rlx/quant.h"

namespace rlx {

namespace {

// Expert params [E, n, k] of one name: floats, or quants and scales.
struct Experts {
  ValueId w = -1, quants = -1, scales = -1;
};
Experts expert_params(Graph& g, const std::string& name, int64_t E, int64_t n, int64_t k, DType dt,
                      const QuantType* t) {
  if (!t) return {g.param(name, {E, n, k}, dt)};
  return {-1, g.param(name + ".quants", {E, n, k / quant_elems_per_word(*t)}, DType::I32),
          g.param(name + ".scales", {E, n, k / kQuantBlock * quant_scales_per_block(*t)}, DType::F16)};
}

const QuantType* planned(const std::map<std::string, QuantType>& q, const std::string& name) {
  auto it = q.find(name);
  return it == q.end() ? nullptr : &it->second;
}

}  // namespace

ValueId build_moe_ffn(Graph& g, const LlamaConfig& c, ValueId h, const std::string& p, DType dt,
                      const std::map<std::string, QuantType>& quantized) {
  const Shape s = g.value(h).shape;
  const int64_t H = c.hidden_size, E = c.num_experts, F = c.expert_ffn, rows = numel(s) / H;
  ValueId x = g.reshape(h, {rows, H});
  ValueId logits = g.matmul(x, g.param(p + "ffn_gate_inp.weight", {E, H}, dt), false, true);
  auto [ids, weights] = g.moe_route(logits, MoeRouteAttrs{c.experts_per_token, c.norm_topk_prob});
  // Gate and up experts side by side per expert: [E, 2F, H], one product
  // whose rows are gate then up, read in place by one SwiGLU.
  const QuantType* tg = planned(quantized, p + "ffn_gate_exps.weight");
  const QuantType* tu = planned(quantized, p + "ffn_up_exps.weight");
  RLX_CHECK(bool(tg) == bool(tu) && (!tg || *tg == *tu),
            "moe: '" << p << "ffn_gate_exps.weight' and '" << p << "ffn_up_exps.weight' must be quantized alike");
  const Experts gate = expert_params(g, p + "ffn_gate_exps.weight", E, F, H, dt, tg);
  const Experts up = expert_params(g, p + "ffn_up_exps.weight", E, F, H, dt, tu);
  ValueId act = g.swiglu_fused(
      tg ? g.moe_matmul_q(x, g.concat({gate.quants, up.quants}, 1), g.concat({gate.scales, up.scales}, 1), *tg, ids)
         : g.moe_matmul(x, g.concat({gate.w, up.w}, 1), ids));
  const QuantType* td = planned(quantized, p + "ffn_down_exps.weight");
  const Experts down = expert_params(g, p + "ffn_down_exps.weight", E, H, F, dt, td);
  ValueId y = td ? g.moe_matmul_q(act, down.quants, down.scales, *td, ids, weights)
                 : g.moe_matmul(act, down.w, ids, weights);
  return g.reshape(y, s);
}

}  // namespace rlx
