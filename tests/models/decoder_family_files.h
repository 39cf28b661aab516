// The decoder families' test models as real files: random weights of odd
// sizes for each family's config, written as a Hugging Face directory
// (config.json + model.safetensors) and as a GGUF laid out as
// convert_hf_to_gguf.py lays the family out.
#pragma once
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
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

// A window (48) shorter than the context (64) bounds the context to it.
inline Family mistral() {
  Family f{"mistral", "mistral", odd_config(), R"(, "sliding_window": 48)"};
  f.cfg.family = "mistral";
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

inline Shape param_shape(const Graph& g, const std::string& name) {
  for (const Node& n : g.nodes())
    if (n.op == OpKind::Param && n.name == name) return g.value(n.outputs[0]).shape;
  ADD_FAILURE() << "no param " << name;
  return {};
}

inline Weights weights_of(const LlamaConfig& c) { return random_weights(build_llama_graph(c, 1, 1, DType::F32)); }

inline void write_hf_dir(const fs::path& dir, const Family& f, const Weights& w) {
  const LlamaConfig& c = f.cfg;
  Graph g = build_llama_graph(c, 1, 1, DType::F32);
  std::map<std::string, std::pair<Shape, std::vector<float>>> ts;
  for (const auto& [name, v] : w) ts[llama_hf_name(name, c.family)] = {param_shape(g, name), v};
  write_safetensors(dir / "model.safetensors", ts);
  write_text(dir / "config.json",
                   "{\"model_type\": \"" + f.model_type + "\", \"vocab_size\": " + std::to_string(c.vocab_size) +
                       ", \"hidden_size\": " + std::to_string(c.hidden_size) +
                       ", \"intermediate_size\": " + std::to_string(c.intermediate_size) +
                       ", \"num_hidden_layers\": " + std::to_string(c.num_layers) +
                       ", \"num_attention_heads\": " + std::to_string(c.num_heads) +
                       ", \"num_key_value_heads\": " + std::to_string(c.num_kv_heads) +
                       ", \"head_dim\": " + std::to_string(c.head_dim) +
                       ", \"rope_theta\": " + std::to_string(c.rope_theta) + ", \"rms_norm_eps\": 1e-5" +
                       ", \"max_position_embeddings\": 64, \"tie_word_embeddings\": " +
                       (c.tie_embeddings ? "true" : "false") + f.extra_json + "}");
}

// As convert_hf_to_gguf.py writes the family: LLaMA's Q/K rows permuted for
// interleaved pairs and Llama 3's divisors as rope_freqs.weight; Qwen's as
// they are.
inline void write_gguf(const fs::path& path, const Family& f, const Weights& w) {
  const LlamaConfig& c = f.cfg;
  const std::string a = f.model_type + ".";
  GgufWriter gw;
  gw.str("general.architecture", f.model_type)
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
    if (permute && (q || k)) gw.tensor(name, s, to_gguf_rows(v, q ? c.num_heads : c.num_kv_heads, c.head_dim, s[1]));
    else gw.tensor(name, s, v);
  }
  if (!c.rope_freq_divisors.empty())
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
