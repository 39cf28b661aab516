// The shared op-case table (tests/op_cases.h) on the CUDA backend, per dtype
// and execution mode: against each case's double-precision reference with
// the case's bound, and against the CPU backend on the same inputs. Cases
// that allow it run twice (the second time on other inputs, so a replayed
// graph must read them); outputs are poisoned with NaN in the arena before
// each run. Asserts the mode that ran and what it launched.
#include <gtest/gtest.h>

#include <algorithm>
#include <functional>

#include "backends/backend.h"
#include "backends/cuda/cuda_executable.h"
#include "backends/cuda/gemv.h"
#include "backends/cuda/matmul.h"
#include "backends/cuda/matmul_cutlass.h"
#include "backends/cuda/matmul_few_rows.h"
#include "op_cases.h"

namespace rlx::test {
namespace {

// Launch counts of `runs` forwards of s in `mode`: one graph launch each, or
// one launch per thunk; in a graph every thunk that is not library-backed
// (cuBLASLt matmul, a quantized one over its dequantized weight, cuDNN
// attention) is exactly one kernel node.
void expect_path(cuda::CudaExecutable& cu, const Schedule& s, ExecMode mode, uint64_t runs, const std::string& what) {
  const uint64_t n = s.thunks.size();
  EXPECT_EQ(cu.mode(), mode) << what;
  EXPECT_EQ(cu.counters().forwards, runs) << what;
  if (mode == ExecMode::Graph) {
    EXPECT_EQ(cu.counters().graph_launches, runs) << what;
    EXPECT_EQ(cu.counters().perop_launches, 0u) << what;
    EXPECT_EQ(cu.schedule_string(), std::string(n, '+')) << what;
    int sum = 0;
    for (size_t i = 0; i < n; ++i) {
      const auto* q = std::get_if<MatMulQParams>(&s.thunks[i].params);
      const bool library = s.thunks[i].kind() == ThunkKind::MatMul || s.thunks[i].kind() == ThunkKind::Attention ||
                           (q && q->dequantized != kNoBuffer);
      if (!library) EXPECT_EQ(cu.thunk_kernel_nodes()[i], 1) << what << ": " << s.thunks[i].label;
      else EXPECT_GE(cu.thunk_kernel_nodes()[i], 1) << what << ": " << s.thunks[i].label;
      sum += cu.thunk_kernel_nodes()[i];
    }
    EXPECT_EQ(cu.graph_kernel_nodes(), sum) << what;
  } else {
    EXPECT_EQ(cu.counters().graph_launches, 0u) << what;
    EXPECT_EQ(cu.counters().perop_launches, runs * n) << what;
    EXPECT_EQ(cu.schedule_string(), std::string(n, '-')) << what;
  }
}

TEST(OpCasesGpu, CudaMatchesTheReferenceAndTheCpuBackend) {
  if (!cuda_available()) GTEST_SKIP() << "no CUDA device present: GPU tests skipped";
  for (const OpCase& oc : op_cases()) {
    for (DType dt : {DType::F32, DType::F16, DType::BF16}) {
      for (ExecMode mode : {ExecMode::PerOp, ExecMode::Graph}) {
        const std::string what = oc.name + " " + std::string(dtype_name(dt)) + (mode == ExecMode::Graph ? " graph" : " perop");
        const OpGraph first = oc.build(dt);
        CompileOptions o;
        o.fuse = false;
        o.device = Device::Cuda;
        o.mode = mode;
        auto exe = compile(first.graph, o);
        EXPECT_EQ(exe->report().backend, "cuda") << what;
        EXPECT_EQ(exe->report().thunk_histogram.count(oc.thunk), 1u) << what << ": no " << oc.thunk << " thunk ran";
        CompileOptions on_cpu;
        on_cpu.fuse = false;
        on_cpu.device = Device::Cpu;
        auto cpu = compile(first.graph, on_cpu);
        const int rounds = oc.rerun_reversed ? 2 : 1;
        for (int round = 0; round < rounds; ++round) {
          const OpGraph c = round == 0 ? first : reversed_inputs(first);
          const std::string r = what + " round " + std::to_string(round);
          for (const Binding& b : exe->schedule().output_bindings)
            exe->backend().write_binding(b, nan_bytes(size_t(numel(b.shape)), b.dtype).data());
          auto got = exe->run(feeds(c));
          const auto refs = reference_of(oc, c.inputs, dt);
          for (const auto& [name, ref] : refs)
            expect_case_close(oc, dt, got.at(name).to_f32(), ref, r + " " + name + " vs reference");
          // Against the CPU, the outputs this case checks, at its tolerance (a
          // graph of two outputs can be two cases: moe_route's exact ids and
          // its weights within rounding).
          for (const auto& [name, want] : cpu->run(feeds(c))) {
            if (!refs.count(name)) continue;
            std::vector<float> w = want.to_f32();
            expect_close(got.at(name).to_f32(), std::vector<double>(w.begin(), w.end()),
                         2 * tolerance(dt) * oc.tol_scale, r + " " + name + " vs cpu");
          }
        }
        expect_path(dynamic_cast<cuda::CudaExecutable&>(exe->backend()), exe->schedule(), mode, uint64_t(rounds), what);
      }
    }
  }
}

// Compiles a case for CUDA (graph mode, unfused), calls `compiled` (which
// may look at what the compile planned), poisons the outputs with NaN, runs
// the case once and checks every output against the reference.
void run_against_reference(const OpCase& oc, DType dt, const std::string& what,
                           const std::function<void()>& compiled = [] {}) {
  const OpGraph c = oc.build(dt);
  CompileOptions o;
  o.fuse = false;
  o.device = Device::Cuda;
  o.mode = ExecMode::Graph;
  auto exe = compile(c.graph, o);
  compiled();
  for (const Binding& b : exe->schedule().output_bindings)
    exe->backend().write_binding(b, nan_bytes(size_t(numel(b.shape)), b.dtype).data());
  auto got = exe->run(feeds(c));
  for (const auto& [name, ref] : reference_of(oc, c.inputs, dt))
    expect_case_close(oc, dt, got.at(name).to_f32(), ref, what + " " + name);
}

// The decode-shaped products on each forced path: RLX_MATMUL=gemv must take
// rlx's matrix-vector kernel (every case here is eligible in every dtype),
// =cublas must not; both against the reference.
TEST(OpCasesGpu, FewRowProductsOnBothPaths) {
  if (!cuda_available()) GTEST_SKIP() << "no CUDA device present: GPU tests skipped";
  int cases = 0;
  for (const OpCase& oc : op_cases()) {
    if (oc.name.rfind("matmul_gemv", 0) != 0) continue;
    ++cases;
    for (DType dt : {DType::F32, DType::F16, DType::BF16}) {
      for (const char* path : {"gemv", "cublas"}) {
        const std::string what = oc.name + " " + std::string(dtype_name(dt)) + " RLX_MATMUL=" + path;
        setenv("RLX_MATMUL", path, 1);
        const auto before = cuda::matmul_path_counts();
        run_against_reference(oc, dt, what, [&] {
          const auto after = cuda::matmul_path_counts();
          const bool gemv = std::string(path) == "gemv";
          EXPECT_EQ(after.gemv - before.gemv, gemv ? 1 : 0) << what;
          EXPECT_EQ(after.cublas - before.cublas, gemv ? 0 : 1) << what;
        });
      }
    }
  }
  unsetenv("RLX_MATMUL");
  EXPECT_EQ(cases, 4);
}

// A fused RMSNorm's gain held in shared memory (the default for one or two
// rows of x) and in registers (RLX_GEMV_GAMMA_SHARED=0), both against the
// reference on NaN-poisoned outputs: every fused-norm float case of at most
// two rows (long rows on the split kernel, the gate/up product among them)
// must take the shared-memory variant when it is on and never when off.
TEST(OpCasesGpu, MatVecNormGainInSharedMemoryAndRegisters) {
  if (!cuda_available()) GTEST_SKIP() << "no CUDA device present: GPU tests skipped";
  const std::vector<std::string> norm_two_rows = {"matvec_norm_residual_1x77x264_bias", "matvec_norm_residual_1x19x5640",
                                                  "matvec_glu_silu_norm_1x74x264_bias",
                                                  "matvec_glu_silu_norm_2x38x5640_bias"};
  int cases = 0;
  setenv("RLX_MATMUL", "gemv", 1);
  for (const OpCase& oc : op_cases()) {
    if (oc.thunk != "matmul" || oc.name.rfind("matvec_", 0) != 0) continue;
    const bool eligible = std::find(norm_two_rows.begin(), norm_two_rows.end(), oc.name) != norm_two_rows.end();
    cases += eligible;
    for (DType dt : {DType::F32, DType::F16, DType::BF16}) {
      for (const char* shared : {"1", "0"}) {
        const std::string what = oc.name + " " + std::string(dtype_name(dt)) + " RLX_GEMV_GAMMA_SHARED=" + shared;
        setenv("RLX_GEMV_GAMMA_SHARED", shared, 1);
        const int64_t before = cuda::gemv_gamma_shared_launches();
        run_against_reference(oc, dt, what);
        EXPECT_EQ(cuda::gemv_gamma_shared_launches() > before, eligible && std::string(shared) == "1") << what;
      }
    }
  }
  unsetenv("RLX_GEMV_GAMMA_SHARED");
  unsetenv("RLX_MATMUL");
  EXPECT_EQ(cases, int(norm_two_rows.size()));
}


// Products forced onto one path (RLX_MATMUL=path): the cases named `prefix`
// must plan it (counted by `planned`) in f16 and bf16 and match the
// reference in both modes and on a second set of inputs; f32 and every
// product the path does not apply to (`applies`) stay on cuBLASLt or gemv.
// Returns the number of `prefix` cases.
int forced_path_products(const char* path, const char* prefix, int cuda::MatMulPathCounts::*planned,
                         const std::function<bool(const MatMulParams&)>& applies) {
  setenv("RLX_MATMUL", path, 1);
  int cases = 0;
  for (const OpCase& oc : op_cases()) {
    if (oc.thunk != "matmul") continue;
    const bool shaped = oc.name.rfind(prefix, 0) == 0;
    cases += shaped;
    for (DType dt : {DType::F32, DType::F16, DType::BF16}) {
      for (ExecMode mode : {ExecMode::PerOp, ExecMode::Graph}) {
        const std::string what = oc.name + " " + std::string(dtype_name(dt)) +
                                 (mode == ExecMode::Graph ? " graph" : " perop") + " RLX_MATMUL=" + path;
        const auto before = cuda::matmul_path_counts();
        const OpGraph first = oc.build(dt);
        CompileOptions o;
        o.fuse = false;
        o.device = Device::Cuda;
        o.mode = mode;
        auto exe = compile(first.graph, o);
        const auto after = cuda::matmul_path_counts();
        const Schedule& sched = exe->schedule();
        const auto mm = std::find_if(sched.thunks.begin(), sched.thunks.end(),
                                     [](const Thunk& t) { return t.kind() == ThunkKind::MatMul; });
        EXPECT_NE(mm, sched.thunks.end()) << what;
        if (mm == sched.thunks.end()) continue;
        const bool want = applies(std::get<MatMulParams>(mm->params));
        if (shaped) EXPECT_EQ(want, dt != DType::F32) << what << ": the case no longer fits the path";
        EXPECT_EQ(after.*planned - before.*planned, want ? 1 : 0) << what;
        EXPECT_EQ(after.cublas + after.gemv + after.cutlass + after.few_rows - before.cublas - before.gemv -
                      before.cutlass - before.few_rows,
                  1)
            << what;
        for (int round = 0; round < 2; ++round) {
          const OpGraph c = round == 0 ? first : reversed_inputs(first);
          for (const Binding& b : exe->schedule().output_bindings)
            exe->backend().write_binding(b, nan_bytes(size_t(numel(b.shape)), b.dtype).data());
          auto got = exe->run(feeds(c));
          for (const auto& [name, ref] : reference_of(oc, c.inputs, dt))
            expect_case_close(oc, dt, got.at(name).to_f32(), ref, what + " round " + std::to_string(round) + " " + name);
        }
        auto& cu = dynamic_cast<cuda::CudaExecutable&>(exe->backend());
        expect_path(cu, sched, mode, 2, what);
        // The activation is in the path's epilogue: one kernel, no second pass.
        if (want && mode == ExecMode::Graph)
          EXPECT_EQ(cu.thunk_kernel_nodes()[size_t(mm - sched.thunks.begin())], 1) << what;
      }
    }
  }
  // Forced off, the same shapes stay on cuBLASLt.
  setenv("RLX_MATMUL", "cublas", 1);
  for (const OpCase& oc : op_cases()) {
    if (oc.name.rfind(prefix, 0) != 0) continue;
    const auto before = cuda::matmul_path_counts();
    CompileOptions o;
    o.fuse = false;
    o.device = Device::Cuda;
    auto exe = compile(oc.build(DType::F16).graph, o);
    EXPECT_EQ(cuda::matmul_path_counts().*planned, before.*planned) << oc.name << " RLX_MATMUL=cublas";
  }
  unsetenv("RLX_MATMUL");
  return cases;
}

// The CUTLASS-shaped products (on Hopper, where rlx was built with it).
TEST(OpCasesGpu, CutlassProductsWhenForced) {
  if (!cuda_available()) GTEST_SKIP() << "no CUDA device present: GPU tests skipped";
  if (!cuda::cutlass_gemm_available())
    GTEST_SKIP() << "no CUTLASS GEMM: rlx built without it, or the device is not compute capability 9.0";
  EXPECT_EQ(forced_path_products("cutlass", "matmul_cutlass", &cuda::MatMulPathCounts::cutlass,
                                 [](const MatMulParams& p) { return cuda::cutlass_gemm_eligible(p, nullptr); }),
            4);
}

// The few-row GEMM's cases: partial row and column tiles, one k step (no
// split) and many (split, summed by the last block, replayed).
TEST(OpCasesGpu, FewRowProductsWhenForced) {
  if (!cuda_available()) GTEST_SKIP() << "no CUDA device present: GPU tests skipped";
  EXPECT_EQ(forced_path_products("fewrows", "matmul_fewrows", &cuda::MatMulPathCounts::few_rows,
                                 [](const MatMulParams& p) { return cuda::few_row_gemm_eligible(p, nullptr); }),
            4);
}

}  // namespace
}  // namespace rlx::test
