// KV-cache write: rows [batch, n_new, row] (read at a row stride and column
// offset) land in the cache [batch, max_ctx, row] at row pos[b] + i, the
// first rope_heads heads rotated at that position on the way (cpu_rope.h);
// a row whose position falls outside the cache is skipped, never written
// out of bounds. With slots, batch b lands in cache row slots[b] (a pool of
// per-sequence caches); a slot outside the pool is skipped the same way. A
// ring cache takes position t in row t mod max_ctx.
#include <cstring>
#include <vector>

#include "backends/cpu/cpu_registry.h"
#include "backends/cpu/cpu_rope.h"

namespace rlx::cpu {
namespace {

template <class T> void kv_write(const KvWriteParams& p, CpuContext& ctx) {
  uint8_t* arena = ctx.arena();
  const int32_t* pos = at<int32_t>(arena, p.pos);
  const T* rows = at<T>(arena, p.rows);
  T* cache = at<T>(arena, p.cache);
  const int32_t* slots = p.slots != kNoBuffer ? at<int32_t>(arena, p.slots) : nullptr;
  const int64_t rotated = int64_t(p.rope_heads) * p.head_dim;
  const T* gamma = p.gamma != kNoBuffer ? at<T>(arena, p.gamma) : nullptr;
  std::vector<T> normed(gamma ? size_t(rotated) : 0);  // the rotated heads, normalized first
  for (int64_t b = 0; b < p.batch; ++b) {
    const int64_t slot = slots ? int64_t(slots[b]) : b;
    if (slot < 0 || slot >= p.cache_batch) continue;
    for (int64_t i = 0; i < p.n_new; ++i) {
      const int64_t t = int64_t(pos[b]) + i;
      if (t < 0 || (!p.ring && t >= p.max_ctx)) continue;
      const T* src = rows + (b * p.n_new + i) * p.rows_stride + p.rows_offset;
      T* dst = cache + (slot * p.max_ctx + (p.ring ? t % p.max_ctx : t)) * p.row;
      const T* rot = src;
      if (gamma) {
        head_rms_norm(src, normed.data(), p.rope_heads, p.head_dim, gamma, p.norm_eps);
        rot = normed.data();
      }
      if (rotated > 0) rope_row(rot, dst, p.rope_heads, p.head_dim, p.n_rot, p.interleaved, p.theta, double(t), p.freqs);
      std::memcpy(dst + rotated, src + rotated, size_t(p.row - rotated) * sizeof(T));
    }
  }
}

}  // namespace

void register_cpu_kv_write(CpuRegistry& r) {
  r.add<KvWriteParams>(DType::F32, kv_write<float>);
  r.add<KvWriteParams>(DType::F16, kv_write<Half>);
  r.add<KvWriteParams>(DType::BF16, kv_write<BFloat>);
}

}  // namespace rlx::cpu
