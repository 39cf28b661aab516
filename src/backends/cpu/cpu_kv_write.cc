// KV-cache write: rows [batch, n_new, row] land in the cache [batch,
// max_ctx, row] at row pos[b] + i; a row whose position falls outside the
// cache is skipped, never written out of bounds.
#include <cstring>

#include "backends/cpu/cpu_registry.h"
#include "backends/cpu/cpu_storage.h"

namespace rlx::cpu {
namespace {

void kv_write(const KvWriteParams& p, CpuContext& ctx) {
  uint8_t* arena = ctx.arena();
  const int32_t* pos = at<int32_t>(arena, p.pos);
  const uint64_t row_bytes = uint64_t(p.row) * dtype_size(p.dtype);
  for (int64_t b = 0; b < p.batch; ++b) {
    for (int64_t i = 0; i < p.n_new; ++i) {
      const int64_t t = int64_t(pos[b]) + i;
      if (t < 0 || t >= p.max_ctx) continue;
      std::memcpy(arena + p.cache + uint64_t(b * p.max_ctx + t) * row_bytes,
                  arena + p.rows + uint64_t(b * p.n_new + i) * row_bytes, row_bytes);
    }
  }
}

}  // namespace

// A byte copy: one kernel serves every float dtype.
void register_cpu_kv_write(CpuRegistry& r) {
  for (DType dt : {DType::F32, DType::F16, DType::BF16}) r.add<KvWriteParams>(dt, kv_write);
}

}  // namespace rlx::cpu
