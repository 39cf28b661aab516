// A tensor-core GEMM for products of few rows (a short sequence at batch 1:
// BERT's 128 tokens), where cuBLASLt's kernels leave most SMs idle or take
// several microseconds to stream a few megabytes of weights. 64x64 tiles,
// mma.sync on f16/bf16 with f32 accumulation, a three-stage cp.async
// pipeline, and K split across blocks so that every SM streams its share of
// the weights; the last block of a tile to finish adds the partial sums in
// split order (the result does not depend on which block finishes last),
// then the bias and the activation, erf-GELU included. A constant weight's
// first tiles are requested before the kernel waits for its predecessor.
// Chosen over cuBLASLt per thunk by timing (see MatMulPlan).
#pragma once
#include <cstdint>
#include <string>

#include "backends/cuda/launch_context.h"
#include "thunks/params.h"

namespace rlx::cuda {

// out[m, n] = act(A[m, k] . B[n, k]^T + bias[n]), batch 1, f16 or bf16, any
// activation; k a multiple of 64, n of 8, rows 16-byte aligned; m at most
// kFewRowMaxRows; the device of compute capability 8.0 or newer.
constexpr int64_t kFewRowMaxRows = 512;
bool few_row_gemm_eligible(const MatMulParams& p, const uint8_t* arena);

// One thunk's launch: the split of K, the tile counters (zeroed here, and
// reset by the kernel that uses them, so the product can be replayed).
// Partial sums go to the workspace, used by one stream at a time.
class FewRowGemm {
 public:
  // Splits aimed at about 1, 2 and 4 blocks per SM; each is timed by the caller.
  static constexpr int kConfigs = 3;

  // p must be few_row_gemm_eligible; throws when the partial sums of the
  // chosen split do not fit workspace_bytes.
  FewRowGemm(const MatMulParams& p, int config, void* workspace, size_t workspace_bytes, const std::string& label);
  ~FewRowGemm();
  FewRowGemm(const FewRowGemm&) = delete;
  FewRowGemm& operator=(const FewRowGemm&) = delete;

  void run(const LaunchContext& ctx) const;
  int splits() const { return splits_; }

 private:
  MatMulParams p_;
  int splits_ = 1, steps_per_split_ = 1;
  void* workspace_;
  uint32_t* counters_ = nullptr;
};

}  // namespace rlx::cuda
