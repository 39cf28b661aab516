// Runs the CPU's matmul_q with one kernel (cpu_quant_dot.h) while in scope:
// tests that hold matmul_q to the f32 dequantized product pick the f32
// kernel; the kernel in use before comes back at the end.
#pragma once
#include "backends/cpu/cpu_quant_dot.h"

namespace rlx::test {

struct QuantKernelScope {
  explicit QuantKernelScope(cpu::QuantKernel k) { cpu::set_quant_kernel(k); }
  ~QuantKernelScope() { cpu::set_quant_kernel(saved); }
  cpu::QuantKernel saved = cpu::quant_kernel();
};

}  // namespace rlx::test
