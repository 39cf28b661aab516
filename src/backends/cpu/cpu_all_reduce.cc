// all_reduce: the sum over the tensor-parallel ranks, through the host group
// the executable was compiled with; one rank copies.
#include <cstring>

#include "backends/cpu/cpu_registry.h"
#include "runtime/collective.h"

namespace rlx::cpu {
namespace {

void all_reduce(const AllReduceParams& p, CpuContext& ctx) {
  uint8_t* arena = ctx.arena();
  if (!ctx.collective()) {
    if (p.out != p.x) std::memmove(arena + p.out, arena + p.x, size_t(p.n) * dtype_size(p.dtype));
    return;
  }
  const uint64_t bytes = uint64_t(p.n) * dtype_size(p.dtype);
  RLX_CHECK(p.out + bytes <= p.x || p.x + bytes <= p.out, "all_reduce: its output overlaps its input");
  ctx.collective()->all_reduce(ctx.rank(), arena + p.x, arena + p.out, p.n, p.dtype);
}

}  // namespace

void register_cpu_all_reduce(CpuRegistry& r) {
  for (DType dt : {DType::F32, DType::F16, DType::BF16}) r.add<AllReduceParams>(dt, all_reduce);
}

}  // namespace rlx::cpu
