// The shared op-case table (tests/op_cases.h) on the CPU backend, against
// each case's double-precision reference, in f32, f16 and bf16. Outputs are
// poisoned with NaN in the arena before the run, and the schedule must hold
// the case's thunk kind on the cpu backend. matmul_q runs its f32 kernel,
// the one the other backends are held to (the integer kernels:
// cpu_quant_dot_test.cc).
#include <gtest/gtest.h>

#include "backends/backend.h"
#include "cpu_quant_kernel_scope.h"
#include "op_cases.h"

namespace rlx::test {
namespace {

TEST(OpCases, CpuMatchesTheReference) {
  const QuantKernelScope f32(cpu::QuantKernel::F32);
  for (const OpCase& oc : op_cases()) {
    for (DType dt : {DType::F32, DType::F16, DType::BF16}) {
      const std::string what = oc.name + " " + std::string(dtype_name(dt));
      OpGraph c = oc.build(dt);
      CompileOptions o;
      o.device = Device::Cpu;
      o.fuse = false;
      auto exe = compile(c.graph, o);
      EXPECT_EQ(exe->report().backend, "cpu") << what;
      EXPECT_EQ(exe->report().thunk_histogram.count(oc.thunk), 1u) << what << ": no " << oc.thunk << " thunk ran";
      for (const Binding& b : exe->schedule().output_bindings)
        exe->backend().write_binding(b, nan_bytes(size_t(numel(b.shape)), b.dtype).data());
      auto out = exe->run(feeds(c));
      for (const auto& [name, ref] : reference_of(oc, c.inputs, dt))
        expect_case_close(oc, dt, out.at(name).to_f32(), ref, what + " " + name);
    }
  }
}

}  // namespace
}  // namespace rlx::test
