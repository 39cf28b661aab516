// Graph queries and small model layers shared by the pass tests.
#pragma once
#include <string>

#include "rlx/graph.h"

namespace rlx::test {

inline int count_live(const Graph& g, OpKind op) {
  int n = 0;
  for (const Node& node : g.nodes()) n += !node.dead && node.op == op;
  return n;
}

// The live node producing v.
inline const Node& producer_of(const Graph& g, ValueId v) { return g.node(g.value(v).producer); }

// The value a graph output currently points to.
inline ValueId output_value(const Graph& g, const std::string& name) {
  for (const auto& [n, v] : g.outputs())
    if (n == name) return v;
  return -1;
}

struct LayerDims {
  int64_t batch = 2, seq = 7, heads = 3, head_dim = 5, ffn = 33;
  int64_t hidden() const { return heads * head_dim; }
};

// A BERT-like post-norm encoder layer, unfused, as a model loader writes it:
// separate q/k/v projections with biases, padding-masked attention, residual
// adds followed by layer norms, a GELU feed-forward block.
inline void build_bert_layer(Graph& g, const LayerDims& d, const std::string& p, ValueId x, ValueId mask,
                             ValueId& out) {
  const int64_t h = d.hidden();
  auto linear = [&](ValueId in, const std::string& name, int64_t n_out, int64_t n_in) {
    ValueId w = g.param(p + name + ".weight", {n_out, n_in}, DType::F32);
    ValueId b = g.param(p + name + ".bias", {n_out}, DType::F32);
    return g.add(g.matmul(in, w, false, true), b);
  };
  ValueId q = linear(x, "q", h, h), k = linear(x, "k", h, h), v = linear(x, "v", h, h);
  AttentionAttrs at;
  at.q_heads = at.kv_heads = int(d.heads);
  at.head_dim = int(d.head_dim);
  at.scale = 0.37f;
  at.mask = MaskKind::Padding;
  ValueId ctx = g.attention(q, k, v, mask, at);
  ValueId attn = linear(ctx, "o", h, h);
  ValueId h1 = g.layer_norm(g.add(attn, x), g.param(p + "ln1.gamma", {h}, DType::F32),
                            g.param(p + "ln1.beta", {h}, DType::F32), 1e-5f);
  ValueId f = g.gelu(linear(h1, "ffn1", d.ffn, h));
  ValueId f2 = linear(f, "ffn2", h, d.ffn);
  out = g.layer_norm(g.add(f2, h1), g.param(p + "ln2.gamma", {h}, DType::F32),
                     g.param(p + "ln2.beta", {h}, DType::F32), 1e-5f);
}

// A LLaMA-like pre-norm decoder layer: rms norms, q/k/v without bias, rotary
// embeddings on q and k, grouped-query causal attention, SiLU-gated MLP; the
// residual sum h is read twice (by the second norm and the last add).
inline ValueId build_llama_layer(Graph& g, const LayerDims& d, int64_t kv_heads, const std::string& p,
                                 ValueId x, ValueId pos) {
  const int64_t h = d.hidden(), kv = kv_heads * d.head_dim;
  auto proj = [&](ValueId in, const std::string& name, int64_t n_out, int64_t n_in) {
    return g.matmul(in, g.param(p + name, {n_out, n_in}, DType::F32), false, true);
  };
  ValueId n1 = g.rms_norm(x, g.param(p + "attn_norm", {h}, DType::F32), 1e-6f);
  ValueId q = proj(n1, "wq", h, h), k = proj(n1, "wk", kv, h), v = proj(n1, "wv", kv, h);
  RopeAttrs rq;
  rq.heads = int(d.heads);
  rq.head_dim = int(d.head_dim);
  rq.n_rot = int(d.head_dim & ~int64_t(1));
  RopeAttrs rk = rq;
  rk.heads = int(kv_heads);
  q = g.rope(q, pos, rq);
  k = g.rope(k, pos, rk);
  AttentionAttrs at;
  at.q_heads = int(d.heads);
  at.kv_heads = int(kv_heads);
  at.head_dim = int(d.head_dim);
  at.scale = 0.41f;
  at.mask = MaskKind::Causal;
  ValueId hsum = g.add(x, proj(g.attention(q, k, v, -1, at), "wo", h, h));
  ValueId n2 = g.rms_norm(hsum, g.param(p + "ffn_norm", {h}, DType::F32), 1e-6f);
  ValueId gate = proj(n2, "w_gate", d.ffn, h), up = proj(n2, "w_up", d.ffn, h);
  ValueId down = proj(g.swiglu(gate, up), "w_down", h, d.ffn);  // as models/llama.cc builds it
  return g.add(hsum, down);
}

}  // namespace rlx::test
