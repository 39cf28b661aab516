// LLaMA decoders: the config from GGUF metadata and from config.json, and
// SmolLM2-135M-Instruct (the default GGUF) continuing a fixed prompt greedily
// exactly as a NumPy forward pass over the same GGUF does
// (tests/data/smollm2_reference.json, made by make_smollm2_reference.py),
// with each CPU matmul_q kernel.
#include "models/llama.h"

#include <gtest/gtest.h>

#include <cmath>
#include <fstream>
#include <nlohmann/json.hpp>

#include "models/gguf.h"
#include "models/llama_generator.h"
#include "cpu_quant_kernel_scope.h"
#include "models/test_files.h"  // tests/models
#include "test_util.h"

namespace rlx {
namespace {

const std::string kSmolLM2 =
    std::string(RLX_SOURCE_DIR) + "/models/SmolLM2-135M-Instruct/SmolLM2-135M-Instruct.Q4_1.gguf";

TEST(Llama, ConfigFromGguf) {
  GgufFile f(kSmolLM2);
  LlamaConfig c = llama_config_from_gguf(f);
  EXPECT_EQ(c.vocab_size, 49152);
  EXPECT_EQ(c.hidden_size, 576);
  EXPECT_EQ(c.intermediate_size, 1536);
  EXPECT_EQ(c.num_layers, 30);
  EXPECT_EQ(c.num_heads, 9);
  EXPECT_EQ(c.num_kv_heads, 3);
  EXPECT_EQ(c.head_dim, 64);
  EXPECT_EQ(c.rope_dims, 64);
  EXPECT_FLOAT_EQ(c.rope_theta, 100000.f);
  EXPECT_NEAR(c.rms_eps, 1e-5f, 1e-12f);
  EXPECT_TRUE(c.tie_embeddings);
  EXPECT_TRUE(c.rope_interleaved);
}

TEST(Llama, ConfigFromHuggingFaceJson) {
  test::TempDir d;
  test::write_text(d.path() / "config.json", R"({"model_type": "llama", "vocab_size": 1000,
    "hidden_size": 288, "intermediate_size": 776, "num_hidden_layers": 2, "num_attention_heads": 6,
    "num_key_value_heads": 2, "head_dim": 48, "rope_theta": 500000.0, "rms_norm_eps": 1e-5,
    "max_position_embeddings": 512, "tie_word_embeddings": true})");
  LlamaConfig c = load_llama_config(d.path().string());
  EXPECT_EQ(c.hidden_size, 288);
  EXPECT_EQ(c.num_kv_heads, 2);
  EXPECT_EQ(c.head_dim, 48);
  EXPECT_FLOAT_EQ(c.rope_theta, 500000.f);
  EXPECT_TRUE(c.tie_embeddings);
  EXPECT_FALSE(c.rope_interleaved);
  Graph g = build_llama_graph(c, 1, 17, DType::F32);
  EXPECT_EQ(g.value(g.outputs().at(0).second).shape, (Shape{1, 1000}));

  test::write_text(d.path() / "config.json", R"({"model_type": "bert"})");
  std::string e = test::error_of([&] { load_llama_config(d.path().string()); });
  EXPECT_NE(e.find("config.json"), std::string::npos) << e;
  EXPECT_NE(e.find("bert"), std::string::npos) << e;
  test::write_text(d.path() / "config.json", R"({"model_type": "llama", "vocab_size": 10})");
  e = test::error_of([&] { load_llama_config(d.path().string()); });
  EXPECT_NE(e.find("config.json"), std::string::npos) << e;
}

// The continuation and the first step's logits with each matmul_q kernel:
// the f32 kernel (activations unquantized) within 2e-3 of the float64
// reference and every token equal; the best integer kernel, whose
// activations are two int8 digits per value (cpu_quant_dot.h), within
// `logits_tol` and the first `same_tokens` tokens equal (one digit, as
// llama.cpp's q8 activations, moved the first-step logits by up to ~0.37
// and turned token 9 from ':' to ',' on this prompt).
void expect_smollm2_reference(cpu::QuantKernel kernel, double logits_tol, size_t same_tokens) {
  const test::QuantKernelScope scope(kernel);
  std::ifstream in(std::string(RLX_SOURCE_DIR) + "/tests/data/smollm2_reference.json");
  ASSERT_TRUE(in);
  auto ref = nlohmann::json::parse(in);
  // One thread: ctest runs tests side by side on CI's two cores, and OpenMP
  // teams of two on a busy pair of cores run many times slower than one.
  GeneratorOptions o;
  o.threads = 1;
  LlamaGenerator gen(kSmolLM2, o);
  const auto want_prompt = ref.at("prompt_ids").get<std::vector<int32_t>>();
  const auto want = ref.at("generated_ids").get<std::vector<int32_t>>();
  std::vector<int32_t> ids = gen.tokenizer().encode(ref.at("prompt").get<std::string>());
  ASSERT_EQ(ids, want_prompt);
  gen.reserve(int64_t(ids.size() + want.size()));

  std::vector<int32_t> got;
  for (size_t step = 0; step < want.size(); ++step) {
    std::vector<float> logits = gen.next_logits(ids);
    ASSERT_EQ(logits.size(), 49152u);
    if (step == 0) {
      // Logits themselves, not only their argmax, against the float64 reference.
      double max_abs = 0;
      for (auto& [i, v] : ref.at("first_step_logits").items()) {
        ASSERT_TRUE(std::isfinite(logits[std::stoul(i)]));
        max_abs = std::max(max_abs, std::abs(double(logits[std::stoul(i)]) - v.get<double>()));
      }
      EXPECT_LT(max_abs, logits_tol) << "first-step logits differ from the reference ("
                                     << cpu::quant_kernel_name(kernel) << " kernel)";
      size_t nonzero = 0;
      for (float v : logits) nonzero += v != 0.f && std::isfinite(v);
      EXPECT_EQ(nonzero, logits.size());
    }
    int32_t next = int32_t(std::max_element(logits.begin(), logits.end()) - logits.begin());
    got.push_back(next);
    ids.push_back(next);
  }
  if (same_tokens >= want.size()) {
    EXPECT_EQ(got, want);
    EXPECT_EQ(gen.tokenizer().decode(got), ref.at("generated_text").get<std::string>());
  } else {
    EXPECT_EQ(std::vector<int32_t>(got.begin(), got.begin() + long(same_tokens)),
              std::vector<int32_t>(want.begin(), want.begin() + long(same_tokens)));
  }
  // Through the KV cache: the prompt prefilled by the 16 bucket, every later
  // token one run of the decode graph.
  EXPECT_EQ(gen.buckets(), (std::vector<int64_t>{16}));
  EXPECT_EQ(gen.decode_steps(), want.size() - 1);
  // The Q8_0 head stays quantized; the Q4_1 layers too for the integer
  // kernels (every product a matmul_q), expanded for the f32 one.
  EXPECT_EQ(gen.quantized_weights().size(), kernel == cpu::QuantKernel::F32 ? 1u : 30u * 7 + 1);
}

TEST(Llama, SmolLM2GreedyContinuationMatchesNumpyReference) {
  expect_smollm2_reference(cpu::QuantKernel::F32, 2e-3, 32);
}

TEST(Llama, SmolLM2GreedyWithInt8ActivationsMatchesNumpyReference) {
  const cpu::QuantKernel best = cpu::quant_kernel_runs(cpu::QuantKernel::Avx512Vnni) ? cpu::QuantKernel::Avx512Vnni
                                : cpu::quant_kernel_runs(cpu::QuantKernel::Avx2)     ? cpu::QuantKernel::Avx2
                                                                                     : cpu::QuantKernel::Scalar;
  expect_smollm2_reference(best, 1e-2, 32);
}

// The same continuation with the token and position advanced on the device:
// after the prefill every token is one run of the state-fed decode graph,
// and the tokens equal the reference's (and so the host-driven path's above,
// with the same f32 matmul_q kernel).
TEST(Llama, SmolLM2DeviceGreedyMatchesNumpyReference) {
  const test::QuantKernelScope f32(cpu::QuantKernel::F32);
  std::ifstream in(std::string(RLX_SOURCE_DIR) + "/tests/data/smollm2_reference.json");
  ASSERT_TRUE(in);
  auto ref = nlohmann::json::parse(in);
  GeneratorOptions o;
  o.threads = 1;
  LlamaGenerator gen(kSmolLM2, o);
  std::vector<int32_t> ids = ref.at("prompt_ids").get<std::vector<int32_t>>();
  const auto want = ref.at("generated_ids").get<std::vector<int32_t>>();
  gen.reserve(int64_t(ids.size() + want.size()));
  std::vector<int32_t> got;
  for (size_t step = 0; step < want.size(); ++step) {
    got.push_back(gen.next_greedy(ids));
    ids.push_back(got.back());
  }
  EXPECT_EQ(got, want);
  EXPECT_EQ(gen.decode_steps(), 0u);  // no host-fed step
  EXPECT_EQ(gen.device_steps(), want.size() - 1);
}

}  // namespace
}  // namespace rlx
