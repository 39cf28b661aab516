#include "models/encoder_demo.h"

#include <cmath>

namespace rlx {

Graph build_encoder_demo(const EncoderShape& s) {
  auto in = [](const char* what, int v, int lo, int hi) {
    RLX_CHECK(v >= lo && v <= hi, "encoder demo: " << what << " " << v << " is outside [" << lo << ", " << hi << "]");
  };
  in("layers", s.layers, 0, 1024);
  in("hidden", s.hidden, 1, 1 << 16);
  in("heads", s.heads, 1, s.hidden);
  in("ffn", s.ffn, 1, 1 << 18);
  in("vocab", s.vocab, 1, 1 << 22);
  in("max_positions", s.max_positions, 1, 1 << 16);
  in("batch", s.batch, 1, 1 << 20);
  in("seq", s.seq, 1, 1 << 20);
  RLX_CHECK(s.hidden % s.heads == 0,
            "encoder demo: hidden " << s.hidden << " is not a multiple of heads " << s.heads);
  Graph g;
  const int64_t B = s.batch, S = s.seq, H = s.hidden, F = s.ffn;
  const DType dt = s.dtype;
  RLX_CHECK(S <= s.max_positions, "encoder demo: seq " << S << " exceeds max_positions " << s.max_positions);
  ValueId ids = g.input("input_ids", {B, S}, DType::I32);
  ValueId mask = g.input("attention_mask", {B, S}, DType::I32);
  std::vector<int32_t> pos(static_cast<size_t>(S));
  for (int64_t i = 0; i < S; ++i) pos[size_t(i)] = int32_t(i);
  std::vector<uint8_t> pos_bytes(pos.size() * 4);
  std::memcpy(pos_bytes.data(), pos.data(), pos_bytes.size());
  ValueId positions = g.constant({S}, DType::I32, pos_bytes, "positions");

  ValueId x = g.add(g.gather(g.param("word_embeddings", {s.vocab, H}, dt), ids),
                    g.gather(g.param("position_embeddings", {s.max_positions, H}, dt), positions));
  x = g.layer_norm(x, g.param("emb_ln.gamma", {H}, dt), g.param("emb_ln.beta", {H}, dt), 1e-12f);

  auto linear = [&](ValueId in, const std::string& name, int64_t out, int64_t inner) {
    ValueId y = g.matmul(in, g.param(name + ".weight", {out, inner}, dt), false, true);
    return g.add(y, g.param(name + ".bias", {out}, dt));
  };
  AttentionAttrs at;
  at.q_heads = at.kv_heads = s.heads;
  at.head_dim = s.hidden / s.heads;
  at.scale = 1.f / std::sqrt(float(at.head_dim));
  at.mask = MaskKind::Padding;
  for (int l = 0; l < s.layers; ++l) {
    std::string p = "layer." + std::to_string(l) + ".";
    ValueId q = linear(x, p + "query", H, H), k = linear(x, p + "key", H, H),
            v = linear(x, p + "value", H, H);
    ValueId ctx = g.attention(q, k, v, mask, at);
    ValueId a = linear(ctx, p + "attn_out", H, H);
    x = g.layer_norm(g.add(a, x), g.param(p + "attn_ln.gamma", {H}, dt),
                     g.param(p + "attn_ln.beta", {H}, dt), 1e-12f);
    ValueId f = g.gelu(linear(x, p + "ffn_in", F, H));
    ValueId o = linear(f, p + "ffn_out", H, F);
    x = g.layer_norm(g.add(o, x), g.param(p + "ffn_ln.gamma", {H}, dt),
                     g.param(p + "ffn_ln.beta", {H}, dt), 1e-12f);
  }
  g.output("hidden", x);
  return g;
}

}  // namespace rlx
