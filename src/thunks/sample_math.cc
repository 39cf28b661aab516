// The host reference of token sampling (sample_math.h): thresholds by sort
// and nth_element, the choice by one walk in token order.
#include "thunks/sample_math.h"

#include <algorithm>
#include <functional>
#include <vector>

namespace rlx {

int32_t sample_row(const float* x, int64_t n, const SampleSpec& s, float u) {
  if (n <= 0) return 0;
  std::vector<uint32_t> key(static_cast<size_t>(n));
  int64_t best = 0;
  for (int64_t i = 0; i < n; ++i) {
    key[size_t(i)] = sample_key(x[i]);
    if (key[size_t(i)] > key[size_t(best)]) best = i;
  }
  const float mx = sample_clean(x[best]);
  if (!std::isfinite(mx)) return int32_t(best);
  auto weight = [&](int64_t i) { return double(sample_weight(sample_clean(x[i]), mx, s.temperature)); };

  // top-k: the k-th largest key, counting ties.
  uint32_t t_k = 0;
  if (s.top_k > 0 && s.top_k < n) {
    std::vector<uint32_t> k = key;
    std::nth_element(k.begin(), k.begin() + (s.top_k - 1), k.end(), std::greater<uint32_t>());
    t_k = k[size_t(s.top_k - 1)];
  }
  // top-p: the largest key whose mass from the top reaches top_p * Z.
  uint32_t t_p = 0;
  if (s.top_p < 1.f) {
    std::vector<std::pair<uint32_t, double>> kept;
    double z = 0;
    for (int64_t i = 0; i < n; ++i)
      if (key[size_t(i)] >= t_k) {
        kept.emplace_back(key[size_t(i)], weight(i));
        z += kept.back().second;
      }
    std::sort(kept.begin(), kept.end(), [](const auto& a, const auto& b) { return a.first > b.first; });
    const double target = double(s.top_p) * z;
    double cum = 0;
    for (size_t j = 0; j < kept.size(); ++j) {
      cum += kept[j].second;
      const bool last_of_value = j + 1 == kept.size() || kept[j + 1].first != kept[j].first;
      if (last_of_value && cum >= target) {
        t_p = kept[j].first;
        break;
      }
    }
  }
  const uint32_t t = std::max(t_k, t_p);

  double z = 0;
  for (int64_t i = 0; i < n; ++i)
    if (key[size_t(i)] >= t) z += weight(i);
  const double target = double(u) * z;
  double cum = 0;
  for (int64_t i = 0; i < n; ++i)
    if (key[size_t(i)] >= t && (cum += weight(i)) > target) return int32_t(i);
  return int32_t(best);  // not reached: u < 1 and the walk sums as z did
}

}  // namespace rlx
