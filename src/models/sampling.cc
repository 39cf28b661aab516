#include "models/sampling.h"

#include <algorithm>
#include <cmath>
#include <numeric>

#include "rlx/error.h"

namespace rlx {

int32_t argmax(const std::vector<float>& logits) {
  RLX_CHECK(!logits.empty(), "sampling: no logits");
  return int32_t(std::max_element(logits.begin(), logits.end()) - logits.begin());
}

Sampler::Sampler(SamplingOptions o) : o_(o), rng_(o.seed) {
  RLX_CHECK(o.top_k >= 0, "sampling: top-k must be >= 0, not " << o.top_k);
  RLX_CHECK(o.top_p > 0.f && o.top_p <= 1.f, "sampling: top-p must be in (0, 1], not " << o.top_p);
  RLX_CHECK(std::isfinite(o.temperature), "sampling: temperature must be finite");
}

int32_t Sampler::next(const std::vector<float>& logits) {
  if (o_.temperature <= 0.f) return argmax(logits);
  std::vector<int32_t> idx(logits.size());
  std::iota(idx.begin(), idx.end(), 0);
  size_t k = o_.top_k > 0 ? std::min(size_t(o_.top_k), idx.size()) : idx.size();
  auto by_logit = [&](int32_t a, int32_t b) { return logits[size_t(a)] > logits[size_t(b)] || (logits[size_t(a)] == logits[size_t(b)] && a < b); };
  std::partial_sort(idx.begin(), idx.begin() + std::ptrdiff_t(k), idx.end(), by_logit);
  idx.resize(k);
  const double mx = logits[size_t(idx[0])];
  std::vector<double> p(k);
  double sum = 0;
  for (size_t i = 0; i < k; ++i) sum += p[i] = std::exp((double(logits[size_t(idx[i])]) - mx) / o_.temperature);
  // Nucleus: keep the most likely tokens until their mass reaches top_p.
  size_t keep = k;
  if (o_.top_p < 1.f) {
    double acc = 0;
    for (size_t i = 0; i < k; ++i) {
      acc += p[i] / sum;
      if (acc >= double(o_.top_p)) {
        keep = i + 1;
        break;
      }
    }
  }
  std::discrete_distribution<size_t> d(p.begin(), p.begin() + std::ptrdiff_t(keep));
  return idx[d(rng_)];
}

}  // namespace rlx
