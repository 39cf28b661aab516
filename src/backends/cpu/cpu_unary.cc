// Elementwise activations.
#include "backends/cpu/cpu_activation.h"
#include "backends/cpu/cpu_registry.h"
#include "backends/cpu/cpu_storage.h"

namespace rlx::cpu {
namespace {

template <class T> void unary(const UnaryParams& p, CpuContext& ctx) {
  const T* x = at<T>(ctx.arena(), p.x);
  T* out = at<T>(ctx.arena(), p.out);
#pragma omp parallel for if (p.n > 32768)
  for (int64_t i = 0; i < p.n; ++i) out[i] = from_f32<T>(apply_activation(p.act, to_f32(x[i])));
}

}  // namespace

void register_cpu_unary(CpuRegistry& r) {
  r.add<UnaryParams>(DType::F32, unary<float>);
  r.add<UnaryParams>(DType::F16, unary<Half>);
  r.add<UnaryParams>(DType::BF16, unary<BFloat>);
}

}  // namespace rlx::cpu
