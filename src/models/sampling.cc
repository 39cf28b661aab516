#include "models/sampling.h"

#include <algorithm>
#include <cmath>

#include "rlx/error.h"
#include "thunks/sample_math.h"

namespace rlx {

int32_t argmax(const std::vector<float>& logits) {
  RLX_CHECK(!logits.empty(), "sampling: no logits");
  return int32_t(std::max_element(logits.begin(), logits.end()) - logits.begin());
}

Sampler::Sampler(SamplingOptions o) : o_(o) {
  RLX_CHECK(o.top_k >= 0, "sampling: top-k must be >= 0, not " << o.top_k);
  RLX_CHECK(o.top_p > 0.f && o.top_p <= 1.f, "sampling: top-p must be in (0, 1], not " << o.top_p);
  RLX_CHECK(std::isfinite(o.temperature), "sampling: temperature must be finite");
}

int32_t Sampler::next(const std::vector<float>& logits, int64_t position) const {
  if (o_.temperature <= 0.f) return argmax(logits);
  RLX_CHECK(!logits.empty(), "sampling: no logits");
  return sample_row(logits.data(), int64_t(logits.size()), SampleSpec{o_.temperature, o_.top_k, o_.top_p},
                    sample_uniform(o_.seed, position));
}

}  // namespace rlx
