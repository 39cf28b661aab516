// Greedy decoding advanced on the device, on the CPU backend: the token and
// position live in state and each token after the prompt is one run of a
// decode graph with no inputs; the tokens equal the host-driven path's
// (logits copied back, argmax on the host) on tests/data/tiny_llama.gguf.
#include <gtest/gtest.h>

#include <fstream>
#include <set>
#include <nlohmann/json.hpp>

#include "models/llama_decode_check.h"  // tests/models
#include "models/llama_greedy_check.h"

namespace rlx {
namespace {

const std::string kTiny = std::string(RLX_SOURCE_DIR) + "/tests/data/tiny_llama.gguf";

std::vector<int32_t> tiny_prompt(const LlamaGenerator& g) {
  std::ifstream in(std::string(RLX_SOURCE_DIR) + "/tests/data/tiny_llama_reference.json");
  EXPECT_TRUE(in);
  return g.tokenizer().encode(nlohmann::json::parse(in).at("prompt").get<std::string>());
}

TEST(DeviceGreedy, TinyLlamaTokensEqualTheHostDrivenPath) {
  GeneratorOptions o;
  o.threads = 1;
  LlamaGenerator host(kTiny, o), dev(kTiny, o);
  const std::vector<int32_t> prompt = tiny_prompt(host);
  const int n = 24;
  host.reserve(int64_t(prompt.size()) + n + 1);
  dev.reserve(int64_t(prompt.size()) + n + 1);
  test::GreedyPaths p = test::run_greedy_paths(host, dev, prompt, n + 1);
  EXPECT_EQ(p.device, p.host);
  std::set<int32_t> distinct(p.host.begin(), p.host.end());
  EXPECT_GT(distinct.size(), 3u) << "a degenerate continuation proves little";
  // The prompt prefilled, every later token from device state, none host-fed.
  EXPECT_EQ(dev.device_steps(), uint64_t(n));  // n + 1 calls: one prefill, n state-fed runs
  EXPECT_EQ(dev.decode_steps(), 0u);
  test::expect_state_fed_decode_graph(dev.greedy_executable());
  EXPECT_EQ(dev.greedy_executable().run_count(), uint64_t(n));
}

// The host-fed and state-fed paths interleave: logits after device steps
// come from the cache those steps wrote, and a new prompt starts over.
TEST(DeviceGreedy, MixesWithLogitsAndNewPrompts) {
  GeneratorOptions o;
  o.threads = 1;
  LlamaGenerator host(kTiny, o), dev(kTiny, o);
  std::vector<int32_t> ids = tiny_prompt(host);
  host.reserve(64);
  dev.reserve(64);
  for (int i = 0; i < 6; ++i) ids.push_back(dev.next_greedy(ids));
  EXPECT_EQ(dev.device_steps(), 5u);
  // Logits of the sequence so far: one host-fed decode step over the cache.
  const std::vector<float> got = dev.next_logits(ids), want = host.next_logits(ids);
  EXPECT_LE(test::max_rel_error(got, want), 1e-5);
  EXPECT_EQ(dev.decode_steps(), 1u);
  // Its argmax is in state: the next greedy token is a state-fed run again.
  ids.push_back(argmax(got));
  const int32_t next = dev.next_greedy(ids);
  EXPECT_EQ(dev.device_steps(), 6u);
  EXPECT_EQ(next, argmax(host.next_logits(ids)));
  // A token other than the state's choice is fed from the host.
  ids.push_back((next + 1) % host.config().vocab_size);
  EXPECT_EQ(dev.next_greedy(ids), argmax(host.next_logits(ids)));
  EXPECT_EQ(dev.device_steps(), 6u);
  EXPECT_EQ(dev.decode_steps(), 2u);
  // A different prompt is prefilled, then continues from state.
  std::vector<int32_t> other(ids.begin(), ids.begin() + 5);
  other.push_back(dev.next_greedy(other));
  EXPECT_EQ(other.back(), argmax(host.next_logits(std::vector<int32_t>(other.begin(), other.end() - 1))));
  const int32_t after = dev.next_greedy(other);
  EXPECT_EQ(after, argmax(host.next_logits(other)));
  EXPECT_EQ(dev.device_steps(), 7u);
}

// Without the KV cache next_greedy is the argmax of the recomputed logits.
TEST(DeviceGreedy, RecomputingGeneratorFallsBackToHostArgmax) {
  GeneratorOptions o;
  o.threads = 1;
  o.kv_cache = false;
  LlamaGenerator g(kTiny, o);
  std::vector<int32_t> ids = tiny_prompt(g);
  EXPECT_EQ(g.next_greedy(ids), argmax(g.next_logits(ids)));
  EXPECT_EQ(g.device_steps(), 0u);
}

}  // namespace
}  // namespace rlx
