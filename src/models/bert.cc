#include "models/bert.h"

#include <cmath>
#include <cstring>
#include <filesystem>

#include "rlx/error.h"

namespace rlx {
namespace {

struct Builder {
  Graph& g;
  DType dt;
  ValueId param(const std::string& name, Shape s) { return g.param(name, std::move(s), dt); }
  // x @ W^T + b with W in the Hugging Face [out, in] layout; left unfused so
  // the compiler's passes decide how to fuse it.
  ValueId dense(ValueId x, const std::string& name, int64_t out, int64_t in) {
    ValueId w = param(name + ".weight", {out, in});
    ValueId b = param(name + ".bias", {out});
    return g.add(g.matmul(x, w, false, true), b);
  }
  ValueId norm(ValueId x, const std::string& name, int64_t h, float eps) {
    return g.layer_norm(x, param(name + ".weight", {h}), param(name + ".bias", {h}), eps);
  }
};

}  // namespace

Graph build_bert_graph(const BertConfig& c, Pooling pooling, int64_t batch, int64_t seq, DType dt,
                       const BertGraphParts& parts) {
  RLX_CHECK(is_float(dt), "bert: compute dtype must be f32, f16 or bf16");
  RLX_CHECK(batch > 0 && seq > 0, "bert: batch and seq must be positive");
  RLX_CHECK(seq <= c.max_position_embeddings,
            "bert: seq " << seq << " exceeds max_position_embeddings " << c.max_position_embeddings);
  Graph g;
  Builder b{g, dt};
  const int64_t H = c.hidden_size, I = c.intermediate_size;
  ValueId ids = g.input("input_ids", {batch, seq}, DType::I32);
  ValueId mask = g.input("attention_mask", {batch, seq}, DType::I32);
  ValueId types = parts.token_types ? g.input("token_type_ids", {batch, seq}, DType::I32) : ValueId{};
  std::vector<uint8_t> pos_bytes(size_t(seq) * 4);
  for (int32_t i = 0; i < int32_t(seq); ++i) std::memcpy(pos_bytes.data() + 4 * i, &i, 4);
  ValueId positions = g.constant({seq}, DType::I32, std::move(pos_bytes), "position_ids");

  ValueId x = g.gather(b.param("embeddings.word_embeddings.weight", {c.vocab_size, H}), ids);
  x = g.add(x, g.gather(b.param("embeddings.position_embeddings.weight",
                                {c.max_position_embeddings, H}),
                        positions));  // [seq, H] broadcasts over the batch
  if (parts.token_types)
    x = g.add(x, g.gather(b.param("embeddings.token_type_embeddings.weight", {c.type_vocab_size, H}),
                          types));
  x = b.norm(x, "embeddings.LayerNorm", H, c.layer_norm_eps);

  AttentionAttrs attn;
  attn.q_heads = attn.kv_heads = c.num_attention_heads;
  attn.head_dim = c.head_dim();
  attn.scale = 1.f / std::sqrt(float(c.head_dim()));
  attn.mask = MaskKind::Padding;
  for (int l = 0; l < c.num_hidden_layers; ++l) {
    const std::string p = "encoder.layer." + std::to_string(l) + ".";
    ValueId q = b.dense(x, p + "attention.self.query", H, H);
    ValueId k = b.dense(x, p + "attention.self.key", H, H);
    ValueId v = b.dense(x, p + "attention.self.value", H, H);
    ValueId ctx = g.attention(q, k, v, mask, attn);
    ValueId o = b.dense(ctx, p + "attention.output.dense", H, H);
    x = b.norm(g.add(o, x), p + "attention.output.LayerNorm", H, c.layer_norm_eps);
    ValueId f = g.activation(b.dense(x, p + "intermediate.dense", I, H), c.hidden_act);
    f = b.dense(f, p + "output.dense", H, I);
    x = b.norm(g.add(f, x), p + "output.LayerNorm", H, c.layer_norm_eps);
  }
  g.output("last_hidden_state", x);
  if (c.classifier) {
    // BertForSequenceClassification: tanh(pooler(x[:, 0])) then the classifier.
    ValueId first = g.reshape(g.narrow(x, 1, 0, 1), {batch, H});
    ValueId pooled = g.activation(b.dense(first, "pooler.dense", H, H), Activation::Tanh);
    g.output("logits", b.dense(pooled, "classifier", c.num_labels, H));
    return g;
  }
  // The other pooling modes run on the host, from last_hidden_state.
  if (!parts.pooled || (pooling != Pooling::Cls && pooling != Pooling::Mean)) return g;

  ValueId pooled;
  if (pooling == Pooling::Cls) {
    pooled = g.reshape(g.narrow(x, 1, 0, 1), {batch, H});
  } else {  // mean over the tokens the mask keeps
    ValueId m = g.reshape(g.cast(mask, dt), {batch, seq, 1});
    ValueId sum = g.reduce(g.mul(x, m), 1, ReduceKind::Sum);  // [B, H]
    ValueId count = g.reduce(m, 1, ReduceKind::Sum);         // [B, 1]
    pooled = g.div(sum, count);
  }
  g.output("embedding", pooled);
  return g;
}

BertWeights::BertWeights(const std::string& path) : file_(path) {
  if (!file_.has("embeddings.word_embeddings.weight") &&
      file_.has("bert.embeddings.word_embeddings.weight"))
    prefix_ = "bert.";
}

void BertWeights::check_sizes(const BertConfig& c) const {
  auto expect = [&](const std::string& param, Shape want) {
    const std::string name = file_name(param);
    RLX_CHECK(file_.has(name), "bert: '" << file_.path() << "' has no tensor '" << name
                                         << "' (config.json asks for " << c.num_hidden_layers
                                         << " layers)");
    const SafetensorInfo& t = file_.info(name);
    RLX_CHECK(t.shape == want, "bert: '" << file_.path() << "', tensor '" << name << "' has shape "
                                         << shape_str(t.shape) << ", config.json needs "
                                         << shape_str(want));
  };
  const int64_t H = c.hidden_size;
  expect("embeddings.word_embeddings.weight", {c.vocab_size, H});
  expect("embeddings.position_embeddings.weight", {c.max_position_embeddings, H});
  expect("embeddings.token_type_embeddings.weight", {c.type_vocab_size, H});
  const std::string last = "encoder.layer." + std::to_string(c.num_hidden_layers - 1) + ".";
  expect(last + "intermediate.dense.weight", {c.intermediate_size, H});
  expect(last + "output.LayerNorm.weight", {H});
  if (c.classifier) {
    expect("pooler.dense.weight", {H, H});
    expect("classifier.weight", {c.num_labels, H});
  }
}

void BertWeights::validate(const Graph& g) const {
  for (const Node& n : g.nodes()) {
    if (n.op != OpKind::Param) continue;
    const std::string name = file_name(n.name);
    RLX_CHECK(file_.has(name), "bert: '" << file_.path() << "' has no tensor '" << name << "'");
    const SafetensorInfo& t = file_.info(name);
    const Shape& want = g.value(n.outputs[0]).shape;
    RLX_CHECK(t.shape == want, "bert: '" << file_.path() << "', tensor '" << name << "' has shape "
                                         << shape_str(t.shape) << ", the config needs "
                                         << shape_str(want));
  }
}

void BertWeights::load_into(Executable& exe, const Graph& g) const {
  for (const Node& n : g.nodes()) {
    if (n.op != OpKind::Param) continue;
    std::vector<float> v = file_.to_f32(file_name(n.name));
    exe.set_param_f32(n.name, v.data(), v.size());
  }
}

std::unique_ptr<Executable> load_bert(const std::string& dir, const BertLoadOptions& o) {
  BertConfig cfg = load_bert_config(dir);
  SentenceConfig sc = load_sentence_config(dir);
  auto path = (std::filesystem::path(dir) / "model.safetensors").string();
  BertWeights w(path);
  w.check_sizes(cfg);
  Graph g = build_bert_graph(cfg, sc.pooling, o.batch, o.seq, o.dtype);
  w.validate(g);
  CompileOptions co;
  co.device = o.device;
  co.mode = o.mode;
  co.trace_json = o.trace_json;
  co.threads = o.threads;
  auto exe = compile(g, co);
  w.load_into(*exe, g);
  return exe;
}

}  // namespace rlx
