// Fused SwiGLU / GeGLU: out = act(gate) * up (act silu or GELU, erf or tanh), row-wise, gate and up read at an
// offset and row stride (the two halves of one fused gate/up matmul row).
#include <algorithm>
#include <type_traits>

#include "backends/cpu/cpu_activation.h"
#include "backends/cpu/cpu_parallel.h"
#include "backends/cpu/cpu_registry.h"
#include "backends/cpu/cpu_storage.h"

namespace rlx::cpu {
namespace {

// A row in chunks of f32: the gate widened, activated by activation_row (one
// vectorized loop per activation, the same values as apply_activation),
// times up.
template <class T> void swiglu(const SwiGluParams& p, CpuContext& ctx) {
  const T* gate = at<T>(ctx.arena(), p.gate);
  const T* up = at<T>(ctx.arena(), p.up);
  T* out = at<T>(ctx.arena(), p.out);
  parallel_for(p.rows, p.rows * p.cols > 32768, [&](int64_t r) {
    constexpr int64_t kChunk = 256;
    float a[kChunk];
    const T* g = gate + r * p.gate_stride + p.gate_offset;
    const T* u = up + r * p.up_stride + p.up_offset;
    T* o = out + r * p.cols;
    for (int64_t c0 = 0; c0 < p.cols; c0 += kChunk) {
      const int64_t n = std::min(kChunk, p.cols - c0);
      const float* gf;
      if constexpr (std::is_same_v<T, float>) {
        gf = g + c0;
      } else {
        for (int64_t c = 0; c < n; ++c) a[c] = to_f32(g[c0 + c]);
        gf = a;
      }
      activation_row(p.act, gf, nullptr, a, n);
      for (int64_t c = 0; c < n; ++c) o[c0 + c] = from_f32<T>(a[c] * to_f32(u[c0 + c]));
    }
  });
}

}  // namespace

void register_cpu_swiglu(CpuRegistry& r) {
  r.add<SwiGluParams>(DType::F32, swiglu<float>);
  r.add<SwiGluParams>(DType::F16, swiglu<Half>);
  r.add<SwiGluParams>(DType::BF16, swiglu<BFloat>);
}

}  // namespace rlx::cpu
