// The backend's half of L2Prefetch (thunks/params.h): how many bytes of the
// next product's weights a launch asks L2 for, and each block's slice.
#pragma once
#include <cstdint>

#include "thunks/params.h"

namespace rlx::cuda {

// Bytes a product may prefetch: RLX_L2_PREFETCH_MB if set (0 turns the
// prefetch off), else half the device's L2, so the weights being read now
// and the next ones both fit. Read per launch (tests switch it).
uint64_t l2_prefetch_budget();

// The plan with its ranges cut to the budget (the front of each, in
// proportion) and per_block set for a grid of `blocks`.
L2Prefetch share_l2_prefetch(const L2Prefetch& plan, uint64_t blocks);

// Launches that carried a prefetch (tests assert the path ran).
int64_t l2_prefetch_launches();

}  // namespace rlx::cuda
