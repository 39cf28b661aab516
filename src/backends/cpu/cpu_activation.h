// Activation functions shared by the unary kernel and the matmul epilogue.
#pragma once
#include <cmath>
#include <cstdint>

#include "backends/cpu/cpu_vec_math.h"
#include "rlx/enums.h"

namespace rlx::cpu {

RLX_CPU_INLINE float apply_activation(Activation act, float x) {
  switch (act) {
    case Activation::None: return x;
    case Activation::Gelu: return gelu_erf(x);
    case Activation::GeluTanh: {  // HF gelu_new
      const float c = 0.79788456080286536f;  // sqrt(2/pi)
      return 0.5f * x * (1.f + std::tanh(c * (x + 0.044715f * x * x * x)));
    }
    case Activation::Silu: return x / (1.f + exp_approx(-x));
    case Activation::Relu: return x > 0.f ? x : 0.f;
    case Activation::Tanh: return std::tanh(x);
  }
  return x;
}

// out[j] = act(x[j] + bias[j]) for j < n (bias may be null; out may be x),
// one vectorized loop per activation.
void activation_row(Activation act, const float* x, const float* bias, float* out, int64_t n);

}  // namespace rlx::cpu
