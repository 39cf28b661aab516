// all_gather: every rank's value in rank order, through the host group the
// executable was compiled with; one rank copies.
#include <cstring>

#include "backends/cpu/cpu_registry.h"
#include "runtime/collective.h"

namespace rlx::cpu {
namespace {

void all_gather(const AllGatherParams& p, CpuContext& ctx) {
  uint8_t* arena = ctx.arena();
  const uint64_t bytes = uint64_t(p.n) * dtype_size(p.dtype);
  if (!ctx.collective()) {
    RLX_CHECK(p.ranks == 1, "all_gather: a graph of " << p.ranks << " ranks run without a tensor-parallel group");
    if (p.out != p.x) std::memmove(arena + p.out, arena + p.x, bytes);
    return;
  }
  RLX_CHECK(p.ranks == ctx.collective()->ranks(),
            "all_gather: a graph of " << p.ranks << " ranks in a group of " << ctx.collective()->ranks());
  RLX_CHECK(p.out + bytes * uint64_t(p.ranks) <= p.x || p.x + bytes <= p.out, "all_gather: its output overlaps its input");
  ctx.collective()->all_gather(ctx.rank(), arena + p.x, arena + p.out, p.n, p.dtype);
}

}  // namespace

void register_cpu_all_gather(CpuRegistry& r) {
  for (DType dt : {DType::F32, DType::F16, DType::BF16}) r.add<AllGatherParams>(dt, all_gather);
}

}  // namespace rlx::cpu
