// Mixture-of-experts routing (MoeRouteParams): per row, the top-k experts by
// logit (thunks/moe_math.h orders them) and their softmax weights, in f32.
#include <cmath>
#include <vector>

#include "backends/cpu/cpu_parallel.h"
#include "backends/cpu/cpu_registry.h"
#include "backends/cpu/cpu_storage.h"
#include "rlx/graph.h"
#include "thunks/moe_math.h"

namespace rlx::cpu {
namespace {

template <class T> void moe_route(const MoeRouteParams& p, CpuContext& ctx) {
  const T* logits = at<const T>(ctx.arena(), p.logits);
  int32_t* ids = at<int32_t>(ctx.arena(), p.ids);
  T* weights = at<T>(ctx.arena(), p.weights);
  const int64_t E = p.experts;
  const int k = p.k;
  parallel_for(p.rows, p.rows * E > 65536, [&](int64_t r) {
    const T* row = logits + r * E;
    float mx = -INFINITY;
    for (int64_t e = 0; e < E; ++e) mx = std::fmax(mx, moe_route_key(to_f32(row[e])));
    float sum = 0.f;
    for (int64_t e = 0; e < E; ++e) sum += std::exp(moe_route_key(to_f32(row[e])) - mx);
    // k passes, each taking the best expert not taken yet (k is small).
    int32_t chosen[kMaxMoeTopK];
    float w[kMaxMoeTopK], chosen_sum = 0.f;
    for (int j = 0; j < k; ++j) {
      int best = -1;
      for (int64_t e = 0; e < E; ++e) {
        bool taken = false;
        for (int i = 0; i < j; ++i) taken = taken || chosen[i] == e;
        if (!taken && (best < 0 || moe_route_before(to_f32(row[e]), int(e), to_f32(row[best]), best))) best = int(e);
      }
      chosen[j] = best;
      w[j] = std::exp(moe_route_key(to_f32(row[best])) - mx) / sum;
      chosen_sum += w[j];
    }
    for (int j = 0; j < k; ++j) {
      ids[r * k + j] = chosen[j];
      weights[r * k + j] = from_f32<T>(p.norm_topk ? w[j] / chosen_sum : w[j]);
    }
  });
}

}  // namespace

void register_cpu_moe_route(CpuRegistry& r) {
  r.add<MoeRouteParams>(DType::F32, moe_route<float>);
  r.add<MoeRouteParams>(DType::F16, moe_route<Half>);
  r.add<MoeRouteParams>(DType::BF16, moe_route<BFloat>);
}

}  // namespace rlx::cpu
