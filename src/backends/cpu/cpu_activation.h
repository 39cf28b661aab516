// Activation functions shared by the unary kernel and the matmul epilogue.
#pragma once
#include <cmath>

#include "rlx/enums.h"

namespace rlx::cpu {

inline float apply_activation(Activation act, float x) {
  switch (act) {
    case Activation::None: return x;
    case Activation::Gelu: return 0.5f * x * (1.f + std::erf(x * 0.70710678118654752f));
    case Activation::GeluTanh: {  // HF gelu_new
      const float c = 0.79788456080286536f;  // sqrt(2/pi)
      return 0.5f * x * (1.f + std::tanh(c * (x + 0.044715f * x * x * x)));
    }
    case Activation::Silu: return x / (1.f + std::exp(-x));
    case Activation::Relu: return x > 0.f ? x : 0.f;
    case Activation::Tanh: return std::tanh(x);
  }
  return x;
}

}  // namespace rlx::cpu
