// YaRN and LongRoPE rope scaling (see rope_scaling.h).
#include "models/rope_scaling.h"

#include <algorithm>
#include <cmath>
#include <numbers>

#include "models/gguf.h"
#include "models/json_read.h"
#include "models/llama.h"
#include "models/llama_limits.h"
#include "rlx/error.h"

namespace rlx {
namespace {

// transformers' get_mscale: YaRN's attention temperature for a factor.
double yarn_mscale(double scale, double mscale = 1) { return scale <= 1 ? 1.0 : 0.1 * mscale * std::log(scale) + 1.0; }

// The (fractional) pair index at which a wavelength makes num_rotations turns
// over the original context.
double correction_dim(double num_rotations, int dim, double base, double max_positions) {
  return dim * std::log(max_positions / (num_rotations * 2 * std::numbers::pi)) / (2 * std::log(base));
}

std::optional<double> optional_number(const JsonField& j, const char* key) {
  if (!j.has(key)) return std::nullopt;
  return j.at(key).number(-1e9, 1e9);
}

std::vector<float> factor_list(const JsonField& rs, const char* key, int pairs) {
  const JsonField a = rs.at(key);
  a.array();
  RLX_CHECK(int(a.size()) == pairs,
            a.where() << "holds " << a.size() << " factors for " << pairs << " rotated pairs (rope dims / 2)");
  std::vector<float> out;
  for (size_t i = 0; i < a.size(); ++i) out.push_back(float(a.at(i).number(1e-6, 1e6)));
  return out;
}

}  // namespace

RopeScale yarn_rope_scale(int rope_dims, double theta, const YarnParams& p) {
  const int dim = rope_dims;
  double low = correction_dim(p.beta_fast, dim, theta, p.original_max_positions);
  double high = correction_dim(p.beta_slow, dim, theta, p.original_max_positions);
  if (p.truncate) {
    low = std::floor(low);
    high = std::ceil(high);
  }
  low = std::max(low, 0.0);
  high = std::min(high, double(dim - 1));  // transformers clamps to dim - 1, not dim / 2 - 1
  if (low == high) high += 0.001;          // as transformers: no division by zero
  RopeScale s;
  for (int i = 0; i < dim / 2; ++i) {
    // extrapolation share: 1 for fast (short-wavelength) pairs, 0 for slow ones.
    const double ramp = std::clamp((double(i) - low) / (high - low), 0.0, 1.0);
    const double extrapolate = (1 - ramp) * p.ext_factor;
    // inv_freq = base_freq * (extrapolate + (1 - extrapolate) / factor) = base_freq / divisor
    s.divisors.push_back(float(1.0 / (extrapolate + (1 - extrapolate) / p.factor)));
  }
  if (p.attention_factor) s.attention_factor = float(*p.attention_factor);
  else if (p.mscale != 0 && p.mscale_all_dim != 0)
    s.attention_factor = float(yarn_mscale(p.factor, p.mscale) / yarn_mscale(p.factor, p.mscale_all_dim));
  else s.attention_factor = float(yarn_mscale(p.factor));
  return s;
}

double longrope_attention_factor(double factor, double original_max_positions) {
  return factor <= 1 ? 1.0 : std::sqrt(1 + std::log(factor) / std::log(original_max_positions));
}

bool read_hf_rope_scaling(const JsonField& rs, const JsonField& root, const std::string& kind, LlamaConfig& c) {
  const LlamaLimits L;
  const double max_positions = double(root.integer_or("max_position_embeddings", 2048, 1, L.positions));
  const int pairs = c.rope_dims / 2;
  if (kind == "yarn") {
    YarnParams p;
    // transformers 5 reads original_max_position_embeddings from the rope
    // parameters, standardized from the top level, else the context.
    p.original_max_positions = double(
        rs.integer_or("original_max_position_embeddings",
                      root.integer_or("original_max_position_embeddings", int64_t(max_positions), 1, L.positions), 1,
                      L.positions));
    p.factor = rs.number_or("factor", max_positions / p.original_max_positions, L.min_factor, L.max_factor);
    if (auto v = optional_number(rs, "beta_fast"); v && *v != 0) p.beta_fast = *v;  // "or 32": 0 is the default too
    if (auto v = optional_number(rs, "beta_slow"); v && *v != 0) p.beta_slow = *v;
    p.truncate = rs.boolean_or("truncate", true);
    if (rs.has("attention_factor")) p.attention_factor = rs.at("attention_factor").number(1e-6, 1e6);
    p.mscale = optional_number(rs, "mscale").value_or(0);
    p.mscale_all_dim = optional_number(rs, "mscale_all_dim").value_or(0);
    RLX_CHECK(p.beta_fast > 0 && p.beta_slow > 0, rs.where() << "beta_fast and beta_slow must be positive");
    const RopeScale s = yarn_rope_scale(c.rope_dims, c.rope_theta, p);
    c.rope_freq_divisors = s.divisors;
    c.rope_attention_factor = s.attention_factor;
    return true;
  }
  if (kind == "longrope" || kind == "su") {
    // Phi-3 writes original_max_position_embeddings at the top level;
    // transformers 5 moves it into the rope parameters.
    const double original = double(
        rs.integer_or("original_max_position_embeddings",
                      root.integer_or("original_max_position_embeddings", int64_t(max_positions), 1, L.positions), 1,
                      L.positions));
    c.rope_freq_divisors = factor_list(rs, "short_factor", pairs);
    c.rope_long_divisors = factor_list(rs, "long_factor", pairs);
    c.rope_original_context = int(original);
    const double factor = rs.number_or("factor", max_positions / original, L.min_factor, L.max_factor);
    c.rope_attention_factor = float(rs.has("attention_factor") ? rs.at("attention_factor").number(1e-6, 1e6)
                                                                 : longrope_attention_factor(factor, original));
    return true;
  }
  return false;
}

bool read_gguf_rope_scaling(const GgufFile& f, const std::string& arch, LlamaConfig& c) {
  const LlamaLimits L;
  const std::string k = arch + ".rope.scaling.";
  const int pairs = c.rope_dims / 2;
  const bool longrope = f.has_tensor("rope_factors_long.weight") || f.has_tensor("rope_factors_short.weight");
  if (f.get_string(k + "type", "none") == "yarn") {
    RLX_CHECK(!longrope, "llama: '" << f.path() << "': both " << k << "type yarn and rope_factors_*.weight");
    RLX_CHECK(f.get_float_or(k + "yarn_log_multiplier", 0, -1e6, 1e6) == 0,
              "llama: '" << f.path() << "': " << k << "yarn_log_multiplier (DeepSeek's mscale) is not supported");
    YarnParams p;
    p.factor = f.get_float(k + "factor", L.min_factor, L.max_factor);
    p.original_max_positions = double(f.get_int_or(k + "original_context_length", c.max_positions, 1, L.positions));
    p.beta_fast = f.get_float_or(k + "yarn_beta_fast", 32, 1e-6, 1e6);
    p.beta_slow = f.get_float_or(k + "yarn_beta_slow", 1, 1e-6, 1e6);
    p.ext_factor = f.get_float_or(k + "yarn_ext_factor", 1, 0, 1);
    // llama.cpp: mscale = attn_factor * (1 + 0.1 ln(factor)).
    p.attention_factor = f.get_float_or(k + "yarn_attn_factor", 1, 1e-6, 1e6) * yarn_mscale(p.factor);
    const RopeScale s = yarn_rope_scale(c.rope_dims, c.rope_theta, p);
    c.rope_freq_divisors = s.divisors;
    c.rope_attention_factor = s.attention_factor;
    return true;
  }
  if (!longrope) return false;
  for (const char* name : {"rope_factors_long.weight", "rope_factors_short.weight"}) {
    RLX_CHECK(f.has_tensor(name), "llama: '" << f.path() << "': LongRoPE needs both rope_factors_long.weight and "
                                                "rope_factors_short.weight; " << name << " is missing");
    const auto& t = f.tensor(name);
    RLX_CHECK(t.shape == (Shape{pairs}), "llama: '" << f.path() << "': " << name << " has shape "
                                                    << shape_str(t.shape) << ", want [" << pairs << "]");
  }
  c.rope_freq_divisors = f.to_f32("rope_factors_short.weight");
  c.rope_long_divisors = f.to_f32("rope_factors_long.weight");
  for (const auto* v : {&c.rope_freq_divisors, &c.rope_long_divisors})
    for (float x : *v)
      RLX_CHECK(std::isfinite(x) && x > 0, "llama: '" << f.path() << "': a LongRoPE factor is " << x);
  c.rope_original_context = int(f.get_int_or(k + "original_context_length", c.max_positions, 1, L.positions));
  // llama.cpp's converter writes the factor it derived; without it, derive
  // it as transformers does from the context length.
  c.rope_attention_factor = float(f.has(k + "attn_factor")
                                      ? f.get_float(k + "attn_factor", 1e-6, 1e6)
                                      : longrope_attention_factor(double(c.max_positions) / c.rope_original_context,
                                                                  c.rope_original_context));
  return true;
}

const std::vector<float>& rope_divisors_for_context(const LlamaConfig& c, int64_t context) {
  if (!c.rope_long_divisors.empty() && context > c.rope_original_context) return c.rope_long_divisors;
  return c.rope_freq_divisors;
}

}  // namespace rlx
