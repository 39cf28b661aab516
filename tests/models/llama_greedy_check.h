// Greedy decoding advanced on the device (LlamaGenerator::next_greedy: the
// token and position live in state, one state-fed run per token) against
// the host-driven path (next_logits, argmax on the host) of another
// generator over the same model. Shared by the CPU suite and the GPU suite.
#pragma once
#include <gtest/gtest.h>

#include <set>
#include <string>
#include <vector>

#include "models/llama_generator.h"
#include "models/sampling.h"

namespace rlx::test {

struct GreedyPaths {
  std::vector<int32_t> host, device;           // the tokens each path chose
  std::vector<std::vector<float>> host_logits;  // the host path's logits per step
};

// n tokens after `prompt` on both paths. `device` must not have run yet (its
// state then holds nothing), `host` may be any generator of the same model.
inline GreedyPaths run_greedy_paths(LlamaGenerator& host, LlamaGenerator& device, const std::vector<int32_t>& prompt,
                                    int n) {
  GreedyPaths r;
  std::vector<int32_t> ids = prompt;
  for (int i = 0; i < n; ++i) {
    r.host_logits.push_back(host.next_logits(ids));
    r.host.push_back(argmax(r.host_logits.back()));
    ids.push_back(r.host.back());
  }
  ids = prompt;
  for (int i = 0; i < n; ++i) {
    r.device.push_back(device.next_greedy(ids));
    ids.push_back(r.device.back());
  }
  return r;
}

// As run_greedy_paths for a sampling device generator: the host path draws
// with Sampler(o) from the logits at position ids.size(), the device path is
// next_token.
inline GreedyPaths run_sampled_paths(LlamaGenerator& host, LlamaGenerator& device, const std::vector<int32_t>& prompt,
                                     int n, const SamplingOptions& o) {
  GreedyPaths r;
  const Sampler sampler(o);
  std::vector<int32_t> ids = prompt;
  for (int i = 0; i < n; ++i) {
    r.host_logits.push_back(host.next_logits(ids));
    r.host.push_back(sampler.next(r.host_logits.back(), int64_t(ids.size())));
    ids.push_back(r.host.back());
  }
  ids = prompt;
  for (int i = 0; i < n; ++i) {
    r.device.push_back(device.next_token(ids));
    ids.push_back(r.device.back());
  }
  return r;
}

// The state-fed decode graph: no inputs, two one-element outputs (the token,
// chosen by one `chooser` thunk, argmax or sample, and the logits' sum that
// carries a NaN), and the two state updates (token and position) after
// everything else.
inline void expect_state_fed_decode_graph(Executable& greedy, const std::string& chooser = "argmax") {
  const Schedule& s = greedy.schedule();
  EXPECT_TRUE(s.input_bindings.empty()) << "the state-fed decode step copies nothing in";
  ASSERT_EQ(s.output_bindings.size(), 2u);
  std::set<std::string> names;
  for (const auto& b : s.output_bindings) {
    names.insert(b.name);
    // One i32 token; one element of the compute dtype for the sum.
    if (b.name == "next_token") EXPECT_EQ(b.bytes(), 4u);
    else EXPECT_TRUE(b.bytes() == 2u || b.bytes() == 4u) << b.name << " holds " << b.bytes() << " bytes";
  }
  EXPECT_EQ(names, (std::set<std::string>{"logit_sum", "next_token"}));
  ASSERT_EQ(s.state_updates.size(), 2u);
  EXPECT_EQ(s.state_updates[0].state, "next_token");
  EXPECT_EQ(s.state_updates[1].state, "next_pos");
  EXPECT_EQ(s.state_updates[1].thunk, int32_t(s.thunks.size()) - 1);
  const auto& h = greedy.report().thunk_histogram;
  EXPECT_EQ(h.count(chooser) ? h.at(chooser) : 0, 1) << "one " << chooser << " thunk";
  EXPECT_EQ(h.count("argmax") + h.count("sample"), 1u) << "one way to choose";
}

}  // namespace rlx::test
