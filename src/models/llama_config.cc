// The decoder families' configs: GGUF metadata (<arch>.* keys) and Hugging
// Face config.json mapped onto LlamaConfig. A family is the LLaMA decoder
// with a few switches (biases, q/k norms, rope frequency divisors); anything
// a family needs that the graph lacks is refused naming the field.
#include <cmath>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <numbers>

#include "models/gemma_config.h"
#include "models/gguf.h"
#include "models/llama.h"
#include "rlx/error.h"

namespace rlx {
namespace {

constexpr const char* kGgufArchs = "llama, qwen2, qwen3, phi3, gemma2, gemma3";
constexpr const char* kHfTypes = "llama, mistral, qwen2, qwen3, phi3, gemma2, gemma3_text, gemma3";

void check_sizes(const LlamaConfig& c, const std::string& path) {
  RLX_CHECK(c.num_layers > 0 && c.num_heads > 0 && c.num_kv_heads > 0 && c.num_heads % c.num_kv_heads == 0 &&
                c.head_dim > 0 && c.hidden_size > 0 && c.intermediate_size > 0 && c.vocab_size > 0 &&
                c.rope_dims > 0 && c.rope_dims <= c.head_dim && c.rope_dims % 2 == 0 && c.max_positions > 0,
            "llama: '" << path << "': inconsistent sizes (layers " << c.num_layers << ", heads " << c.num_heads
                       << ", kv heads " << c.num_kv_heads << ", head_dim " << c.head_dim << ", rope dims "
                       << c.rope_dims << ")");
  RLX_CHECK(c.rope_freq_divisors.empty() || int(c.rope_freq_divisors.size()) == c.rope_dims / 2,
            "llama: '" << path << "': " << c.rope_freq_divisors.size() << " rope frequency divisors for "
                       << c.rope_dims / 2 << " rotated pairs");
  RLX_CHECK(c.rope_freq_divisors.size() <= 64, "llama: '" << path << "': rope scaling with head_dim " << c.head_dim
                                                          << " (at most 128 rotated dims) is not supported");
}

}  // namespace

std::vector<float> llama3_rope_divisors(int rope_dims, float theta, float factor, float low_freq_factor,
                                        float high_freq_factor, float original_max_positions) {
  const double low_wavelen = original_max_positions / low_freq_factor;
  const double high_wavelen = original_max_positions / high_freq_factor;
  std::vector<float> d(size_t(rope_dims / 2));
  for (int i = 0; i < rope_dims / 2; ++i) {
    const double inv_freq = std::pow(double(theta), -2.0 * i / rope_dims);
    const double wavelen = 2 * std::numbers::pi / inv_freq;
    double scaled = inv_freq;  // short wavelengths keep their frequency
    if (wavelen > low_wavelen) {
      scaled = inv_freq / factor;
    } else if (wavelen >= high_wavelen) {  // between: a smooth blend of both
      const double smooth = (original_max_positions / wavelen - low_freq_factor) / (high_freq_factor - low_freq_factor);
      scaled = (1 - smooth) * inv_freq / factor + smooth * inv_freq;
    }
    d[size_t(i)] = float(inv_freq / scaled);
  }
  return d;
}

LlamaConfig llama_config_from_gguf(const GgufFile& f) {
  const std::string arch = f.get_string("general.architecture");
  const bool gemma = arch == "gemma2" || arch == "gemma3";
  RLX_CHECK(arch == "llama" || arch == "qwen2" || arch == "qwen3" || arch == "phi3" || gemma,
            "llama: '" << f.path() << "' holds a '" << arch << "' model; rlx loads GGUF architectures " << kGgufArchs);
  const std::string k = arch + ".";
  auto i = [&](const char* key) { return int(f.get_int(k + key)); };
  LlamaConfig c;
  c.family = arch;
  c.hidden_size = i("embedding_length");
  c.intermediate_size = i("feed_forward_length");
  c.num_layers = i("block_count");
  c.num_heads = i("attention.head_count");
  c.num_kv_heads = int(f.get_int(k + "attention.head_count_kv", c.num_heads));
  c.max_positions = int(f.get_int(k + "context_length", 2048));
  c.rms_eps = float(f.get_float(k + "attention.layer_norm_rms_epsilon"));
  c.rope_theta = float(f.get_float(k + "rope.freq_base", 10000.0));
  RLX_CHECK(c.num_heads > 0 && (f.has(k + "attention.key_length") || c.hidden_size % c.num_heads == 0),
            "llama: '" << f.path() << "': embedding_length " << c.hidden_size << " is not a multiple of head_count "
                       << c.num_heads);
  c.head_dim = int(f.get_int(k + "attention.key_length", c.hidden_size / c.num_heads));
  c.rope_dims = int(f.get_int(k + "rope.dimension_count", c.head_dim));
  RLX_CHECK(f.get_int(k + "attention.value_length", c.head_dim) == c.head_dim,
            "llama: '" << f.path() << "': key and value head sizes differ");
  // llama.cpp's converter permutes LLaMA's Q/K rows for interleaved pairs;
  // Qwen keeps Hugging Face's halves (NeoX rotation).
  c.rope_interleaved = arch == "llama";
  c.qkv_bias = arch == "qwen2";
  c.qk_norm = arch == "qwen3";
  if (arch == "phi3") {
    c.fused_qkv_gate_up = true;
    RLX_CHECK(f.has_tensor("blk.0.attn_qkv.weight"),
              "llama: '" << f.path() << "': a phi3 GGUF without the fused blk.0.attn_qkv.weight is not supported");
    RLX_CHECK(!f.has_tensor("rope_factors_long.weight") && !f.has_tensor("rope_factors_short.weight"),
              "llama: '" << f.path() << "': rope_factors_long/short.weight (Phi-3 longrope scaling) is not supported");
  }
  const std::string scaling = f.get_string(k + "rope.scaling.type", "none");
  if (scaling == "linear") {
    const float factor = float(f.get_float(k + "rope.scaling.factor"));
    RLX_CHECK(factor > 0, "llama: '" << f.path() << "': " << k << "rope.scaling.factor " << factor);
    c.rope_freq_divisors.assign(size_t(c.rope_dims / 2), factor);
  } else {
    RLX_CHECK(scaling == "none", "llama: '" << f.path() << "': " << k << "rope.scaling.type '" << scaling
                                            << "' is not supported (none and linear are)");
  }
  if (f.has_tensor("rope_freqs.weight")) {  // Llama 3.1+: the divisors themselves
    RLX_CHECK(c.rope_freq_divisors.empty(),
              "llama: '" << f.path() << "': both rope_freqs.weight and " << k << "rope.scaling.type");
    const auto& t = f.tensor("rope_freqs.weight");
    RLX_CHECK(t.shape == (Shape{c.rope_dims / 2}), "llama: '" << f.path() << "': rope_freqs.weight has shape "
                                                             << shape_str(t.shape) << ", want [" << c.rope_dims / 2
                                                             << "]");
    c.rope_freq_divisors = f.to_f32("rope_freqs.weight");
    for (float v : c.rope_freq_divisors)
      RLX_CHECK(std::isfinite(v) && v > 0, "llama: '" << f.path() << "': rope_freqs.weight holds " << v);
  }
  const auto& emb = f.tensor("token_embd.weight");
  RLX_CHECK(emb.shape.size() == 2 && emb.shape[1] == c.hidden_size,
            "llama: '" << f.path() << "': token_embd.weight has shape " << shape_str(emb.shape));
  c.vocab_size = int(f.get_int(k + "vocab_size", emb.shape[0]));
  RLX_CHECK(c.vocab_size == emb.shape[0], "llama: '" << f.path() << "': " << k << "vocab_size " << c.vocab_size
                                                     << " but token_embd.weight has " << emb.shape[0] << " rows");
  c.tie_embeddings = !f.has_tensor("output.weight");
  if (gemma) read_gemma_gguf(f, c);
  check_sizes(c, f.path());
  return c;
}

LlamaConfig load_llama_config(const std::string& dir_or_file) {
  namespace fs = std::filesystem;
  std::string path = fs::is_directory(dir_or_file) ? (fs::path(dir_or_file) / "config.json").string() : dir_or_file;
  std::ifstream in(path);
  RLX_CHECK(in, "llama: cannot open '" << path << "'");
  nlohmann::json j;
  try {
    j = nlohmann::json::parse(in);
  } catch (const nlohmann::json::exception& e) {
    RLX_FAIL("llama: '" << path << "' is not valid JSON: " << e.what());
  }
  LlamaConfig c;
  try {
    const std::string type = j.value("model_type", "");
    if (is_gemma_model_type(type)) {
      c = gemma_config_from_hf(j, path);
      check_sizes(c, path);
      return c;
    }
    RLX_CHECK(type == "llama" || type == "mistral" || type == "qwen2" || type == "qwen3" || type == "phi3",
              "llama: '" << path << "': model_type is '" << type << "'; rlx loads model_type " << kHfTypes);
    c.family = type;
    c.vocab_size = j.at("vocab_size").get<int>();
    c.hidden_size = j.at("hidden_size").get<int>();
    c.intermediate_size = j.at("intermediate_size").get<int>();
    c.num_layers = j.at("num_hidden_layers").get<int>();
    c.num_heads = j.at("num_attention_heads").get<int>();
    c.num_kv_heads = j.contains("num_key_value_heads") && !j["num_key_value_heads"].is_null()
                         ? j["num_key_value_heads"].get<int>()
                         : c.num_heads;
    RLX_CHECK(c.num_heads > 0, "llama: '" << path << "': num_attention_heads must be positive");
    c.head_dim = j.contains("head_dim") && !j["head_dim"].is_null() ? j["head_dim"].get<int>()
                                                                      : c.hidden_size / c.num_heads;
    c.rope_dims = c.head_dim;
    // transformers 5 writes the rotary settings as one object, rope_parameters
    // {rope_type, rope_theta, factor, ...}; earlier versions as rope_theta and
    // rope_scaling beside each other. Either is read; a theta taken from the
    // wrong place would give every position the wrong angle without a word.
    const bool has_parameters = j.contains("rope_parameters") && !j["rope_parameters"].is_null();
    RLX_CHECK(!has_parameters || j["rope_parameters"].is_object(),
              "llama: '" << path << "': rope_parameters must be an object");
    const nlohmann::json none = nlohmann::json::object();
    const nlohmann::json& rope = has_parameters ? j["rope_parameters"]
                                 : j.contains("rope_scaling") && !j["rope_scaling"].is_null() ? j["rope_scaling"]
                                                                                              : none;
    c.rope_theta = rope.contains("rope_theta") ? rope["rope_theta"].get<float>() : j.value("rope_theta", 10000.f);
    RLX_CHECK(std::isfinite(c.rope_theta) && c.rope_theta > 0,
              "llama: '" << path << "': rope_theta " << c.rope_theta << " must be a positive number");
    c.rms_eps = j.value("rms_norm_eps", 1e-6f);
    c.max_positions = j.value("max_position_embeddings", 2048);
    c.tie_embeddings = j.value("tie_word_embeddings", false);
    c.qkv_bias = type == "qwen2";  // Qwen2Attention: biases on q, k and v, none on o
    c.qk_norm = type == "qwen3";
    c.fused_qkv_gate_up = type == "phi3";
    const double partial = rope.value("partial_rotary_factor", j.value("partial_rotary_factor", 1.0));
    RLX_CHECK(partial == 1.0, "llama: '" << path << "': partial_rotary_factor " << partial << " is not supported");
    RLX_CHECK(!j.value("mlp_bias", false), "llama: '" << path << "': mlp_bias is not supported");
    RLX_CHECK(type == "qwen2" || !j.value("attention_bias", false),
              "llama: '" << path << "': attention_bias (a bias on o_proj too) is not supported");
    // A sliding window as long as the context changes nothing; a shorter one
    // bounds the context to the window (within it the attention is exact).
    const bool windowed = type == "mistral" || type == "phi3" || j.value("use_sliding_window", false);
    if (windowed && j.contains("sliding_window") && !j["sliding_window"].is_null()) {
      const int window = j["sliding_window"].get<int>();
      RLX_CHECK(window > 0, "llama: '" << path << "': sliding_window " << window);
      c.max_positions = std::min(c.max_positions, window);
    }
    if (!rope.empty()) {
      const auto& rs = rope;
      const std::string kind = rs.contains("rope_type") ? rs["rope_type"].get<std::string>()
                                                        : rs.value("type", std::string("default"));
      if (kind == "llama3") {
        c.rope_freq_divisors = llama3_rope_divisors(
            c.rope_dims, c.rope_theta, rs.at("factor").get<float>(), rs.at("low_freq_factor").get<float>(),
            rs.at("high_freq_factor").get<float>(), rs.at("original_max_position_embeddings").get<float>());
      } else if (kind == "linear") {
        const float factor = rs.at("factor").get<float>();
        RLX_CHECK(factor > 0, "llama: '" << path << "': rope_scaling.factor " << factor);
        c.rope_freq_divisors.assign(size_t(c.rope_dims / 2), factor);
      } else {
        RLX_CHECK(kind == "default", "llama: '" << path << "': rope_scaling type '" << kind
                                                << "' is not supported (llama3, linear and default are)");
        // (Phi-3's longrope/su, YaRN and dynamic NTK land here.)
      }
    }
  } catch (const nlohmann::json::exception& e) {
    RLX_FAIL("llama: '" << path << "': malformed config: " << e.what());
  }
  check_sizes(c, path);
  return c;
}

}  // namespace rlx
