// YaRN and LongRoPE (Phi-3 longrope / su) rope scaling: the divisors and
// attention factor as transformers computes them (written out again here in
// double), and decoders of odd sizes from a Hugging Face directory and a
// GGUF against the double-precision reference, with the KV cache (RoPE fused
// into kv_write and attention) and without. Each piece switched off (the
// attention factor, YaRN's ramp, LongRoPE's long factors) must move the
// logits past the tolerance, or the comparison could not see it.
#include <gtest/gtest.h>

#include <cmath>
#include <numbers>

#include "models/decoder_family_files.h"  // tests/models
#include "models/rope_scaling_families.h"  // tests/models
#include "models/gguf.h"
#include "models/llama_generator.h"
#include "models/llama_reference.h"  // tests/models
#include "models/rope_scaling.h"
#include "test_util.h"

namespace rlx {
namespace {

double max_rel_diff(const std::vector<float>& got, const std::vector<double>& ref) {
  double m = 0, worst = 0;
  for (size_t i = 0; i < ref.size(); ++i) m = std::max(m, std::fabs(ref[i]));
  for (size_t i = 0; i < ref.size(); ++i) worst = std::max(worst, std::fabs(double(got[i]) - ref[i]));
  return worst / m;
}

constexpr double kTol = 1e-4;

// Prompt logits (11 tokens, then 3 decode steps with the cache) match the
// reference of `want`; each config in `wrong` misses it by far more than
// the tolerance.
void expect_logits(const std::string& path, bool kv_cache, const LlamaConfig& want,
                   const std::vector<std::pair<std::string, LlamaConfig>>& wrong, const test::Weights& w) {
  GeneratorOptions o;
  o.threads = 1;
  o.kv_cache = kv_cache;
  LlamaGenerator gen(path, o);
  const std::vector<int32_t> ids = test::random_ids(14, want.vocab_size, 7);
  for (size_t n = 11; n <= ids.size(); ++n) {
    const std::vector<int32_t> prefix(ids.begin(), ids.begin() + long(n));
    const std::vector<float> got = gen.next_logits(prefix);
    test::expect_close(got, test::reference(want, w, prefix, int(n) - 1), kTol,
                       path + " after " + std::to_string(n) + " tokens");
    if (n == ids.size()) {
      for (const auto& [what, cfg] : wrong)
        EXPECT_GT(max_rel_diff(got, test::reference(cfg, w, prefix, int(n) - 1)), 20 * kTol)
            << path << ": the logits do not change with " << what;
    }
  }
}

TEST(YarnRopeScale, MatchesTransformersFormula) {
  // Odd head size 46 (23 pairs), the ramp inside the rotated pairs.
  YarnParams p;
  p.factor = 4;
  p.original_max_positions = 2048;
  const RopeScale s = yarn_rope_scale(46, 10000, p);
  const std::vector<float> want = test::hf_yarn_divisors(46, 10000, 4, 2048, 32, 1);
  ASSERT_EQ(s.divisors.size(), want.size());
  for (size_t i = 0; i < want.size(); ++i) EXPECT_NEAR(s.divisors[i], want[i], 1e-6 * want[i]) << i;
  EXPECT_FLOAT_EQ(s.divisors.front(), 1.f);  // fast pairs extrapolate
  EXPECT_FLOAT_EQ(s.divisors.back(), 4.f);   // slow pairs interpolate
  EXPECT_NEAR(s.attention_factor, 0.1 * std::log(4.0) + 1, 1e-7);
  // mscale / mscale_all_dim (DeepSeek's form) and an explicit factor.
  p.mscale = 0.707;
  p.mscale_all_dim = 1.0;
  EXPECT_NEAR(yarn_rope_scale(46, 10000, p).attention_factor,
              (0.1 * 0.707 * std::log(4.0) + 1) / (0.1 * std::log(4.0) + 1), 1e-7);
  p.attention_factor = 0.8;
  EXPECT_FLOAT_EQ(yarn_rope_scale(46, 10000, p).attention_factor, 0.8f);
  EXPECT_NEAR(longrope_attention_factor(32, 4096), std::sqrt(1 + std::log(32.0) / std::log(4096.0)), 1e-12);
  EXPECT_EQ(longrope_attention_factor(0.5, 4096), 1.0);
}

// Golden values from transformers 5.17's _compute_yarn_parameters on
// Qwen2.5-7B's rope (head_dim 128, theta 1e6, rope_scaling {"type": "yarn",
// "factor": 4.0, "original_max_position_embeddings": 32768}): inv_freq in
// float32, as transformers computes it, and the attention factor.
TEST(YarnRopeScale, MatchesTransformersOnQwen25) {
  const double hf_inv_freq[64] = {
      1.000000000e+00, 8.058422208e-01, 6.493816376e-01, 5.232991576e-01, 4.216965139e-01, 3.398208320e-01,
      2.738419771e-01, 2.206733972e-01, 1.778279394e-01, 1.433012635e-01, 1.154782027e-01, 9.305720031e-02,
      7.498941571e-02, 6.042964384e-02, 4.869675264e-02, 3.924189880e-02, 3.162277862e-02, 2.548296750e-02,
      2.053525113e-02, 1.654817164e-02, 1.333521493e-02, 1.074607857e-02, 8.659643121e-03, 6.978305988e-03,
      5.375321489e-03, 4.131738096e-03, 3.168422729e-03, 2.423422411e-03, 1.848276588e-03, 1.405112445e-03,
      1.064360957e-03, 8.029597811e-04, 6.029411452e-04, 4.503235687e-04, 3.342405544e-04, 2.462583943e-04,
      1.798411540e-04, 1.299314899e-04, 9.262301319e-05, 6.490394298e-05, 4.445698505e-05, 3.582531644e-05,
      2.886954826e-05, 2.326430149e-05, 1.874735608e-05, 1.510740913e-05, 1.217418867e-05, 9.810474694e-06,
      7.905693565e-06, 6.370741630e-06, 5.133812465e-06, 4.137042652e-06, 3.333803534e-06, 2.686519565e-06,
      2.164910939e-06, 1.744576593e-06, 1.405853368e-06, 1.132895932e-06, 9.129353202e-07, 7.356817946e-07,
      5.928434348e-07, 4.777382401e-07, 3.849816324e-07, 3.102344408e-07,
  };
  YarnParams p;
  p.factor = 4;
  p.original_max_positions = 32768;
  const RopeScale s = yarn_rope_scale(128, 1e6, p);
  ASSERT_EQ(s.divisors.size(), 64u);
  for (int i = 0; i < 64; ++i)
    EXPECT_NEAR(std::pow(1e6, -2.0 * i / 128) / s.divisors[size_t(i)], hf_inv_freq[i], 1e-6 * hf_inv_freq[i]) << i;
  EXPECT_NEAR(s.attention_factor, 1.138629436111989, 1e-7);
  // Phi-3-mini-128k's LongRoPE (131072 of 4096) in transformers 5.17.
  EXPECT_NEAR(longrope_attention_factor(131072.0 / 4096, 4096), 1.1902381, 1e-7);
}

std::vector<std::pair<std::string, LlamaConfig>> yarn_wrong(const LlamaConfig& c) {
  LlamaConfig no_factor = c, no_ramp = c;
  no_factor.rope_attention_factor = 1.f;
  no_ramp.rope_freq_divisors.assign(c.rope_freq_divisors.size(), 4.f);  // plain linear scaling
  return {{"no attention factor", no_factor}, {"no ramp", no_ramp}};
}

TEST(YarnRopeScaling, HuggingFaceDirectoryMatchesTheReference) {
  const test::Family f = test::qwen2_yarn();
  const test::Weights w = test::weights_of(f.cfg);
  test::TempDir d;
  test::write_hf_dir(d.path(), f, w);
  const LlamaConfig got = load_llama_config(d.path().string());
  ASSERT_EQ(got.rope_freq_divisors.size(), f.cfg.rope_freq_divisors.size());
  for (size_t i = 0; i < got.rope_freq_divisors.size(); ++i)
    EXPECT_NEAR(got.rope_freq_divisors[i], f.cfg.rope_freq_divisors[i], 1e-6 * f.cfg.rope_freq_divisors[i]) << i;
  EXPECT_FLOAT_EQ(got.rope_attention_factor, f.cfg.rope_attention_factor);
  expect_logits(d.path().string(), true, f.cfg, yarn_wrong(f.cfg), w);
  expect_logits(d.path().string(), false, f.cfg, yarn_wrong(f.cfg), w);
}

TEST(YarnRopeScaling, RopeParametersOfTransformers5AndAnExplicitAttentionFactor) {
  test::Family f = test::qwen2_yarn();
  f.extra_json = R"(, "rope_parameters": {"rope_type": "yarn", "rope_theta": 10000.0, "factor": 4.0,
    "original_max_position_embeddings": 2048, "attention_factor": 0.75, "beta_fast": 16.0, "beta_slow": 2.0})";
  f.cfg.rope_freq_divisors = test::hf_yarn_divisors(f.cfg.head_dim, 10000, 4, 2048, 16, 2);
  f.cfg.rope_attention_factor = 0.75f;
  const test::Weights w = test::weights_of(f.cfg);
  test::TempDir d;
  test::write_hf_dir(d.path(), f, w);
  const LlamaConfig got = load_llama_config(d.path().string());
  EXPECT_FLOAT_EQ(got.rope_attention_factor, 0.75f);
  EXPECT_FLOAT_EQ(got.rope_theta, 10000.f);
  expect_logits(d.path().string(), true, f.cfg, yarn_wrong(f.cfg), w);
}

TEST(YarnRopeScaling, GgufMatchesTheReference) {
  const test::Family f = test::qwen2_yarn();
  const test::Weights w = test::weights_of(f.cfg);
  test::TempDir d;
  const auto path = d.path() / "m.gguf";
  test::write_gguf(path, f, w, [](test::GgufWriter& gw) {
    gw.str("qwen2.rope.scaling.type", "yarn")
        .f32("qwen2.rope.scaling.factor", 4.f)
        .u32("qwen2.rope.scaling.original_context_length", 2048);
  });
  expect_logits(path.string(), true, f.cfg, yarn_wrong(f.cfg), w);
}

TEST(YarnRopeScaling, GgufLogMultiplierIsRefusedByName) {
  const test::Family f = test::qwen2_yarn();
  const test::Weights w = test::weights_of(f.cfg);
  test::TempDir d;
  const auto path = d.path() / "m.gguf";
  test::write_gguf(path, f, w, [](test::GgufWriter& gw) {
    gw.str("qwen2.rope.scaling.type", "yarn")
        .f32("qwen2.rope.scaling.factor", 4.f)
        .f32("qwen2.rope.scaling.yarn_log_multiplier", 0.1f);
  });
  try {
    GgufFile g(path.string());
    llama_config_from_gguf(g);
    FAIL() << "yarn_log_multiplier was accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("yarn_log_multiplier"), std::string::npos) << e.what();
  }
}

TEST(LongRopeScaling, HuggingFaceDirectoryChoosesTheFactorsByContext) {
  for (const std::string type : {"longrope", "su"}) {
    const test::LongRope lr(type);
    const test::Weights w = test::weights_of(lr.f.cfg);
    test::TempDir d;
    test::write_hf_dir(d.path(), lr.f, w);
    const LlamaConfig got = load_llama_config(d.path().string());
    ASSERT_EQ(got.rope_freq_divisors.size(), lr.short_f.size());
    ASSERT_EQ(got.rope_long_divisors.size(), lr.long_f.size());
    for (size_t i = 0; i < lr.short_f.size(); ++i) {
      EXPECT_NEAR(got.rope_freq_divisors[i], lr.short_f[i], 1e-6 * lr.short_f[i]) << i;
      EXPECT_NEAR(got.rope_long_divisors[i], lr.long_f[i], 1e-6 * lr.long_f[i]) << i;
    }
    EXPECT_EQ(got.rope_original_context, 16);
    EXPECT_NEAR(got.rope_attention_factor, lr.f.cfg.rope_attention_factor, 1e-6);
    const float af = lr.f.cfg.rope_attention_factor;
    expect_logits(d.path().string(), true, lr.with(lr.long_f, af),
                  {{"the short factors", lr.with(lr.short_f, af)}, {"no attention factor", lr.with(lr.long_f, 1.f)}},
                  w);
    expect_logits(d.path().string(), false, lr.with(lr.short_f, af),
                  {{"the long factors", lr.with(lr.long_f, af)}, {"no attention factor", lr.with(lr.short_f, 1.f)}},
                  w);
  }
}

TEST(LongRopeScaling, GgufFactorTensorsMatchTheReference) {
  const test::LongRope lr("longrope");
  const test::Weights w = test::weights_of(lr.f.cfg);
  test::TempDir d;
  const auto path = d.path() / "m.gguf";
  const float af = 1.3f;  // as the converter writes it (here not the derived value, so the key is read)
  test::write_gguf(path, lr.f, w, [&](test::GgufWriter& gw) {
    gw.u32("phi3.rope.scaling.original_context_length", 16).f32("phi3.rope.scaling.attn_factor", af);
    gw.tensor("rope_factors_long.weight", {int64_t(lr.long_f.size())}, lr.long_f);
    gw.tensor("rope_factors_short.weight", {int64_t(lr.short_f.size())}, lr.short_f);
  });
  expect_logits(path.string(), true, lr.with(lr.long_f, af), {{"the short factors", lr.with(lr.short_f, af)}}, w);
  expect_logits(path.string(), false, lr.with(lr.short_f, af), {{"no attention factor", lr.with(lr.short_f, 1.f)}},
                w);
}

TEST(LongRopeScaling, WrongFactorCountIsRefused) {
  test::LongRope lr("longrope");
  lr.f.extra_json = R"(, "original_max_position_embeddings": 16, "rope_scaling": {"type": "longrope",
    "short_factor": [1.0, 2.0], "long_factor": [1.0, 2.0]})";
  test::TempDir d;
  test::write_hf_dir(d.path(), lr.f, test::weights_of(lr.f.cfg));
  try {
    load_llama_config(d.path().string());
    FAIL() << "2 factors for 24 pairs were accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("short_factor"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace rlx
