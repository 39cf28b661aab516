// Which weights each product asks L2 to fetch ahead (thunks/params.h
// L2Prefetch): the next constant-weight product's, in schedule order, the
// last product taking the first's (the next forward pass starts there).
#pragma once
#include "thunks/thunk.h"

namespace rlx {

void plan_weight_prefetch(Schedule& s);

// The weight byte ranges of a product thunk (a glu product's gate and up
// halves apart, a quantized product's quants and scales apart), or none
// where its weights are not constant or not one row-major [n, k] matrix.
L2Prefetch product_weights(const ThunkParams& p);

}  // namespace rlx
