// How one sequence picks its next token from the step's output: the
// device's argmax where nothing else applies, else the logits on the host
// with the penalties, min-p and the sampler (models/sampling.h, the same
// draw as the device's sample thunk).
#pragma once
#include <cstdint>
#include <vector>

#include "models/sampling.h"
#include "rlx/llm.h"

namespace rlx {

class TokenChoice {
 public:
  TokenChoice(const SamplingParams& p, uint64_t seed);
  // Whether choose() needs the logits (not only the argmax).
  bool needs_logits() const { return needs_logits_; }
  // The token at `position` after `history`; logits may be changed.
  int32_t choose(int32_t argmax, std::vector<float>& logits, const std::vector<int32_t>& history,
                 int64_t position) const;

 private:
  SamplingParams p_;
  Sampler sampler_;
  bool needs_logits_;
};

}  // namespace rlx
