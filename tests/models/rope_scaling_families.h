// The RoPE scaling test models (YaRN on Qwen2, LongRoPE on Phi-3) and the
// transformers formulas they are checked against, written out again here in
// double; shared by the CPU and GPU suites.
#pragma once
#include <algorithm>
#include <cmath>
#include <numbers>
#include <string>
#include <vector>

#include "models/decoder_family_files.h"

namespace rlx::test {

// transformers' _compute_yarn_parameters (truncate, no mscale): the divisor
// of pair i is inv_freq_extrapolation / inv_freq, and the attention factor.
inline std::vector<float> hf_yarn_divisors(int dim, double base, double factor, double orig, double beta_fast,
                                    double beta_slow) {
  auto corr = [&](double rot) { return dim * std::log(orig / (rot * 2 * std::numbers::pi)) / (2 * std::log(base)); };
  double low = std::max(std::floor(corr(beta_fast)), 0.0), high = std::min(std::ceil(corr(beta_slow)), dim - 1.0);
  if (low == high) high += 0.001;
  std::vector<float> d;
  for (int i = 0; i < dim / 2; ++i) {
    const double pos_freq = std::pow(base, 2.0 * i / dim);
    const double extra = 1 - std::clamp((i - low) / (high - low), 0.0, 1.0);
    const double inv = (1 / (factor * pos_freq)) * (1 - extra) + (1 / pos_freq) * extra;
    d.push_back(float((1 / pos_freq) / inv));
  }
  return d;
}

inline std::string float_list(const std::vector<float>& v) {
  std::string s = "[";
  for (size_t i = 0; i < v.size(); ++i) s += (i ? ", " : "") + std::to_string(v[i]);
  return s + "]";
}

// Qwen2 with YaRN as Qwen2.5 configs write it (rope_scaling type yarn,
// factor, original_max_position_embeddings), and as transformers 5 does
// (rope_parameters with rope_theta inside).
inline Family qwen2_yarn() {
  Family f = qwen2();
  f.name = "qwen2-yarn";
  f.cfg.rope_theta = 10000.f;
  f.extra_json = R"(, "use_sliding_window": false, "rope_scaling": {"type": "yarn", "factor": 4.0,
    "original_max_position_embeddings": 2048})";
  f.cfg.rope_freq_divisors = hf_yarn_divisors(f.cfg.head_dim, 10000, 4, 2048, 32, 1);
  f.cfg.rope_attention_factor = float(0.1 * std::log(4.0) + 1);
  return f;
}

// Phi-3 with LongRoPE: 24 short and long factors, original context 16 of
// 64 (factor 4: attention factor sqrt(1 + ln 4 / ln 16)). The generator's
// cache holds 64 rows, past 16: the long factors; without a cache a prompt
// of at most 16 tokens runs in a 16-row graph: the short ones.
struct LongRope {
  Family f = phi3();
  std::vector<float> short_f, long_f;
  explicit LongRope(const std::string& type) {
    f.name = "phi3-longrope";
    const int pairs = f.cfg.rope_dims / 2;
    for (int i = 0; i < pairs; ++i) {
      short_f.push_back(1.f + 0.05f * float(i));
      long_f.push_back(1.f + 0.9f * float(i));
    }
    f.extra_json = ", \"sliding_window\": null, \"original_max_position_embeddings\": 16, \"rope_scaling\": "
                   "{\"type\": \"" + type + "\", \"short_factor\": " + float_list(short_f) + ", \"long_factor\": " +
                   float_list(long_f) + "}";
    f.cfg.rope_freq_divisors = short_f;
    f.cfg.rope_attention_factor = float(std::sqrt(1 + std::log(4.0) / std::log(16.0)));
  }
  LlamaConfig with(const std::vector<float>& divisors, float factor) const {
    LlamaConfig c = f.cfg;
    c.rope_freq_divisors = divisors;
    c.rope_attention_factor = factor;
    return c;
  }
};

}  // namespace rlx::test
