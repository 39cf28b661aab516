// Decode attention with the query heads of a KV head together (one query
// row per sequence, grouped-query attention): each K and V row is read once
// for every query head that shares it, where the per-head decode kernels
// read it once per query head. Chosen for batches of two or more rows
// (a ragged batch's decode step), where the per-head kernels' reads and
// blocks grow with the batch; RLX_ATTENTION_DECODE=rows keeps the per-head
// kernels everywhere, =grouped takes this one wherever it is eligible;
// RLX_ATTENTION_DECODE_SPLIT=0 / 1 keeps a long cache's keys in one block or
// splits them over a cluster of eight whatever the batch (for measuring).
#pragma once
#include <cstdint>

#include "backends/cuda/launch_context.h"
#include "thunks/params.h"

namespace rlx::cuda {

// One query row, at least two query heads a KV head, head_dim <= 128 in
// whole 16-byte chunks, K and V rows 16-byte aligned.
bool attention_decode_grouped_eligible(const AttentionParams& p, const uint8_t* arena);

// Whether the decode step p takes the grouped kernel (eligibility, the
// batch and RLX_ATTENTION_DECODE).
bool use_attention_decode_grouped(const AttentionParams& p, const uint8_t* arena);

void run_attention_decode_grouped(const AttentionParams& p, const LaunchContext& ctx);

}  // namespace rlx::cuda
