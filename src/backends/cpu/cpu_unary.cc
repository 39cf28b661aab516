// Elementwise activations.
#include "backends/cpu/cpu_activation.h"
#include "backends/cpu/cpu_parallel.h"
#include "backends/cpu/cpu_registry.h"
#include "backends/cpu/cpu_storage.h"

namespace rlx::cpu {
namespace {

template <class T> void unary(const UnaryParams& p, CpuContext& ctx) {
  const T* x = at<T>(ctx.arena(), p.x);
  T* out = at<T>(ctx.arena(), p.out);
  parallel_for(p.n, p.n > 32768, [&](int64_t i) { out[i] = from_f32<T>(apply_activation(p.act, to_f32(x[i]))); });
}

// f32: one vectorized pass per contiguous chunk.
template <> void unary<float>(const UnaryParams& p, CpuContext& ctx) {
  const float* x = at<float>(ctx.arena(), p.x);
  float* out = at<float>(ctx.arena(), p.out);
  parallel_ranges(p.n, p.n > 32768 ? run_threads() : 1, [&](int64_t lo, int64_t hi, int) {
    activation_row(p.act, x + lo, nullptr, out + lo, hi - lo);
  });
}

}  // namespace

void register_cpu_unary(CpuRegistry& r) {
  r.add<UnaryParams>(DType::F32, unary<float>);
  r.add<UnaryParams>(DType::F16, unary<Half>);
  r.add<UnaryParams>(DType::BF16, unary<BFloat>);
}

}  // namespace rlx::cpu
