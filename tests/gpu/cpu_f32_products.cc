// The GPU tests hold the CUDA kernels to the CPU backend's results. On the
// CPU, quantized products default to int8 activations (as llama.cpp's do),
// which round differently from the f32 products the CUDA kernels compute;
// here the CPU runs its f32 kernel for every test (the int8 kernels have
// their own bounds in tests/unit/cpu_quant_dot_test.cc).
#include <gtest/gtest.h>

#include "backends/cpu/cpu_quant_dot.h"

namespace rlx {
namespace {

class CpuF32Products : public ::testing::Environment {
 public:
  void SetUp() override { cpu::set_quant_kernel(cpu::QuantKernel::F32); }
};

[[maybe_unused]] ::testing::Environment* const kCpuF32Products =
    ::testing::AddGlobalTestEnvironment(new CpuF32Products);

}  // namespace
}  // namespace rlx
