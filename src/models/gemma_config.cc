#include "models/gemma_config.h"

#include <cmath>
#include <nlohmann/json.hpp>

#include "models/gguf.h"
#include "models/llama_limits.h"
#include "rlx/error.h"

namespace rlx {
namespace {

using nlohmann::json;

// A number that may be absent (then `absent`) or null (then `null`: a
// feature turned off, as transformers reads None).
double number(const json& j, const char* key, double absent, double null = 0.0) {
  if (!j.contains(key)) return absent;
  if (j[key].is_null()) return null;
  return j[key].get<double>();
}

// Layers (l + 1) % pattern != 0 are local: transformers' rule (Gemma 2's
// pattern is 2: even layers local; Gemma 3's default 6: every 6th global).
std::vector<bool> local_by_pattern(int layers, int pattern) {
  std::vector<bool> local(static_cast<size_t>(layers));
  for (int l = 0; l < layers; ++l) local[size_t(l)] = pattern == 0 || (l + 1) % pattern != 0;
  return local;
}

// The global layers' rope: "default" or "linear" (factor), else refused.
void read_global_rope(const json& rope, LlamaConfig& c, const std::string& path) {
  if (rope.is_null()) return;
  if (rope.contains("rope_theta")) c.rope_theta = rope["rope_theta"].get<float>();
  const std::string kind = rope.contains("rope_type") ? rope["rope_type"].get<std::string>()
                                                      : rope.value("type", std::string("default"));
  if (kind == "linear") {
    const float factor = rope.at("factor").get<float>();
    RLX_CHECK(factor > 0, "gemma: '" << path << "': rope scaling factor " << factor);
    c.rope_freq_divisors.assign(size_t(c.rope_dims / 2), factor);
  } else {
    RLX_CHECK(kind == "default", "gemma: '" << path << "': rope_type '" << kind
                                            << "' is not supported (default and linear are)");
  }
}

void check_layers(const LlamaConfig& c, const std::string& path) {
  RLX_CHECK(c.local_layers.empty() || int(c.local_layers.size()) == c.num_layers,
            "gemma: '" << path << "': " << c.local_layers.size() << " layer types for " << c.num_layers << " layers");
  RLX_CHECK(c.sliding_window >= 0, "gemma: '" << path << "': sliding_window " << c.sliding_window);
  RLX_CHECK(c.attn_softcap >= 0 && c.final_softcap >= 0 && std::isfinite(c.attn_softcap) &&
                std::isfinite(c.final_softcap),
            "gemma: '" << path << "': soft caps " << c.attn_softcap << ", " << c.final_softcap);
  RLX_CHECK(c.query_scale > 0 && std::isfinite(c.query_scale),
            "gemma: '" << path << "': query scale " << c.query_scale << " (query_pre_attn_scalar must be > 0)");
}

// The parts both sources share: Gemma's decoder layer.
void gemma_layer(LlamaConfig& c) {
  c.embed_scale = std::sqrt(float(c.hidden_size));
  c.sandwich_norms = true;
  c.gelu_tanh_ffn = true;
  c.qk_norm = c.family == "gemma3";
  c.rope_interleaved = false;  // HF halves; llama.cpp's gemma rope is NeoX
}

}  // namespace

bool is_gemma_model_type(const std::string& t) { return t == "gemma2" || t == "gemma3" || t == "gemma3_text"; }

LlamaConfig gemma_config_from_hf(const json& root, const std::string& path) {
  const std::string type = root.value("model_type", "");
  RLX_CHECK(type != "gemma3" || (root.contains("text_config") && root["text_config"].is_object()),
            "gemma: '" << path << "': a gemma3 config without a text_config object");
  const json& j = type == "gemma3" ? root["text_config"] : root;
  const bool g2 = type == "gemma2";
  // Absent fields take transformers' Gemma2Config / Gemma3TextConfig defaults.
  LlamaConfig c;
  c.family = g2 ? "gemma2" : "gemma3";
  c.vocab_size = int(number(j, "vocab_size", g2 ? 256000 : 262208));
  c.hidden_size = int(number(j, "hidden_size", 2304));
  c.intermediate_size = int(number(j, "intermediate_size", 9216));
  c.num_layers = int(number(j, "num_hidden_layers", 26));
  c.num_heads = int(number(j, "num_attention_heads", 8));
  c.num_kv_heads = int(number(j, "num_key_value_heads", 4));
  c.head_dim = c.rope_dims = int(number(j, "head_dim", 256));
  c.rms_eps = float(number(j, "rms_norm_eps", 1e-6));
  c.max_positions = int(number(j, "max_position_embeddings", g2 ? 8192 : 131072));
  c.rope_theta = float(number(j, "rope_theta", g2 ? 10000 : 1e6));
  c.tie_embeddings = j.contains("tie_word_embeddings") ? j["tie_word_embeddings"].get<bool>()
                                                       : root.value("tie_word_embeddings", true);
  const std::string act = j.contains("hidden_activation") && !j["hidden_activation"].is_null()
                              ? j["hidden_activation"].get<std::string>()
                              : j.value("hidden_act", std::string("gelu_pytorch_tanh"));
  RLX_CHECK(act == "gelu_pytorch_tanh", "gemma: '" << path << "': hidden_activation '" << act
                                                   << "' is not supported (gelu_pytorch_tanh is)");
  RLX_CHECK(!j.value("attention_bias", false), "gemma: '" << path << "': attention_bias is not supported");
  gemma_layer(c);
  c.norm_adds_one = true;
  c.query_scale = float(1.0 / std::sqrt(number(j, "query_pre_attn_scalar", 256, -1)));
  c.attn_softcap = float(number(j, "attn_logit_softcapping", g2 ? 50 : 0));
  c.final_softcap = float(number(j, "final_logit_softcapping", g2 ? 30 : 0));
  c.sliding_window = int(number(j, "sliding_window", 4096));
  if (j.contains("layer_types") && !j["layer_types"].is_null()) {
    for (const auto& t : j.at("layer_types")) {
      const std::string s = t.get<std::string>();
      RLX_CHECK(s == "sliding_attention" || s == "full_attention",
                "gemma: '" << path << "': layer type '" << s << "' (sliding_attention or full_attention)");
      c.local_layers.push_back(s == "sliding_attention");
    }
  } else {
    const double pattern = number(j, "sliding_window_pattern", number(j, "_sliding_window_pattern", 6));
    c.local_layers = local_by_pattern(c.num_layers, g2 ? 2 : int(pattern));
  }
  if (c.sliding_window == 0) c.local_layers.assign(size_t(c.num_layers), false);
  // Rope: transformers 5's rope_parameters per layer type, or rope_scaling
  // (the global layers') and rope_local_base_freq (the local ones').
  if (j.contains("rope_parameters") && j["rope_parameters"].is_object()) {
    const json& rp = j["rope_parameters"];
    read_global_rope(rp.contains("full_attention") ? rp["full_attention"] : rp, c, path);
    if (rp.contains("sliding_attention")) {
      const json& local = rp["sliding_attention"];
      RLX_CHECK(local.value("rope_type", std::string("default")) == "default",
                "gemma: '" << path << "': scaled rope on the sliding layers is not supported");
      c.local_rope_theta = local.value("rope_theta", 10000.f);
    }
  } else if (j.contains("rope_scaling")) {
    read_global_rope(j["rope_scaling"], c, path);
  }
  if (!g2 && c.local_rope_theta == 0.f) c.local_rope_theta = float(number(j, "rope_local_base_freq", 10000));
  check_layers(c, path);
  return c;
}

void read_gemma_gguf(const GgufFile& f, LlamaConfig& c) {
  const std::string k = c.family + ".";
  const bool g2 = c.family == "gemma2";
  const LlamaLimits L;
  gemma_layer(c);
  // As llama.cpp reads these files: Gemma 2 always caps its attention scores
  // (50 without the key), Gemma 3 never does; the final cap is Gemma 2's 30
  // or Gemma 3's none without the key.
  c.attn_softcap = g2 ? float(f.get_float_or(k + "attn_logit_softcapping", 50.0, 0.0, 1e6)) : 0.f;
  c.final_softcap = float(f.get_float_or(k + "final_logit_softcapping", g2 ? 30.0 : 0.0, 0.0, 1e6));
  c.sliding_window = int(f.get_int_or(k + "attention.sliding_window", g2 ? 4096 : 0, 0, L.positions));
  const std::string pattern_key = k + "attention.sliding_window_pattern";
  if (f.has(pattern_key) && f.get(pattern_key).type == GgufValueType::Array) {
    for (int64_t v : f.get_int_array(pattern_key)) c.local_layers.push_back(v != 0);
  } else {
    // llama.cpp's rule: layer l is local when l % n < n - 1 (n = 0: all).
    const int n = int(f.get_int_or(pattern_key, g2 ? 2 : 6, 0, L.layers));
    for (int l = 0; l < c.num_layers; ++l) c.local_layers.push_back(n == 0 || l % n < n - 1);
  }
  if (c.sliding_window <= 0) c.local_layers.assign(size_t(c.num_layers), false);
  // Gemma 3's local layers rotate with their own base (10000 without the key)
  // and no scaling; Gemma 2's as the global ones unless the file says.
  const std::string swa_base = k + "rope.freq_base_swa";
  if (!g2 || f.has(swa_base)) c.local_rope_theta = float(f.get_float_or(swa_base, 10000.0, L.min_theta, L.max_theta));
  RLX_CHECK(!g2 || c.local_rope_theta == 0.f || c.rope_freq_divisors.empty(),
            "gemma: '" << f.path() << "': " << swa_base << " with rope scaling is not supported");
  // The files carry no query_pre_attn_scalar: llama.cpp takes hidden / heads
  // for the 27B models (46 layers for Gemma 2, 62 for Gemma 3) and head_dim
  // for every other size, as Google's reference configs set it.
  const bool big = c.num_layers == (g2 ? 46 : 62);
  c.query_scale = float(1.0 / std::sqrt(big ? double(c.hidden_size / c.num_heads) : double(c.head_dim)));
  check_layers(c, f.path());
}

}  // namespace rlx
