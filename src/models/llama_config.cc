// The decoder families' configs: GGUF metadata (<arch>.* keys) and Hugging
// Face config.json mapped onto LlamaConfig. A family is the LLaMA decoder
// with a few switches (biases, q/k norms, rope frequency divisors); anything
// a family needs that the graph lacks is refused naming the field.
#include <cmath>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <numbers>
#include <optional>
#include <set>

#include "models/gemma_config.h"
#include "models/gguf.h"
#include "models/json_read.h"
#include "models/llama.h"
#include "models/llama_limits.h"
#include "models/moe.h"
#include "models/rope_scaling.h"
#include "rlx/error.h"

namespace rlx {
namespace {

constexpr const char* kGgufArchs = "llama, qwen2, qwen3, phi3, gemma2, gemma3, qwen3moe";
constexpr const char* kHfTypes = "llama, mistral, qwen2, qwen3, phi3, gemma2, gemma3_text, gemma3, qwen3_moe, mixtral";

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
  RLX_CHECK(c.rope_long_divisors.empty() || c.rope_long_divisors.size() == c.rope_freq_divisors.size(),
            "llama: '" << path << "': " << c.rope_long_divisors.size() << " long rope factors for "
                       << c.rope_freq_divisors.size() << " short ones");
  RLX_CHECK(c.rope_freq_divisors.size() <= 64, "llama: '" << path << "': rope scaling with head_dim " << c.head_dim
                                                          << " (at most 128 rotated dims) is not supported");
}

// The layers a GGUF's tensors hold (blk.N.*) must be those block_count
// names: 0 .. num_layers - 1, each present, none beyond. Checked before any
// graph is sized from block_count.
void check_gguf_layers(const GgufFile& f, int num_layers) {
  std::set<int64_t> held;
  for (const GgufTensorInfo& t : f.tensors()) {
    if (t.name.rfind("blk.", 0) != 0) continue;
    const size_t dot = t.name.find('.', 4);
    const std::string n = t.name.substr(4, dot == std::string::npos ? std::string::npos : dot - 4);
    RLX_CHECK(!n.empty() && n.size() <= 9 && n.find_first_not_of("0123456789") == std::string::npos,
              "llama: '" << f.path() << "': tensor '" << t.name << "' names no layer number");
    const int64_t layer = std::stoll(n);
    RLX_CHECK(layer < num_layers, "llama: '" << f.path() << "': tensor '" << t.name << "' belongs to layer " << layer
                                             << ", but block_count is " << num_layers
                                             << " (weights the config does not use)");
    held.insert(layer);
  }
  RLX_CHECK(int64_t(held.size()) == num_layers,
            "llama: '" << f.path() << "': block_count is " << num_layers << " but the file holds tensors of "
                       << held.size() << " layers");
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
  RLX_CHECK(arch == "llama" || arch == "qwen2" || arch == "qwen3" || arch == "qwen3moe" || arch == "phi3" || gemma,
            "llama: '" << f.path() << "' holds a '" << arch << "' model; rlx loads GGUF architectures " << kGgufArchs);
  const std::string k = arch + ".";
  const LlamaLimits L;
  LlamaConfig c;
  c.family = arch;
  c.hidden_size = f.get_as<int>(k + "embedding_length", 1, L.hidden_size);
  // A GGUF whose every layer is sparse may name only its experts' width.
  const bool experts_only = f.has(k + "expert_feed_forward_length") && !f.has(k + "feed_forward_length");
  c.intermediate_size = experts_only ? f.get_as<int>(k + "expert_feed_forward_length", 1, L.intermediate_size)
                                     : f.get_as<int>(k + "feed_forward_length", 1, L.intermediate_size);
  c.num_layers = f.get_as<int>(k + "block_count", 1, L.layers);
  c.num_heads = f.get_as<int>(k + "attention.head_count", 1, L.heads);
  c.num_kv_heads = f.get_as_or<int>(k + "attention.head_count_kv", c.num_heads, 1, L.heads);
  c.max_positions = f.get_as_or<int>(k + "context_length", 2048, 1, L.positions);
  c.rms_eps = float(f.get_float(k + "attention.layer_norm_rms_epsilon", L.min_eps, L.max_eps));
  c.rope_theta = float(f.get_float_or(k + "rope.freq_base", 10000.0, L.min_theta, L.max_theta));
  RLX_CHECK(f.has(k + "attention.key_length") || c.hidden_size % c.num_heads == 0,
            "llama: '" << f.path() << "': embedding_length " << c.hidden_size << " is not a multiple of head_count "
                       << c.num_heads);
  c.head_dim = f.get_as_or<int>(k + "attention.key_length", c.hidden_size / c.num_heads, 1, L.head_dim);
  c.rope_dims = f.get_as_or<int>(k + "rope.dimension_count", c.head_dim, 1, L.head_dim);
  RLX_CHECK(f.get_int_or(k + "attention.value_length", c.head_dim, 1, L.head_dim) == c.head_dim,
            "llama: '" << f.path() << "': key and value head sizes differ");
  // llama.cpp's converter permutes LLaMA's Q/K rows for interleaved pairs;
  // Qwen keeps Hugging Face's halves (NeoX rotation).
  c.rope_interleaved = arch == "llama";
  c.qkv_bias = arch == "qwen2";
  c.qk_norm = arch == "qwen3" || arch == "qwen3moe";
  if (arch == "phi3") {
    // Phi-3's window, on every layer as llama.cpp applies it.
    const int window = f.get_as_or<int>(k + "attention.sliding_window", 0, 0, L.positions);
    if (window > 0 && window < c.max_positions) {
      c.sliding_window = window;
      c.local_layers.assign(size_t(c.num_layers), true);
    }
    c.fused_qkv_gate_up = true;
    RLX_CHECK(f.has_tensor("blk.0.attn_qkv.weight"),
              "llama: '" << f.path() << "': a phi3 GGUF without the fused blk.0.attn_qkv.weight is not supported");
  }
  const std::string scaling = f.get_string(k + "rope.scaling.type", "none");
  if (read_gguf_rope_scaling(f, arch, c)) {
    // YaRN, or LongRoPE's factor tensors
  } else if (scaling == "linear") {
    const float factor = float(f.get_float(k + "rope.scaling.factor", L.min_factor, L.max_factor));
    c.rope_freq_divisors.assign(size_t(c.rope_dims / 2), factor);
  } else {
    RLX_CHECK(scaling == "none", "llama: '" << f.path() << "': " << k << "rope.scaling.type '" << scaling
                                            << "' is not supported (none, linear and yarn are)");
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
  c.vocab_size = f.get_as_or<int>(k + "vocab_size", int(std::min<int64_t>(emb.shape[0], L.vocab)), 1, L.vocab);
  RLX_CHECK(c.vocab_size == emb.shape[0], "llama: '" << f.path() << "': " << k << "vocab_size " << c.vocab_size
                                                     << " but token_embd.weight has " << emb.shape[0] << " rows");
  c.tie_embeddings = !f.has_tensor("output.weight");
  if (gemma) read_gemma_gguf(f, c);
  if (f.has(k + "expert_count")) read_moe_gguf(f, arch, c);  // Mixtral's GGUFs are architecture llama
  RLX_CHECK(arch != "qwen3moe" || c.num_experts > 0, "llama: '" << f.path() << "': a qwen3moe GGUF without "
                                                               << k << "expert_count");
  check_sizes(c, f.path());
  check_gguf_layers(f, c.num_layers);
  return c;
}

bool is_llama_hf_model_type(const std::string& t) {
  return t == "llama" || t == "mistral" || t == "qwen2" || t == "qwen3" || t == "phi3" || is_gemma_model_type(t) ||
         is_moe_model_type(t);
}

const char* llama_hf_model_types() { return kHfTypes; }

LlamaConfig load_llama_config(const std::string& dir_or_file) {
  namespace fs = std::filesystem;
  const std::string path = fs::is_directory(dir_or_file) ? (fs::path(dir_or_file) / "config.json").string()
                                                          : dir_or_file;
  const nlohmann::json doc = read_json_file(path);
  const JsonField j(doc, path);
  j.object();
  const LlamaLimits L;
  LlamaConfig c;
  const std::string type = j.string_or("model_type", "");
  // The graph is causal: a config that attends both ways (EmbeddingGemma,
  // LLM2Vec-style embedders) would be read as another model.
  RLX_CHECK(!j.boolean_or("use_bidirectional_attention", false),
            j.where() << "use_bidirectional_attention is not supported (rlx's decoders attend causally)");
  RLX_CHECK(j.boolean_or("is_causal", true),
            j.where() << "is_causal false is not supported (rlx's decoders attend causally)");
  if (is_gemma_model_type(type)) {
    c = gemma_config_from_hf(doc, path);
    check_sizes(c, path);
    return c;
  }
  RLX_CHECK(is_llama_hf_model_type(type),
            "llama: '" << path << "': model_type is '" << type << "'; rlx loads model_type " << kHfTypes);
  c.family = type;
  c.vocab_size = int(j.at("vocab_size").integer(1, L.vocab));
  c.hidden_size = int(j.at("hidden_size").integer(1, L.hidden_size));
  c.intermediate_size = int(j.at("intermediate_size").integer(1, L.intermediate_size));
  c.num_layers = int(j.at("num_hidden_layers").integer(1, L.layers));
  c.num_heads = int(j.at("num_attention_heads").integer(1, L.heads));
  c.num_kv_heads = int(j.integer_or("num_key_value_heads", c.num_heads, 1, L.heads));
  RLX_CHECK(j.has("head_dim") || c.hidden_size % c.num_heads == 0,
            j.where() << "hidden_size " << c.hidden_size << " is not a multiple of num_attention_heads "
                      << c.num_heads);
  c.head_dim = int(j.integer_or("head_dim", c.hidden_size / c.num_heads, 1, L.head_dim));
  c.rope_dims = c.head_dim;
  // transformers 5 writes the rotary settings as one object, rope_parameters
  // {rope_type, rope_theta, factor, ...}; earlier versions as rope_theta and
  // rope_scaling beside each other. Either is read: a theta taken from the
  // wrong place gives every position the wrong angle without a word.
  std::optional<JsonField> rope;
  if (j.has("rope_parameters")) rope = j.at("rope_parameters");
  else if (j.has("rope_scaling")) rope = j.at("rope_scaling");
  if (rope) rope->object();
  c.rope_theta = float(rope && rope->has("rope_theta") ? rope->at("rope_theta").number(L.min_theta, L.max_theta)
                                                       : j.number_or("rope_theta", 10000.0, L.min_theta, L.max_theta));
  c.rms_eps = float(j.number_or("rms_norm_eps", 1e-6, L.min_eps, L.max_eps));
  c.max_positions = int(j.integer_or("max_position_embeddings", 2048, 1, L.positions));
  c.tie_embeddings = j.boolean_or("tie_word_embeddings", false);
  c.qkv_bias = type == "qwen2";  // Qwen2Attention: biases on q, k and v, none on o
  c.qk_norm = type == "qwen3" || type == "qwen3_moe";
  c.fused_qkv_gate_up = type == "phi3";
  const double partial = rope ? rope->number_or("partial_rotary_factor", j.number_or("partial_rotary_factor", 1.0, 0.0, 1.0),
                                               0.0, 1.0)
                             : j.number_or("partial_rotary_factor", 1.0, 0.0, 1.0);
  RLX_CHECK(partial == 1.0, j.where() << "partial_rotary_factor " << partial << " is not supported");
  RLX_CHECK(!j.boolean_or("mlp_bias", false), j.where() << "mlp_bias is not supported");
  RLX_CHECK(type == "qwen2" || !j.boolean_or("attention_bias", false),
            j.where() << "attention_bias (a bias on o_proj too) is not supported");
  // A sliding window shorter than the context makes its layers local (a
  // window as long as the context changes nothing): every layer of Mistral,
  // Mixtral and Phi-3; Qwen's (use_sliding_window) from max_window_layers
  // on, as transformers lays them out; layer_types where the file has them.
  const bool windowed = type == "mistral" || type == "mixtral" || type == "phi3" ||
                        j.boolean_or("use_sliding_window", false);
  if (windowed && j.has("sliding_window")) {
    const int window = int(j.at("sliding_window").integer(1, L.positions));
    if (window < c.max_positions) {
      c.sliding_window = window;
      if (j.has("layer_types")) {
        const JsonField types = j.at("layer_types").array();
        RLX_CHECK(types.size() == size_t(c.num_layers),
                  types.where() << types.size() << " layer types for " << c.num_layers << " layers");
        for (size_t l = 0; l < types.size(); ++l) {
          const std::string t = types.at(l).string();
          RLX_CHECK(t == "sliding_attention" || t == "full_attention",
                    types.at(l).where() << "layer type '" << t << "' (sliding_attention or full_attention)");
          c.local_layers.push_back(t == "sliding_attention");
        }
      } else {
        const bool qwen = type.rfind("qwen", 0) == 0;
        const int first = qwen ? int(j.integer_or("max_window_layers", 28, 0, L.layers)) : 0;
        for (int l = 0; l < c.num_layers; ++l) c.local_layers.push_back(l >= first);
      }
    }
  }
  if (rope) {
    const JsonField& rs = *rope;
    const std::string kind = rs.has("rope_type") ? rs.at("rope_type").string() : rs.string_or("type", "default");
    auto factor = [&](const char* key) { return float(rs.at(key).number(L.min_factor, L.max_factor)); };
    if (kind == "llama3") {
      const float lo = factor("low_freq_factor"), hi = factor("high_freq_factor");
      RLX_CHECK(hi > lo, rs.where() << "high_freq_factor " << hi << " must exceed low_freq_factor " << lo);
      c.rope_freq_divisors = llama3_rope_divisors(
          c.rope_dims, c.rope_theta, factor("factor"), lo, hi,
          float(rs.at("original_max_position_embeddings").integer(1, L.positions)));
    } else if (kind == "linear") {
      c.rope_freq_divisors.assign(size_t(c.rope_dims / 2), factor("factor"));
    } else if (kind == "dynamic") {
      // Dynamic NTK (transformers' "dynamic"): the base grows only once a
      // sequence is longer than the original context, and within it the
      // rotation is the default one. The context is bounded there, so the
      // default rotation is exact for every sequence rlx runs.
      factor("factor");  // present and in range, as transformers requires
      const int original = rs.has("original_max_position_embeddings")
                               ? int(rs.at("original_max_position_embeddings").integer(1, L.positions))
                               : c.max_positions;
      c.max_positions = std::min(c.max_positions, original);
    } else if (!read_hf_rope_scaling(rs, j, kind, c)) {
      RLX_CHECK(kind == "default", rs.where() << "rope_scaling type '" << kind
                                              << "' is not supported (llama3, linear, dynamic, yarn, longrope, su "
                                                 "and default are)");
    }
  }
  if (is_moe_model_type(type)) read_moe_hf(j, type, c);
  check_sizes(c, path);
  return c;
}

}  // namespace rlx
