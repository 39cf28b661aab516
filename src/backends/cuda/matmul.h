// Matrix products through cuBLASLt. Everything cuBLASLt needs (descriptors,
// layouts, the algorithm) is chosen once here, at initialize, the algorithm by
// timing the heuristic's candidates; execute only enqueues the matmul and,
// where no epilogue fits, an activation kernel.
#pragma once
#include <cublasLt.h>

#include <string>

#include "backends/cuda/launch_context.h"
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
  bool activation_in_epilogue() const { return !separate_activation_; }

 private:
  void choose_fastest(uint8_t* arena, const cublasLtMatmulHeuristicResult_t* results, int found,
                      const std::string& what);

  cublasLtHandle_t lt_;
  MatMulParams p_;
  void* workspace_;
  size_t workspace_bytes_;
  cublasLtMatmulDesc_t desc_ = nullptr;
  cublasLtMatrixLayout_t a_ = nullptr, b_ = nullptr, c_ = nullptr;
  cublasLtMatmulAlgo_t algo_{};
  bool separate_activation_ = false;
};

}  // namespace rlx::cuda
