#include "backends/cpu/cpu_activation.h"

namespace rlx::cpu {
namespace {

template <Activation A> RLX_CPU_INLINE void row(const float* x, const float* bias, float* out, int64_t n) {
  if (bias)
    for (int64_t j = 0; j < n; ++j) out[j] = apply_activation(A, x[j] + bias[j]);
  else
    for (int64_t j = 0; j < n; ++j) out[j] = apply_activation(A, x[j]);
}

}  // namespace

RLX_CPU_CLONES void activation_row(Activation act, const float* x, const float* bias, float* out, int64_t n) {
  switch (act) {
    case Activation::None: return row<Activation::None>(x, bias, out, n);
    case Activation::Gelu: return row<Activation::Gelu>(x, bias, out, n);
    case Activation::GeluTanh: return row<Activation::GeluTanh>(x, bias, out, n);
    case Activation::Silu: return row<Activation::Silu>(x, bias, out, n);
    case Activation::Relu: return row<Activation::Relu>(x, bias, out, n);
    case Activation::Tanh: return row<Activation::Tanh>(x, bias, out, n);
  }
}

}  // namespace rlx::cpu
