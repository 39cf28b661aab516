#include "models/nomic_bert.h"

#include <cmath>

#include "rlx/error.h"

namespace rlx {
namespace {

std::string layer(int l) { return "encoder.layers." + std::to_string(l) + "."; }

struct Builder {
  Graph& g;
  DType dt;
  ValueId param(const std::string& name, Shape s) { return g.param(name, std::move(s), dt); }
  ValueId dense(ValueId x, const std::string& name, int64_t out, int64_t in, bool bias) {
    ValueId y = g.matmul(x, param(name + ".weight", {out, in}), false, true);
    return bias ? g.add(y, param(name + ".bias", {out})) : y;
  }
  ValueId norm(ValueId x, const std::string& name, int64_t h, float eps) {
    return g.layer_norm(x, param(name + ".weight", {h}), param(name + ".bias", {h}), eps);
  }
};

}  // namespace

void read_nomic_bert_config(const JsonField& j, BertConfig& c) {
  const BertLimits L;
  const std::string w = j.where();
  // transformers 5 saves nomic_bert in its own layout (hidden_size, q_proj,
  // ...); rlx reads nomic's checkpoints, the ones on the Hub.
  RLX_CHECK(j.has("n_embd") || !j.has("hidden_size"),
            w << "hidden_size without n_embd: this is transformers' NomicBertConfig layout; rlx reads nomic's "
                 "checkpoint layout (n_embd, n_head, attn.Wqkv, mlp.fc11, ...)");
  // GPT2Config's defaults where nomic's config leaves a key out.
  c.hidden_size = int(j.integer_or("n_embd", 768, 1, L.hidden));
  c.num_hidden_layers = int(j.integer_or("n_layer", 12, 1, L.layers));
  c.num_attention_heads = int(j.integer_or("n_head", 12, 1, L.heads));
  c.layer_norm_eps = float(j.number_or("layer_norm_epsilon", 1e-5, 0.0, 1.0));
  c.max_position_embeddings = int(j.integer_or("n_positions", 1024, 1, L.positions));
  c.type_vocab_size = int(j.integer_or("type_vocab_size", 2, 0, L.type_vocab));
  c.vocab_size = int(j.integer_or("vocab_size", 50257, 1, L.vocab));
  // NomicBertModel pads the vocabulary up to pad_vocab_size_multiple rows.
  const int64_t multiple = j.integer_or("pad_vocab_size_multiple", 1, 1, 1 << 16);
  c.vocab_size = int((int64_t(c.vocab_size) + multiple - 1) / multiple * multiple);
  RLX_CHECK(c.vocab_size <= L.vocab, w << "vocab_size padded to " << c.vocab_size << " is over " << L.vocab);
  c.pad_token_id = int(j.integer_or("pad_token_id", 0, 0, c.vocab_size - 1));
  c.position_offset = 0;

  auto refuse_true = [&](const char* key, const char* why) {
    RLX_CHECK(!j.boolean_or(key, false), w << key << " is true: " << why << " is not supported");
  };
  refuse_true("prenorm", "a pre-norm NomicBERT");
  refuse_true("causal", "causal attention in an encoder");
  refuse_true("use_rms_norm", "RMS norm");
  refuse_true("parallel_block", "a parallel attention/MLP block");
  const double fraction = j.number_or("rotary_emb_fraction", 0.0, 0.0, 1.0);
  RLX_CHECK(fraction == 1.0, w << "rotary_emb_fraction " << fraction
                               << " is not supported (1.0: rotary positions over the whole head)");
  RLX_CHECK(!j.has("rotary_emb_scale_base"), w << "rotary_emb_scale_base (xPos scaling) is not supported");
  RLX_CHECK(!j.has("num_heads_kv") || j.at("num_heads_kv").integer() == c.num_attention_heads,
            w << "num_heads_kv differs from n_head: grouped attention is not supported");
  c.nomic.rotary_base = float(j.number_or("rotary_emb_base", 10000.0, 1e-3, 1e12));
  c.nomic.rotary_interleaved = j.boolean_or("rotary_emb_interleaved", false);
  c.nomic.qkv_bias = j.boolean_or("qkv_proj_bias", true);
  c.nomic.fc1_bias = j.boolean_or("mlp_fc1_bias", true);
  c.nomic.fc2_bias = j.boolean_or("mlp_fc2_bias", true);
  const std::string act = j.string_or("activation_function", "gelu_new");
  RLX_CHECK(act == "swiglu" || act == "geglu",
            w << "activation_function '" << act << "' is not supported (swiglu and geglu are)");
  c.nomic.gate_act = act == "swiglu" ? Activation::Silu : Activation::Gelu;
  c.hidden_act = c.nomic.gate_act;
  // n_inner absent: the gated MLP's own default, 8/3 of the width rounded up to 256.
  const int64_t fallback = (int64_t(8 * c.hidden_size / 3) + 255) / 256 * 256;
  c.intermediate_size = int(j.integer_or("n_inner", fallback, 1, L.intermediate));
  // Past max_trained_positions a rotary_scaling_factor changes the base with
  // the sequence length (dynamic NTK); within it the base is the config's.
  if (j.has("rotary_scaling_factor")) {
    const int64_t trained = j.integer_or("max_trained_positions", 2048, 1, L.positions);
    c.max_position_embeddings = int(std::min<int64_t>(c.max_position_embeddings, trained));
  }
  RLX_CHECK(c.hidden_size % c.num_attention_heads == 0 && (c.head_dim() % 2) == 0,
            w << "n_embd " << c.hidden_size << " over n_head " << c.num_attention_heads
              << " must give an even head size for rotary positions");
}

std::vector<std::pair<std::string, Shape>> nomic_bert_tensors(const BertConfig& c) {
  const int64_t H = c.hidden_size, I = c.intermediate_size;
  const NomicOptions& o = c.nomic;
  std::vector<std::pair<std::string, Shape>> t = {{"embeddings.word_embeddings.weight", {c.vocab_size, H}},
                                                  {"emb_ln.weight", {H}}, {"emb_ln.bias", {H}}};
  if (c.type_vocab_size > 0) t.push_back({"embeddings.token_type_embeddings.weight", {c.type_vocab_size, H}});
  for (int l = 0; l < c.num_hidden_layers; ++l) {
    const std::string p = layer(l);
    auto linear = [&](const std::string& n, int64_t out, int64_t in, bool bias) {
      t.push_back({p + n + ".weight", {out, in}});
      if (bias) t.push_back({p + n + ".bias", {out}});
    };
    linear("attn.Wqkv", 3 * H, H, o.qkv_bias);
    linear("attn.out_proj", H, H, o.qkv_bias);
    linear("mlp.fc11", I, H, o.fc1_bias);
    linear("mlp.fc12", I, H, o.fc1_bias);
    linear("mlp.fc2", H, I, o.fc2_bias);
    for (const char* n : {"norm1", "norm2"}) {
      t.push_back({p + n + ".weight", {H}});
      t.push_back({p + n + ".bias", {H}});
    }
  }
  return t;
}

ValueId build_nomic_bert_stack(Graph& g, const BertConfig& c, ValueId ids, bool token_types, ValueId types,
                               ValueId mask, ValueId positions, DType dt) {
  Builder b{g, dt};
  const NomicOptions& o = c.nomic;
  const int64_t H = c.hidden_size, I = c.intermediate_size;
  ValueId x = g.gather(b.param("embeddings.word_embeddings.weight", {c.vocab_size, H}), ids);
  if (token_types)
    x = g.add(x, g.gather(b.param("embeddings.token_type_embeddings.weight", {c.type_vocab_size, H}), types));
  x = b.norm(x, "emb_ln", H, c.layer_norm_eps);

  RopeAttrs rope;
  rope.heads = c.num_attention_heads;
  rope.head_dim = c.head_dim();
  rope.theta = o.rotary_base;
  rope.interleaved = o.rotary_interleaved;
  AttentionAttrs attn;
  attn.q_heads = attn.kv_heads = c.num_attention_heads;
  attn.head_dim = c.head_dim();
  attn.scale = 1.f / std::sqrt(float(c.head_dim()));
  attn.mask = MaskKind::Padding;
  for (int l = 0; l < c.num_hidden_layers; ++l) {
    const std::string p = layer(l);
    ValueId qkv = b.dense(x, p + "attn.Wqkv", 3 * H, H, o.qkv_bias);
    ValueId q = g.rope(g.narrow(qkv, 2, 0, H), positions, rope);
    ValueId k = g.rope(g.narrow(qkv, 2, H, H), positions, rope);
    ValueId v = g.narrow(qkv, 2, 2 * H, H);
    ValueId ctx = g.attention(q, k, v, mask, attn);
    x = b.norm(g.add(b.dense(ctx, p + "attn.out_proj", H, H, o.qkv_bias), x), p + "norm1", H, c.layer_norm_eps);
    ValueId up = b.dense(x, p + "mlp.fc11", I, H, o.fc1_bias);
    ValueId gate = b.dense(x, p + "mlp.fc12", I, H, o.fc1_bias);
    ValueId f = b.dense(g.swiglu(gate, up, o.gate_act), p + "mlp.fc2", H, I, o.fc2_bias);
    x = b.norm(g.add(f, x), p + "norm2", H, c.layer_norm_eps);
  }
  return x;
}

}  // namespace rlx
