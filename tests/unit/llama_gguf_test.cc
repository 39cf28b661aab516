// A small LLaMA GGUF made as llama.cpp's converter makes one (permuted Q/K,
// Q8_0/Q4_0/F16/F32 tensors, a SentencePiece vocabulary, a separate LM head:
// tests/data/tiny_llama.gguf from make_tiny_llama.py) through the generator,
// against the NumPy forward pass's logits and greedy continuation, with
// each CPU matmul_q kernel.
#include <gtest/gtest.h>

#include <fstream>
#include <nlohmann/json.hpp>

#include "cpu_quant_kernel_scope.h"
#include "models/llama_generator.h"
#include "test_util.h"

namespace rlx {
namespace {

// With the f32 matmul_q kernel within 1e-4 of the reference; with the
// default integer kernel (two int8 digits per activation) within 1e-3 of
// max |ref|. The same greedy continuation on both.
TEST(LlamaGguf, TinyModelMatchesNumpyReference) {
  ASSERT_NE(cpu::quant_kernel(), cpu::QuantKernel::F32) << "an integer kernel is the default";
  for (cpu::QuantKernel kernel : {cpu::QuantKernel::F32, cpu::quant_kernel()}) {
    const test::QuantKernelScope scope(kernel);
    const std::string what = std::string("first logits, ") + cpu::quant_kernel_name(kernel) + " kernel";
    const std::string dir = std::string(RLX_SOURCE_DIR) + "/tests/data/";
    std::ifstream in(dir + "tiny_llama_reference.json");
    ASSERT_TRUE(in);
    auto ref = nlohmann::json::parse(in);
    LlamaGenerator gen(dir + "tiny_llama.gguf");
    EXPECT_TRUE(gen.config().rope_interleaved);
    EXPECT_FALSE(gen.config().tie_embeddings);
    EXPECT_EQ(gen.eos_id(), 2);
    std::vector<int32_t> ids = gen.tokenizer().encode(ref.at("prompt").get<std::string>());
    ASSERT_EQ(ids, ref.at("prompt_ids").get<std::vector<int32_t>>());  // BOS, then sentencepiece's ids
    test::expect_close(gen.next_logits(ids), ref.at("first_logits").get<std::vector<double>>(),
                       kernel == cpu::QuantKernel::F32 ? 1e-4 : 1e-3, what);
    std::vector<int32_t> got;
    for (int step = 0; step < 8; ++step) {
      auto logits = gen.next_logits(ids);
      got.push_back(int32_t(std::max_element(logits.begin(), logits.end()) - logits.begin()));
      ids.push_back(got.back());
    }
    EXPECT_EQ(got, ref.at("generated_ids").get<std::vector<int32_t>>()) << what;
  }
}

}  // namespace
}  // namespace rlx
