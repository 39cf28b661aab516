// Argmax over the last dim: the index of the largest element of each row
// (i32), the lowest on ties; a NaN counts as larger than every number and the
// first NaN wins (torch.argmax / numpy.argmax). Greedy decoding's last step.
#include <cmath>

#include "backends/cpu/cpu_parallel.h"
#include "backends/cpu/cpu_registry.h"
#include "backends/cpu/cpu_storage.h"

namespace rlx::cpu {
namespace {

template <class T> void argmax(const ArgmaxParams& p, CpuContext& ctx) {
  const T* x = at<T>(ctx.arena(), p.x);
  int32_t* out = at<int32_t>(ctx.arena(), p.out);
  parallel_for(p.rows, p.rows * p.cols > 32768, [&](int64_t r) {
    const T* row = x + r * p.cols;
    float best = to_f32(row[0]);
    int64_t at_best = 0;
    for (int64_t c = 1; c < p.cols && !std::isnan(best); ++c) {
      const float v = to_f32(row[c]);
      if (v > best || std::isnan(v)) {
        best = v;
        at_best = c;
      }
    }
    out[r] = int32_t(at_best);
  });
}

}  // namespace

void register_cpu_argmax(CpuRegistry& r) {
  r.add<ArgmaxParams>(DType::F32, argmax<float>);
  r.add<ArgmaxParams>(DType::F16, argmax<Half>);
  r.add<ArgmaxParams>(DType::BF16, argmax<BFloat>);
}

}  // namespace rlx::cpu
