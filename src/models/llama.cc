#include "models/llama.h"

#include <cmath>
#include <cstring>
#include <set>

#include "models/gguf.h"
#include "models/gguf_held_quant.h"
#include "models/llama_shard.h"
#include "models/moe.h"
#include "models/rope_scaling.h"
#include "rlx/error.h"

namespace rlx {

namespace {

// What the graph ends in: the LM head (generation), or the final norm's
// hidden states (an embedder's Transformer module).
enum class Head { Logits, HiddenRows, HiddenAll };

bool is_local_layer(const LlamaConfig& c, int l) {
  return !c.local_layers.empty() && c.local_layers[size_t(l)] && c.sliding_window > 0;
}

// A ring pays where the window plus a run (and the margin) is shorter than the cache.
bool ring_pays(const LlamaConfig& c, int64_t cache_len, int64_t window_run) {
  return cache_len > 0 && window_run > 0 && c.sliding_window > 0 &&
         kv_ring_rows(c.sliding_window, window_run) < cache_len;
}

Graph build_graph(const LlamaConfig& c, int64_t batch, int64_t seq, DType dt, int64_t cache_len, LlamaFeed feed,
                  const SamplingOptions& sampling, const QuantizedWeights& quantized, const LlamaPool& pool,
                  Head out, int64_t window_run) {
  RLX_CHECK(is_float(dt), "llama: compute dtype must be f32, f16 or bf16");
  RLX_CHECK(batch > 0 && seq > 0, "llama: batch and seq must be positive");
  RLX_CHECK(seq <= c.max_positions, "llama: seq " << seq << " exceeds the context length " << c.max_positions);
  RLX_CHECK(cache_len >= 0 && cache_len <= c.max_positions && (cache_len == 0 || seq <= cache_len),
            "llama: a KV cache of " << cache_len << " rows for " << seq << " tokens (context length "
                                    << c.max_positions << ")");
  const bool cached = cache_len > 0, from_state = feed == LlamaFeed::State;
  RLX_CHECK(!from_state || (cached && seq == 1), "llama: a graph fed from state is a cached decode step (seq 1)");
  const bool pooled = pool.slots > 0;
  RLX_CHECK(!pooled || (cached && !from_state), "llama: a cache pool needs a KV cache and input-fed runs");
  RLX_CHECK(out == Head::Logits || !cached, "llama: hidden states come from a graph without a KV cache");
  const bool ring = ring_pays(c, cache_len, window_run);
  RLX_CHECK(!ring || seq <= window_run, "llama: a run of " << seq << " tokens over window caches made for runs of "
                                                           << window_run);
  Graph g;
  // The decode loop's state, first so that every cached graph places it alike.
  const bool loop_state = cached && !pooled;
  const ValueId next_token = loop_state ? g.state("next_token", {batch, 1}, DType::I32) : -1;
  const ValueId next_pos = loop_state ? g.state("next_pos", {batch}, DType::I32) : -1;
  auto i32_per_batch = [&](const std::string& name, auto value_of) {
    std::vector<uint8_t> bytes(size_t(batch) * 4);
    for (int64_t b = 0; b < batch; ++b) {
      const int32_t v = int32_t(value_of(b));
      std::memcpy(bytes.data() + b * 4, &v, 4);
    }
    return g.constant({batch}, DType::I32, std::move(bytes), name);
  };
  const int64_t H = c.hidden_size, F = c.intermediate_size, hd = c.head_dim;
  const int64_t q_dim = int64_t(c.num_heads) * hd, kv_dim = int64_t(c.num_kv_heads) * hd;
  auto param = [&](const std::string& name, Shape s) { return g.param(name, std::move(s), dt); };
  // x @ W^T with W in the [out, in] layout GGUF and Hugging Face share.
  auto dense = [&](ValueId x, const std::string& name, int64_t out, int64_t in) {
    auto q = quantized.find(name);
    if (q == quantized.end()) return g.matmul(x, param(name, {out, in}), false, true);
    return g.matmul_q(x, g.param(name + ".quants", {out, in / quant_elems_per_word(q->second)}, DType::I32),
                      g.param(name + ".scales", {out, in / kQuantBlock * quant_scales_per_block(q->second)}, DType::F16),
                      q->second);
  };
  // The products of x with several weights [out_i, in] when all are
  // quantized alike: one matmul_q over their concatenated params (param
  // groups: laid side by side at load, nothing copied), then a narrow per
  // weight. Empty otherwise (float weights are merged by the passes).
  auto quantized_group = [&](ValueId x, const std::vector<std::pair<std::string, int64_t>>& ws, int64_t in) {
    std::vector<ValueId> out;
    auto first = quantized.find(ws[0].first);
    bool alike = first != quantized.end();
    for (const auto& [name, rows] : ws) {
      auto q = quantized.find(name);
      alike = alike && q != quantized.end() && q->second == first->second;
    }
    if (!alike) return out;
    const QuantType t = first->second;
    std::vector<ValueId> quants, scales;
    for (const auto& [name, rows] : ws) {
      quants.push_back(g.param(name + ".quants", {rows, in / quant_elems_per_word(t)}, DType::I32));
      scales.push_back(g.param(name + ".scales", {rows, in / kQuantBlock * quant_scales_per_block(t)}, DType::F16));
    }
    ValueId y = g.matmul_q(x, g.concat(quants, 0), g.concat(scales, 0), t);
    const int last = int(g.value(y).shape.size()) - 1;
    int64_t at = 0;
    for (const auto& [name, rows] : ws) {
      out.push_back(g.narrow(y, last, at, rows));
      at += rows;
    }
    return out;
  };

  // x [batch, seq, heads * hd] normalized per head with one gain [hd].
  auto head_rms_norm = [&](ValueId x, const std::string& name, int64_t heads) {
    ValueId per_head = g.reshape(x, {batch, seq, heads, hd});
    return g.reshape(g.rms_norm(per_head, param(name, {hd}), c.rms_eps), {batch, seq, heads * hd});
  };

  // Without a cache: the position of each column; with one: each batch's start.
  ValueId ids, positions, last = -1, slot = -1;
  if (from_state) {
    ids = next_token;
    positions = next_pos;
    last = i32_per_batch("last_index", [](int64_t b) { return b; });  // the one row of each batch
  } else {
    ids = g.input("input_ids", {batch, seq}, DType::I32);
    positions = cached ? g.input("pos", {batch}, DType::I32) : g.input("positions", {seq}, DType::I32);
    if (out != Head::HiddenAll) last = g.input("last_index", {batch}, DType::I32);
    if (pooled) slot = g.input("slot", {batch}, DType::I32);
  }
  // A tied embedding whose head is quantized: the gather reads the head's
  // blocks (gather_q), so the table is never expanded to floats.
  const auto tied_q = c.tie_embeddings ? quantized.find("token_embd.weight") : quantized.end();
  ValueId embed = -1, embed_q = -1, embed_s = -1, x;
  if (tied_q != quantized.end()) {
    const QuantType t = tied_q->second;
    embed_q = g.param("token_embd.weight.quants", {c.vocab_size, H / quant_elems_per_word(t)}, DType::I32);
    embed_s = g.param("token_embd.weight.scales", {c.vocab_size, H / kQuantBlock * quant_scales_per_block(t)}, DType::F16);
    x = g.gather_q(embed_q, embed_s, ids, t, dt);
  } else {
    embed = param("token_embd.weight", {c.vocab_size, H});
    x = g.gather(embed, ids);
  }
  // Gemma: embeddings times sqrt(hidden), the factor rounded to the compute
  // dtype first (transformers' normalizer is a tensor of the model's dtype).
  if (c.embed_scale > 0.f) x = g.mul(x, g.constant_f32({1}, dt, {c.embed_scale}, "embed_scale"));
  auto scaled = [&](ValueId v, float by, const std::string& name) {
    return g.mul(v, g.constant_f32({1}, g.value(v).dtype, {by}, name));
  };

  AttentionAttrs attn;
  attn.q_heads = c.num_heads;
  attn.kv_heads = c.num_kv_heads;
  attn.head_dim = c.head_dim;
  attn.scale = c.query_scale > 0.f ? c.query_scale : 1.f / std::sqrt(float(hd));
  attn.softcap = c.attn_softcap;
  attn.mask = MaskKind::Causal;
  attn.q_pos = cached;
  attn.kv_slots = pooled;
  RopeAttrs rq;
  rq.pos_is_start = cached;
  rq.heads = c.num_heads;
  rq.head_dim = c.head_dim;
  rq.n_rot = c.rope_dims;
  rq.theta = c.rope_theta;
  rq.interleaved = c.rope_interleaved;
  // LongRoPE: the long factors where this graph's context (its cache, or
  // its sequence without one) passes the original one, as llama.cpp.
  rq.freq_divisors = rope_divisors_for_context(c, cached ? cache_len : seq);
  rq.attention_factor = c.rope_attention_factor;
  RopeAttrs rk = rq;
  rk.heads = c.num_kv_heads;
  // Local (sliding-window) layers: a window on the keys, and their own rope
  // base without the global layers' scaling where the config gives one.
  AttentionAttrs local_attn = attn;
  local_attn.window = c.sliding_window;
  local_attn.ring = ring;
  RopeAttrs local_rq = rq, local_rk = rk;
  if (c.local_rope_theta > 0.f) {
    local_rq.theta = local_rk.theta = c.local_rope_theta;
    local_rq.freq_divisors.clear();
    local_rk.freq_divisors.clear();
    local_rq.attention_factor = local_rk.attention_factor = 1.f;
  }

  for (int l = 0; l < c.num_layers; ++l) {
    const std::string p = "blk." + std::to_string(l) + ".";
    const bool local = is_local_layer(c, l);
    ValueId h = g.rms_norm(x, param(p + "attn_norm.weight", {H}), c.rms_eps);
    auto qkv = c.fused_qkv_gate_up ? std::vector<ValueId>{}
                                   : quantized_group(h, {{p + "attn_q.weight", q_dim}, {p + "attn_k.weight", kv_dim},
                                                         {p + "attn_v.weight", kv_dim}},
                                                     H);
    if (c.fused_qkv_gate_up) {
      ValueId fused = dense(h, p + "attn_qkv.weight", q_dim + 2 * kv_dim, H);
      qkv = {g.narrow(fused, 2, 0, q_dim), g.narrow(fused, 2, q_dim, kv_dim),
             g.narrow(fused, 2, q_dim + kv_dim, kv_dim)};
    }
    ValueId q = qkv.empty() ? dense(h, p + "attn_q.weight", q_dim, H) : qkv[0];
    ValueId k = qkv.empty() ? dense(h, p + "attn_k.weight", kv_dim, H) : qkv[1];
    ValueId v = qkv.empty() ? dense(h, p + "attn_v.weight", kv_dim, H) : qkv[2];
    if (c.qkv_bias) {
      q = g.add(q, param(p + "attn_q.bias", {q_dim}));
      k = g.add(k, param(p + "attn_k.bias", {kv_dim}));
      v = g.add(v, param(p + "attn_v.bias", {kv_dim}));
    }
    if (c.qk_norm) {  // each head normalized on its own, one gain for all heads
      q = head_rms_norm(q, p + "attn_q_norm.weight", c.num_heads);
      k = head_rms_norm(k, p + "attn_k_norm.weight", c.num_kv_heads);
    }
    q = g.rope(q, positions, local ? local_rq : rq);
    k = g.rope(k, positions, local ? local_rk : rk);
    if (cached) {
      // The new K and V rows join one cache row each (K then V); attention
      // reads all of it up to each position. One cache per layer lets one
      // kv_write store both, rotating K on the way (fuse_kv_write).
      const int64_t rows = llama_kv_rows(c, l, cache_len, window_run);
      ValueId kv = g.kv_write(g.state(p + "kv_cache", {pooled ? pool.slots : batch, rows, 2 * kv_dim}, dt),
                              g.concat({k, v}, 2), positions, slot, rows < cache_len);
      k = g.narrow(kv, 2, 0, kv_dim);
      v = g.narrow(kv, 2, kv_dim, kv_dim);
    }
    ValueId ctx = g.attention(q, k, v, -1, local ? local_attn : attn, cached ? positions : -1, slot);
    ValueId attn_out = dense(ctx, p + "attn_output.weight", H, q_dim);
    if (c.tp_ranks > 0) attn_out = g.all_reduce(attn_out);  // each rank's heads' share
    // Gemma normalizes each block's output too, before the residual add.
    if (c.sandwich_norms) attn_out = g.rms_norm(attn_out, param(p + "post_attention_norm.weight", {H}), c.rms_eps);
    x = g.add(x, attn_out);
    h = g.rms_norm(x, param(p + "ffn_norm.weight", {H}), c.rms_eps);
    if (c.is_moe_layer(l)) {  // a router and its experts instead of one FFN
      ValueId moe_out = build_moe_ffn(g, c, h, p, dt, quantized);
      if (c.tp_ranks > 0) moe_out = g.all_reduce(moe_out);  // each rank's share of every expert's rows
      x = g.add(x, moe_out);
      continue;
    }
    // One SwiGLU op: after the gate and up products merge, it reads both
    // halves of the merged output in place.
    auto gate_up = c.fused_qkv_gate_up ? std::vector<ValueId>{}
                                       : quantized_group(h, {{p + "ffn_gate.weight", F}, {p + "ffn_up.weight", F}}, H);
    if (c.fused_qkv_gate_up) {  // the gate's rows first, as the checkpoint's chunk(2) reads them
      ValueId fused = dense(h, p + "ffn_up.weight", 2 * F, H);
      gate_up = {g.narrow(fused, 2, 0, F), g.narrow(fused, 2, F, F)};
    }
    ValueId gate = gate_up.empty() ? dense(h, p + "ffn_gate.weight", F, H) : gate_up[0];
    ValueId up = gate_up.empty() ? dense(h, p + "ffn_up.weight", F, H) : gate_up[1];
    // GeGLU (Gemma) is the same op with the tanh GELU on the gate.
    ValueId act = g.swiglu(gate, up, c.gelu_tanh_ffn ? Activation::GeluTanh : Activation::Silu);
    ValueId ffn_out = dense(act, p + "ffn_down.weight", H, F);
    if (c.tp_ranks > 0) ffn_out = g.all_reduce(ffn_out);  // each rank's FFN rows' share
    if (c.sandwich_norms) ffn_out = g.rms_norm(ffn_out, param(p + "post_ffw_norm.weight", {H}), c.rms_eps);
    x = g.add(x, ffn_out);
  }
  if (out == Head::HiddenAll) {  // every row, normed: an embedder pools them
    x = g.rms_norm(x, param("output_norm.weight", {H}), c.rms_eps);
    g.output("last_hidden_state", dt != DType::F32 ? g.cast(x, DType::F32) : x);
    return g;
  }
  // Only the rows asked for reach the final norm and the LM head.
  x = g.gather(g.reshape(x, {batch * seq, H}), last);
  if (out == Head::HiddenRows) {  // last-token pooling: one normed row per sequence
    x = g.rms_norm(x, param("output_norm.weight", {H}), c.rms_eps);
    g.output("embedding", dt != DType::F32 ? g.cast(x, DType::F32) : x);
    return g;
  }
  x = g.rms_norm(x, param("output_norm.weight", {H}), c.rms_eps);
  const std::string head = c.tie_embeddings ? "token_embd.weight" : "output.weight";
  const int64_t head_rows = c.tp_vocab ? c.vocab_size / c.tp_ranks : c.vocab_size;
  ValueId logits = embed_q >= 0   ? g.matmul_q(x, embed_q, embed_s, tied_q->second)
                   : embed >= 0 && c.tie_embeddings ? g.matmul(x, embed, false, true)
                                                    : dense(x, head, head_rows, H);
  if (c.tp_vocab) {  // each rank's rows of the vocabulary, gathered in rank order
    const int64_t rows = g.value(logits).shape[0];
    logits = g.reshape(g.permute(g.reshape(g.all_gather(logits, c.tp_ranks), {c.tp_ranks, rows, head_rows}), {1, 0, 2}),
                       {rows, c.vocab_size});
  }
  // Final-logit soft-capping (Gemma 2): cap * tanh(logits / cap).
  if (c.final_softcap > 0.f)
    logits = scaled(g.tanh(scaled(logits, 1.f / c.final_softcap, "final_softcap_inv")), c.final_softcap,
                    "final_softcap");
  if (c.chosen_vocab() < c.vocab_size) logits = g.narrow(logits, 1, 0, c.chosen_vocab());
  // Graphs that choose the token on the device also give each row's logit
  // sum: NaN when any logit is, so a broken forward is reported, not a token.
  if (cached) g.output("logit_sum", g.reduce(logits, -1, ReduceKind::Sum));
  if (pooled) {
    // The host chooses what comes next: the argmax for greedy rows, the logits for the rest.
    g.output("next_token", g.argmax(logits));
    if (!pool.logits) return g;
    if (dt != DType::F32) logits = g.cast(logits, DType::F32);
    g.output("logits", logits);
    return g;
  }
  if (cached) {
    // The position after the last token run, pos + (last_index - b * seq) + 1,
    // is the new token's, and the next token is chosen on the device: greedy
    // (a cast to f32 changes no order), or drawn with the draw keyed by that
    // position.
    ValueId step = from_state ? i32_per_batch("one", [](int64_t) { return 1; })
                              : g.add(last, i32_per_batch("one_minus_row_base", [&](int64_t b) { return 1 - b * seq; }));
    ValueId new_pos = g.add(positions, step);
    ValueId chosen = sampling.temperature > 0.f
                         ? g.sample(logits, new_pos,
                                    SampleAttrs{sampling.temperature, sampling.top_k, sampling.top_p, sampling.seed})
                         : g.argmax(logits);
    g.output("next_token", chosen);
    g.update_state(next_token, g.reshape(chosen, {batch, 1}));
    g.update_state(next_pos, new_pos);
  }
  if (from_state) return g;  // the token is all the host reads
  if (dt != DType::F32) logits = g.cast(logits, DType::F32);
  g.output("logits", logits);
  return g;
}

}  // namespace

Graph build_llama_graph(const LlamaConfig& c, int64_t batch, int64_t seq, DType dt, int64_t cache_len,
                        LlamaFeed feed, const SamplingOptions& sampling, const QuantizedWeights& quantized,
                        const LlamaPool& pool, int64_t window_run) {
  return build_graph(c, batch, seq, dt, cache_len, feed, sampling, quantized, pool, Head::Logits, window_run);
}

int64_t llama_kv_rows(const LlamaConfig& c, int layer, int64_t cache_len, int64_t window_run) {
  if (!is_local_layer(c, layer) || !ring_pays(c, cache_len, window_run)) return cache_len;
  return kv_ring_rows(c.sliding_window, window_run);
}

bool llama_kv_ring(const LlamaConfig& c, int64_t cache_len, int64_t window_run) {
  for (int l = 0; l < c.num_layers; ++l)
    if (llama_kv_rows(c, l, cache_len, window_run) < cache_len) return true;
  return false;
}

Graph build_llama_hidden_graph(const LlamaConfig& c, int64_t batch, int64_t seq, DType dt, LlamaHidden which) {
  return build_graph(c, batch, seq, dt, 0, LlamaFeed::Inputs, {}, {}, {},
                     which == LlamaHidden::Rows ? Head::HiddenRows : Head::HiddenAll, 0);
}

LlamaGguf::LlamaGguf(const std::string& path)
    : file_(std::make_unique<GgufFile>(path)), cfg_(llama_config_from_gguf(*file_)) {}

LlamaGguf::~LlamaGguf() = default;

void LlamaGguf::validate(const Graph& g, TpRank tp) const {
  const std::vector<LlamaParamSource> sources = llama_whole_sources(g, cfg_, tp);
  // Every tensor of the file is read (as llama.cpp requires): one the graph
  // does not use means the config and the weights disagree.
  // read into the config
  std::set<std::string> used = {"rope_freqs.weight", "rope_factors_long.weight", "rope_factors_short.weight"};
  for (const LlamaParamSource& s : sources) used.insert(s.tensor);
  for (const GgufTensorInfo& t : file_->tensors())
    RLX_CHECK(used.count(t.name), "llama: '" << file_->path() << "': tensor '" << t.name
                                             << "' is not used by the " << cfg_.family
                                             << " config (unknown or extra weights)");
  for (const LlamaParamSource& s : sources) {
    RLX_CHECK(file_->has_tensor(s.tensor), "llama: '" << file_->path() << "' has no tensor '" << s.tensor << "'");
    const GgufTensorInfo& t = file_->tensor(s.tensor);
    RLX_CHECK(t.shape == s.shape, "llama: '" << file_->path() << "', tensor '" << s.tensor << "' has shape "
                                             << shape_str(t.shape) << ", the config needs " << shape_str(s.shape));
    RLX_CHECK(ggml_type_dequantizable(t.type), "llama: '" << file_->path() << "', tensor '" << s.tensor
                                                          << "': type " << ggml_type_name(t.type)
                                                          << " is not supported");
  }
}

std::optional<QuantType> LlamaGguf::stored_quant(const std::string& tensor) const {
  if (!file_->has_tensor(tensor)) return std::nullopt;
  return held_quant_type(file_->tensor(tensor).type);
}

void LlamaGguf::load_into(Executable& exe, const Graph& g, TpRank tp) const {
  const ParamSink sink = llama_param_sink(exe, cfg_, tp);
  for (const LlamaParamSource& s : llama_whole_sources(g, cfg_, tp)) {
    if (s.quant && stored_quant(s.tensor) == s.quant) {
      // The file's blocks as they are, converted block by block, or (Q5_1,
      // Q5_K, Q6_K) requantized from their values (gguf_held_quant.h).
      load_held_quant(sink, s, *file_, s.tensor);
      file_->release_pages(file_->bytes(s.tensor));  // each tensor as it is copied: the peak stays low
      continue;
    }
    // Float tensors go from the mapped file to the param as they are (or
    // converted in one pass); the rest are dequantized first.
    const GgmlType type = file_->tensor(s.tensor).type;
    if (!s.quant && (type == GgmlType::F32 || type == GgmlType::F16 || type == GgmlType::BF16)) {
      const std::span<const uint8_t> b = file_->bytes(s.tensor);
      const DType dt = type == GgmlType::F32 ? DType::F32 : type == GgmlType::F16 ? DType::F16 : DType::BF16;
      sink.set_bytes(s.param, dt, b.data(), b.size(), s.shape);
      file_->release_pages(b);
      continue;
    }
    std::vector<float> v = file_->to_f32(s.tensor);
    if (s.quant) set_quantized_weight(sink, s, v);
    else sink.set_f32(s.param, v.data(), v.size(), s.shape);
  }
  file_->release_pages();  // the arena holds the weights now
}

}  // namespace rlx
