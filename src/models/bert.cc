#include "models/bert.h"

#include <cmath>
#include <cstring>
#include <filesystem>

#include "models/modernbert.h"
#include "models/nomic_bert.h"
#include "rlx/error.h"

namespace rlx {
namespace {

struct Builder {
  Graph& g;
  DType dt;
  const std::map<std::string, QuantType>* quantized = nullptr;
  ValueId param(const std::string& name, Shape s) { return g.param(name, std::move(s), dt); }
  // x @ W^T + b with W in the Hugging Face [out, in] layout (or its blocks);
  // left unfused so the compiler's passes decide how to fuse it.
  ValueId dense(ValueId x, const std::string& name, int64_t out, int64_t in) {
    ValueId b = param(name + ".bias", {out});
    const std::string w = name + ".weight";
    const auto q = quantized ? quantized->find(w) : std::map<std::string, QuantType>::const_iterator{};
    if (quantized && q != quantized->end()) {
      const QuantType t = q->second;
      ValueId qs = g.param(w + ".quants", {out, in / quant_elems_per_word(t)}, DType::I32);
      ValueId ss = g.param(w + ".scales", {out, in / kQuantBlock * quant_scales_per_block(t)}, DType::F16);
      return g.matmul_q(x, qs, ss, t, b);  // the bias added by the product
    }
    return g.add(g.matmul(x, param(w, {out, in}), false, true), b);
  }
  ValueId norm(ValueId x, const std::string& name, int64_t h, float eps) {
    return g.layer_norm(x, param(name + ".weight", {h}), param(name + ".bias", {h}), eps);
  }
};

}  // namespace

EncoderNames encoder_names(EncoderFamily f) {
  EncoderNames n;
  if (f == EncoderFamily::DistilBert) {
    n.type = "";
    n.layer = "transformer.layer.";
    n.query = "attention.q_lin";
    n.key = "attention.k_lin";
    n.value = "attention.v_lin";
    n.attn_out = "attention.out_lin";
    n.attn_norm = "sa_layer_norm";
    n.ffn_in = "ffn.lin1";
    n.ffn_out = "ffn.lin2";
    n.out_norm = "output_layer_norm";
  } else if (f == EncoderFamily::NomicBert) {
    // The rest of its names are nomic_bert_tensors'.
    n.position = "";
    n.layer = "encoder.layers.";
  } else if (f == EncoderFamily::ModernBert) {
    // The rest of its names are modernbert_tensors'.
    n.word = "embeddings.tok_embeddings";
    n.position = n.type = "";
    n.layer = "layers.";
  }
  return n;
}

std::vector<std::string> encoder_dense_weights(const BertConfig& c) {
  const EncoderNames nm = encoder_names(c.family);
  std::vector<std::string> w;
  for (int l = 0; l < c.num_hidden_layers; ++l) {
    const std::string p = nm.layer + std::to_string(l) + ".";
    for (const std::string* d : {&nm.query, &nm.key, &nm.value, &nm.attn_out, &nm.ffn_in, &nm.ffn_out})
      w.push_back(p + *d + ".weight");
  }
  return w;
}

Graph build_bert_graph(const BertConfig& c, Pooling pooling, int64_t batch, int64_t seq, DType dt,
                       const BertGraphParts& parts) {
  RLX_CHECK(is_float(dt), "bert: compute dtype must be f32, f16 or bf16");
  RLX_CHECK(batch > 0 && seq > 0, "bert: batch and seq must be positive");
  RLX_CHECK(seq <= c.max_tokens(),
            "bert: seq " << seq << " exceeds max_position_embeddings " << c.max_position_embeddings
                         << (c.position_offset ? " less the position offset " + std::to_string(c.position_offset) : ""));
  Graph g;
  Builder b{g, dt, &parts.quantized};
  RLX_CHECK(parts.quantized.empty() || (c.family != EncoderFamily::NomicBert && c.family != EncoderFamily::ModernBert),
            "bert: quantized dense weights are for the BERT-layout families only");
  const EncoderNames nm = encoder_names(c.family);
  const bool token_types = parts.token_types && !nm.type.empty() && c.type_vocab_size > 0;
  const int64_t H = c.hidden_size, I = c.intermediate_size;
  ValueId ids = g.input("input_ids", {batch, seq}, DType::I32);
  ValueId mask = g.input("attention_mask", {batch, seq}, DType::I32);
  ValueId types = token_types ? g.input("token_type_ids", {batch, seq}, DType::I32) : ValueId{};
  // Right padding: every real token's position is its index (+ the offset);
  // padded positions are masked, so their position does not matter.
  std::vector<uint8_t> pos_bytes(size_t(seq) * 4);
  for (int32_t i = 0; i < int32_t(seq); ++i) {
    int32_t p = i + c.position_offset;
    std::memcpy(pos_bytes.data() + 4 * i, &p, 4);
  }
  ValueId positions = g.constant({seq}, DType::I32, std::move(pos_bytes), "position_ids");

  ValueId x;
  if (c.family == EncoderFamily::NomicBert) {
    x = build_nomic_bert_stack(g, c, ids, token_types, types, mask, positions, dt);
  } else if (c.family == EncoderFamily::ModernBert) {
    x = build_modernbert_stack(g, c, ids, mask, positions, dt);
  } else {
    x = g.gather(b.param(nm.word + ".weight", {c.vocab_size, H}), ids);
    x = g.add(x, g.gather(b.param(nm.position + ".weight", {c.max_position_embeddings, H}),
                          positions));  // [seq, H] broadcasts over the batch
    if (token_types) x = g.add(x, g.gather(b.param(nm.type + ".weight", {c.type_vocab_size, H}), types));
    x = b.norm(x, nm.embed_norm, H, c.layer_norm_eps);

    AttentionAttrs attn;
    attn.q_heads = attn.kv_heads = c.num_attention_heads;
    attn.head_dim = c.head_dim();
    attn.scale = 1.f / std::sqrt(float(c.head_dim()));
    attn.mask = MaskKind::Padding;
    for (int l = 0; l < c.num_hidden_layers; ++l) {
      const std::string p = nm.layer + std::to_string(l) + ".";
      ValueId q = b.dense(x, p + nm.query, H, H);
      ValueId k = b.dense(x, p + nm.key, H, H);
      ValueId v = b.dense(x, p + nm.value, H, H);
      ValueId ctx = g.attention(q, k, v, mask, attn);
      ValueId o = b.dense(ctx, p + nm.attn_out, H, H);
      x = b.norm(g.add(o, x), p + nm.attn_norm, H, c.layer_norm_eps);
      ValueId f = g.activation(b.dense(x, p + nm.ffn_in, I, H), c.hidden_act);
      f = b.dense(f, p + nm.ffn_out, H, I);
      x = b.norm(g.add(f, x), p + nm.out_norm, H, c.layer_norm_eps);
    }
  }
  g.output("last_hidden_state", x);
  if (c.classifier && c.family == EncoderFamily::ModernBert) {
    g.output("logits", build_modernbert_head(g, c, x, mask, batch, seq, dt));
    return g;
  }
  if (c.classifier) {
    // Each family's head on the first token: BERT tanh(pooler) then
    // classifier; RoBERTa tanh(classifier.dense) then classifier.out_proj;
    // DistilBERT relu(pre_classifier) then classifier.
    ValueId first = g.reshape(g.narrow(x, 1, 0, 1), {batch, H});
    const ClassifierNames h = classifier_names(c.family);
    ValueId pooled = g.activation(b.dense(first, h.hidden, H, H), h.act);
    g.output("logits", b.dense(pooled, h.out, c.num_labels, H));
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

ClassifierNames classifier_names(EncoderFamily f) {
  if (f == EncoderFamily::Roberta) return {"classifier.dense", "classifier.out_proj", Activation::Tanh};
  if (f == EncoderFamily::DistilBert) return {"pre_classifier", "classifier", Activation::Relu};
  return {"pooler.dense", "classifier", Activation::Tanh};
}

BertWeights::BertWeights(const std::string& path) : file_(path) {
  // ModernBERT names its table tok_embeddings; its heads keep it under "model.".
  for (const char* table : {"embeddings.word_embeddings.weight", "embeddings.tok_embeddings.weight"}) {
    if (file_.has(table)) return;
    for (const char* p : {"bert.", "roberta.", "distilbert.", "model."})
      if (file_.has(std::string(p) + table)) prefix_ = p;
  }
}

std::string BertWeights::file_name(const std::string& param) const {
  // The heads sit beside the encoder, outside its prefix.
  for (const char* head : {"classifier.", "pre_classifier.", "head."})
    if (param.rfind(head, 0) == 0) return param;
  return prefix_ + param;
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
  const EncoderNames nm = encoder_names(c.family);
  if (c.family == EncoderFamily::NomicBert) {
    for (const auto& [name, shape] : nomic_bert_tensors(c)) expect(name, shape);
  } else if (c.family == EncoderFamily::ModernBert) {
    for (const auto& [name, shape] : modernbert_tensors(c)) expect(name, shape);
  } else {
    expect(nm.word + ".weight", {c.vocab_size, H});
    expect(nm.position + ".weight", {c.max_position_embeddings, H});
    if (!nm.type.empty()) expect(nm.type + ".weight", {c.type_vocab_size, H});
    const std::string last = nm.layer + std::to_string(c.num_hidden_layers - 1) + ".";
    expect(last + nm.ffn_in + ".weight", {c.intermediate_size, H});
    expect(last + nm.out_norm + ".weight", {H});
  }
  // Layers past the config's are weights it would silently not run.
  const std::string layers = prefix_ + nm.layer;
  for (const std::string& name : file_.names()) {
    if (name.rfind(layers, 0) != 0) continue;
    const size_t end = name.find('.', layers.size());
    const std::string n = name.substr(layers.size(), end == std::string::npos ? end : end - layers.size());
    RLX_CHECK(n.empty() || n.size() > 9 || n.find_first_not_of("0123456789") != std::string::npos ||
                  std::stoll(n) < c.num_hidden_layers,
              "bert: '" << file_.path() << "': tensor '" << name << "' belongs to layer " << n
                        << ", but config.json says num_hidden_layers " << c.num_hidden_layers
                        << " (weights the config does not use)");
  }
  if (c.classifier && c.family != EncoderFamily::ModernBert) {  // its head is in modernbert_tensors
    const ClassifierNames h = classifier_names(c.family);
    expect(h.hidden + ".weight", {H, H});
    expect(h.out + ".weight", {c.num_labels, H});
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
  co.int8_products = o.int8_products;
  auto exe = compile(g, co);
  w.load_into(*exe, g);
  return exe;
}

}  // namespace rlx
