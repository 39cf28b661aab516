#include "models/modernbert.h"

#include <cmath>

#include "rlx/error.h"

namespace rlx {
namespace {

std::string layer(int l) { return "layers." + std::to_string(l) + "."; }

struct Builder {
  Graph& g;
  DType dt;
  ValueId param(const std::string& name, Shape s) { return g.param(name, std::move(s), dt); }
  ValueId dense(ValueId x, const std::string& name, int64_t out, int64_t in, bool bias) {
    ValueId y = g.matmul(x, param(name + ".weight", {out, in}), false, true);
    return bias ? g.add(y, param(name + ".bias", {out})) : y;
  }
  ValueId norm(ValueId x, const std::string& name, int64_t h, float eps, bool bias) {
    return g.layer_norm(x, param(name + ".weight", {h}), bias ? param(name + ".bias", {h}) : ValueId(-1), eps);
  }
};

Activation read_activation(const JsonField& j, const char* key) {
  const std::string s = j.string_or(key, "gelu");
  if (s == "gelu") return Activation::Gelu;  // erf form (ACT2FN["gelu"])
  if (s == "gelu_new" || s == "gelu_pytorch_tanh" || s == "gelu_fast") return Activation::GeluTanh;
  if (s == "silu" || s == "swish") return Activation::Silu;
  if (s == "relu") return Activation::Relu;
  RLX_FAIL(j.where() << key << " '" << s << "' is not supported (gelu, gelu_pytorch_tanh, silu, relu are)");
}

// The rope_theta of one layer type in rope_parameters (transformers 5),
// `fallback` where the type is absent; any RoPE but the default is refused.
float rope_theta(const JsonField& j, const char* type, float fallback) {
  if (!j.has("rope_parameters")) return fallback;
  JsonField rp = j.at("rope_parameters").object();
  if (!rp.has(type)) return fallback;
  JsonField t = rp.at(type).object();
  const std::string kind = t.string_or("rope_type", "default");
  RLX_CHECK(kind == "default", t.where() << "rope_type '" << kind << "' is not supported (default is)");
  return float(t.number_or("rope_theta", fallback, 1e-3, 1e12));
}

}  // namespace

void read_modernbert_config(const JsonField& j, BertConfig& c) {
  const BertLimits L;
  const std::string w = j.where();
  ModernBertOptions& o = c.modernbert;
  // ModernBertConfig's defaults where a key is left out.
  c.vocab_size = int(j.integer_or("vocab_size", 50368, 1, L.vocab));
  c.hidden_size = int(j.integer_or("hidden_size", 768, 1, L.hidden));
  c.intermediate_size = int(j.integer_or("intermediate_size", 1152, 1, L.intermediate));
  c.num_hidden_layers = int(j.integer_or("num_hidden_layers", 22, 1, L.layers));
  c.num_attention_heads = int(j.integer_or("num_attention_heads", 12, 1, L.heads));
  c.max_position_embeddings = int(j.integer_or("max_position_embeddings", 8192, 1, L.positions));
  c.layer_norm_eps = float(j.number_or("norm_eps", 1e-5, 0.0, 1.0));
  c.pad_token_id = int(j.integer_or("pad_token_id", 0, 0, c.vocab_size - 1));
  c.type_vocab_size = 0;
  c.position_offset = 0;
  c.hidden_act = read_activation(j, "hidden_activation");
  o.norm_bias = j.boolean_or("norm_bias", false);
  o.attention_bias = j.boolean_or("attention_bias", false);
  o.mlp_bias = j.boolean_or("mlp_bias", false);
  o.local_attention = int(j.integer_or("local_attention", 128, 1, L.positions));
  RLX_CHECK(c.hidden_size % c.num_attention_heads == 0 && c.head_dim() % 2 == 0,
            w << "hidden_size " << c.hidden_size << " over num_attention_heads " << c.num_attention_heads
              << " must give an even head size for rotary positions");
  RLX_CHECK(!j.has("head_dim") || j.at("head_dim").integer() == c.head_dim(),
            w << "head_dim differs from hidden_size / num_attention_heads: not supported");
  RLX_CHECK(!j.has("rope_scaling"), w << "rope_scaling is not supported");

  // Which layers are local: layer_types (transformers 5), else every layer
  // whose index is not a multiple of global_attn_every_n_layers.
  const int64_t every = j.integer_or("global_attn_every_n_layers", 3, 1, L.layers);
  o.local.assign(size_t(c.num_hidden_layers), false);
  if (j.has("layer_types")) {
    JsonField t = j.at("layer_types").array();
    RLX_CHECK(t.size() == size_t(c.num_hidden_layers),
              t.where() << "has " << t.size() << " entries for " << c.num_hidden_layers << " layers");
    for (size_t i = 0; i < t.size(); ++i) {
      const std::string type = t.at(i).string();
      RLX_CHECK(type == "full_attention" || type == "sliding_attention",
                t.at(i).where() << "layer type '" << type << "' is not supported (full_attention, sliding_attention)");
      o.local[i] = type == "sliding_attention";
    }
  } else {
    for (int i = 0; i < c.num_hidden_layers; ++i) o.local[size_t(i)] = i % every != 0;
  }
  o.global_theta = float(j.number_or("global_rope_theta", 160000.0, 1e-3, 1e12));
  // transformers 4 rotates local layers with the global theta where
  // local_rope_theta is null.
  const bool local_null = j.json().contains("local_rope_theta") && j.json()["local_rope_theta"].is_null();
  o.local_theta = local_null ? o.global_theta : float(j.number_or("local_rope_theta", 10000.0, 1e-3, 1e12));
  o.global_theta = rope_theta(j, "full_attention", o.global_theta);
  o.local_theta = rope_theta(j, "sliding_attention", o.local_theta);

  if (c.classifier) {
    const std::string pooling = j.string_or("classifier_pooling", "cls");
    RLX_CHECK(pooling == "cls" || pooling == "mean",
              w << "classifier_pooling '" << pooling << "' is not supported (cls, mean)");
    o.classifier_mean = pooling == "mean";
    o.classifier_bias = j.boolean_or("classifier_bias", false);
    o.classifier_act = read_activation(j, "classifier_activation");
  }
}

std::vector<std::pair<std::string, Shape>> modernbert_tensors(const BertConfig& c) {
  const int64_t H = c.hidden_size, I = c.intermediate_size;
  const ModernBertOptions& o = c.modernbert;
  std::vector<std::pair<std::string, Shape>> t = {{"embeddings.tok_embeddings.weight", {c.vocab_size, H}}};
  auto norm = [&](const std::string& n) {
    t.push_back({n + ".weight", {H}});
    if (o.norm_bias) t.push_back({n + ".bias", {H}});
  };
  auto linear = [&](const std::string& n, int64_t out, int64_t in, bool bias) {
    t.push_back({n + ".weight", {out, in}});
    if (bias) t.push_back({n + ".bias", {out}});
  };
  norm("embeddings.norm");
  for (int l = 0; l < c.num_hidden_layers; ++l) {
    const std::string p = layer(l);
    if (l > 0) norm(p + "attn_norm");
    linear(p + "attn.Wqkv", 3 * H, H, o.attention_bias);
    linear(p + "attn.Wo", H, H, o.attention_bias);
    norm(p + "mlp_norm");
    linear(p + "mlp.Wi", 2 * I, H, o.mlp_bias);
    linear(p + "mlp.Wo", H, I, o.mlp_bias);
  }
  norm("final_norm");
  if (c.classifier) {
    linear("head.dense", H, H, o.classifier_bias);
    norm("head.norm");
    linear("classifier", c.num_labels, H, true);
  }
  return t;
}

ValueId build_modernbert_stack(Graph& g, const BertConfig& c, ValueId ids, ValueId mask, ValueId positions,
                               DType dt) {
  Builder b{g, dt};
  const ModernBertOptions& o = c.modernbert;
  const int64_t H = c.hidden_size, I = c.intermediate_size, seq = g.value(ids).shape[1];
  const float eps = c.layer_norm_eps;
  ValueId x = g.gather(b.param("embeddings.tok_embeddings.weight", {c.vocab_size, H}), ids);
  x = b.norm(x, "embeddings.norm", H, eps, o.norm_bias);

  RopeAttrs rope;
  rope.heads = c.num_attention_heads;
  rope.head_dim = c.head_dim();
  AttentionAttrs attn;
  attn.q_heads = attn.kv_heads = c.num_attention_heads;
  attn.head_dim = c.head_dim();
  attn.scale = 1.f / std::sqrt(float(c.head_dim()));
  attn.mask = MaskKind::Padding;
  // A local layer keeps keys |i - j| <= local_attention / 2, the window
  // |i - j| < half + 1; a sequence no longer than that sees every key anyway
  // (and the GPU keeps its fastest attention).
  const int64_t half = o.local_attention / 2;
  const int64_t local_window = seq - 1 > half ? half + 1 : 0;
  for (int l = 0; l < c.num_hidden_layers; ++l) {
    const std::string p = layer(l);
    const bool local = o.local[size_t(l)];
    rope.theta = local ? o.local_theta : o.global_theta;
    attn.window = local ? local_window : 0;
    ValueId h = l == 0 ? x : b.norm(x, p + "attn_norm", H, eps, o.norm_bias);  // layer 0: Identity
    ValueId qkv = b.dense(h, p + "attn.Wqkv", 3 * H, H, o.attention_bias);
    ValueId q = g.rope(g.narrow(qkv, 2, 0, H), positions, rope);
    ValueId k = g.rope(g.narrow(qkv, 2, H, H), positions, rope);
    ValueId v = g.narrow(qkv, 2, 2 * H, H);
    ValueId ctx = g.attention(q, k, v, mask, attn);
    x = g.add(x, b.dense(ctx, p + "attn.Wo", H, H, o.attention_bias));
    ValueId wi = b.dense(b.norm(x, p + "mlp_norm", H, eps, o.norm_bias), p + "mlp.Wi", 2 * I, H, o.mlp_bias);
    // GeGLU: act(input) * gate, input the first half of Wi's output; the
    // fused op reads both halves in place where its act allows.
    ValueId input = g.narrow(wi, 2, 0, I), gate = g.narrow(wi, 2, I, I);
    const bool fused = c.hidden_act == Activation::Gelu || c.hidden_act == Activation::GeluTanh ||
                       c.hidden_act == Activation::Silu;
    ValueId act = fused ? g.swiglu(input, gate, c.hidden_act) : g.mul(g.activation(input, c.hidden_act), gate);
    x = g.add(x, b.dense(act, p + "mlp.Wo", H, I, o.mlp_bias));
  }
  return b.norm(x, "final_norm", H, eps, o.norm_bias);
}

ValueId build_modernbert_head(Graph& g, const BertConfig& c, ValueId x, ValueId mask, int64_t batch, int64_t seq,
                              DType dt) {
  Builder b{g, dt};
  const ModernBertOptions& o = c.modernbert;
  const int64_t H = c.hidden_size;
  ValueId pooled;
  if (o.classifier_mean) {  // the mean over the tokens the mask keeps
    ValueId m = g.reshape(g.cast(mask, dt), {batch, seq, 1});
    pooled = g.div(g.reduce(g.mul(x, m), 1, ReduceKind::Sum), g.reduce(m, 1, ReduceKind::Sum));
  } else {
    pooled = g.reshape(g.narrow(x, 1, 0, 1), {batch, H});
  }
  ValueId h = g.activation(b.dense(pooled, "head.dense", H, H, o.classifier_bias), o.classifier_act);
  h = b.norm(h, "head.norm", H, c.layer_norm_eps, o.norm_bias);
  return b.dense(h, "classifier", c.num_labels, H, true);
}

}  // namespace rlx
