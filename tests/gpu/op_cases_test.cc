// The shared op-case table (tests/op_cases.h) on the CUDA backend, against
// the CPU backend on the same inputs, per dtype and execution mode. Outputs
// are poisoned with NaN in the arena before the run; the test asserts the
// mode that ran and how many launches it made.
#include <gtest/gtest.h>

#include "backends/backend.h"
#include "backends/cuda/cuda_executable.h"
#include "op_cases.h"

namespace rlx::test {
namespace {

TEST(OpCasesGpu, CudaMatchesTheCpuBackend) {
  if (!cuda_available()) GTEST_SKIP() << "no CUDA device present: GPU tests skipped";
  for (const OpCase& oc : op_cases()) {
    for (DType dt : {DType::F32, DType::F16, DType::BF16}) {
      for (ExecMode mode : {ExecMode::PerOp, ExecMode::Graph}) {
        const std::string what = oc.name + " " + std::string(dtype_name(dt)) + (mode == ExecMode::Graph ? " graph" : " perop");
        OpGraph c = oc.build(dt);
        CompileOptions o;
        o.fuse = false;
        o.device = Device::Cpu;
        auto want = compile(c.graph, o)->run(feeds(c));
        o.device = Device::Cuda;
        o.mode = mode;
        auto exe = compile(c.graph, o);
        EXPECT_EQ(exe->report().thunk_histogram.count(oc.thunk), 1u) << what;
        for (const Binding& b : exe->schedule().output_bindings)
          exe->backend().write_binding(b, nan_bytes(size_t(numel(b.shape)), b.dtype).data());
        auto got = exe->run(feeds(c));
        auto& cu = dynamic_cast<cuda::CudaExecutable&>(exe->backend());
        EXPECT_EQ(cu.mode(), mode) << what;
        EXPECT_EQ(cu.counters().graph_launches, mode == ExecMode::Graph ? 1u : 0u) << what;
        for (const auto& [name, ref] : want) {
          std::vector<float> r = ref.to_f32();
          expect_close(got.at(name).to_f32(), std::vector<double>(r.begin(), r.end()),
                       2 * tolerance(dt) * oc.tol_scale, what + " " + name);
        }
      }
    }
  }
}

}  // namespace
}  // namespace rlx::test
