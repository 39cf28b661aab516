// The whole LLaMA graph (build_llama_graph: odd GQA shape, tied embeddings,
// logits gathered at chosen rows) on the CUDA backend in every execution
// mode, against the double-precision reference of tests/models, in
// Hugging Face's layout and in GGUF's (permuted Q/K, interleaved RoPE).
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "backends/cuda/cuda_executable.h"
#include "models/llama.h"
#include "models/llama_reference.h"  // tests/models
#include "rlx/session.h"
#include "test_util.h"

namespace rlx {
namespace {

class LlamaModelParity : public ::testing::TestWithParam<std::tuple<DType, ExecMode, bool>> {};

TEST_P(LlamaModelParity, MatchesDoubleReference) {
  if (!cuda_available()) GTEST_SKIP() << "no CUDA device present: GPU tests skipped";
  auto [dt, mode, gguf_layout] = GetParam();
  LlamaConfig c = test::odd_config();
  test::Weights w = test::random_weights(build_llama_graph(c, 1, 1, DType::F32));
  test::Weights bound = w;
  if (gguf_layout) {
    c.rope_interleaved = true;
    for (int l = 0; l < c.num_layers; ++l) {
      const std::string p = "blk." + std::to_string(l) + ".";
      bound[p + "attn_q.weight"] = test::to_gguf_rows(w[p + "attn_q.weight"], c.num_heads, c.head_dim, c.hidden_size);
      bound[p + "attn_k.weight"] =
          test::to_gguf_rows(w[p + "attn_k.weight"], c.num_kv_heads, c.head_dim, c.hidden_size);
    }
  }
  const int64_t B = 2, S = 13;
  CompileOptions o;
  o.device = Device::Cuda;
  o.mode = mode;
  auto exe = compile(build_llama_graph(c, B, S, dt), o);
  ASSERT_NE(dynamic_cast<cuda::CudaExecutable*>(&exe->backend()), nullptr);
  for (const auto& [name, v] : bound) exe->set_param_f32(name, v.data(), v.size());
  std::vector<int32_t> ids = test::random_ints(size_t(B * S), 9, 0, c.vocab_size - 1), pos(S);
  for (int64_t i = 0; i < S; ++i) pos[size_t(i)] = int32_t(i);
  const std::vector<int> last = {12, 6};
  auto out = exe->run({{"input_ids", HostTensor::from_i32({B, S}, ids)},
                       {"positions", HostTensor::from_i32({S}, pos)},
                       {"last_index", HostTensor::from_i32({B}, {last[0], int32_t(S) + last[1]})}});
  std::vector<float> got = out.at("logits").to_f32();
  ASSERT_EQ(got.size(), size_t(B * c.vocab_size));
  // f32: 1e-4 of max |logit|; f16/bf16 weights and activations: the 3e-2.
  const double tol = dt == DType::F32 ? 1e-4 : dt == DType::F16 ? 3e-2 : 6e-2;
  for (int64_t b = 0; b < B; ++b) {
    std::vector<int32_t> row(ids.begin() + b * S, ids.begin() + (b + 1) * S);
    std::vector<float> g(got.begin() + b * c.vocab_size, got.begin() + (b + 1) * c.vocab_size);
    test::expect_close(g, test::reference(test::odd_config(), w, row, last[size_t(b)]), tol,
                       "sequence " + std::to_string(b));
  }
}

INSTANTIATE_TEST_SUITE_P(Modes, LlamaModelParity,
                         ::testing::Combine(::testing::Values(DType::F32, DType::F16, DType::BF16),
                                            ::testing::Values(ExecMode::PerOp, ExecMode::Graph),
                                            ::testing::Bool()));

}  // namespace
}  // namespace rlx
