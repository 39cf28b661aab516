// The pooling modes the graph does not compute (max, mean_sqrt_len,
// weightedmean, lasttoken), on the host from last_hidden_state, as
// sentence-transformers' Pooling module computes them.
#pragma once
#include <cstddef>

#include "models/hf_config.h"

namespace rlx {

// hidden: [seq, dim] of one text whose first `tokens` positions are real
// (right padding); out: [dim].
void pool_tokens(Pooling mode, const float* hidden, size_t tokens, size_t dim, float* out);

}  // namespace rlx
