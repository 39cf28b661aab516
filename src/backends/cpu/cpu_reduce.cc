// Reduction of x viewed as [outer, len, inner] over len.
#include <cmath>
#include <limits>

#include "backends/cpu/cpu_parallel.h"
#include "backends/cpu/cpu_registry.h"
#include "backends/cpu/cpu_storage.h"

namespace rlx::cpu {
namespace {

template <class T> void reduce(const ReduceParams& p, CpuContext& ctx) {
  const T* x = at<T>(ctx.arena(), p.x);
  T* out = at<T>(ctx.arena(), p.out);
  const int64_t len = p.len, inner = p.inner;
  parallel_for(p.outer * inner, p.outer * len * inner > 32768, [&](int64_t oi) {
    const int64_t o = oi / inner, i = oi % inner;
      const T* src = x + o * len * inner + i;
      float v;
      if (p.kind == ReduceKind::Max) {
        v = -std::numeric_limits<float>::infinity();
        for (int64_t l = 0; l < len; ++l) {
          float e = to_f32(src[l * inner]);
          v = (e > v || std::isnan(e)) ? e : v;  // NaN propagates, like torch.max
        }
      } else {
        double s = 0.0;
        for (int64_t l = 0; l < len; ++l) s += to_f32(src[l * inner]);
        if (p.kind == ReduceKind::Mean) s /= double(len);
        v = float(s);
      }
      out[o * inner + i] = from_f32<T>(v);
      });
}

}  // namespace

void register_cpu_reduce(CpuRegistry& r) {
  r.add<ReduceParams>(DType::F32, reduce<float>);
  r.add<ReduceParams>(DType::F16, reduce<Half>);
  r.add<ReduceParams>(DType::BF16, reduce<BFloat>);
}

}  // namespace rlx::cpu
