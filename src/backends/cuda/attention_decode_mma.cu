// Grouped decode attention on the tensor cores (attention_decode_grouped.h;
// f16/bf16, head_dim a multiple of 16 up to 128). The grouped kernel's
// blocks (KV head, up to kMmaHeads query heads sharing it, sequence; a
// cluster splitting a long cache), but a warp copies its tile of kMmaKeys
// keys into shared memory (cp.async) and both products are mma.sync
// m16n8k16 with f32 accumulators:
//   S^T = K Q^T   (16 keys x 8 heads; k = head_dim, Q^T held in registers),
//   O^T += V^T P^T (16 dims x 8 heads a block of dims; k = the 16 keys).
// A lane holds two heads' columns of S^T (heads 2t and 2t+1, t = lane % 4)
// and the same two heads' columns of O^T, so each head's online softmax
// runs in the lanes of its column (three shuffles a reduction). P goes from
// the first product's accumulators to the second's B operand by movmatrix,
// an 8 x 8 transpose in registers.
#include <cstring>

#include "backends/cuda/attention_common.cuh"
#include "backends/cuda/attention_decode_grouped.h"
#include "backends/cuda/cuda_check.h"
#include "backends/cuda/dispatch.h"
#include "backends/cuda/launch.cuh"
#include "backends/cuda/mma.cuh"

namespace rlx::cuda {
namespace {

constexpr int kMmaWarps = 4;   // warps a block
constexpr int kMmaKeys = 16;   // keys a warp's tile (the first product's m)
constexpr int kMmaHeads = 8;   // query heads a block (the products' n)
constexpr int kMmaSplit = 8;   // blocks of a cluster splitting a long cache
constexpr int64_t kMmaSplitKeys = 256;

// Chunk c of tile row r (CH chunks of 16 bytes a row): the eight rows one
// ldmatrix phase reads sit in eight different bank groups.
template <int CH>
__device__ __forceinline__ int swizzled(int r, int c) {
  return r * CH + (c ^ (r & 7));
}

template <class T, int DMAX, int SPLIT>
__global__ void __launch_bounds__(kMmaWarps * 32) attention_decode_mma_kernel(const AttentionParams p, uint8_t* arena) {
  pdl_entry();
  constexpr int CH = DMAX / 8, KS = DMAX / 16;  // 16-byte chunks and 16-wide steps of a row
  __shared__ __align__(16) float q_s[kMmaHeads][DMAX];
  // Each warp's K and V tiles; after the keys, the warps' partial sums.
  __shared__ __align__(16) uint4 kv_s[kMmaWarps][2][kMmaKeys * CH];
  __shared__ float w_m[kMmaWarps][kMmaHeads], w_l[kMmaWarps][kMmaHeads];
  __shared__ float b_m[kMmaHeads], b_l[kMmaHeads], b_acc[kMmaHeads][DMAX];  // the cluster merge's share
  static_assert(sizeof(float) * kMmaWarps * kMmaHeads * DMAX <= sizeof(kv_s), "partial sums fit the tiles");

  const int D = p.head_dim, chunks = D / 8, steps = D / 16;
  const GroupedBlock<T> blk = grouped_block<T, kMmaHeads, DMAX, SPLIT>(p, arena, q_s);
  const int gn = blk.gn, rank = blk.rank;
  const T *k = blk.k, *v = blk.v;
  const int32_t* mask = blk.mask;
  const int64_t kv_end = blk.kv_end, kv_begin = blk.kv_begin;
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, g = lane >> 2, t = lane & 3;
  // Q^T as the first product's B operand (k = dims, n = heads): this lane's
  // head g, dims 2t, 2t + 1 and 2t + 8, 2t + 9 of each 16-wide step.
  uint32_t qb[KS][2];
#pragma unroll
  for (int s = 0; s < KS; ++s) {
    qb[s][0] = pack_pair<T>(q_s[g][s * 16 + 2 * t], q_s[g][s * 16 + 2 * t + 1]);
    qb[s][1] = pack_pair<T>(q_s[g][s * 16 + 2 * t + 8], q_s[g][s * 16 + 2 * t + 9]);
  }
  // Heads 2t (index 0) and 2t + 1 (index 1): running max and sum; o[s] holds
  // O^T rows (dims) s * 16 + g (o[s][0], o[s][1]) and + 8 (o[s][2], o[s][3]).
  float m[2] = {-INFINITY, -INFINITY}, l[2] = {0.f, 0.f}, o[KS][4];
#pragma unroll
  for (int s = 0; s < KS; ++s) o[s][0] = o[s][1] = o[s][2] = o[s][3] = 0.f;
  uint4* k_tile = kv_s[warp][0];
  uint4* v_tile = kv_s[warp][1];
  // This block's keys: [lo, hi) of [kv_begin, kv_end), whole tiles except at the end.
  const int64_t share =
      ((max(int64_t(0), kv_end - kv_begin) + SPLIT - 1) / SPLIT + kMmaKeys - 1) / kMmaKeys * kMmaKeys;
  const int64_t lo = kv_begin + rank * share, hi = min(kv_end, lo + share);
  for (int64_t j0 = lo + int64_t(warp) * kMmaKeys; j0 < hi; j0 += int64_t(kMmaWarps) * kMmaKeys) {
    // The tile's K and V rows into shared memory; rows past the valid keys
    // and chunks past head_dim as zeros.
#pragma unroll
    for (int i = lane; i < kMmaKeys * CH; i += 32) {
      const int r = i / CH, c = i % CH;
      const bool valid = j0 + r < hi && c < chunks;
      const int64_t row = valid ? key_row(p, j0 + r) : 0;
      cp_async16(k_tile + swizzled<CH>(r, c), k + row * p.k_stride + (valid ? c * 8 : 0), valid);
      cp_async16(v_tile + swizzled<CH>(r, c), v + row * p.v_stride + (valid ? c * 8 : 0), valid);
    }
    cp_async_commit();
    cp_async_wait<0>();
    __syncwarp();
    // S^T: A = K (blocks: keys 0-7 / 8-15 by dims 0-7 / 8-15 of the step).
    float sc[4] = {0.f, 0.f, 0.f, 0.f};
#pragma unroll
    for (int s = 0; s < KS; ++s) {
      if (s >= steps) break;
      uint32_t a[4];
      const int blk4 = lane >> 3;
      ldmatrix_x4(a, k_tile + swizzled<CH>((lane & 7) + (blk4 & 1) * 8, s * 2 + (blk4 >> 1)));
      mma_16x8x16<T>(sc, a, qb[s][0], qb[s][1]);
    }
    // sc: keys j0 + g (sc[0], sc[1]) and j0 + g + 8 (sc[2], sc[3]); heads 2t, 2t + 1.
    const int64_t ja = j0 + g, jb = ja + 8;
    const bool oka = ja < hi && (!mask || mask[ja] != 0), okb = jb < hi && (!mask || mask[jb] != 0);
    float pr[4];
#pragma unroll
    for (int i = 0; i < 4; ++i) sc[i] = (i < 2 ? oka : okb) ? soft_capped(p, sc[i]) : -INFINITY;
#pragma unroll
    for (int hh = 0; hh < 2; ++hh) {  // head 2t + hh: sc[hh] and sc[hh + 2]
      float mx = fmaxf(sc[hh], sc[hh + 2]);
#pragma unroll
      for (int off = 4; off < 32; off <<= 1) mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, off));
      const float m_new = fmaxf(m[hh], mx);
      const bool none = m_new == -INFINITY;  // no valid key yet
      const float corr = none ? 1.f : expf(m[hh] - m_new);
      pr[hh] = none ? 0.f : expf(sc[hh] - m_new);
      pr[hh + 2] = none ? 0.f : expf(sc[hh + 2] - m_new);
      float sum = pr[hh] + pr[hh + 2];
#pragma unroll
      for (int off = 4; off < 32; off <<= 1) sum += __shfl_xor_sync(0xffffffffu, sum, off);
      l[hh] = l[hh] * corr + sum;
      m[hh] = m_new;
#pragma unroll
      for (int s = 0; s < KS; ++s) o[s][hh] *= corr, o[s][hh + 2] *= corr;
    }
    // P^T as the second product's B operand (k = keys, n = heads): the
    // [key][head] blocks of keys 0-7 and 8-15, transposed.
    const uint32_t p0 = movmatrix_trans(pack_pair<T>(pr[0], pr[1]));
    const uint32_t p1 = movmatrix_trans(pack_pair<T>(pr[2], pr[3]));
    // O^T += V^T P^T: A = V^T by transposing loads (blocks: keys 0-7 / 8-15 by
    // dims 0-7 / 8-15 of the step, in the order A's fragment takes them).
#pragma unroll
    for (int s = 0; s < KS; ++s) {
      if (s >= steps) break;
      uint32_t a[4];
      const int blk4 = lane >> 3;
      ldmatrix_x4_trans(a, v_tile + swizzled<CH>((lane & 7) + (blk4 >> 1) * 8, s * 2 + (blk4 & 1)));
      mma_16x8x16<T>(o[s], a, p0, p1);
    }
    __syncwarp();  // the tile is read before the next one's copies land
  }
  __syncthreads();  // every warp is done with its tiles: they hold the partial sums now
  float(*w_acc)[kMmaHeads][DMAX] = reinterpret_cast<float(*)[kMmaHeads][DMAX]>(&kv_s[0][0][0]);
  if (g == 0)
#pragma unroll
    for (int hh = 0; hh < 2; ++hh) w_m[warp][2 * t + hh] = m[hh], w_l[warp][2 * t + hh] = l[hh];
#pragma unroll
  for (int s = 0; s < KS; ++s) {
    if (s >= steps) break;
#pragma unroll
    for (int i = 0; i < 4; ++i) w_acc[warp][2 * t + (i & 1)][s * 16 + g + (i >> 1) * 8] = o[s][i];
  }
  __syncthreads();
  finish_grouped_heads<T, kMmaWarps, kMmaHeads, DMAX, SPLIT>(gn, D, w_m, w_l, w_acc, b_m, b_l, b_acc,
                                                             at<T>(arena, p.out) + (blk.b * p.q_heads + blk.h0) * D);
}

template <class T, int DMAX>
void launch_mma(const AttentionParams& p, const LaunchContext& ctx) {
  const int per_kv = p.q_heads / p.kv_heads, groups = (per_kv + kMmaHeads - 1) / kMmaHeads;
  const int64_t blocks = int64_t(p.kv_heads) * groups;
  // A long cache is split over a cluster where the blocks would not fill the SMs.
  const bool split = p.skv >= kMmaSplitKeys && clusters_available() && blocks * p.batch <= multiprocessor_count();
  if (split)
    launch(attention_decode_mma_kernel<T, DMAX, kMmaSplit>, dim3(unsigned(blocks * kMmaSplit), unsigned(p.batch)),
           kMmaWarps * 32, 0, ctx, p, kMmaSplit);
  else
    launch(attention_decode_mma_kernel<T, DMAX, 1>, dim3(unsigned(blocks), unsigned(p.batch)), kMmaWarps * 32, 0,
           ctx, p);
}

}  // namespace

bool attention_decode_mma_eligible(const AttentionParams& p, const uint8_t* arena) {
  return (p.dtype == DType::F16 || p.dtype == DType::BF16) && p.head_dim % 16 == 0 &&
         attention_decode_grouped_eligible(p, arena);
}

void run_attention_decode_mma(const AttentionParams& p, const LaunchContext& ctx) {
  if (p.dtype == DType::F16) {
    if (p.head_dim <= 64) launch_mma<__half, 64>(p, ctx);
    else launch_mma<__half, 128>(p, ctx);
  } else if (p.dtype == DType::BF16) {
    if (p.head_dim <= 64) launch_mma<__nv_bfloat16, 64>(p, ctx);
    else launch_mma<__nv_bfloat16, 128>(p, ctx);
  } else {
    throw Error(std::string("attention ") + ctx.label + ": the tensor-core decode kernel takes f16 or bf16");
  }
}

}  // namespace rlx::cuda
