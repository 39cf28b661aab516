// The kernels before a cuDNN attention call. Their buffers (the bias, the
// sequence lengths) belong to the thunk (allocated at initialize), so they
// are given as device addresses beside the arena offsets they read.
#pragma once
#include <cstdint>

#include "thunks/params.h"

namespace rlx::cuda {

struct MaskBiasParams {
  uint64_t mask;          // arena offset of the i32 [batch, skv] padding mask
  uint64_t bias_addr;     // device address of the [batch, skv] bias (dtype)
  int64_t batch, skv;
  DType dtype;
};

// Attention over a KV cache (a prompt's rows at positions pos[b] ..): per
// batch row, the query rows whose positions the cache holds (seq_q), the
// keys they see (seq_kv = pos[b] + seq_q; with cuDNN's bottom-right causal
// alignment query i then sees keys j <= pos[b] + i, as rlx's kernels) and,
// with a ragged batch's cache slots, the page table of the slot's cache
// (`pages` pages of skv / pages rows each; slot s's are s * pages ..). Output
// rows past seq_q (positions past the cache: padding rows) are zeroed.
struct CacheLensParams {
  uint64_t pos;           // arena offset of the i32 [batch] start positions
  uint64_t kv_slots;      // arena offset of the i32 [batch] cache slots, or kNoBuffer
  uint64_t lens_addr;     // device address of i32: seq_q [batch], seq_kv [batch], pages [batch, pages]
  uint64_t out;           // arena offset of the [batch, sq, row] output
  int64_t batch, sq, skv, kv_batch, pages, row;
  DType dtype;
};

}  // namespace rlx::cuda

#include "backends/cuda/launch_context.h"

namespace rlx::cuda {
void run_mask_bias(const MaskBiasParams& p, const LaunchContext& ctx);
void run_cache_lens(const CacheLensParams& p, const LaunchContext& ctx);
}  // namespace rlx::cuda
