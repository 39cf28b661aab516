// Tensor-core attention through cuDNN's fused scaled-dot-product attention
// (the cuDNN frontend's SDPA graph), for f16/bf16. The graph is built at
// initialize, once per distinct shape (the layers of a model share it);
// execute only enqueues. A padding mask becomes an additive bias row per
// batch ([B, 1, 1, Skv], -inf where the mask is 0) written by a small kernel
// before the call; rows whose keys are all masked are zeroed after it, as
// the other kernels do. Over a KV cache (a prompt chunk at positions read
// from the arena) a small kernel writes each sequence's lengths first, and a
// ragged batch's cache slots become page tables over the pool; a
// decode step's one query row stays on rlx's decode kernel.
#pragma once
#include <memory>
#include <string>

#include "backends/cuda/device_thunk.h"

namespace rlx::cuda {

// A cuDNN attention thunk for p, or nullptr when cuDNN cannot serve it (f32,
// a head_dim cuDNN lacks, misaligned rows, no cuDNN in this build, or cuDNN
// rejecting the graph); the caller then uses rlx's own kernels.
// RLX_ATTENTION=own forces rlx's kernels; =cudnn makes a rejection an error.
std::unique_ptr<DeviceThunk> make_cudnn_attention(const AttentionParams& p, const DeviceResources& r,
                                                  const std::string& label);

// How many attention thunks each path has served in this process (tests
// assert which path ran).
struct AttentionPathCounts {
  int cudnn = 0, own = 0;
  int mask_bias_reused = 0;  // cuDNN thunks that reuse an earlier layer's mask bias
};
AttentionPathCounts attention_path_counts();
// The mask biases of one executable: the first cuDNN attention thunk (in
// schedule order) that reads a given mask writes its bias each run; the later
// layers reading the same mask reuse it instead of launching the kernel again.
std::shared_ptr<MaskBiasShare> make_mask_bias_share();

// Whether this build has cuDNN's attention at all.
bool cudnn_attention_built();
void count_own_attention();

}  // namespace rlx::cuda
