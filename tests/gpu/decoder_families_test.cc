// The decoder families (Llama 3 rope scaling, Qwen2 biases, Qwen3 q/k norms,
// Mistral, Phi-3, Gemma 2 and 3) on the CUDA backend from real files
// (tests/models/decoder_family_files.h): prefill and cached decode steps
// (RoPE with frequency divisors in the rope, kv_write and decode-attention
// kernels; Gemma's sliding windows, soft caps and post-norms)
// against the double-precision reference, in f32/f16/bf16, per-op and graph.
#include <gtest/gtest.h>

#include "backends/cuda/cuda_executable.h"
#include "models/decoder_family_files.h"  // tests/models
#include "models/llama_generator.h"
#include "models/llama_reference.h"  // tests/models
#include "test_util.h"

namespace rlx {
namespace {

using Case = std::tuple<test::Family (*)(), bool /*gguf*/, DType, ExecMode>;
class DecoderFamilyCuda : public ::testing::TestWithParam<Case> {};

TEST_P(DecoderFamilyCuda, MatchesDoubleReference) {
  if (!cuda_available()) GTEST_SKIP() << "no CUDA device present: GPU tests skipped";
  auto [family, gguf, dt, mode] = GetParam();
  test::Family f = family();
  if (gguf && f.model_type == "mistral") GTEST_SKIP() << "Mistral GGUFs are architecture llama";
  // Gemma GGUFs carry no query_pre_attn_scalar: llama.cpp's rule gives head_dim here.
  if (gguf && test::is_gemma(f)) f.cfg.query_scale = 1.f / std::sqrt(float(f.cfg.head_dim));
  test::TempDir d;
  const test::Weights w = test::weights_of(f.cfg);
  std::string path = d.path().string();
  if (gguf) {
    path = (d.path() / "m.gguf").string();
    test::write_gguf(path, f, w);
  } else {
    test::write_hf_dir(d.path(), f, w);
  }
  GeneratorOptions o;
  o.device = Device::Cuda;
  o.dtype = dt;
  o.mode = mode;
  LlamaGenerator gen(path, o);
  // f32: 1e-4 of max |logit|; f16/bf16 weights and activations: 3e-2 / 6e-2.
  const double tol = dt == DType::F32 ? 1e-4 : dt == DType::F16 ? 3e-2 : 6e-2;
  std::vector<int32_t> ids = test::random_ids(20, f.cfg.vocab_size, 11);
  for (size_t n = 13; n <= ids.size(); ++n) {
    std::vector<int32_t> prefix(ids.begin(), ids.begin() + long(n));
    test::expect_close(gen.next_logits(prefix), test::reference(f.cfg, w, prefix, int(n) - 1), tol,
                       f.name + (gguf ? " gguf" : " hf") + " logits after " + std::to_string(n) + " tokens");
  }
  EXPECT_EQ(gen.decode_steps(), 7u);
  if (!test::is_gemma(f)) return;
  // Recomputing the prefix: the prefill kernels' windows and caps (and in
  // f16/bf16 not cuDNN, which has neither), at a window that bites.
  o.kv_cache = false;
  LlamaGenerator recompute(path, o);
  for (size_t n : {size_t(9), ids.size()}) {
    std::vector<int32_t> prefix(ids.begin(), ids.begin() + long(n));
    test::expect_close(recompute.next_logits(prefix), test::reference(f.cfg, w, prefix, int(n) - 1), tol,
                       f.name + (gguf ? " gguf" : " hf") + " recomputed logits after " + std::to_string(n) + " tokens");
  }
}

// Window layers' ring caches on the device (prefill runs of 16, rings of
// 53-54 rows for a 64-token context): 58 tokens, the window wrapping past
// the ring's end, against the reference in each dtype, recorded.
TEST(DecoderFamilyCudaRing, WindowRingsMatchTheReference) {
  if (!cuda_available()) GTEST_SKIP() << "no CUDA device present: GPU tests skipped";
  for (auto family : {&test::mistral, &test::gemma2, &test::gemma3})
    for (DType dt : {DType::F32, DType::F16, DType::BF16}) {
      const test::Family f = family();
      test::TempDir d;
      const test::Weights w = test::weights_of(f.cfg);
      test::write_hf_dir(d.path(), f, w);
      GeneratorOptions o;
      o.device = Device::Cuda;
      o.dtype = dt;
      o.mode = ExecMode::Graph;
      o.prefill_chunk = 16;
      LlamaGenerator gen(d.path().string(), o);
      const double tol = dt == DType::F32 ? 1e-4 : dt == DType::F16 ? 3e-2 : 6e-2;
      const std::vector<int32_t> ids = test::random_ids(58, f.cfg.vocab_size, 13);
      // A prefill of 37 (runs of 16, 16, 5), a step, a prefill of 14 more, steps to 58.
      for (int n : {37, 38, 52, 53, 54, 55, 56, 57, 58}) {
        std::vector<int32_t> prefix(ids.begin(), ids.begin() + n);
        const std::vector<float> got = gen.next_logits(prefix);
        if (n == 37 || n == 38 || n == 52 || n == 55 || n == 58)
          test::expect_close(got, test::reference(f.cfg, w, prefix, n - 1), tol,
                             f.name + " " + std::string(dtype_name(dt)) + " ring logits after " + std::to_string(n) + " tokens");
      }
      EXPECT_EQ(gen.decode_steps(), 7u) << f.name;
      EXPECT_EQ(gen.window_run(), 16) << f.name;
    }
}

INSTANTIATE_TEST_SUITE_P(
    Families, DecoderFamilyCuda,
    ::testing::Combine(::testing::Values(&test::llama3, &test::qwen2, &test::qwen3, &test::mistral, &test::phi3,
                                         &test::gemma2, &test::gemma3),
                       ::testing::Bool(), ::testing::Values(DType::F32, DType::F16, DType::BF16),
                       ::testing::Values(ExecMode::PerOp, ExecMode::Graph)),
    [](const auto& info) {
      const test::Family f = std::get<0>(info.param)();
      return f.name + (std::get<1>(info.param) ? "_gguf_" : "_hf_") + std::string(dtype_name(std::get<2>(info.param))) +
             (std::get<3>(info.param) == ExecMode::Graph ? "_graph" : "_perop");
    });

}  // namespace
}  // namespace rlx
