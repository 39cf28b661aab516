// Embedding lookup: out[i, :] = table[ids[i], :]; an id outside the table
// gives a zero row rather than reading out of bounds.
#include <cstring>

#include "backends/cpu/cpu_parallel.h"
#include "backends/cpu/cpu_registry.h"
#include "backends/cpu/cpu_storage.h"

namespace rlx::cpu {
namespace {

void gather(const GatherParams& p, CpuContext& ctx) {
  uint8_t* arena = ctx.arena();
  const uint8_t* table = arena + p.table;
  const int32_t* ids = at<int32_t>(arena, p.ids);
  uint8_t* out = arena + p.out;
  const uint64_t row_bytes = uint64_t(p.row) * dtype_size(p.dtype);
  parallel_for(p.n_ids, p.n_ids * p.row > 65536, [&](int64_t i) {
    const int32_t id = ids[i];
    if (id >= 0 && id < p.vocab)
      std::memcpy(out + uint64_t(i) * row_bytes, table + uint64_t(id) * row_bytes, row_bytes);
    else
      std::memset(out + uint64_t(i) * row_bytes, 0, row_bytes);  // zero in every dtype
  });
}

}  // namespace

void register_cpu_gather(CpuRegistry& r) {
  for (DType dt : {DType::F32, DType::F16, DType::BF16, DType::I32}) r.add<GatherParams>(dt, gather);
}

}  // namespace rlx::cpu
