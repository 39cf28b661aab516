// Per-row softmax cross-entropy: logsumexp(logits) - logits[label].
#include <cmath>
#include <limits>

#include "backends/cpu/cpu_parallel.h"
#include "backends/cpu/cpu_registry.h"
#include "backends/cpu/cpu_storage.h"

namespace rlx::cpu {
namespace {

template <class T> void softmax_xent(const SoftmaxCEParams& p, CpuContext& ctx) {
  const T* logits = at<T>(ctx.arena(), p.logits);
  const int32_t* labels = at<int32_t>(ctx.arena(), p.labels);
  T* out = at<T>(ctx.arena(), p.out);
  const int64_t classes = p.classes;
  parallel_for(p.rows, p.rows * classes > 16384, [&](int64_t r) {
    const T* lr = logits + r * classes;
    const int32_t label = labels[r];
    if (label < 0 || label >= classes) {  // a bad label must not pass as a loss
      out[r] = from_f32<T>(std::numeric_limits<float>::quiet_NaN());
      return;
    }
    float mx = -std::numeric_limits<float>::infinity();
    for (int64_t c = 0; c < classes; ++c) mx = std::fmax(mx, to_f32(lr[c]));
    double sum = 0.0;
    for (int64_t c = 0; c < classes; ++c) sum += std::exp(double(to_f32(lr[c]) - mx));
    out[r] = from_f32<T>(float(double(mx) + std::log(sum) - double(to_f32(lr[label]))));
  });
}

}  // namespace

void register_cpu_softmax_xent(CpuRegistry& r) {
  r.add<SoftmaxCEParams>(DType::F32, softmax_xent<float>);
  r.add<SoftmaxCEParams>(DType::F16, softmax_xent<Half>);
  r.add<SoftmaxCEParams>(DType::BF16, softmax_xent<BFloat>);
}

}  // namespace rlx::cpu
