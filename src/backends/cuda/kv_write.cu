// KV-cache write: rows [batch, n_new, row] (read at a row stride and column
// offset, so the K/V slice of a fused projection is read in place) land in
// the cache [batch, max_ctx, row] at row pos[b] + i, pos read from the arena
// so a recorded graph replays with a new position. With rope_heads > 0 the
// first heads are rotated on the way (RoPE on K fused into the write), after
// a per-head RMSNorm where gamma is given (Qwen3's k norm fused too). A row
// whose position falls outside the cache is skipped, never written out of
// bounds. With slots, batch b lands in cache row slots[b] of a pool of
// per-sequence caches (a ragged batch); a slot outside the pool is skipped.
// A ring cache takes position t in row t mod max_ctx.
#include "backends/cuda/cuda_registry.h"
#include "backends/cuda/device_types.cuh"
#include "backends/cuda/dispatch.h"
#include "backends/cuda/launch.cuh"
#include "backends/cuda/rope_math.cuh"

namespace rlx::cuda {
namespace {

// The cache row of new row bi, or null when its position (or slot) is outside the cache.
template <class T>
__device__ inline T* cache_row(const KvWriteParams& p, const int32_t* pos, const int32_t* slots, T* cache,
                               int64_t bi, int64_t row_len) {
  const int64_t b = bi / p.n_new, at_row = int64_t(pos[b]) + bi % p.n_new;
  const int64_t slot = slots ? int64_t(slots[b]) : b;
  if (at_row < 0 || (!p.ring && at_row >= p.max_ctx) || slot < 0 || slot >= p.cache_batch) return nullptr;
  return cache + (slot * p.max_ctx + (p.ring ? at_row % p.max_ctx : at_row)) * row_len;
}

__device__ inline const int32_t* slots_of(const KvWriteParams& p, uint8_t* arena) {
  return p.slots == kNoBuffer ? nullptr : at<const int32_t>(arena, p.slots);
}

// A plain copy: one thread per word W of a row (4 bytes where the row, its
// offset and its stride allow, else 2).
template <class W>
__global__ void kv_write_kernel(const KvWriteParams p, uint8_t* arena) {
  pdl_entry();
  const int32_t* pos = at<const int32_t>(arena, p.pos);
  const int32_t* slots = slots_of(p, arena);
  const int64_t es = p.dtype == DType::F32 ? 4 : 2, ws = int64_t(sizeof(W));
  const int64_t words = p.row * es / ws, stride = p.rows_stride * es / ws, offset = p.rows_offset * es / ws;
  const int64_t total = p.batch * p.n_new * words;
  const W* rows = at<const W>(arena, p.rows);
  W* cache = at<W>(arena, p.cache);
  for (int64_t t = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; t < total; t += int64_t(gridDim.x) * blockDim.x) {
    const int64_t w = t % words, bi = t / words;
    if (W* dst = cache_row(p, pos, slots, cache, bi, words)) dst[w] = rows[bi * stride + offset + w];
  }
}

// With rotation: one thread per rotated pair or copied element of a row.
template <class T>
__global__ void kv_write_rope_kernel(const KvWriteParams p, uint8_t* arena) {
  pdl_entry();
  const int32_t* pos = at<const int32_t>(arena, p.pos);
  const int32_t* slots = slots_of(p, arena);
  const int half = p.n_rot / 2, per_head = half + (p.head_dim - p.n_rot);
  const int64_t rotated_items = int64_t(p.rope_heads) * per_head;
  const int64_t per_row = rotated_items + (p.row - int64_t(p.rope_heads) * p.head_dim);
  const int64_t total = p.batch * p.n_new * per_row;
  const T* rows = at<const T>(arena, p.rows);
  const T* gamma = p.gamma != kNoBuffer ? at<const T>(arena, p.gamma) : nullptr;
  T* cache = at<T>(arena, p.cache);
  for (int64_t t = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; t < total; t += int64_t(gridDim.x) * blockDim.x) {
    const int64_t e = t % per_row, bi = t / per_row;
    T* dst = cache_row(p, pos, slots, cache, bi, p.row);
    if (!dst) continue;
    const T* src = rows + bi * p.rows_stride + p.rows_offset;
    if (e >= rotated_items) {  // past the rotated heads
      const int64_t c = int64_t(p.rope_heads) * p.head_dim + (e - rotated_items);
      dst[c] = src[c];
      continue;
    }
    const int64_t h = e / per_head, j = e % per_head;
    src += h * p.head_dim;
    dst += h * p.head_dim;
    const float inv_rms = gamma ? head_inv_rms(src, p.head_dim, p.norm_eps) : 1.f;  // the head norm, per thread
    if (j >= half) {  // a copied tail dim of a rotated head
      const int d = int(p.n_rot + (j - half));
      dst[d] = from_f32<T>(head_element(src, d, gamma, inv_rms));
      continue;
    }
    const float position = float(pos[bi / p.n_new] + int32_t(bi % p.n_new));
    rope_pair(src, dst, int(j), p.n_rot, p.interleaved, p.theta, p.freqs, position, gamma, inv_rms);
  }
}

void run_kv_write(const KvWriteParams& p, const LaunchContext& ctx) {
  const int64_t rows = p.batch * p.n_new;
  if (p.rope_heads > 0) {
    const int64_t per_row = int64_t(p.rope_heads) * (p.n_rot / 2 + p.head_dim - p.n_rot) +
                            (p.row - int64_t(p.rope_heads) * p.head_dim);
    dispatch_float(p.dtype, ctx.label, [&]<class T>() {
      launch(kv_write_rope_kernel<T>, grid_for(rows * per_row, 256), 256, 0, ctx, p);
    });
    return;
  }
  const int64_t es = int64_t(dtype_size(p.dtype));
  if ((p.row * es) % 4 == 0 && (p.rows_offset * es) % 4 == 0 && (p.rows_stride * es) % 4 == 0)
    launch(kv_write_kernel<uint32_t>, grid_for(rows * (p.row * es / 4), 256), 256, 0, ctx, p);
  else
    launch(kv_write_kernel<uint16_t>, grid_for(rows * (p.row * es / 2), 256), 256, 0, ctx, p);
}

}  // namespace

void register_cuda_kv_write(CudaRegistry& r) {
  for (DType dt : kFloatDTypes) r.add<KvWriteParams>(dt, run_kv_write);
}

}  // namespace rlx::cuda
