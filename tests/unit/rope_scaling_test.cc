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
    EXPECT_EQ(got.rope_freq_divisors, lr.short_f);
    EXPECT_EQ(got.rope_long_divisors, lr.long_f);
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
