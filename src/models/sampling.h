// Choosing the next token from logits on the host: greedy argmax, or
// temperature / top-k / top-p sampling as src/thunks/sample_math.h defines it
// (the definition the device's sample thunk follows, so both pick the same
// token). The draw is a hash of (seed, position): no generator state.
#pragma once
#include <cstdint>
#include <vector>

namespace rlx {

struct SamplingOptions {
  float temperature = 0.f;  // 0: greedy (argmax, lowest id on ties, the first NaN above all); < 0 is refused
  int top_k = 0;            // 0: no limit; ties at the k-th largest logit are all kept
  float top_p = 1.f;        // nucleus: the most likely tokens whose probability first reaches top_p
  uint64_t seed = 0;
};

class Sampler {
 public:
  explicit Sampler(SamplingOptions o);  // throws on options out of range
  // The token at `position` (the length of the sequence it follows) given
  // its logits.
  int32_t next(const std::vector<float>& logits, int64_t position) const;
  const SamplingOptions& options() const { return o_; }

 private:
  SamplingOptions o_;
};

// The lowest index of the largest logit; a NaN counts as larger than every
// number and the first NaN wins (numpy.argmax, torch.argmax). Sampling counts
// a NaN as -inf instead (thunks/sample_math.h).
int32_t argmax(const std::vector<float>& logits);

}  // namespace rlx
