// Batched greedy decoding (the engine) against single-sequence greedy
// decoding (LlamaGenerator::next_greedy) of the same model: prompts of
// different lengths from tests/data/tiny_llama.gguf, shared by the CPU and
// the GPU suites.
#pragma once
#include <gtest/gtest.h>

#include <algorithm>
#include <fstream>
#include <set>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "models/llama_generator.h"
#include "thunks/thunk.h"

namespace rlx::test {

inline const std::string& tiny_llama_path() {
  static const std::string p = std::string(RLX_SOURCE_DIR) + "/tests/data/tiny_llama.gguf";
  return p;
}

// `count` (at most 8) prompts of distinct lengths (3 to 22 tokens, so that the batch's
// prefill bucket (32) differs from most single prefills' (16)): prefixes of
// the reference prompt and of that prompt followed by a second sentence.
inline std::vector<std::vector<int32_t>> tiny_batch_prompts(const LlamaGenerator& g, int count) {
  std::ifstream in(std::string(RLX_SOURCE_DIR) + "/tests/data/tiny_llama_reference.json");
  EXPECT_TRUE(in);
  const std::string text = nlohmann::json::parse(in).at("prompt").get<std::string>();
  const std::vector<int32_t> longest = g.tokenizer().encode(text + " Then the dog woke up and ran away.");
  EXPECT_GE(longest.size(), 22u);
  const size_t lengths[] = {12, 3, 22, 7, 17, 5, 20, 9};
  EXPECT_LE(count, 8);
  std::vector<std::vector<int32_t>> out;
  for (int i = 0; i < std::min(count, 8); ++i)
    out.emplace_back(longest.begin(), longest.begin() + std::ptrdiff_t(std::min(lengths[i], longest.size())));
  return out;
}

// n greedy tokens after `prompt`, one sequence at a time (a prefill, then
// state-fed decode steps).
inline std::vector<int32_t> single_greedy(LlamaGenerator& g, const std::vector<int32_t>& prompt, int n) {
  std::vector<int32_t> ids = prompt, out;
  for (int i = 0; i < n; ++i) {
    out.push_back(g.next_greedy(ids));
    ids.push_back(out.back());
  }
  return out;
}

// Each continuation equals its single-sequence one and is not degenerate
// (a near-constant continuation would prove little).
inline void expect_batch_equals_singles(const std::vector<std::vector<int32_t>>& batch,
                                        const std::vector<std::vector<int32_t>>& singles) {
  ASSERT_EQ(batch.size(), singles.size());
  for (size_t b = 0; b < batch.size(); ++b) {
    EXPECT_EQ(batch[b], singles[b]) << "sequence " << b;
    std::set<int32_t> distinct(singles[b].begin(), singles[b].end());
    EXPECT_GT(distinct.size(), 3u) << "sequence " << b << ": a degenerate continuation proves little";
  }
}

// The state-fed batch decode step: no inputs, one output of `batch` token
// ids, the token and position state updates.
inline void expect_batch_decode_graph(Executable& step, int64_t batch) {
  const Schedule& s = step.schedule();
  EXPECT_TRUE(s.input_bindings.empty()) << "the batch decode step copies nothing in";
  ASSERT_EQ(s.output_bindings.size(), 1u);
  EXPECT_EQ(s.output_bindings[0].name, "next_token");
  EXPECT_EQ(s.output_bindings[0].bytes(), size_t(batch) * 4);
  ASSERT_EQ(s.state_updates.size(), 2u);
  EXPECT_EQ(s.state_updates[0].state, "next_token");
  EXPECT_EQ(s.state_updates[1].state, "next_pos");
}

}  // namespace rlx::test
