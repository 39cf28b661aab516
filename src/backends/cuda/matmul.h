// Matrix products through cuBLASLt or, for few rows, rlx's matrix-vector
// kernel (gemv.h) or its split-K tensor-core GEMM (matmul_few_rows.h), or on
// Hopper a CUTLASS GEMM with erf-GELU in its epilogue (matmul_cutlass.h). Everything cuBLASLt needs (descriptors, layouts, the
// algorithm) is chosen once here, at initialize, the algorithm by timing the
// heuristic's candidates and the other kernels where they apply;
// execute only enqueues the chosen product and, where no cuBLASLt epilogue
// fits, an activation kernel.
#pragma once
#include <cublasLt.h>

#include <memory>
#include <string>

#include "backends/cuda/launch_context.h"
#include "backends/cuda/matmul_cutlass.h"
#include "backends/cuda/matmul_few_rows.h"
#include "thunks/params.h"

namespace rlx::cuda {

class MatMulPlan {
 public:
  // workspace must outlive the plan and is only used on one stream at a time.
  MatMulPlan(cublasLtHandle_t lt, const MatMulParams& p, uint8_t* arena, void* workspace,
             size_t workspace_bytes, const std::string& label, bool allow_tf32 = false);
  ~MatMulPlan();
  MatMulPlan(const MatMulPlan&) = delete;
  MatMulPlan& operator=(const MatMulPlan&) = delete;

  void execute(const LaunchContext& ctx) const;
  bool activation_in_epilogue() const { return use_gemv_ || cutlass_ || few_rows_ || !separate_activation_; }
  bool uses_gemv() const { return use_gemv_; }
  const MatMulParams& params() const { return p_; }

 private:
  void choose_fastest(uint8_t* arena, const cublasLtMatmulHeuristicResult_t* results, int found,
                      const std::string& what, bool try_gemv, bool try_cutlass, bool try_few_rows);
  void execute_cublas(const LaunchContext& ctx) const;

  cublasLtHandle_t lt_;
  MatMulParams p_;
  void* workspace_;
  size_t workspace_bytes_;
  cublasLtMatmulDesc_t desc_ = nullptr;
  cublasLtMatrixLayout_t a_ = nullptr, b_ = nullptr, c_ = nullptr;
  cublasLtMatmulAlgo_t algo_{};
  bool separate_activation_ = false;
  bool gemv_faster_ = false, use_gemv_ = false;
  std::unique_ptr<CutlassGemm> cutlass_;  // set only where it runs
  bool cutlass_faster_ = false;
  int cutlass_config_ = -1;  // the configuration cutlass_ was built with
  std::unique_ptr<FewRowGemm> few_rows_;  // set only where it runs
  bool few_rows_faster_ = false;
  int few_rows_config_ = -1;  // the configuration few_rows_ was built with
};

// The activation cuBLASLt has no epilogue for (erf-GELU among them), in place
// over p.out: "flat" (16-byte chunks) where the output is contiguous and
// aligned, else "strided". Run after the product; exposed for tests.
const char* activation_pass_variant(const MatMulParams& p, const uint8_t* arena);
void run_activation_pass(const MatMulParams& p, const LaunchContext& ctx);

// Plans made so far per path, for tests that assert which one ran.
struct MatMulPathCounts {
  int cublas = 0, gemv = 0, cutlass = 0, few_rows = 0;
};
MatMulPathCounts matmul_path_counts();

}  // namespace rlx::cuda
