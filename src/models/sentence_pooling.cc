#include "models/sentence_pooling.h"

#include <algorithm>
#include <cmath>
#include <vector>

#include "rlx/error.h"

namespace rlx {

void pool_tokens(Pooling mode, const float* x, size_t tokens, size_t dim, float* out) {
  RLX_CHECK(tokens >= 1, "pooling: a text with no tokens");
  std::vector<double> acc(dim, 0.0);
  switch (mode) {
    case Pooling::Cls:
      std::copy(x, x + dim, out);
      return;
    case Pooling::LastToken:
      std::copy(x + (tokens - 1) * dim, x + tokens * dim, out);
      return;
    case Pooling::Max:
      for (size_t d = 0; d < dim; ++d) {
        float m = x[d];
        for (size_t t = 1; t < tokens; ++t) m = std::max(m, x[t * dim + d]);
        out[d] = m;
      }
      return;
    case Pooling::Mean:
    case Pooling::MeanSqrtLen:
    case Pooling::WeightedMean: {
      // Weighted mean: position t (from 0) weighs t + 1.
      double total = 0;
      for (size_t t = 0; t < tokens; ++t) {
        double w = mode == Pooling::WeightedMean ? double(t + 1) : 1.0;
        total += w;
        for (size_t d = 0; d < dim; ++d) acc[d] += w * x[t * dim + d];
      }
      double div = mode == Pooling::MeanSqrtLen ? std::sqrt(double(tokens)) : total;
      for (size_t d = 0; d < dim; ++d) out[d] = float(acc[d] / div);
      return;
    }
  }
}

}  // namespace rlx
