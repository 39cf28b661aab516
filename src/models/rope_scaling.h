// YaRN and LongRoPE (Phi-3's longrope / su) rope scaling: per-pair frequency
// divisors and an attention factor that multiplies cos and sin, from a
// Hugging Face rope_scaling / rope_parameters object or GGUF metadata, as
// transformers' _compute_yarn_parameters / _compute_longrope_parameters and
// llama.cpp compute them.
#pragma once
#include <optional>
#include <string>
#include <vector>

namespace rlx {

class GgufFile;
class JsonField;
struct LlamaConfig;

struct YarnParams {
  double factor = 1;                  // the context extension (interpolation) factor
  double original_max_positions = 1;  // the pretraining context the ramp is measured against
  double beta_fast = 32, beta_slow = 1;
  bool truncate = true;               // floor/ceil the correction range (transformers' default)
  double ext_factor = 1;              // llama.cpp's extrapolation mix (1 = YaRN as published)
  std::optional<double> attention_factor;  // none: derived from factor (and mscale / mscale_all_dim)
  double mscale = 0, mscale_all_dim = 0;
};

struct RopeScale {
  std::vector<float> divisors;  // rope_dims / 2
  float attention_factor = 1.f;
};

// Pair i of rope_dims turns at theta^(-2i/rope_dims) / divisors[i]: a ramp
// between the interpolated frequency (divided by factor) below the
// correction range and the original one above it.
RopeScale yarn_rope_scale(int rope_dims, double theta, const YarnParams& p);

// LongRoPE's default attention factor: sqrt(1 + ln(s) / ln(original)) with
// s = max_positions / original (1 where s <= 1).
double longrope_attention_factor(double factor, double original_max_positions);

// Hugging Face rope_scaling / rope_parameters of type yarn, longrope or su
// onto c (rope_dims, rope_theta set; root is config.json, for
// max_position_embeddings and Phi-3's top-level
// original_max_position_embeddings). False for any other type.
bool read_hf_rope_scaling(const JsonField& rs, const JsonField& root, const std::string& kind, LlamaConfig& c);

// GGUF: <arch>.rope.scaling.type yarn (factor, original_context_length,
// yarn_beta_fast/slow, yarn_ext_factor, yarn_attn_factor), or Phi-3's
// rope_factors_long/short.weight tensors (rope.scaling.attn_factor,
// rope.scaling.original_context_length). False when neither applies.
bool read_gguf_rope_scaling(const GgufFile& f, const std::string& arch, LlamaConfig& c);

// The divisors a graph whose context is `context` tokens rotates with:
// LongRoPE's long factors past the original context (llama.cpp chooses by
// the context it is given, n_ctx), else rope_freq_divisors.
const std::vector<float>& rope_divisors_for_context(const LlamaConfig& c, int64_t context);

}  // namespace rlx
