// Fused attention: softmax(q k^T * scale + mask) v without materializing the
// score matrix.
//
// Key lengths up to kShortMaxKeys with head_dim <= 128 take the short path
// (below): K and V of a head staged once per block, one query row per warp.
//
// One query row per batch (a decode step) takes a decode kernel: one block
// per (head, batch) whose warps split the keys and are merged at the end;
// with 16-byte K rows of up to 512 bytes each lane (or pair of lanes)
// scores its own key ("decode"; caches of 256 rows or more split each
// head's keys over a cluster of 8 blocks), otherwise lanes split head_dim
// ("decode_wide"). A batch of decode rows whose query heads share KV heads
// takes a grouped kernel instead (attention_decode_grouped.h), which reads
// each K and V row once for all the query heads that share it.
//
// The general kernel serves the rest: one block per (query tile, head,
// batch); key/value tiles are staged in shared memory and folded in with an
// online softmax (running max and sum per query row), so memory is O(tile)
// for any sequence length.
//
// Every path honours a sliding window (p.window > 0, causal: a query at
// position q sees keys in (q - window, q]; otherwise two-sided, sq == skv:
// query i sees keys |i - j| < window) and a soft cap on the scaled
// scores (p.softcap > 0: s -> softcap * tanh(s / softcap)), as the CPU kernel.
// The paths that take query positions also read a ring cache (p.ring: the
// key at position j in row j mod skv); they read only the window's keys.
#include "backends/cuda/device_types.cuh"
#include "backends/cuda/cuda_registry.h"
#include "backends/cuda/dispatch.h"
#include "backends/cuda/launch.cuh"
#include "backends/cuda/kernels.h"
#include "backends/cuda/attention_common.cuh"
#include "backends/cuda/attention_decode_grouped.h"
#include "backends/cuda/rope_math.cuh"

#include <type_traits>

namespace rlx::cuda {
namespace {

constexpr int kWarps = 4;
constexpr int kRowsPerWarp = 4;
constexpr int kQueryTile = kWarps * kRowsPerWarp;

// Keys per tile, chosen so K, V and q tiles fit in 48 KiB of shared memory.
template <int DMAX>
constexpr int key_tile() { return DMAX <= 64 ? 64 : DMAX <= 128 ? 32 : 8; }

template <class T, int DMAX>
__global__ void __launch_bounds__(kWarps * 32) attention_kernel(const AttentionParams p, uint8_t* arena) {
  pdl_entry();
  constexpr int BK = key_tile<DMAX>();
  constexpr int KPL = (BK + 31) / 32;  // keys per lane
  constexpr int DPL = DMAX / 32;       // output dims per lane
  __shared__ float q_s[kQueryTile][DMAX];
  __shared__ float k_s[BK][DMAX + 1];  // +1: lanes read different rows, no bank conflicts
  __shared__ float v_s[BK][DMAX];
  __shared__ float p_s[kWarps][BK];

  const int D = p.head_dim;
  const int h = blockIdx.y;
  const int64_t b = blockIdx.z;
  const int64_t q0 = int64_t(blockIdx.x) * kQueryTile;
  const int kvh = h / (p.q_heads / p.kv_heads);
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  const T* q = at<const T>(arena, p.q);
  const T* k = at<const T>(arena, p.k);
  const T* v = at<const T>(arena, p.v);
  const int32_t* mask = padding_keep(p, arena, b);
  const int64_t kv0 = kv_row0(p, arena, b);
  // Query positions from the arena (a KV cache): keys at or past pos[b] + sq
  // are not valid, and causal lets query i see keys j <= pos[b] + i.
  int64_t kv_len = p.skv, causal_shift = p.skv - p.sq;  // query i sees keys j <= i + shift
  if (p.pos != kNoBuffer) {
    const int64_t start = at<const int32_t>(arena, p.pos)[b];
    kv_len = cached_keys(p, start);
    causal_shift = start;
  }

  for (int idx = threadIdx.x; idx < kQueryTile * D; idx += blockDim.x) {
    int r = idx / D, d = idx % D;
    int64_t i = q0 + r;
    q_s[r][d] = i < p.sq ? to_f32(q[(b * p.sq + i) * p.q_stride + p.q_offset + int64_t(h) * D + d]) * p.scale : 0.f;
  }

  float m[kRowsPerWarp], l[kRowsPerWarp], acc[kRowsPerWarp][DPL];
#pragma unroll
  for (int r = 0; r < kRowsPerWarp; ++r) {
    m[r] = -INFINITY;
    l[r] = 0.f;
#pragma unroll
    for (int t = 0; t < DPL; ++t) acc[r][t] = 0.f;
  }

  int64_t kv_end = kv_len, kv_begin = 0;
  if (p.mask_kind == MaskKind::Causal) {
    int64_t last = min(p.sq - 1, q0 + kQueryTile - 1);
    kv_end = min(kv_end, last + causal_shift + 1);
    // Keys before the tile's first query's window are seen by none of its rows.
    if (p.window > 0) kv_begin = max(int64_t(0), q0 + causal_shift - p.window + 1);
  }

  for (int64_t k0 = kv_begin; k0 < kv_end; k0 += BK) {
    __syncthreads();
    for (int idx = threadIdx.x; idx < BK * D; idx += blockDim.x) {
      int kk = idx / D, d = idx % D;
      int64_t j = k0 + kk;
      float kv = 0.f, vv = 0.f;
      if (j < kv_len) {  // rows past the valid length are never read
        const int64_t row = kv0 + key_row(p, j);
        kv = to_f32(k[row * p.k_stride + p.k_offset + int64_t(kvh) * D + d]);
        vv = to_f32(v[row * p.v_stride + p.v_offset + int64_t(kvh) * D + d]);
      }
      k_s[kk][d] = kv;
      v_s[kk][d] = vv;
    }
    __syncthreads();

#pragma unroll
    for (int r = 0; r < kRowsPerWarp; ++r) {
      const int row = warp * kRowsPerWarp + r;
      const int64_t i = q0 + row;
      if (i >= p.sq) continue;  // warp-uniform
      float s[KPL];
      float tile_max = -INFINITY;
#pragma unroll
      for (int t = 0; t < KPL; ++t) {
        int kk = lane + 32 * t;
        int64_t j = k0 + kk;
        bool valid = kk < BK && j < kv_len;
        if (valid && mask) valid = mask[j] != 0;
        if (valid && p.mask_kind == MaskKind::Causal) valid = j <= i + causal_shift;
        if (valid) valid = in_window(p, j, i + causal_shift);  // two-sided: causal_shift is 0
        float dot = -INFINITY;
        if (valid) {
          dot = 0.f;
          for (int d = 0; d < D; ++d) dot += q_s[row][d] * k_s[kk][d];
          dot = soft_capped(p, dot);
        }
        s[t] = dot;
        tile_max = fmaxf(tile_max, dot);
      }
      tile_max = warp_max(tile_max);
      const float m_new = fmaxf(m[r], tile_max);
      if (m_new == -INFINITY) continue;  // every key so far masked; warp-uniform
      const float corr = expf(m[r] - m_new);
      float psum = 0.f;
#pragma unroll
      for (int t = 0; t < KPL; ++t) {
        int kk = lane + 32 * t;
        float pv = s[t] == -INFINITY ? 0.f : expf(s[t] - m_new);
        psum += pv;
        if (kk < BK) p_s[warp][kk] = pv;
      }
      psum = warp_sum(psum);
      l[r] = l[r] * corr + psum;
      m[r] = m_new;
      __syncwarp();
#pragma unroll
      for (int t = 0; t < DPL; ++t) {
        int d = lane + 32 * t;
        float a = acc[r][t] * corr;
        if (d < D)
          for (int kk = 0; kk < BK; ++kk) a += p_s[warp][kk] * v_s[kk][d];
        acc[r][t] = a;
      }
      __syncwarp();
    }
  }

  T* out = at<T>(arena, p.out);
#pragma unroll
  for (int r = 0; r < kRowsPerWarp; ++r) {
    const int64_t i = q0 + warp * kRowsPerWarp + r;
    if (i >= p.sq) continue;
    const float inv = l[r] > 0.f ? 1.f / l[r] : 0.f;  // fully masked row -> zeros
#pragma unroll
    for (int t = 0; t < DPL; ++t) {
      int d = lane + 32 * t;
      if (d < D) out[((b * p.sq + i) * p.q_heads + h) * D + d] = from_f32<T>(acc[r][t] * inv);
    }
  }
}


// ---- short-sequence path ----
// One block of kShortWarps warps per (kShortWarps query rows, head, batch):
// the block stages K and V of its (batch, kv head) once in shared memory
// (16-byte chunks, every load in flight together), then each warp owns one
// query row: lanes split the keys for q.k, the softmax reduces with warp
// shuffles, and lanes split head_dim for p.V. Many small blocks keep enough
// warps in flight to hide the memory and shuffle latencies.
constexpr int kShortWarps = 8;
constexpr int kShortThreads = kShortWarps * 32;
constexpr int64_t kShortMaxKeys = 1024;    // the mask staging below holds 4 keys per thread
constexpr size_t kShortMaxSmem = 160 * 1024;
constexpr int kKeyGroups = 4;              // keys per lane per pass over K
constexpr int kStageBatch = 12;            // chunks each thread loads before storing any

// Shared memory of one block. Rows are kept in 16-byte chunks with an odd
// pitch, so lanes reading the same chunk of different rows hit distinct banks.
struct ShortLayout {
  int ve;      // elements per chunk
  int chunks;  // chunks holding head_dim (the rest of the last one is zero)
  int ld;      // row pitch in chunks
  int skv4;    // score slots per warp (skv rounded up to 4 for float4 reads)
  size_t k, v, q, s, keep, total;  // byte offsets
};
__host__ __device__ inline ShortLayout short_layout(int64_t skv, int D, int esize) {
  ShortLayout L;
  L.ve = 16 / esize;
  L.chunks = (D + L.ve - 1) / L.ve;
  L.ld = L.chunks | 1;
  L.skv4 = int((skv + 3) / 4 * 4);
  const size_t row = size_t(L.ld) * 16;
  L.k = 0;
  L.v = L.k + size_t(skv) * row;
  L.q = L.v + size_t(skv) * row;
  L.s = L.q + size_t(kShortWarps) * row;
  L.keep = L.s + size_t(kShortWarps) * size_t(L.skv4) * 4;
  L.total = L.keep + size_t(skv) * 4;
  return L;
}

// One row source: element (r, c) of it is base[(row0 + r) * stride + col0 + c].
template <class T>
struct RowSource {
  const T* base;
  int64_t row0, stride, col0;
  bool vec;  // every row's head_dim elements start 16-byte aligned
};

template <class T>
__device__ __forceinline__ RowSource<T> row_source(const uint8_t* arena, uint64_t offset, int64_t row0,
                                                   int64_t stride, int64_t col0, int D) {
  constexpr int ve = kChunkElems<T>;
  const bool vec = (reinterpret_cast<uintptr_t>(arena) + offset) % 16 == 0 && stride % ve == 0 &&
                   col0 % ve == 0 && D % ve == 0;
  return {reinterpret_cast<const T*>(arena + offset), row0, stride, col0, vec};
}

// Chunk c of row r; past head_dim it is zero.
template <class T>
__device__ __forceinline__ uint4 load_chunk(const RowSource<T>& src, int r, int c, int D) {
  constexpr int ve = kChunkElems<T>;
  const T* row = src.base + (src.row0 + r) * src.stride + src.col0;
  if (src.vec) return __ldg(reinterpret_cast<const uint4*>(row) + c);
  T e[ve];
#pragma unroll
  for (int u = 0; u < ve; ++u) e[u] = c * ve + u < D ? row[c * ve + u] : from_f32<T>(0.f);
  uint4 out;
  memcpy(&out, e, 16);
  return out;
}

// N contiguous elements of T (N * sizeof(T) a power of two, naturally aligned) as f32.
template <class T, int N>
__device__ __forceinline__ void load_elems(const T* src, float (&f)[N]) {
  constexpr int bytes = N * int(sizeof(T));
  if constexpr (bytes == 16) {
    unpack_chunk<T>(*reinterpret_cast<const uint4*>(src), f);
  } else {
    using W = std::conditional_t<bytes == 8, uint2, std::conditional_t<bytes == 4, uint32_t, uint16_t>>;
    const W w = *reinterpret_cast<const W*>(src);
    T e[N];
    memcpy(e, &w, bytes);
#pragma unroll
    for (int u = 0; u < N; ++u) f[u] = to_f32(e[u]);
  }
}

template <class T, int DMAX>
__global__ void __launch_bounds__(kShortThreads, 2) attention_short_kernel(const AttentionParams p, uint8_t* arena) {
  pdl_entry();
  extern __shared__ __align__(16) uint8_t smem[];
  constexpr int ve = kChunkElems<T>;
  const int D = p.head_dim;
  const ShortLayout L = short_layout(p.skv, D, int(sizeof(T)));
  const int C = L.chunks;
  const int h = blockIdx.y;
  const int64_t b = blockIdx.z;
  const int64_t q0 = int64_t(blockIdx.x) * kShortWarps;
  const int kvh = h / (p.q_heads / p.kv_heads);
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  const int64_t shift = p.skv - p.sq;  // causal: query i sees keys j <= i + shift
  const int q_rows = int(min(int64_t(kShortWarps), p.sq - q0));
  // Keys any row of this block can see: only these are staged.
  int kv_rows = int(p.skv);
  if (p.mask_kind == MaskKind::Causal) kv_rows = int(max(int64_t(0), min(p.skv, q0 + q_rows + shift)));

  uint4* chunks = reinterpret_cast<uint4*>(smem);
  int32_t* keep = reinterpret_cast<int32_t*>(smem + L.keep);
  const int32_t* mask = padding_keep(p, arena, b);
  const bool padding = mask != nullptr;

  // Staging: the mask and every chunk a thread stores are loaded first.
  int32_t mask_val[kShortMaxKeys / kShortThreads];
  if (padding) {
#pragma unroll
    for (int u = 0; u < int(kShortMaxKeys / kShortThreads); ++u) {
      const int j = threadIdx.x + u * kShortThreads;
      mask_val[u] = j < kv_rows ? __ldg(mask + j) : 0;
    }
  }
  const RowSource<T> src_k = row_source<T>(arena, p.k, b * p.skv, p.k_stride, p.k_offset + int64_t(kvh) * D, D);
  const RowSource<T> src_v = row_source<T>(arena, p.v, b * p.skv, p.v_stride, p.v_offset + int64_t(kvh) * D, D);
  const RowSource<T> src_q = row_source<T>(arena, p.q, b * p.sq + q0, p.q_stride, p.q_offset + int64_t(h) * D, D);
  const int per_kv = kv_rows * C, total = 2 * per_kv + q_rows * C;
  for (int base = threadIdx.x; base < total; base += kShortThreads * kStageBatch) {
    uint4 val[kStageBatch];
    int dst[kStageBatch];
#pragma unroll
    for (int u = 0; u < kStageBatch; ++u) {
      int idx = base + u * kShortThreads;
      dst[u] = -1;
      if (idx < total) {
        const int which = idx < per_kv ? 0 : idx < 2 * per_kv ? 1 : 2;  // K, V, q
        idx -= which * per_kv;
        const int r = idx / C, c = idx - r * C;
        // Selected by value (not an indexed array) so the sources stay in registers.
        const RowSource<T> src = which == 0 ? src_k : which == 1 ? src_v : src_q;
        val[u] = load_chunk(src, r, c, D);
        dst[u] = int((which == 0 ? L.k : which == 1 ? L.v : L.q) / 16) + r * L.ld + c;
      }
    }
#pragma unroll
    for (int u = 0; u < kStageBatch; ++u)
      if (dst[u] >= 0) chunks[dst[u]] = val[u];
  }
  if (padding) {
#pragma unroll
    for (int u = 0; u < int(kShortMaxKeys / kShortThreads); ++u) {
      const int j = threadIdx.x + u * kShortThreads;
      if (j < kv_rows) keep[j] = mask_val[u];
    }
  }
  __syncthreads();
  if (warp >= q_rows) return;  // no block-wide barrier follows

  const int64_t i = q0 + warp;
  int kv_lim = int(p.skv);
  if (p.mask_kind == MaskKind::Causal) kv_lim = int(max(int64_t(0), min(p.skv, i + shift + 1)));
  const uint4* k_s = chunks + L.k / 16;
  const uint4* q_row = chunks + L.q / 16 + warp * L.ld;
  float* s_w = reinterpret_cast<float*>(smem + L.s) + warp * L.skv4;
  constexpr float kLog2e = 1.4426950408889634f;  // scores in log2 units: exp2 below

  // Scores: lane owns keys lane, lane + 32, ...; kKeyGroups of them per pass.
  float mx = -INFINITY;
  for (int j0 = 0; j0 < kv_lim; j0 += 32 * kKeyGroups) {
    float acc[kKeyGroups];
    int row[kKeyGroups];
#pragma unroll
    for (int g = 0; g < kKeyGroups; ++g) {
      acc[g] = 0.f;
      row[g] = min(j0 + 32 * g + lane, kv_lim - 1);  // past the end: a valid row, result dropped
    }
    for (int c = 0; c < C; ++c) {
      float qf[ve];
      unpack_chunk<T>(q_row[c], qf);
#pragma unroll
      for (int g = 0; g < kKeyGroups; ++g) {
        float kf[ve];
        unpack_chunk<T>(k_s[row[g] * L.ld + c], kf);
#pragma unroll
        for (int e = 0; e < ve; ++e) acc[g] = fmaf(qf[e], kf[e], acc[g]);
      }
    }
#pragma unroll
    for (int g = 0; g < kKeyGroups; ++g) {
      const int j = j0 + 32 * g + lane;
      if (j < kv_lim) {
        const bool kept = (!padding || keep[j] != 0) && in_window(p, j, i + shift);
        const float sv = kept ? soft_capped(p, acc[g] * p.scale) * kLog2e : -INFINITY;
        s_w[j] = sv;
        mx = fmaxf(mx, sv);
      }
    }
  }
  mx = warp_max(mx);
  float sum = 0.f;
  for (int j = lane; j < kv_lim; j += 32) {
    const float sv = s_w[j];
    const float e = sv == -INFINITY ? 0.f : exp2f(sv - mx);  // all masked: every e is 0
    s_w[j] = e;
    sum += e;
  }
  sum = warp_sum(sum);
  __syncwarp();

  // p.V: lane owns CH consecutive dims; two accumulators shorten the FMA chains.
  constexpr int CH = DMAX / 32;
  const int d0 = lane * CH;
  float o[CH], o2[CH];
#pragma unroll
  for (int e = 0; e < CH; ++e) o[e] = o2[e] = 0.f;
  if (d0 < D) {
    const T* v_col = reinterpret_cast<const T*>(smem + L.v) + d0;
    const int pitch = L.ld * ve;
    int j = 0;
    for (; j + 4 <= kv_lim; j += 4) {
      const float4 pj = *reinterpret_cast<const float4*>(s_w + j);
      float v0[CH], v1[CH], v2[CH], v3[CH];
      load_elems<T, CH>(v_col + (j + 0) * pitch, v0);
      load_elems<T, CH>(v_col + (j + 1) * pitch, v1);
      load_elems<T, CH>(v_col + (j + 2) * pitch, v2);
      load_elems<T, CH>(v_col + (j + 3) * pitch, v3);
#pragma unroll
      for (int e = 0; e < CH; ++e) {
        o[e] = fmaf(pj.x, v0[e], o[e]);
        o2[e] = fmaf(pj.y, v1[e], o2[e]);
        o[e] = fmaf(pj.z, v2[e], o[e]);
        o2[e] = fmaf(pj.w, v3[e], o2[e]);
      }
    }
    for (; j < kv_lim; ++j) {
      float vj[CH];
      load_elems<T, CH>(v_col + j * pitch, vj);
#pragma unroll
      for (int e = 0; e < CH; ++e) o[e] = fmaf(s_w[j], vj[e], o[e]);
    }
    const float inv = sum > 0.f ? 1.f / sum : 0.f;  // fully masked row -> zeros
    T* out = at<T>(arena, p.out) + ((b * p.sq + i) * p.q_heads + h) * D;
#pragma unroll
    for (int e = 0; e < CH; ++e)
      if (d0 + e < D) out[d0 + e] = from_f32<T>((o[e] + o2[e]) * inv);
  }
}

// ---- one query row: the decode step ----
// One block per (head, batch); its warps take groups of kDecodeKeys keys in
// turn (all their K and V loads in flight together), lanes split head_dim,
// and each warp keeps an online softmax of its own keys. The warps' partial
// results are merged through shared memory at the end. Work scales with the
// valid keys only (pos[b] + 1 under a KV cache), not the cache's capacity.
constexpr int kDecodeWarps = 16;
constexpr int kDecodeKeys = 4;

template <class T, int DMAX>
__global__ void __launch_bounds__(kDecodeWarps * 32) attention_decode_kernel(const AttentionParams p, uint8_t* arena) {
  pdl_entry();
  constexpr int DPL = DMAX / 32;  // dims per lane
  __shared__ float w_m[kDecodeWarps], w_l[kDecodeWarps];
  __shared__ float w_acc[kDecodeWarps][DMAX];
  const int D = p.head_dim;
  const int h = blockIdx.x;
  const int64_t b = blockIdx.y;
  const int kvh = h / (p.q_heads / p.kv_heads);
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  const T* q = at<const T>(arena, p.q) + b * p.q_stride + p.q_offset + int64_t(h) * D;  // sq == 1
  const T* k = at<const T>(arena, p.k) + kv_row0(p, arena, b) * p.k_stride + p.k_offset + int64_t(kvh) * D;
  const T* v = at<const T>(arena, p.v) + kv_row0(p, arena, b) * p.v_stride + p.v_offset + int64_t(kvh) * D;
  const int32_t* mask = padding_keep(p, arena, b);
  const int64_t kv_end = decode_key_end(p, arena, b), kv_begin = decode_key_begin(p, arena, b);

  float qv[DPL], acc[DPL];
#pragma unroll
  for (int t = 0; t < DPL; ++t) {
    const int d = lane + 32 * t;
    qv[t] = d < D ? decode_query(p, arena, q, d, b) : 0.f;
    acc[t] = 0.f;
  }
  float m = -INFINITY, l = 0.f;
  for (int64_t j0 = kv_begin + int64_t(warp) * kDecodeKeys; j0 < kv_end; j0 += int64_t(kDecodeWarps) * kDecodeKeys) {
    float kf[kDecodeKeys][DPL], vf[kDecodeKeys][DPL];
    bool ok[kDecodeKeys];
#pragma unroll
    for (int g = 0; g < kDecodeKeys; ++g) {
      const int64_t j = j0 + g, row = key_row(p, j);
      ok[g] = j < kv_end && (!mask || mask[j] != 0);  // warp-uniform
#pragma unroll
      for (int t = 0; t < DPL; ++t) {
        const int d = lane + 32 * t;
        const bool in = ok[g] && d < D;
        kf[g][t] = in ? to_f32(k[row * p.k_stride + d]) : 0.f;
        vf[g][t] = in ? to_f32(v[row * p.v_stride + d]) : 0.f;
      }
    }
#pragma unroll
    for (int g = 0; g < kDecodeKeys; ++g) {
      if (!ok[g]) continue;
      float dot = 0.f;
#pragma unroll
      for (int t = 0; t < DPL; ++t) dot = fmaf(qv[t], kf[g][t], dot);
      dot = soft_capped(p, warp_sum(dot));
      const float m_new = fmaxf(m, dot);
      const float corr = expf(m - m_new), pj = expf(dot - m_new);
      l = l * corr + pj;
#pragma unroll
      for (int t = 0; t < DPL; ++t) acc[t] = fmaf(pj, vf[g][t], acc[t] * corr);
      m = m_new;
    }
  }
  if (lane == 0) {
    w_m[warp] = m;
    w_l[warp] = l;
  }
#pragma unroll
  for (int t = 0; t < DPL; ++t) w_acc[warp][lane + 32 * t] = acc[t];
  __syncthreads();
  for (int d = threadIdx.x; d < D; d += blockDim.x) {
    float mx, sum, o;
    merge_parts(kDecodeWarps, [&](int w) { return SoftmaxPart{w_m[w], w_l[w], w_acc[w][d]}; }, mx, sum, o);
    at<T>(arena, p.out)[(b * p.q_heads + h) * D + d] = from_f32<T>(sum > 0.f ? o / sum : 0.f);  // all masked -> 0
  }
}

bool use_decode_path(const AttentionParams& p) { return p.sq == 1; }

// ---- one query row, a key per lane ----
// Each warp takes 32 keys at a time, one per lane: the lane reads its key's
// row in 16-byte loads and scores it against q in shared memory; the 32 value
// rows come in 16-byte chunks too, a lane holding one chunk column of a few
// rows, and the warp's online softmax folds them in. Per 32 keys that is one
// round trip for K and V together and two warp reductions, against one
// reduction per key when lanes split head_dim.
//
// Long caches split each head's keys over a cluster of kSplitBlocks blocks
// (SPLIT > 1): each block folds its share, then the first block of the
// cluster merges the others' partial results straight from their shared
// memory, so the split costs no second kernel and no scratch buffer, and a
// layer's 32 heads keep 256 blocks busy instead of 32.
constexpr int kRowWarps = 16;
constexpr int kSplitBlocks = 8, kSplitWarps = 4;
constexpr int64_t kSplitMinKeys = 256;  // a cache this long is split

// Rows of 16 chunks or more (head_dim 128 in f16, 64 in f32; 256 and 128
// held by two lanes a key) hold twice the registers: half the warps, so none
// spill.
template <class T, int DMAX, int SPLIT>
constexpr int decode_warps() {
  return SPLIT > 1 ? kSplitWarps : DMAX / kChunkElems<T> > 8 ? kRowWarps / 2 : kRowWarps;
}

template <class T, int DMAX, int SPLIT>
__global__ void __launch_bounds__(decode_warps<T, DMAX, SPLIT>() * 32)
    attention_decode_rows_kernel(const AttentionParams p, uint8_t* arena) {
  pdl_entry();
  // C chunks of 16 bytes span a row at DMAX. A key row of more than 16
  // chunks (head_dim 256 in f16) is held by L lanes, CK chunks each, so a
  // tile has KT = 32 / L keys. A value load takes R rows of the tile at
  // once, lane holding chunk v_chunk of row v_row (+ R per load): NV loads.
  constexpr int ve = kChunkElems<T>, C = DMAX / ve, L = C > 16 ? C / 16 : 1, CK = C / L, KT = 32 / L;
  constexpr int R = 32 / C, NV = KT / R, W = decode_warps<T, DMAX, SPLIT>();
  static_assert(C <= 32 && 32 % C == 0 && C % L == 0, "a row is at most one 16-byte chunk per lane");
  __shared__ float q_s[DMAX];
  __shared__ float w_m[W], w_l[W];
  __shared__ float w_acc[W][DMAX];
  __shared__ float b_m, b_l, b_acc[DMAX];  // this block's share, for the cluster merge
  const int D = p.head_dim, chunks = D / ve;
  const int h = blockIdx.x / SPLIT, rank = blockIdx.x % SPLIT;
  const int64_t b = blockIdx.y;
  const int kvh = h / (p.q_heads / p.kv_heads);
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  const int key = lane % KT, part = lane / KT;  // this lane's key of the tile, and its part of the row
  const int v_chunk = lane % C, v_row = lane / C;
  const T* q = at<const T>(arena, p.q) + b * p.q_stride + p.q_offset + int64_t(h) * D;  // sq == 1
  const T* k = at<const T>(arena, p.k) + kv_row0(p, arena, b) * p.k_stride + p.k_offset + int64_t(kvh) * D;
  const T* v = at<const T>(arena, p.v) + kv_row0(p, arena, b) * p.v_stride + p.v_offset + int64_t(kvh) * D;
  const int32_t* mask = padding_keep(p, arena, b);
  const int64_t kv_end = decode_key_end(p, arena, b), kv_begin = decode_key_begin(p, arena, b);
  for (int d = threadIdx.x; d < D; d += blockDim.x) q_s[d] = decode_query(p, arena, q, d, b);
  __syncthreads();

  float m = -INFINITY, l = 0.f, acc[ve];  // acc: chunk v_chunk, summed over this lane's rows
#pragma unroll
  for (int e = 0; e < ve; ++e) acc[e] = 0.f;
  // This block's keys: [lo, hi) of [kv_begin, kv_end), whole tiles of 32 except at the end.
  const int64_t share = ((max(int64_t(0), kv_end - kv_begin) + SPLIT - 1) / SPLIT + 31) / 32 * 32;
  const int64_t lo = kv_begin + rank * share, hi = min(kv_end, lo + share);
  for (int64_t j0 = lo + int64_t(warp) * KT; j0 < hi; j0 += int64_t(W) * KT) {
    const int64_t j = j0 + key;
    const bool ok = j < hi && (!mask || mask[j] != 0);  // the same for the L lanes of a key
    // Rows past the valid keys are still inside the buffer (j < skv) unless
    // past hi's tile: stop there. Masked rows weigh 0.
    const int n = int(min(int64_t(KT), hi - j0));
    // The key rows and the tile's value rows go out together, all in 16-byte
    // loads into registers of their own: one round trip for the whole tile.
    // (Scalar value loads converted as they arrived let the compiler reuse
    // their registers, which serialized them into 16 round trips a tile.)
    uint4 kc[CK];
    if (ok) {
      const uint4* kr = reinterpret_cast<const uint4*>(k + key_row(p, j) * p.k_stride) + part * CK;
#pragma unroll
      for (int c = 0; c < CK; ++c)
        if (part * CK + c < chunks) kc[c] = __ldg(kr + c);
    }
    uint4 vc[NV];
#pragma unroll
    for (int i = 0; i < NV; ++i) {
      const int r = i * R + v_row;
      vc[i] = r < n && v_chunk < chunks
                  ? __ldg(reinterpret_cast<const uint4*>(v + key_row(p, j0 + r) * p.v_stride) + v_chunk)
                  : make_uint4(0, 0, 0, 0);
    }
    float dot = 0.f;
    if (ok) {
#pragma unroll
      for (int c = 0; c < CK; ++c) {
        if (part * CK + c >= chunks) break;
        float kf[ve];
        unpack_chunk<T>(kc[c], kf);
#pragma unroll
        for (int e = 0; e < ve; ++e) dot = fmaf(q_s[(part * CK + c) * ve + e], kf[e], dot);
      }
    }
#pragma unroll
    for (int off = KT; off < 32; off <<= 1) dot += __shfl_xor_sync(0xffffffffu, dot, off);  // the L parts
    const float s = ok ? soft_capped(p, dot) : -INFINITY;
    const float tile_max = warp_max(s);
    if (tile_max == -INFINITY) continue;  // no valid key in this tile (warp-uniform)
    const float m_new = fmaxf(m, tile_max), corr = expf(m - m_new);
    const float pj = ok ? expf(s - m_new) : 0.f;
    l = l * corr + warp_sum(part == 0 ? pj : 0.f);  // each key once
    m = m_new;
#pragma unroll
    for (int e = 0; e < ve; ++e) acc[e] *= corr;
#pragma unroll
    for (int i = 0; i < NV; ++i) {
      // Key r's weight, from lane r (its part 0); 0 past n: pj is 0 there.
      const float pr = __shfl_sync(0xffffffffu, pj, i * R + v_row);
      float vf[ve];
      unpack_chunk<T>(vc[i], vf);
#pragma unroll
      for (int e = 0; e < ve; ++e) acc[e] = fmaf(pr, vf[e], acc[e]);
    }
  }
  // Lanes of one chunk hold sums over different rows: add them up.
#pragma unroll
  for (int off = C; off < 32; off <<= 1)
#pragma unroll
    for (int e = 0; e < ve; ++e) acc[e] += __shfl_xor_sync(0xffffffffu, acc[e], off);
  if (lane == 0) {
    w_m[warp] = m;
    w_l[warp] = l;
  }
  if (v_row == 0)
#pragma unroll
    for (int e = 0; e < ve; ++e) w_acc[warp][v_chunk * ve + e] = acc[e];
  __syncthreads();
  T* out = at<T>(arena, p.out) + (b * p.q_heads + h) * D;
  for (int d = threadIdx.x; d < D; d += blockDim.x) {
    float mx, sum, o;
    merge_parts(W, [&](int w) { return SoftmaxPart{w_m[w], w_l[w], w_acc[w][d]}; }, mx, sum, o);
    if constexpr (SPLIT == 1) {
      out[d] = from_f32<T>(sum > 0.f ? o / sum : 0.f);  // all masked -> 0
    } else {
      b_acc[d] = o;
      if (d == 0) {
        b_m = mx;
        b_l = sum;
      }
    }
  }
  if constexpr (SPLIT > 1)
    cluster_merge<SPLIT>(
        D, &b_m, &b_l, b_acc, [](int) { return 0; }, [](int i) { return i; },
        [&](int i, float v) { out[i] = from_f32<T>(v); });
}

// K and V rows of whole 16-byte chunks, 16-byte aligned, at most 32 of them
// (a lane, or two lanes past 16 chunks, hold a key's row in registers):
// head_dim <= 256 in f16/bf16, 128 in f32.
bool use_decode_rows(const AttentionParams& p, const uint8_t* arena) {
  const int64_t es = int64_t(dtype_size(p.dtype)), ve = 16 / es;
  const uint64_t k0 = reinterpret_cast<uint64_t>(arena) + p.k + uint64_t(p.k_offset * es);
  const uint64_t v0 = reinterpret_cast<uint64_t>(arena) + p.v + uint64_t(p.v_offset * es);
  return p.sq == 1 && p.head_dim * es <= 512 && p.head_dim % ve == 0 && k0 % 16 == 0 &&
         (p.k_stride * es) % 16 == 0 && v0 % 16 == 0 && (p.v_stride * es) % 16 == 0;
}

// The rows kernel for a row of head_dim: 8, 16 or 32 chunks of 16 bytes.
template <class T, int SPLIT>
void launch_decode_rows(const AttentionParams& p, const LaunchContext& ctx, dim3 grid) {
  constexpr int ve = kChunkElems<T>;
  const int c = int(p.head_dim) / ve;
  const unsigned cluster = SPLIT > 1 ? unsigned(SPLIT) : 1u;
  if (c > 16)
    return launch(attention_decode_rows_kernel<T, 32 * ve, SPLIT>, grid, decode_warps<T, 32 * ve, SPLIT>() * 32, 0,
                  ctx, p, cluster);
  if constexpr (ve == 8)  // 8 chunks are a row of 64 in f16
    if (c <= 8)
      return launch(attention_decode_rows_kernel<T, 64, SPLIT>, grid, decode_warps<T, 64, SPLIT>() * 32, 0, ctx, p,
                    cluster);
  launch(attention_decode_rows_kernel<T, 16 * ve, SPLIT>, grid, decode_warps<T, 16 * ve, SPLIT>() * 32, 0, ctx, p,
         cluster);
}

template <class T>
void launch_decode(const AttentionParams& p, const LaunchContext& ctx) {
  switch (decode_kernel_for(p, ctx.arena)) {
    case DecodeKernel::Grouped: return run_attention_decode_grouped(p, ctx);
    case DecodeKernel::GroupedMma: return run_attention_decode_mma(p, ctx);
    case DecodeKernel::PerHead: break;
  }
  const dim3 grid(unsigned(p.q_heads), unsigned(p.batch));
  if (use_decode_rows(p, ctx.arena)) {
    // RLX_ATTENTION_DECODE_SPLIT=0 keeps every cache in one block a head (for measuring).
    const char* split = std::getenv("RLX_ATTENTION_DECODE_SPLIT");
    if (p.skv >= kSplitMinKeys && clusters_available() && !(split && std::strcmp(split, "0") == 0))
      return launch_decode_rows<T, kSplitBlocks>(p, ctx, dim3(unsigned(p.q_heads * kSplitBlocks), unsigned(p.batch)));
    launch_decode_rows<T, 1>(p, ctx, grid);
  } else if (p.head_dim <= 64) {
    launch(attention_decode_kernel<T, 64>, grid, kDecodeWarps * 32, 0, ctx, p);
  } else if (p.head_dim <= 128) {
    launch(attention_decode_kernel<T, 128>, grid, kDecodeWarps * 32, 0, ctx, p);
  } else {
    launch(attention_decode_kernel<T, 256>, grid, kDecodeWarps * 32, 0, ctx, p);
  }
}

bool use_short_path(const AttentionParams& p) {
  const int esize = int(dtype_size(p.dtype));
  // Query positions (a KV cache) take the general kernel, which reads them.
  return p.pos == kNoBuffer && p.skv >= 1 && p.skv <= kShortMaxKeys && p.head_dim <= 128 &&
         short_layout(p.skv, p.head_dim, esize).total <= kShortMaxSmem;
}

template <class T>
void launch_short(const AttentionParams& p, const LaunchContext& ctx) {
  dim3 grid(unsigned((p.sq + kShortWarps - 1) / kShortWarps), unsigned(p.q_heads), unsigned(p.batch));
  const size_t smem = short_layout(p.skv, p.head_dim, int(sizeof(T))).total;
  if (p.head_dim <= 32)
    launch(attention_short_kernel<T, 32>, grid, kShortThreads, smem, ctx, p);
  else if (p.head_dim <= 64)
    launch(attention_short_kernel<T, 64>, grid, kShortThreads, smem, ctx, p);
  else
    launch(attention_short_kernel<T, 128>, grid, kShortThreads, smem, ctx, p);
}

}  // namespace

void prepare_attention_kernels() {
  auto allow = [](auto kernel) {
    check(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, int(kShortMaxSmem)),
          "attention shared memory limit");
  };
  allow(attention_short_kernel<float, 32>);
  allow(attention_short_kernel<float, 64>);
  allow(attention_short_kernel<float, 128>);
  allow(attention_short_kernel<__half, 32>);
  allow(attention_short_kernel<__half, 64>);
  allow(attention_short_kernel<__half, 128>);
  allow(attention_short_kernel<__nv_bfloat16, 32>);
  allow(attention_short_kernel<__nv_bfloat16, 64>);
  allow(attention_short_kernel<__nv_bfloat16, 128>);
}

const char* attention_variant(const AttentionParams& p) {
  // Arena bases are 256-byte aligned (cudaMalloc): the offsets decide.
  if (use_decode_path(p)) {
    switch (decode_kernel_for(p, nullptr)) {
      case DecodeKernel::Grouped: return "decode_grouped";
      case DecodeKernel::GroupedMma: return "decode_mma";
      case DecodeKernel::PerHead: break;
    }
    return use_decode_rows(p, nullptr) ? "decode" : "decode_wide";
  }
  return use_short_path(p) ? "short" : "general";
}

void run_attention(const AttentionParams& p, const LaunchContext& ctx) {
  RLX_CHECK(p.head_dim >= 1 && p.head_dim <= 256,
            std::string("attention ") + ctx.label + ": head_dim " + std::to_string(p.head_dim) +
                " is outside 1..256");
  RLX_CHECK(p.kv_heads >= 1 && p.q_heads % p.kv_heads == 0,
            std::string("attention ") + ctx.label + ": q_heads must be a multiple of kv_heads");
  RLX_CHECK(p.q_rope_n_rot == 0 || (use_decode_path(p) && p.pos != kNoBuffer),
            std::string("attention ") + ctx.label + ": q is rotated only in decode steps (one query row)");
  dim3 grid(unsigned((p.sq + kQueryTile - 1) / kQueryTile), unsigned(p.q_heads), unsigned(p.batch));
  dispatch_float(p.dtype, ctx.label, [&]<class T>() {
    if (use_decode_path(p)) return launch_decode<T>(p, ctx);
    if (use_short_path(p)) return launch_short<T>(p, ctx);
    if (p.head_dim <= 64)
      launch(attention_kernel<T, 64>, grid, kWarps * 32, 0, ctx, p);
    else if (p.head_dim <= 128)
      launch(attention_kernel<T, 128>, grid, kWarps * 32, 0, ctx, p);
    else
      launch(attention_kernel<T, 256>, grid, kWarps * 32, 0, ctx, p);
  });
}

void register_cuda_attention(CudaRegistry& r) {
  for (DType dt : kFloatDTypes) r.add<AttentionParams>(dt, run_attention);
}

}  // namespace rlx::cuda
