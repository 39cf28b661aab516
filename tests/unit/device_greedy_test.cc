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
  test::expect_state_fed_decode_graph(dev.state_fed_executable());
  EXPECT_EQ(dev.state_fed_executable().run_count(), uint64_t(n));
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

// Batch 2 at the graph level: sequences of 5 and 8 tokens prefilled in one
// seq-8 run leave next_pos {5, 8} (pos + last_index - b*seq + 1) and their
// argmax tokens in state; state-fed batch-2 steps then continue each exactly
// as a batch-1 host-fed loop over that sequence alone does.
TEST(DeviceGreedy, BatchOfTwoContinuesEachSequenceAsAlone) {
  const LlamaConfig c = test::small_odd_config();
  const int64_t cache = 24, seq = 8, steps = 6;
  const int64_t len[2] = {5, 8};
  CompileOptions o;
  o.threads = 1;
  o.verify_plan = true;
  // Weights 10x the usual random ones: the tokens then depend on the context
  // and on positions (with small ones each token mostly predicts itself).
  test::Weights w = test::random_weights(build_llama_graph(c, 1, 1, DType::F32));
  for (auto& [name, v] : w)
    if (name.find("norm") == std::string::npos)
      for (float& x : v) x *= 10.f;
  const std::vector<int32_t> tokens = test::random_ints(16, 23, 0, c.vocab_size - 1);

  // Batch 1, host-fed: a prefill of the sequence, then decode steps with the
  // host's argmax fed back.
  std::vector<int32_t> want[2];
  for (int b = 0; b < 2; ++b) {
    const Graph pg = build_llama_graph(c, 1, len[b], DType::F32, cache), dg = build_llama_graph(c, 1, 1, DType::F32, cache);
    CompileOptions so = o;
    so.arena_share = make_arena_share(std::max(planned_arena_bytes(pg, o), planned_arena_bytes(dg, o)));
    auto pre = compile(pg, so), dec = compile(dg, so);
    for (const auto& [name, v] : w) pre->set_param_f32(name, v.data(), v.size());
    dec->share_params_with(*pre);
    std::vector<int32_t> ids(tokens.begin() + b * seq, tokens.begin() + b * seq + len[b]);
    int32_t next = argmax(pre->run({{"input_ids", HostTensor::from_i32({1, len[b]}, ids)},
                                    {"pos", HostTensor::from_i32({1}, {0})},
                                    {"last_index", HostTensor::from_i32({1}, {int32_t(len[b] - 1)})}})
                              .at("logits")
                              .to_f32());
    for (int64_t t = 0; t <= steps; ++t) {
      want[b].push_back(next);
      next = argmax(dec->run({{"input_ids", HostTensor::from_i32({1, 1}, {next})},
                              {"pos", HostTensor::from_i32({1}, {int32_t(len[b] + t)})},
                              {"last_index", HostTensor::from_i32({1}, {0})}})
                        .at("logits")
                        .to_f32());
    }
  }

  // Batch 2: one padded prefill, then state-fed steps.
  const Graph pg = build_llama_graph(c, 2, seq, DType::F32, cache);
  const Graph sg = build_llama_graph(c, 2, 1, DType::F32, cache, LlamaFeed::State);
  CompileOptions so = o;
  so.arena_share = make_arena_share(std::max(planned_arena_bytes(pg, o), planned_arena_bytes(sg, o)));
  auto pre = compile(pg, so), step = compile(sg, so);
  for (const auto& [name, v] : w) pre->set_param_f32(name, v.data(), v.size());
  step->share_params_with(*pre);
  std::vector<int32_t> padded = tokens;
  for (int64_t i = len[0]; i < seq; ++i) padded[size_t(i)] = 0;
  auto out = pre->run({{"input_ids", HostTensor::from_i32({2, seq}, padded)},
                       {"pos", HostTensor::from_i32({2}, {0, 0})},
                       {"last_index", HostTensor::from_i32({2}, {int32_t(len[0] - 1), int32_t(seq + len[1] - 1)})}});
  std::vector<int32_t> got[2];
  std::vector<int32_t> chosen = out.at("next_token").to_i32();
  for (int64_t t = 0; t <= steps; ++t) {
    for (int b = 0; b < 2; ++b) got[b].push_back(chosen[size_t(b)]);
    if (t < steps) chosen = step->run({}).at("next_token").to_i32();
  }
  EXPECT_EQ(got[0], want[0]);
  EXPECT_EQ(got[1], want[1]);
  for (int b = 0; b < 2; ++b) {
    std::set<int32_t> distinct(want[b].begin(), want[b].end());
    EXPECT_GE(distinct.size(), 4u) << "sequence " << b << ": a near-constant continuation proves little";
  }
}

}  // namespace
}  // namespace rlx
