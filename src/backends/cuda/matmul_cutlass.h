// A CUTLASS GEMM for Hopper (TMA loads, warp-specialized wgmma) with the bias
// and erf-GELU applied in its epilogue. cuBLASLt's epilogues know only the
// tanh GELU, so without this BERT's FFN needs a second pass over its widest
// activation. Chosen over cuBLASLt per thunk by timing (see MatMulPlan).
#pragma once
#include <cstdint>
#include <memory>

#include "backends/cuda/launch_context.h"
#include "thunks/params.h"

namespace rlx::cuda {

// Built with CUTLASS, and the current device runs sm_90a code (9.0).
bool cutlass_gemm_available();

// out[m, n] = act(A[m, k] . B[n, k]^T + bias[n]), all row-major (trans_b,
// batch 1), f16 or bf16, act Gelu (erf) or None, bias optional; operands and
// row strides 16-byte aligned. False where rlx was built without CUTLASS.
bool cutlass_gemm_eligible(const MatMulParams& p, const uint8_t* arena);

// The kernel's arguments (TMA descriptors included) for one thunk, made once
// for fixed arena addresses; run only enqueues, so it can be captured.
class CutlassGemm {
 public:
  // Tile configurations; each is timed separately by the caller.
  static constexpr int kConfigs = 2;

  // p must be cutlass_gemm_eligible for arena.
  CutlassGemm(const MatMulParams& p, uint8_t* arena, int config);
  ~CutlassGemm();
  CutlassGemm(const CutlassGemm&) = delete;
  CutlassGemm& operator=(const CutlassGemm&) = delete;

  void run(const LaunchContext& ctx) const;

  struct Impl;

 private:
  std::unique_ptr<Impl> impl_;
};

}  // namespace rlx::cuda
