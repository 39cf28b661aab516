// Double-precision reference formulas shared by the kernel tests.
#pragma once
#include <cmath>

#include "rlx/enums.h"

namespace rlx::test {

inline double ref_activation(Activation act, double x) {
  switch (act) {
    case Activation::None: return x;
    case Activation::Gelu: return 0.5 * x * (1.0 + std::erf(x / std::sqrt(2.0)));
    case Activation::GeluTanh:
      return 0.5 * x * (1.0 + std::tanh(std::sqrt(2.0 / M_PI) * (x + 0.044715 * x * x * x)));
    case Activation::Silu: return x / (1.0 + std::exp(-x));
    case Activation::Relu: return x > 0 ? x : 0.0;
    case Activation::Tanh: return std::tanh(x);
  }
  return x;
}

}  // namespace rlx::test
