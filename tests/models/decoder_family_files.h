// The decoder families' test models as real files: random weights of odd
// sizes for each family's config, written as a Hugging Face directory
// (config.json + model.safetensors) and as a GGUF laid out as
// convert_hf_to_gguf.py lays the family out.
#pragma once
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <functional>
#include <map>
#include <numbers>
#include <string>
#include <vector>

#include "models/gguf_writer.h"
#include "models/llama.h"
#include "models/llama_hf.h"
#include "models/llama_reference.h"
#include "models/test_files.h"
#include "test_util.h"

namespace rlx::test {

namespace fs = std::filesystem;

// transformers' _compute_llama3_parameters, written out again here (not
// rlx's llama3_rope_divisors) so that the HF mapping is checked: the
// divisor of pair i is inv_freq / inv_freq_llama.
inline std::vector<float> hf_llama3_divisors(int dims, double theta, double factor, double low, double high,
                                             double old_ctx) {
  std::vector<float> d;
  for (int i = 0; i < dims; i += 2) {
    const double inv = 1.0 / std::pow(theta, double(i) / dims), wavelen = 2 * std::numbers::pi / inv;
    double llama = wavelen > old_ctx / low ? inv / factor : inv;
    const double smooth = (old_ctx / wavelen - low) / (high - low);
    const bool medium = !(wavelen < old_ctx / high) && !(wavelen > old_ctx / low);
    if (medium) llama = (1 - smooth) * llama / factor + smooth * llama;
    d.push_back(float(inv / llama));
  }
  return d;
}

struct Family {
  std::string name, model_type;  // model_type doubles as the GGUF architecture
  LlamaConfig cfg;
  std::string extra_json;  // more config.json fields
};

inline Family llama3() {
  Family f{"llama3", "llama", odd_config(), R"(, "rope_scaling": {"rope_type": "llama3", "factor": 8.0,
    "low_freq_factor": 1.0, "high_freq_factor": 4.0, "original_max_position_embeddings": 16})"};
  f.cfg.rope_freq_divisors = hf_llama3_divisors(f.cfg.head_dim, f.cfg.rope_theta, 8, 1, 4, 16);
  return f;
}

inline Family qwen2() {
  Family f{"qwen2", "qwen2", odd_config(), R"(, "use_sliding_window": false, "sliding_window": 32)"};
  f.cfg.family = "qwen2";
  f.cfg.qkv_bias = true;
  f.cfg.tie_embeddings = false;
  f.cfg.rope_theta = 1e6f;
  return f;
}

// head_dim 40 with hidden 200 over 6 heads (not a multiple), GQA 6:3.
inline Family qwen3() {
  Family f{"qwen3", "qwen3", odd_config(), ""};
  f.cfg.family = "qwen3";
  f.cfg.qk_norm = true;
  f.cfg.hidden_size = 200;
  f.cfg.num_kv_heads = 3;
  f.cfg.head_dim = f.cfg.rope_dims = 40;
  f.cfg.intermediate_size = 333;
  return f;
}

// A window (6) shorter than the context (64): every layer is local.
inline Family mistral() {
  Family f{"mistral", "mistral", odd_config(), R"(, "sliding_window": 6)"};
  f.cfg.family = "mistral";
  f.cfg.sliding_window = 6;
  f.cfg.local_layers.assign(size_t(f.cfg.num_layers), true);
  return f;
}

// Fused Q|K|V and gate|up weights, an untied head.
inline Family phi3() {
  Family f{"phi3", "phi3", odd_config(), ""};
  f.cfg.family = "phi3";
  f.cfg.fused_qkv_gate_up = true;
  f.cfg.tie_embeddings = false;
  return f;
}

// Gemma's pieces on odd sizes: head_dim 40 free of hidden / heads (224 / 6),
// GQA 6:2, FFN 333, three layers (local, global, local: Gemma 2's rule), a
// window of 5 and soft caps that bite on these scores, query_pre_attn_scalar
// 24 (neither head_dim nor hidden / heads), tied embeddings.
inline void gemma_common(LlamaConfig& c) {
  c.embed_scale = std::sqrt(float(c.hidden_size));
  c.sandwich_norms = true;
  c.gelu_tanh_ffn = true;
  c.norm_adds_one = true;
}

inline Family gemma2() {
  Family f{"gemma2", "gemma2", odd_config(), ""};
  LlamaConfig& c = f.cfg;
  c.family = "gemma2";
  c.hidden_size = 224;
  c.intermediate_size = 333;
  c.num_layers = 3;
  c.head_dim = c.rope_dims = 40;
  gemma_common(c);
  c.query_scale = float(1.0 / std::sqrt(24.0));
  c.attn_softcap = 0.8f;
  c.final_softcap = 1.0f;
  c.sliding_window = 5;
  c.local_layers = {true, false, true};
  return f;
}

// Gemma 3 text: q/k norms, MQA 4:1 with head_dim 52, four layers with
// sliding_window_pattern 3 (local, local, global, local), window 4, global
// rope theta 1e6 with linear scaling 4, local theta 10000 unscaled, no soft
// caps, an untied head.
inline Family gemma3() {
  Family f{"gemma3", "gemma3_text", odd_config(), ""};
  LlamaConfig& c = f.cfg;
  c.family = "gemma3";
  c.hidden_size = 176;
  c.intermediate_size = 301;
  c.num_layers = 4;
  c.num_heads = 4;
  c.num_kv_heads = 1;
  c.head_dim = c.rope_dims = 52;
  c.tie_embeddings = false;
  gemma_common(c);
  c.qk_norm = true;
  c.query_scale = float(1.0 / std::sqrt(30.0));
  c.sliding_window = 4;
  c.local_layers = {true, true, false, true};
  c.rope_theta = 1e6f;
  c.rope_freq_divisors.assign(size_t(c.rope_dims / 2), 4.f);
  c.local_rope_theta = 10000.f;
  return f;
}

inline bool is_gemma(const Family& f) { return f.cfg.sandwich_norms; }

// The config.json fields of a Gemma family, from its config: Gemma 2 by
// its default layer rule, Gemma 3 by layer_types and sliding_window_pattern.
inline std::string gemma_json(const LlamaConfig& c) {
  auto num = [](double v) { return std::to_string(v); };
  std::string j = ", \"hidden_activation\": \"gelu_pytorch_tanh\", \"query_pre_attn_scalar\": " +
                  num(1.0 / (double(c.query_scale) * c.query_scale)) +
                  ", \"sliding_window\": " + std::to_string(c.sliding_window);
  j += c.attn_softcap > 0 ? ", \"attn_logit_softcapping\": " + num(c.attn_softcap) : ", \"attn_logit_softcapping\": null";
  j += c.final_softcap > 0 ? ", \"final_logit_softcapping\": " + num(c.final_softcap) : ", \"final_logit_softcapping\": null";
  if (c.family == "gemma3") {
    j += ", \"sliding_window_pattern\": 3, \"rope_local_base_freq\": " + num(c.local_rope_theta) + ", \"layer_types\": [";
    for (size_t l = 0; l < c.local_layers.size(); ++l)
      j += std::string(l ? ", " : "") + (c.local_layers[l] ? "\"sliding_attention\"" : "\"full_attention\"");
    j += "]";
    if (!c.rope_freq_divisors.empty())
      j += ", \"rope_scaling\": {\"rope_type\": \"linear\", \"factor\": " + num(c.rope_freq_divisors[0]) + "}";
  }
  return j;
}

// Hugging Face stores Gemma's norm gains as w with the norm applying 1 + w.
inline bool is_norm_gain(const std::string& name) {
  return name.size() >= 11 && name.compare(name.size() - 11, 11, "norm.weight") == 0;
}

inline Shape param_shape(const Graph& g, const std::string& name) {
  for (const Node& n : g.nodes())
    if (n.op == OpKind::Param && n.name == name) return g.value(n.outputs[0]).shape;
  ADD_FAILURE() << "no param " << name;
  return {};
}

inline Weights weights_of(const LlamaConfig& c) { return random_weights(build_llama_graph(c, 1, 1, DType::F32)); }

// multimodal (Gemma 3): as Gemma3ForConditionalGeneration saves it, the
// decoder's config as text_config and its tensors under model.language_model.
inline void write_hf_dir(const fs::path& dir, const Family& f, const Weights& w, bool multimodal = false) {
  const LlamaConfig& c = f.cfg;
  Graph g = build_llama_graph(c, 1, 1, DType::F32);
  std::map<std::string, std::pair<Shape, std::vector<float>>> ts;
  for (const auto& [name, v] : w) {
    std::vector<float> stored = v;
    if (c.norm_adds_one && is_norm_gain(name))
      for (float& x : stored) x -= 1.f;
    std::string hf = llama_hf_name(name, c.family);
    if (multimodal && hf.rfind("model.", 0) == 0) hf = "model.language_model." + hf.substr(6);
    ts[hf] = {param_shape(g, name), stored};
  }
  write_safetensors(dir / "model.safetensors", ts);
  const std::string body =
                   "\"model_type\": \"" + f.model_type + "\", \"vocab_size\": " + std::to_string(c.vocab_size) +
                       ", \"hidden_size\": " + std::to_string(c.hidden_size) +
                       ", \"intermediate_size\": " + std::to_string(c.intermediate_size) +
                       ", \"num_hidden_layers\": " + std::to_string(c.num_layers) +
                       ", \"num_attention_heads\": " + std::to_string(c.num_heads) +
                       ", \"num_key_value_heads\": " + std::to_string(c.num_kv_heads) +
                       ", \"head_dim\": " + std::to_string(c.head_dim) +
                       ", \"rope_theta\": " + std::to_string(c.rope_theta) + ", \"rms_norm_eps\": 1e-5" +
                       ", \"max_position_embeddings\": 64, \"tie_word_embeddings\": " +
                       (c.tie_embeddings ? "true" : "false") + f.extra_json +
                       (is_gemma(f) ? gemma_json(c) : std::string());
  write_text(dir / "config.json", multimodal ? "{\"model_type\": \"gemma3\", \"text_config\": {" + body + "}}"
                                             : "{" + body + "}");
}

// As convert_hf_to_gguf.py writes the family: LLaMA's Q/K rows permuted for
// interleaved pairs and Llama 3's divisors as rope_freqs.weight; Qwen's as
// they are; Gemma's norms as 1 + w (the converter adds the 1), its keys as
// llama.cpp names them.
// rope_scaling, when given, writes the rope scaling keys and tensors in
// place of rope_freqs.weight (YaRN, LongRoPE).
// blocks, when given, holds tensors written as they are (a ggml type and its
// blocks) in place of their floats.
struct GgufBlocks {
  uint32_t type;
  std::string bytes;
};
inline void write_gguf(const fs::path& path, const Family& f, const Weights& w,
                       const std::function<void(GgufWriter&)>& rope_scaling = nullptr,
                       const std::map<std::string, GgufBlocks>& blocks = {}) {
  const LlamaConfig& c = f.cfg;
  const std::string arch = is_gemma(f) ? c.family : f.model_type;
  const std::string a = arch + ".";
  GgufWriter gw;
  if (is_gemma(f)) {
    gw.u32(a + "attention.sliding_window", uint32_t(c.sliding_window));
    if (c.family == "gemma2") {
      gw.f32(a + "attn_logit_softcapping", c.attn_softcap).f32(a + "final_logit_softcapping", c.final_softcap);
    } else {
      gw.u32(a + "attention.sliding_window_pattern", 3).f32(a + "rope.freq_base_swa", c.local_rope_theta);
      if (c.final_softcap > 0) gw.f32(a + "final_logit_softcapping", c.final_softcap);
      if (!c.rope_freq_divisors.empty())
        gw.str(a + "rope.scaling.type", "linear").f32(a + "rope.scaling.factor", c.rope_freq_divisors[0]);
    }
  }
  gw.str("general.architecture", arch)
      .u32(a + "context_length", 64)
      .u32(a + "embedding_length", uint32_t(c.hidden_size))
      .u32(a + "feed_forward_length", uint32_t(c.intermediate_size))
      .u32(a + "block_count", uint32_t(c.num_layers))
      .u32(a + "attention.head_count", uint32_t(c.num_heads))
      .u32(a + "attention.head_count_kv", uint32_t(c.num_kv_heads))
      .u32(a + "attention.key_length", uint32_t(c.head_dim))
      .u32(a + "attention.value_length", uint32_t(c.head_dim))
      .f32(a + "attention.layer_norm_rms_epsilon", c.rms_eps)
      .f32(a + "rope.freq_base", c.rope_theta);
  Graph g = build_llama_graph(c, 1, 1, DType::F32);
  const bool permute = f.model_type == "llama";
  for (const auto& [name, v] : w) {
    const Shape s = param_shape(g, name);
    const bool q = name.find("attn_q.weight") != std::string::npos, k = name.find("attn_k.weight") != std::string::npos;
    if (auto b = blocks.find(name); b != blocks.end()) gw.tensor_bytes(name, s, b->second.type, b->second.bytes);
    else if (permute && (q || k)) gw.tensor(name, s, to_gguf_rows(v, q ? c.num_heads : c.num_kv_heads, c.head_dim, s[1]));
    else gw.tensor(name, s, v);
  }
  if (rope_scaling) rope_scaling(gw);
  else if (!c.rope_freq_divisors.empty() && !is_gemma(f))
    gw.tensor("rope_freqs.weight", {int64_t(c.rope_freq_divisors.size())}, c.rope_freq_divisors);
  gw.write(path);
}

inline std::vector<int32_t> random_ids(int n, int vocab, uint64_t seed) {
  std::vector<float> r = random_floats(size_t(n), seed, 0.f, float(vocab) - 0.01f);
  std::vector<int32_t> ids;
  for (float x : r) ids.push_back(int32_t(x));
  return ids;
}

}  // namespace rlx::test
