// all_reduce and all_gather on the GPU: NCCL's collective on the run's
// stream when the executable is a rank of a group (recorded into the forward
// graph like a kernel), else the copy kernel (one rank: every thunk one
// kernel, as the recorded graph's node count expects).
#include "backends/cuda/collective_thunks.h"

#include <type_traits>

#include "backends/cuda/cuda_check.h"
#include "backends/cuda/cuda_registry.h"
#include "backends/cuda/kernels.h"
#include "backends/cuda/nccl_collective.h"

namespace rlx::cuda {
namespace {

template <class P> class CollectiveThunk final : public DeviceThunk {
 public:
  CollectiveThunk(const P& p, const DeviceResources& r) : p_(p), group_(r.collective), rank_(r.rank) {
    if constexpr (std::is_same_v<P, AllGatherParams>)
      RLX_CHECK(group_ ? group_->ranks() == p.ranks : p.ranks == 1,
                "all_gather: a graph of " << p.ranks << " ranks in a group of " << (group_ ? group_->ranks() : 1));
  }
  void execute(const LaunchContext& ctx) const override {
    const void* in = ctx.arena + p_.x;
    void* out = ctx.arena + p_.out;
    if (group_) {
      if constexpr (std::is_same_v<P, AllReduceParams>) group_->all_reduce(rank_, in, out, p_.n, p_.dtype, ctx.stream);
      else group_->all_gather(rank_, in, out, p_.n, p_.dtype, ctx.stream);
      return;
    }
    CopyParams c{};
    c.src = p_.x;
    c.dst = p_.out;
    c.n = p_.n;
    c.rank = 1;
    c.shape[0] = p_.n;
    c.src_stride[0] = c.dst_stride[0] = 1;
    c.src_dtype = c.dst_dtype = p_.dtype;
    run_copy(c, ctx);
  }

 private:
  P p_;
  const NcclCollective* group_;
  int rank_;
};

}  // namespace

std::unique_ptr<DeviceThunk> make_all_reduce_thunk(const AllReduceParams& p, const DeviceResources& r) {
  return std::make_unique<CollectiveThunk<AllReduceParams>>(p, r);
}

std::unique_ptr<DeviceThunk> make_all_gather_thunk(const AllGatherParams& p, const DeviceResources& r) {
  return std::make_unique<CollectiveThunk<AllGatherParams>>(p, r);
}

void register_cuda_all_reduce(CudaRegistry& r) {
  for (DType dt : {DType::F32, DType::F16, DType::BF16}) r.add_stateful<AllReduceParams>(dt);
}

void register_cuda_all_gather(CudaRegistry& r) {
  for (DType dt : {DType::F32, DType::F16, DType::BF16}) r.add_stateful<AllGatherParams>(dt);
}

}  // namespace rlx::cuda
