// YaRN (Qwen2) and LongRoPE (Phi-3) on the CUDA backend from Hugging Face
// directories and GGUF files (tests/models/rope_scaling_families.h): the
// attention factor and the scaled frequencies in the rope, kv_write and
// decode-attention kernels, prefill and cached decode steps against the
// double-precision reference, in f32/f16, per-op and graph. The generator's
// cache (64 rows) passes LongRoPE's original context (16): the long factors.
#include <gtest/gtest.h>

#include "backends/cuda/cuda_executable.h"
#include "models/llama_generator.h"
#include "models/llama_reference.h"        // tests/models
#include "models/rope_scaling_families.h"  // tests/models
#include "test_util.h"

namespace rlx {
namespace {

using Case = std::tuple<bool /*longrope*/, bool /*gguf*/, DType, ExecMode>;
class RopeScalingCuda : public ::testing::TestWithParam<Case> {};

TEST_P(RopeScalingCuda, MatchesDoubleReference) {
  if (!cuda_available()) GTEST_SKIP() << "no CUDA device present: GPU tests skipped";
  auto [longrope, gguf, dt, mode] = GetParam();
  const test::LongRope lr("longrope");
  const test::Family f = longrope ? lr.f : test::qwen2_yarn();
  const LlamaConfig want = longrope ? lr.with(lr.long_f, lr.f.cfg.rope_attention_factor) : f.cfg;
  test::TempDir d;
  const test::Weights w = test::weights_of(f.cfg);
  std::string path = d.path().string();
  if (gguf) {
    path = (d.path() / "m.gguf").string();
    test::write_gguf(path, f, w, [&](test::GgufWriter& gw) {
      if (longrope) {
        gw.u32("phi3.rope.scaling.original_context_length", 16)
            .f32("phi3.rope.scaling.attn_factor", lr.f.cfg.rope_attention_factor);
        gw.tensor("rope_factors_long.weight", {int64_t(lr.long_f.size())}, lr.long_f);
        gw.tensor("rope_factors_short.weight", {int64_t(lr.short_f.size())}, lr.short_f);
      } else {
        gw.str("qwen2.rope.scaling.type", "yarn")
            .f32("qwen2.rope.scaling.factor", 4.f)
            .u32("qwen2.rope.scaling.original_context_length", 2048);
      }
    });
  } else {
    test::write_hf_dir(d.path(), f, w);
  }
  GeneratorOptions o;
  o.device = Device::Cuda;
  o.dtype = dt;
  o.mode = mode;
  LlamaGenerator gen(path, o);
  const double tol = dt == DType::F32 ? 1e-4 : 3e-2;
  std::vector<int32_t> ids = test::random_ids(20, f.cfg.vocab_size, 11);
  for (size_t n = 13; n <= ids.size(); ++n) {
    std::vector<int32_t> prefix(ids.begin(), ids.begin() + long(n));
    test::expect_close(gen.next_logits(prefix), test::reference(want, w, prefix, int(n) - 1), tol,
                       f.name + (gguf ? " gguf" : " hf") + " logits after " + std::to_string(n) + " tokens");
  }
  EXPECT_EQ(gen.decode_steps(), 7u);
}

INSTANTIATE_TEST_SUITE_P(YarnAndLongRope, RopeScalingCuda,
                         ::testing::Combine(::testing::Bool(), ::testing::Bool(),
                                            ::testing::Values(DType::F32, DType::F16),
                                            ::testing::Values(ExecMode::PerOp, ExecMode::Graph)),
                         [](const auto& info) {
                           return std::string(std::get<0>(info.param) ? "longrope" : "yarn") +
                                  (std::get<1>(info.param) ? "_gguf_" : "_hf_") +
                                  std::string(dtype_name(std::get<2>(info.param))) +
                                  (std::get<3>(info.param) == ExecMode::Graph ? "_graph" : "_perop");
                         });

}  // namespace
}  // namespace rlx
