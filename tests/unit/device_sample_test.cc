// Sampled decoding advanced on the device, on the CPU backend: with a
// temperature the cached graphs end in a sample thunk, each token after the
// prompt is one run of the state-fed decode graph, and the tokens equal the
// host-sampled path's (logits copied back, Sampler on the host) on
// tests/data/tiny_llama.gguf.
#include <gtest/gtest.h>

#include <fstream>
#include <set>
#include <nlohmann/json.hpp>

#include "models/llama_decode_check.h"  // tests/models
#include "models/llama_greedy_check.h"
#include "test_util.h"

namespace rlx {
namespace {

const std::string kTiny = std::string(RLX_SOURCE_DIR) + "/tests/data/tiny_llama.gguf";

std::vector<int32_t> tiny_prompt(const LlamaGenerator& g) {
  std::ifstream in(std::string(RLX_SOURCE_DIR) + "/tests/data/tiny_llama_reference.json");
  EXPECT_TRUE(in);
  return g.tokenizer().encode(nlohmann::json::parse(in).at("prompt").get<std::string>());
}

GeneratorOptions sampling_options(const SamplingOptions& s) {
  GeneratorOptions o;
  o.threads = 1;
  o.sampling = s;
  return o;
}

TEST(DeviceSample, TinyLlamaTokensEqualTheHostSampledPath) {
  const int n = 24;
  for (const SamplingOptions s : {SamplingOptions{1.3f, 0, 1.f, 7}, SamplingOptions{0.9f, 20, 0.9f, 8}}) {
    LlamaGenerator host(kTiny, sampling_options({})), dev(kTiny, sampling_options(s));
    const std::vector<int32_t> prompt = tiny_prompt(host);
    host.reserve(int64_t(prompt.size()) + n + 1);
    dev.reserve(int64_t(prompt.size()) + n + 1);
    const test::GreedyPaths p = test::run_sampled_paths(host, dev, prompt, n + 1, s);
    EXPECT_EQ(p.device, p.host) << "T " << s.temperature;
    std::set<int32_t> distinct(p.host.begin(), p.host.end());
    EXPECT_GT(distinct.size(), 3u) << "a degenerate continuation proves little";
    std::vector<int32_t> greedy;
    for (const auto& l : p.host_logits) greedy.push_back(argmax(l));
    EXPECT_NE(p.host, greedy) << "sampling should leave the greedy path somewhere";
    // The prompt prefilled, every later token one state-fed run, none host-fed.
    EXPECT_EQ(dev.device_steps(), uint64_t(n));
    EXPECT_EQ(dev.decode_steps(), 0u);
    test::expect_state_fed_decode_graph(dev.state_fed_executable(), "sample");
    // The same seed again draws the same tokens.
    LlamaGenerator again(kTiny, sampling_options(s));
    again.reserve(int64_t(prompt.size()) + n + 1);
    std::vector<int32_t> ids = prompt;
    for (int i = 0; i <= n; ++i) ids.push_back(again.next_token(ids));
    EXPECT_EQ(std::vector<int32_t>(ids.begin() + std::ptrdiff_t(prompt.size()), ids.end()), p.device);
  }
}

// Host-fed runs (logits asked for, a token the host chose, a new prompt)
// leave a draw in state that continues as the host would have drawn; the
// recomputing generator samples on the host to the same tokens.
TEST(DeviceSample, MixesWithLogitsAndNewPromptsAndRecompute) {
  const SamplingOptions s{1.1f, 0, 0.95f, 21};
  const Sampler sampler(s);
  LlamaGenerator host(kTiny, sampling_options({})), dev(kTiny, sampling_options(s));
  GeneratorOptions ro = sampling_options(s);
  ro.kv_cache = false;
  LlamaGenerator recompute(kTiny, ro);
  host.reserve(64);
  dev.reserve(64);
  std::vector<int32_t> ids = tiny_prompt(host);
  auto host_token = [&](const std::vector<int32_t>& x) { return sampler.next(host.next_logits(x), int64_t(x.size())); };
  for (int i = 0; i < 4; ++i) ids.push_back(dev.next_token(ids));
  EXPECT_EQ(dev.device_steps(), 3u);
  const std::vector<float> got = dev.next_logits(ids), want = host.next_logits(ids);
  EXPECT_LE(test::max_rel_error(got, want), 1e-5);
  EXPECT_EQ(dev.decode_steps(), 1u);
  // That run's draw is in state: the next token is a state-fed run.
  ids.push_back(sampler.next(got, int64_t(ids.size())));
  EXPECT_EQ(dev.next_token(ids), host_token(ids));
  EXPECT_EQ(dev.device_steps(), 4u);
  // A token other than the state's is fed from the host.
  ids.push_back(int32_t((ids.back() + 1) % host.config().vocab_size));
  EXPECT_EQ(dev.next_token(ids), host_token(ids));
  EXPECT_EQ(dev.device_steps(), 4u);
  // A different prompt is prefilled, then continues from state.
  std::vector<int32_t> other(ids.begin(), ids.begin() + 5);
  other.push_back(dev.next_token(other));
  EXPECT_EQ(other.back(), host_token(std::vector<int32_t>(other.begin(), other.end() - 1)));
  EXPECT_EQ(dev.next_token(other), host_token(other));
  EXPECT_EQ(dev.device_steps(), 5u);
  // Without the KV cache the host samples the recomputed logits alike.
  EXPECT_EQ(recompute.next_token(other), host_token(other));
  EXPECT_EQ(recompute.next_token(ids), host_token(ids));
  EXPECT_EQ(recompute.device_steps(), 0u);
  // A sampling generator has no greedy step.
  EXPECT_NE(test::error_of([&] { dev.next_greedy(ids); }).find("samples"), std::string::npos);
}

}  // namespace
}  // namespace rlx
