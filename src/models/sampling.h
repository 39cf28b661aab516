// Choosing the next token from logits on the host: greedy argmax, or
// temperature / top-k / top-p sampling from a seeded generator.
#pragma once
#include <cstdint>
#include <random>
#include <vector>

namespace rlx {

struct SamplingOptions {
  float temperature = 0.f;  // <= 0: greedy (argmax, lowest id on ties)
  int top_k = 0;            // 0: no limit
  float top_p = 1.f;        // nucleus: the fewest tokens whose probability reaches top_p
  uint64_t seed = 0;
};

class Sampler {
 public:
  explicit Sampler(SamplingOptions o);
  int32_t next(const std::vector<float>& logits);

 private:
  SamplingOptions o_;
  std::mt19937_64 rng_;
};

int32_t argmax(const std::vector<float>& logits);

}  // namespace rlx
