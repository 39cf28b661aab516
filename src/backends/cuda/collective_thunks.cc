// all_reduce and all_gather on the GPU: NCCL's collective on the run's
// stream when the executable is a rank of a group (recorded into the forward
// graph like a kernel), else a device-to-device copy (one rank).
#include "backends/cuda/collective_thunks.h"

#include <type_traits>

#include "backends/cuda/cuda_check.h"
#include "backends/cuda/cuda_registry.h"
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
    if (p_.out != p_.x)
      check(cudaMemcpyAsync(out, in, size_t(p_.n) * dtype_size(p_.dtype), cudaMemcpyDeviceToDevice, ctx.stream),
            ctx.label);
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
