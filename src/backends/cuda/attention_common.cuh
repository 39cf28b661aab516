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

// What a grouped decode block works on: blockIdx.x is (KV head, group of
// H query heads sharing it) * SPLIT + the block's rank in its cluster,
// blockIdx.y the sequence. The block's query heads are h0 .. h0 + gn - 1.
template <class T>
struct GroupedBlock {
  int rank, kvh, gn, h0;
  int64_t b;
  const T *k, *v;        // the KV head's column in the sequence's first K and V rows
  const int32_t* mask;   // padding_keep's row, or null
  int64_t kv_begin, kv_end;
};

// The block's GroupedBlock, with its query heads (scaled, rotated where the
// attention carries q's RoPE) in q_s [H][DMAX] as f32, zero past gn heads
// and head_dim. Every thread of the block calls it (it ends at a barrier).
template <class T, int H, int DMAX, int SPLIT>
__device__ __forceinline__ GroupedBlock<T> grouped_block(const AttentionParams& p, uint8_t* arena,
                                                         float (*q_s)[DMAX]) {
  GroupedBlock<T> g;
  const int D = p.head_dim;
  const int per_kv = p.q_heads / p.kv_heads, groups = (per_kv + H - 1) / H;
  const int blk = int(blockIdx.x) / SPLIT, first = (blk % groups) * H;
  g.rank = int(blockIdx.x) % SPLIT;
  g.kvh = blk / groups;
  g.gn = min(H, per_kv - first);
  g.h0 = g.kvh * per_kv + first;
  g.b = blockIdx.y;
  const T* q = at<const T>(arena, p.q) + g.b * p.q_stride + p.q_offset + int64_t(g.h0) * D;  // sq == 1
  const int64_t row0 = kv_row0(p, arena, g.b);
  g.k = at<const T>(arena, p.k) + row0 * p.k_stride + p.k_offset + int64_t(g.kvh) * D;
  g.v = at<const T>(arena, p.v) + row0 * p.v_stride + p.v_offset + int64_t(g.kvh) * D;
  g.mask = padding_keep(p, arena, g.b);
  g.kv_end = decode_key_end(p, arena, g.b);
  g.kv_begin = decode_key_begin(p, arena, g.b);
  for (int i = threadIdx.x; i < H * DMAX; i += blockDim.x) {
    const int h = i / DMAX, d = i % DMAX;
    q_s[h][d] = h < g.gn && d < D ? decode_query(p, arena, q + int64_t(h) * D, d, g.b) : 0.f;
  }
  __syncthreads();
  return g;
}

// The end of a grouped decode block: its W warps' partial softmaxes of each
// of its gn heads (w_m, w_l [W][H], w_acc [W][H][DMAX]) merged per (head,
// dim) and stored to out (gn * D values), or with SPLIT > 1 merged with the
// cluster's other blocks first (b_m, b_l, b_acc: this block's share).
// Every thread of the block calls it, after the barrier that publishes w_*.
template <class T, int W, int H, int DMAX, int SPLIT>
__device__ __forceinline__ void finish_grouped_heads(int gn, int D, const float (*w_m)[H], const float (*w_l)[H],
                                                     const float (*w_acc)[H][DMAX], float* b_m, float* b_l,
                                                     float (*b_acc)[DMAX], T* out) {
  for (int i = threadIdx.x; i < gn * D; i += blockDim.x) {
    const int h = i / D, d = i % D;
    float mx, sum, o;
    merge_parts(W, [&](int w) { return SoftmaxPart{w_m[w][h], w_l[w][h], w_acc[w][h][d]}; }, mx, sum, o);
    if constexpr (SPLIT == 1) {
      out[i] = from_f32<T>(sum > 0.f ? o / sum : 0.f);  // all masked -> 0
    } else {
      b_acc[h][d] = o;
      if (d == 0) b_m[h] = mx, b_l[h] = sum;
    }
  }
  if constexpr (SPLIT > 1)
    cluster_merge<SPLIT>(
        gn * D, b_m, b_l, &b_acc[0][0], [&](int i) { return i / D; }, [&](int i) { return i / D * DMAX + i % D; },
        [&](int i, float v) { out[i] = from_f32<T>(v); });
}

}  // namespace
}  // namespace rlx::cuda
