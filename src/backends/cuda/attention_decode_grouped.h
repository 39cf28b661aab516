// Decode attention with the query heads of a KV head together (one query
// row per sequence, grouped-query attention): each K and V row is read once
// for every query head that shares it, where the per-head decode kernels
// read it once per query head. Two kernels: one on the CUDA cores (every
// float dtype) and one on the tensor cores (f16/bf16, head_dim a multiple
// of 16; attention_decode_mma.cu). A decode step of two rows or more (a
// ragged batch's) takes the tensor-core kernel where it is eligible, else
// the CUDA-core one; one row keeps the per-head kernels.
// RLX_ATTENTION_DECODE=rows keeps the per-head kernels everywhere, =grouped
// and =mma take that kernel wherever it is eligible (the per-head ones
// elsewhere); RLX_ATTENTION_DECODE_SPLIT=0 / 1 keeps a long cache's keys in
// one block of the CUDA-core kernel or splits them over a cluster of eight
// whatever the batch (for measuring; =0 keeps the per-head kernel's caches
// in one block a head too).
#pragma once
#include <cstdint>

#include "backends/cuda/launch_context.h"
#include "thunks/params.h"

namespace rlx::cuda {

// One query row, at least two query heads a KV head, head_dim <= 128 in
// whole 16-byte chunks, K and V rows 16-byte aligned.
bool attention_decode_grouped_eligible(const AttentionParams& p, const uint8_t* arena);

// The tensor-core kernel's further terms: f16/bf16, head_dim % 16 == 0.
bool attention_decode_mma_eligible(const AttentionParams& p, const uint8_t* arena);

// Which kernel serves the decode step p (eligibility, the batch and
// RLX_ATTENTION_DECODE).
enum class DecodeKernel { PerHead, Grouped, GroupedMma };
DecodeKernel decode_kernel_for(const AttentionParams& p, const uint8_t* arena);

void run_attention_decode_grouped(const AttentionParams& p, const LaunchContext& ctx);
void run_attention_decode_mma(const AttentionParams& p, const LaunchContext& ctx);

}  // namespace rlx::cuda
