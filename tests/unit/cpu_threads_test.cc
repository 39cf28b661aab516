// The CPU forward of all-MiniLM-L6-v2 gives the same hidden states, bit for
// bit, with 1, 2 and 3 threads: no kernel's result may depend on how its work
// is split. Where rlx's packed GEMM does not run (no AVX-512), the products go
// to OpenBLAS, whose Haswell kernels round differently by slice shape (a
// column slice or another row count changes the last bits of some columns),
// so there the bound is 1e-5 of the largest value instead of zero.
#include <gtest/gtest.h>
#include <omp.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <random>

#include "backends/cpu/cpu_gemm_packed.h"
#include "backends/cpu/cpu_quant_dot.h"
#include "cpu_quant_kernel_scope.h"
#include "models/bert.h"
#include "models/llama_generator.h"
#include "models/test_files.h"  // tests/models

namespace rlx {
namespace {

std::vector<float> hidden_states(int threads, int64_t batch, int64_t seq) {
  BertLoadOptions o;
  o.batch = batch;
  o.seq = seq;
  o.threads = threads;
  auto exe = load_bert(test::minilm_dir(), o);
  std::mt19937 rng(5);
  std::vector<int32_t> ids(size_t(batch * seq)), mask(ids.size(), 1), types(ids.size(), 0);
  for (auto& i : ids) i = int32_t(1000 + rng() % 20000);
  for (int64_t t = seq - 9; t < seq; ++t) mask[size_t(seq + t)] = 0;  // row 1 padded
  auto out = exe->run({{"input_ids", HostTensor::from_i32({batch, seq}, ids)},
                       {"attention_mask", HostTensor::from_i32({batch, seq}, mask)},
                       {"token_type_ids", HostTensor::from_i32({batch, seq}, types)}});
  return out.at("last_hidden_state").to_f32();
}

TEST(CpuThreads, SameHiddenStatesWithOneTwoAndThreeThreads) {
  ASSERT_TRUE(test::minilm_present());
  const int saved = omp_get_max_threads();
  const int64_t batch = 3, seq = 45;  // odd sizes, more rows than one attention block
  auto one = hidden_states(1, batch, seq);
  ASSERT_EQ(one.size(), size_t(batch * seq * 384));
  double max_abs = 0;
  for (float x : one) {
    ASSERT_TRUE(std::isfinite(x));
    max_abs = std::max(max_abs, double(std::fabs(x)));
  }
  ASSERT_GT(max_abs, 0.1) << "all-zero hidden states";
  for (int threads : {2, 3}) {
    auto got = hidden_states(threads, batch, seq);
    ASSERT_EQ(got.size(), one.size());
    double worst = 0;
    for (size_t i = 0; i < got.size(); ++i) worst = std::max(worst, double(std::fabs(got[i] - one[i])));
    const double bound = cpu::packed_gemm_available() ? 0.0 : 1e-5 * max_abs;
    EXPECT_LE(worst, bound) << threads << " threads differ from 1 thread by " << worst;
  }
  EXPECT_EQ(omp_get_max_threads(), saved) << "a run changed the process's thread count";
}

// SmolLM2's Q4_1 layers and Q8_0 head through each integer matmul_q kernel
// (threads over weight rows): a prompt of 21 tokens (the 32-row bucket: x's
// rows 4, 2 and 1 at a time) and decode steps (three with the default
// kernel, one with the slower ones) give the same logits, bit for bit, on
// 1, 2 and 3 threads.
std::vector<float> smollm2_logits(int threads, int steps) {
  GeneratorOptions o;
  o.threads = threads;
  LlamaGenerator gen(std::string(RLX_SOURCE_DIR) + "/models/SmolLM2-135M-Instruct/SmolLM2-135M-Instruct.Q4_1.gguf", o);
  std::vector<int32_t> ids;
  for (int i = 0; i < 21; ++i) ids.push_back(int32_t(100 + 977 * i % 40000));
  std::vector<float> all;
  for (int step = 0; step < steps; ++step) {
    const std::vector<float> l = gen.next_logits(ids);
    all.insert(all.end(), l.begin(), l.end());
    ids.push_back(int32_t(std::max_element(l.begin(), l.end()) - l.begin()));
  }
  EXPECT_EQ(gen.decode_steps(), uint64_t(steps - 1));
  return all;
}

TEST(CpuThreads, SameQuantizedLogitsWithOneTwoAndThreeThreads) {
  const cpu::QuantKernel best = cpu::quant_kernel();
  for (cpu::QuantKernel k : {cpu::QuantKernel::Scalar, cpu::QuantKernel::Avx2, cpu::QuantKernel::Avx512Vnni}) {
    if (!cpu::quant_kernel_runs(k)) continue;
    const test::QuantKernelScope scope(k);
    const int steps = k == best ? 4 : 2;
    const uint64_t calls = cpu::quant_kernel_calls(k);
    const std::vector<float> one = smollm2_logits(1, steps);
    EXPECT_GT(cpu::quant_kernel_calls(k), calls) << cpu::quant_kernel_name(k) << " did not run";
    ASSERT_EQ(one.size(), size_t(steps) * 49152);
    size_t finite = 0;
    for (float v : one) finite += std::isfinite(v) && v != 0.f;
    ASSERT_EQ(finite, one.size()) << cpu::quant_kernel_name(k);
    for (int threads : {2, 3}) {
      const std::vector<float> got = smollm2_logits(threads, steps);
      ASSERT_EQ(got.size(), one.size());
      size_t differ = 0;
      for (size_t i = 0; i < got.size(); ++i) differ += std::memcmp(&got[i], &one[i], sizeof(float)) != 0;
      EXPECT_EQ(differ, 0u) << cpu::quant_kernel_name(k) << ": " << threads << " threads";
    }
  }
}

}  // namespace
}  // namespace rlx
