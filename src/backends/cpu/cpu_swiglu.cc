// Fused SwiGLU / GeGLU: out = act(gate) * up (act silu or GELU, erf or tanh), row-wise, gate and up read at an
// offset and row stride (the two halves of one fused gate/up matmul row).
#include "backends/cpu/cpu_activation.h"
#include "backends/cpu/cpu_registry.h"
#include "backends/cpu/cpu_storage.h"

namespace rlx::cpu {
namespace {

template <class T> void swiglu(const SwiGluParams& p, CpuContext& ctx) {
  const T* gate = at<T>(ctx.arena(), p.gate);
  const T* up = at<T>(ctx.arena(), p.up);
  T* out = at<T>(ctx.arena(), p.out);
#pragma omp parallel for if (p.rows * p.cols > 32768)
  for (int64_t r = 0; r < p.rows; ++r) {
    const T* g = gate + r * p.gate_stride + p.gate_offset;
    const T* u = up + r * p.up_stride + p.up_offset;
    T* o = out + r * p.cols;
    for (int64_t c = 0; c < p.cols; ++c)
      o[c] = from_f32<T>(apply_activation(p.act, to_f32(g[c])) * to_f32(u[c]));
  }
}

}  // namespace

void register_cpu_swiglu(CpuRegistry& r) {
  r.add<SwiGluParams>(DType::F32, swiglu<float>);
  r.add<SwiGluParams>(DType::F16, swiglu<Half>);
  r.add<SwiGluParams>(DType::BF16, swiglu<BFloat>);
}

}  // namespace rlx::cpu
