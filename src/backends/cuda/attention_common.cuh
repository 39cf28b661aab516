// Helpers shared by the attention kernels (attention.cu) and the grouped
// decode kernel (attention_decode_grouped.cu): masks, windows, soft caps,
// query rotation, the rows of a KV cache and the merge of partial softmaxes.
#pragma once
#include <cooperative_groups.h>

#include "backends/cuda/device_types.cuh"
#include "backends/cuda/rope_math.cuh"
#include "thunks/params.h"

namespace rlx::cuda {
namespace {

// The scaled score s after the soft cap (none when softcap is 0).
__device__ __forceinline__ float soft_capped(const AttentionParams& p, float s) {
  return p.softcap > 0.f ? p.softcap * tanhf(s / p.softcap) : s;
}

// Whether the window lets the query at position qpos see key j: a causal
// window the keys up to window - 1 before it, a two-sided one (no causal
// mask) those up to window - 1 away on either side.
__device__ __forceinline__ bool in_window(const AttentionParams& p, int64_t j, int64_t qpos) {
  if (p.window <= 0) return true;
  if (p.mask_kind == MaskKind::Causal) return j > qpos - p.window;
  return j > qpos - p.window && j < qpos + p.window;
}

// Element d of the one query row's head at q, scaled; rotated first where
// the attention carries q's RoPE (decode steps, position pos[b]).
template <class T>
__device__ inline float decode_query(const AttentionParams& p, uint8_t* arena, const T* q, int d, int64_t b) {
  if (d >= p.q_rope_n_rot) return to_f32(q[d]) * p.scale;
  const float position = float(at<const int32_t>(arena, p.pos)[b]);
  return to_f32(rope_element(q, d, p.q_rope_n_rot, p.q_rope_interleaved, p.q_rope_theta, p.q_rope_freqs,
                             position)) *
         p.scale;
}

// The row of the key at position j: j itself, or in a ring cache (a
// sliding-window layer's) j mod skv. Positions and skv are below 2^31.
__device__ __forceinline__ int64_t key_row(const AttentionParams& p, int64_t j) {
  return p.ring ? int64_t(uint32_t(j) % uint32_t(p.skv)) : j;
}

// The keys valid under a KV cache whose first new query sits at start:
// those before start + sq, no more than the cache holds unless it is a ring.
__device__ __forceinline__ int64_t cached_keys(const AttentionParams& p, int64_t start) {
  return p.ring ? start + p.sq : max(int64_t(0), min(p.skv, start + p.sq));
}

// The first k/v row of batch b: its own, or in a ragged batch the row of the
// cache slot kv_slots[b] names (clamped into the pool; the host checks it).
__device__ inline int64_t kv_row0(const AttentionParams& p, uint8_t* arena, int64_t b) {
  if (p.kv_slots == kNoBuffer) return b * p.skv;
  const int64_t slot = at<const int32_t>(arena, p.kv_slots)[b];
  return min(max(slot, int64_t(0)), p.kv_batch - 1) * p.skv;
}

// The padding mask row of sequence b, or null when there is no padding mask
// or it keeps none of the keys: such a sequence attends to every key (a
// softmax over no key has no answer; Hugging Face unmasks these rows for
// SDPA). Every thread of the block calls it; most find a kept key at once.
__device__ inline const int32_t* padding_keep(const AttentionParams& p, uint8_t* arena, int64_t b) {
  if (p.mask_kind != MaskKind::Padding) return nullptr;
  const int32_t* row = at<const int32_t>(arena, p.mask) + b * p.skv;
  int any = 0;
  for (int64_t j = threadIdx.x; j < p.skv && !any; j += blockDim.x) any = __ldg(row + j) != 0;
  return __syncthreads_or(any) ? row : nullptr;
}

// The keys batch b's query row sees: [0, end). Under a KV cache the valid
// length comes from the start position in the arena (pos[b] + 1).
__device__ __forceinline__ int64_t decode_key_end(const AttentionParams& p, uint8_t* arena, int64_t b) {
  int64_t kv_len = p.skv, causal_shift = p.skv - 1;  // the row sees keys j <= shift
  if (p.pos != kNoBuffer) {
    const int64_t start = at<const int32_t>(arena, p.pos)[b];
    kv_len = cached_keys(p, start);  // sq == 1
    causal_shift = start;
  }
  return p.mask_kind == MaskKind::Causal ? min(kv_len, causal_shift + 1) : kv_len;
}

// The first key a causal window lets the row see (0 without one; a
// two-sided window needs sq == skv, so the one row sees its one key).
__device__ __forceinline__ int64_t decode_key_begin(const AttentionParams& p, uint8_t* arena, int64_t b) {
  if (p.window <= 0 || p.mask_kind != MaskKind::Causal) return 0;
  const int64_t qpos = p.pos != kNoBuffer ? int64_t(at<const int32_t>(arena, p.pos)[b]) : p.skv - 1;
  return max(int64_t(0), qpos - p.window + 1);
}

// Merges n partial softmaxes over disjoint keys (part(i) gives the running
// max m, sum l and weighted value o of one warp or block) into the output
// value; a part with m = -inf saw no valid key, and all masked gives 0.
struct SoftmaxPart {
  float m, l, o;
};
template <class Part>
__device__ __forceinline__ void merge_parts(int n, Part part, float& mx, float& sum, float& o) {
  mx = -INFINITY;
  for (int i = 0; i < n; ++i) mx = fmaxf(mx, part(i).m);
  sum = 0.f;
  o = 0.f;
  if (mx == -INFINITY) return;
  for (int i = 0; i < n; ++i) {
    const SoftmaxPart x = part(i);
    if (x.m == -INFINITY) continue;
    const float c = expf(x.m - mx);
    sum += x.l * c;
    o += x.o * c;
  }
}

// The merge of a thread-block cluster's SPLIT partial softmaxes: block r's
// share of entry i is (b_m[mi(i)], b_l[mi(i)], b_acc[ai(i)]) in its shared
// memory. The entries are spread over the cluster's blocks (entry i to
// block i % SPLIT) and a thread loads all SPLIT parts of its entry before it
// merges them: one round trip through distributed shared memory, where the
// first block merging every entry part by part waited for 3 * SPLIT of them
// in turn for each. store(i, value) writes entry i. Every thread of every
// block of the cluster calls it (it holds two cluster barriers).
template <int SPLIT, class MIndex, class AIndex, class Store>
__device__ __forceinline__ void cluster_merge(int entries, const float* b_m, const float* b_l, const float* b_acc,
                                              MIndex mi, AIndex ai, Store store) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ < 900
  __trap();  // clusters need Hopper; the launches split only where clusters_available()
#elif defined(__CUDA_ARCH__)
  namespace cg = cooperative_groups;
  cg::cluster_group cluster = cg::this_cluster();
  cluster.sync();  // every block's share is in its shared memory
  const int rank = int(cluster.block_rank());
  for (int i = rank + SPLIT * int(threadIdx.x); i < entries; i += SPLIT * int(blockDim.x)) {
    float pm[SPLIT], pl[SPLIT], po[SPLIT];
    const int j = mi(i), a = ai(i);
#pragma unroll
    for (int r = 0; r < SPLIT; ++r) {
      pm[r] = cluster.map_shared_rank(b_m, r)[j];
      pl[r] = cluster.map_shared_rank(b_l, r)[j];
      po[r] = cluster.map_shared_rank(b_acc, r)[a];
    }
    float mx, sum, o;
    merge_parts(SPLIT, [&](int r) { return SoftmaxPart{pm[r], pl[r], po[r]}; }, mx, sum, o);
    store(i, sum > 0.f ? o / sum : 0.f);  // all masked -> 0
  }
  cluster.sync();  // every block's shared memory stays until the others have read it
#endif
}

}  // namespace
}  // namespace rlx::cuda
