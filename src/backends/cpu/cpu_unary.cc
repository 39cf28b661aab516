// Elementwise activations.
#include <algorithm>

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

// f32: vectorized chunks of a few thousand elements per task.
template <> void unary<float>(const UnaryParams& p, CpuContext& ctx) {
  const float* x = at<float>(ctx.arena(), p.x);
  float* out = at<float>(ctx.arena(), p.out);
  constexpr int64_t kChunk = 4096;
  const int64_t chunks = (p.n + kChunk - 1) / kChunk;
#pragma omp parallel for if (p.n > 32768)
  for (int64_t c = 0; c < chunks; ++c)
    activation_row(p.act, x + c * kChunk, nullptr, out + c * kChunk, std::min(kChunk, p.n - c * kChunk));
}

}  // namespace

void register_cpu_unary(CpuRegistry& r) {
  r.add<UnaryParams>(DType::F32, unary<float>);
  r.add<UnaryParams>(DType::F16, unary<Half>);
  r.add<UnaryParams>(DType::BF16, unary<BFloat>);
}

}  // namespace rlx::cpu
