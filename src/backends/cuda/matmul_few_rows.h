// A tensor-core GEMM for products of few rows (a short sequence at batch 1:
// BERT's 128 tokens), where cuBLASLt's kernels leave most SMs idle or take
// several microseconds to stream a few megabytes of weights. Tiles of 64
// or 128 rows by 64 columns, mma.sync on f16/bf16 with f32 accumulation, a
// 3- or 4-stage cp.async pipeline, and K split across the blocks of a thread-block cluster so that
// every SM streams its share of the weights; the cluster adds its partial
// sums through distributed shared memory in split order (no workspace, the
// same bits every run), then the bias and the activation, erf-GELU
// included. A constant weight's first tiles are requested before the kernel
// waits for its predecessor.
// Chosen over cuBLASLt per thunk by timing (see MatMulPlan).
#pragma once
#include <cstdint>
#include <string>

#include "backends/cuda/launch_context.h"
#include "thunks/params.h"

namespace rlx::cuda {

// out[m, n] = act(A[m, k] . B[n, k]^T + bias[n]), batch 1, f16 or bf16, any
// activation; k a multiple of 64, n of 8, rows 16-byte aligned; m at most
// kFewRowMaxRows; the device of compute capability 9.0 (clusters).
constexpr int64_t kFewRowMaxRows = 512;
bool few_row_gemm_eligible(const MatMulParams& p, const uint8_t* arena);

// One thunk's launch: how K is split (the blocks of a tile's splits form a
// thread-block cluster and add their partial sums through its shared memory).
class FewRowGemm {
 public:
  // Tiles of 64 rows (3 stages) and of 128 rows (4 stages), each with splits
  // aimed at about 1, 2 and 4 blocks per SM; each is timed by the caller.
  static constexpr int kConfigs = 6;

  // p must be few_row_gemm_eligible.
  FewRowGemm(const MatMulParams& p, int config, const std::string& label);

  void run(const LaunchContext& ctx) const;
  int splits() const { return splits_; }
  int rows_per_block() const { return bm_; }

 private:
  MatMulParams p_;
  int bm_ = 64, splits_ = 1, steps_per_split_ = 1;
};

}  // namespace rlx::cuda
