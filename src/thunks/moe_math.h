// Mixture-of-experts routing defined once for the CPU kernel, the CUDA
// kernel and the tests: the order in which experts are chosen and how the
// chosen weights are computed (see MoeRouteParams).
#pragma once
#include <cmath>
#include <cstdint>

#if defined(__CUDACC__)
#define RLX_MOE_HD __host__ __device__
#else
#define RLX_MOE_HD
#endif

namespace rlx {

// NaN routes last, as -inf does.
RLX_MOE_HD inline float moe_route_key(float v) { return v != v ? -INFINITY : v; }

// True when logit a at index ia is chosen before logit b at index ib: the
// larger first, the lower index on ties.
RLX_MOE_HD inline bool moe_route_before(float a, int ia, float b, int ib) {
  a = moe_route_key(a);
  b = moe_route_key(b);
  return a > b || (a == b && ia < ib);
}

}  // namespace rlx
