// Grouped decode attention (attention_decode_grouped.h). One block per (KV
// head, group of G query heads sharing it, batch row); with a long cache,
// kGroupSplit blocks of a thread-block cluster take a share of the keys
// each and merge their partial softmaxes through distributed shared memory
// (cluster_merge). A warp takes KT keys at a time: each key's row is held by
// L lanes in 16-byte chunks (8 chunks a lane at most) and scored against
// every query head of the group from shared memory; the value rows of the
// tile go out in the same round trip, each lane loading its DMAX / 32
// columns of every row, and are folded in with the weights each head's
// online softmax gives them (through shared memory, a warp's own slice).
#include "backends/cuda/attention_decode_grouped.h"

#include <cstdlib>
#include <cstring>
#include <string>

#include "backends/cuda/attention_common.cuh"
#include "backends/cuda/cuda_check.h"
#include "backends/cuda/dispatch.h"
#include "backends/cuda/launch.cuh"

namespace rlx::cuda {
namespace {

constexpr int kMaxGroup = 8;             // query heads a block takes, at most
constexpr int kGroupWarps = 4;           // warps a block
constexpr int kGroupSplit = 8;           // blocks of a cluster splitting a long cache
constexpr int64_t kGroupSplitKeys = 256; // caches this long may be split

// NW 4-byte words of a value row at src (4 * NW bytes, as aligned).
template <int NW>
__device__ __forceinline__ void load_words(const void* src, uint32_t (&w)[NW]) {
  if constexpr (NW == 1) {
    w[0] = __ldg(reinterpret_cast<const unsigned int*>(src));
  } else if constexpr (NW == 2) {
    const uint2 t = __ldg(reinterpret_cast<const uint2*>(src));
    w[0] = t.x, w[1] = t.y;
  } else {
    const uint4 t = __ldg(reinterpret_cast<const uint4*>(src));
    w[0] = t.x, w[1] = t.y, w[2] = t.z, w[3] = t.w;
  }
}

template <class T, int DMAX, int G, int SPLIT>
__global__ void __launch_bounds__(kGroupWarps * 32)
    attention_decode_grouped_kernel(const AttentionParams p, uint8_t* arena) {
  pdl_entry();
  // C chunks of 16 bytes span a row at DMAX; L lanes hold a key's row, CK
  // chunks each, so a tile has KT keys. A lane holds DL value columns of
  // each row of the tile: NW words. G query heads a block (the last group
  // of a KV head may hold fewer: gn; q_s is zero past them, so every loop
  // over the heads runs whole, without a branch that would keep the
  // compiler from interleaving the heads' reductions).
  constexpr int ve = kChunkElems<T>, C = DMAX / ve, L = C > 8 ? C / 8 : 1, CK = C / L, KT = 32 / L;
  constexpr int DL = DMAX / 32, NW = DL * int(sizeof(T)) / 4;
  static_assert(C % L == 0 && (NW == 1 || NW == 2 || NW == 4), "rows of 4 to 32 chunks");
  __shared__ __align__(16) float q_s[G][DMAX];
  __shared__ __align__(16) float p_s[kGroupWarps][G][KT];
  __shared__ float w_m[kGroupWarps][G], w_l[kGroupWarps][G];
  __shared__ float w_acc[kGroupWarps][G][DMAX];
  __shared__ float b_m[G], b_l[G], b_acc[G][DMAX];  // this block's share, for the cluster merge

  const int D = p.head_dim, chunks = D / ve;
  const GroupedBlock<T> blk = grouped_block<T, G, DMAX, SPLIT>(p, arena, q_s);
  const int gn = blk.gn, rank = blk.rank;
  const T *k = blk.k, *v = blk.v;
  const int32_t* mask = blk.mask;
  const int64_t kv_end = blk.kv_end, kv_begin = blk.kv_begin;
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  const int key = lane % KT, part = lane / KT;  // this lane's key of the tile, and its part of the row
  const int d0 = lane * DL;                     // this lane's value columns

  float m[G], l[G], acc[G][DL];
#pragma unroll
  for (int g = 0; g < G; ++g) {
    m[g] = -INFINITY, l[g] = 0.f;
#pragma unroll
    for (int e = 0; e < DL; ++e) acc[g][e] = 0.f;
  }
  // This block's keys: [lo, hi) of [kv_begin, kv_end), whole tiles except at the end.
  const int64_t share = ((max(int64_t(0), kv_end - kv_begin) + SPLIT - 1) / SPLIT + KT - 1) / KT * KT;
  const int64_t lo = kv_begin + rank * share, hi = min(kv_end, lo + share);
  for (int64_t j0 = lo + int64_t(warp) * KT; j0 < hi; j0 += int64_t(kGroupWarps) * KT) {
    const int64_t j = j0 + key;
    const bool ok = j < hi && (!mask || mask[j] != 0);  // the same for the L lanes of a key
    const int n = int(min(int64_t(KT), hi - j0));        // rows of the tile inside the valid keys
    // The key rows and the tile's value rows go out together.
    uint4 kc[CK];
    if (ok) {
      const uint4* kr = reinterpret_cast<const uint4*>(k + key_row(p, j) * p.k_stride) + part * CK;
#pragma unroll
      for (int c = 0; c < CK; ++c)
        if (part * CK + c < chunks) kc[c] = __ldg(kr + c);
    }
    uint32_t vw[KT][NW];
#pragma unroll
    for (int r = 0; r < KT; ++r) {
      if (r < n && d0 < D) {
        load_words<NW>(v + key_row(p, j0 + r) * p.v_stride + d0, vw[r]);
      } else {
#pragma unroll
        for (int w = 0; w < NW; ++w) vw[r][w] = 0u;
      }
    }
    if (!__any_sync(0xffffffffu, ok)) continue;  // no valid key in this tile (warp-uniform)
    float s[G];
#pragma unroll
    for (int g = 0; g < G; ++g) s[g] = 0.f;
    if (ok) {
#pragma unroll
      for (int c = 0; c < CK; ++c) {
        if (part * CK + c >= chunks) break;
        float kf[ve];
        unpack_chunk<T>(kc[c], kf);
#pragma unroll
        for (int g = 0; g < G; ++g) {
          const float4* qv = reinterpret_cast<const float4*>(&q_s[g][(part * CK + c) * ve]);
#pragma unroll
          for (int e = 0; e < ve / 4; ++e) {
            const float4 x = qv[e];
            s[g] = fmaf(x.x, kf[4 * e], fmaf(x.y, kf[4 * e + 1], fmaf(x.z, kf[4 * e + 2], fmaf(x.w, kf[4 * e + 3], s[g]))));
          }
        }
      }
    }
#pragma unroll
    for (int g = 0; g < G; ++g) {
#pragma unroll
      for (int off = KT; off < 32; off <<= 1) s[g] += __shfl_xor_sync(0xffffffffu, s[g], off);  // the L parts
      const float sg = ok ? soft_capped(p, s[g]) : -INFINITY;
      const float m_new = fmaxf(m[g], warp_max(sg)), corr = expf(m[g] - m_new);
      const float pj = ok ? expf(sg - m_new) : 0.f;
      l[g] = l[g] * corr + warp_sum(part == 0 ? pj : 0.f);  // each key once
      m[g] = m_new;
#pragma unroll
      for (int e = 0; e < DL; ++e) acc[g][e] *= corr;
      if (part == 0) p_s[warp][g][key] = pj;  // 0 past the valid keys
    }
    __syncwarp();
#pragma unroll
    for (int r = 0; r < KT; r += 4) {  // four rows a step: one 16-byte read of each head's weights
      float vf[4][DL];
#pragma unroll
      for (int i = 0; i < 4; ++i) unpack_words<T, NW>(vw[r + i], vf[i]);
#pragma unroll
      for (int g = 0; g < G; ++g) {
        const float4 pr = *reinterpret_cast<const float4*>(&p_s[warp][g][r]);
#pragma unroll
        for (int e = 0; e < DL; ++e)
          acc[g][e] = fmaf(pr.w, vf[3][e], fmaf(pr.z, vf[2][e], fmaf(pr.y, vf[1][e], fmaf(pr.x, vf[0][e], acc[g][e]))));
      }
    }
    __syncwarp();  // the weights are read before the next tile writes them
  }
  if (lane == 0)
#pragma unroll
    for (int g = 0; g < G; ++g) w_m[warp][g] = m[g], w_l[warp][g] = l[g];
  if (d0 < D)
#pragma unroll
    for (int g = 0; g < G; ++g)
#pragma unroll
      for (int e = 0; e < DL; ++e) w_acc[warp][g][d0 + e] = acc[g][e];
  __syncthreads();
  finish_grouped_heads<T, kGroupWarps, G, DMAX, SPLIT>(gn, D, w_m, w_l, w_acc, b_m, b_l, b_acc,
                                                       at<T>(arena, p.out) + (blk.b * p.q_heads + blk.h0) * D);
}

// RLX_ATTENTION_DECODE: auto (the default), rows, grouped or mma.
enum class DecodeChoice { Auto, Rows, Grouped, Mma };
DecodeChoice decode_choice() {
  const char* e = std::getenv("RLX_ATTENTION_DECODE");
  if (!e || !*e || std::strcmp(e, "auto") == 0) return DecodeChoice::Auto;
  if (std::strcmp(e, "rows") == 0) return DecodeChoice::Rows;
  if (std::strcmp(e, "grouped") == 0) return DecodeChoice::Grouped;
  if (std::strcmp(e, "mma") == 0) return DecodeChoice::Mma;
  throw Error(std::string("RLX_ATTENTION_DECODE must be auto, rows, grouped or mma, not '") + e + "'");
}

template <class T, int DMAX, int G>
void launch_grouped(const AttentionParams& p, const LaunchContext& ctx) {
  const int per_kv = p.q_heads / p.kv_heads, groups = (per_kv + G - 1) / G;
  const int64_t blocks = int64_t(p.kv_heads) * groups;
  // A long cache is split over a cluster where the blocks would not fill the
  // SMs; RLX_ATTENTION_DECODE_SPLIT=0 or 1 decides instead (for measuring).
  const char* e = std::getenv("RLX_ATTENTION_DECODE_SPLIT");
  const bool want = e && *e ? std::strcmp(e, "0") != 0 : blocks * p.batch <= multiprocessor_count();
  const bool split = want && p.skv >= kGroupSplitKeys && clusters_available();
  if (split)
    launch(attention_decode_grouped_kernel<T, DMAX, G, kGroupSplit>,
           dim3(unsigned(blocks * kGroupSplit), unsigned(p.batch)), kGroupWarps * 32, 0, ctx, p, kGroupSplit);
  else
    launch(attention_decode_grouped_kernel<T, DMAX, G, 1>, dim3(unsigned(blocks), unsigned(p.batch)),
           kGroupWarps * 32, 0, ctx, p);
}

// The group size: the query heads a KV head has, rounded up to 2, 4 or 8.
template <class T, int DMAX>
void launch_group_size(const AttentionParams& p, const LaunchContext& ctx) {
  const int per_kv = p.q_heads / p.kv_heads;
  if (per_kv <= 2) launch_grouped<T, DMAX, 2>(p, ctx);
  else if (per_kv <= 4) launch_grouped<T, DMAX, 4>(p, ctx);
  else launch_grouped<T, DMAX, kMaxGroup>(p, ctx);
}

}  // namespace

bool attention_decode_grouped_eligible(const AttentionParams& p, const uint8_t* arena) {
  const int64_t es = int64_t(dtype_size(p.dtype)), ve = 16 / es;
  const uint64_t k0 = reinterpret_cast<uint64_t>(arena) + p.k + uint64_t(p.k_offset * es);
  const uint64_t v0 = reinterpret_cast<uint64_t>(arena) + p.v + uint64_t(p.v_offset * es);
  return p.sq == 1 && p.kv_heads >= 1 && p.q_heads >= 2 * p.kv_heads && p.q_heads % p.kv_heads == 0 &&
         p.head_dim <= 128 && p.head_dim % ve == 0 && k0 % 16 == 0 && (p.k_stride * es) % 16 == 0 &&
         v0 % 16 == 0 && (p.v_stride * es) % 16 == 0 && p.batch <= 65535;
}

DecodeKernel decode_kernel_for(const AttentionParams& p, const uint8_t* arena) {
  const DecodeChoice c = decode_choice();
  if (c == DecodeChoice::Rows || !attention_decode_grouped_eligible(p, arena)) return DecodeKernel::PerHead;
  const bool mma = attention_decode_mma_eligible(p, arena);
  if (c == DecodeChoice::Grouped) return DecodeKernel::Grouped;
  if (c == DecodeChoice::Mma) return mma ? DecodeKernel::GroupedMma : DecodeKernel::PerHead;
  if (p.batch < 2) return DecodeKernel::PerHead;
  return mma ? DecodeKernel::GroupedMma : DecodeKernel::Grouped;
}

void run_attention_decode_grouped(const AttentionParams& p, const LaunchContext& ctx) {
  dispatch_float(p.dtype, ctx.label, [&]<class T>() {
    if (p.head_dim <= 64) launch_group_size<T, 64>(p, ctx);
    else launch_group_size<T, 128>(p, ctx);
  });
}

}  // namespace rlx::cuda
