#include "models/sampling.h"

#include <algorithm>
#include <cmath>

#include "rlx/error.h"
#include "thunks/sample_math.h"

namespace rlx {

int32_t argmax(const std::vector<float>& logits) {
  RLX_CHECK(!logits.empty(), "sampling: no logits");
  // numpy's rule, as the CPU and CUDA argmax kernels: the lowest index of
  // the largest value, a NaN above every number and the first NaN winning.
  size_t best = 0;
  for (size_t i = 1; i < logits.size() && !std::isnan(logits[best]); ++i)
    if (logits[i] > logits[best] || std::isnan(logits[i])) best = i;
  return int32_t(best);
}

Sampler::Sampler(SamplingOptions o) : o_(o) {
  RLX_CHECK(o.top_k >= 0, "sampling: top-k must be >= 0, not " << o.top_k);
  RLX_CHECK(o.top_p > 0.f && o.top_p <= 1.f, "sampling: top-p must be in (0, 1], not " << o.top_p);
  RLX_CHECK(std::isfinite(o.temperature) && o.temperature >= 0.f,
            "sampling: temperature must be finite and >= 0 (0: greedy), not " << o.temperature);
}

int32_t Sampler::next(const std::vector<float>& logits, int64_t position) const {
  if (o_.temperature <= 0.f) return argmax(logits);
  RLX_CHECK(!logits.empty(), "sampling: no logits");
  return sample_row(logits.data(), int64_t(logits.size()), SampleSpec{o_.temperature, o_.top_k, o_.top_p},
                    sample_uniform(o_.seed, position));
}

}  // namespace rlx
