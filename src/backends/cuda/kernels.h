// Host entry points of the kernel families: each picks the element type and
// launch shape for one thunk and launches through launch(). Matrix products
// need per-thunk state and live in matmul.h.
#pragma once
#include "backends/cuda/launch_context.h"
#include "thunks/params.h"

namespace rlx::cuda {

void run_binary(const BinaryParams& p, const LaunchContext& ctx);
// Which binary kernel run_binary takes: "vec" (16-byte chunks) or "general".
const char* binary_variant(const BinaryParams& p, const uint8_t* arena);
void run_unary(const UnaryParams& p, const LaunchContext& ctx);
void run_copy(const CopyParams& p, const LaunchContext& ctx);
void run_norm(const NormParams& p, const LaunchContext& ctx);
// Which norm kernel run_norm picks for p over this arena: "warp", "vec" or
// "general".
const char* norm_variant(const NormParams& p, const uint8_t* arena);
void run_softmax(const SoftmaxParams& p, const LaunchContext& ctx);
void run_softmax_xent(const SoftmaxCEParams& p, const LaunchContext& ctx);
void run_attention(const AttentionParams& p, const LaunchContext& ctx);
// Raises the shared memory limit of the short-sequence attention kernels;
// once per process, before anything is recorded.
void prepare_attention_kernels();
// The same for the current device, once per device (an executable's
// constructor calls it with its device current).
void prepare_device_kernels();
// Which attention kernel run_attention picks for p: "short" or "general".
const char* attention_variant(const AttentionParams& p);
void run_rope(const RopeParams& p, const LaunchContext& ctx);
// Which SwiGLU kernel runs p: "vec" (16-byte chunks) or "general".
const char* swiglu_variant(const SwiGluParams& p, const uint8_t* arena);
void run_gather(const GatherParams& p, const LaunchContext& ctx);
void run_gather_q(const GatherQParams& p, const LaunchContext& ctx);
// Which gather kernel run_gather takes: "vec" (16-byte chunks) or "general".
const char* gather_variant(const GatherParams& p, const uint8_t* arena);
void run_reduce(const ReduceParams& p, const LaunchContext& ctx);

// Holds the stream for about ns nanoseconds (timing passes only).
void enqueue_gpu_delay(cudaStream_t stream, uint64_t ns);

// Threads per block for a kernel that gives one block to each row of cols.
int row_block(int64_t cols);

}  // namespace rlx::cuda
