// all_reduce on the GPU: ncclAllReduce on the run's stream when the
// executable is a rank of a group (recorded into the forward graph like any
// kernel), else a device-to-device copy.
#include "backends/cuda/all_reduce.h"

#include "backends/cuda/cuda_check.h"
#include "backends/cuda/cuda_registry.h"
#include "backends/cuda/nccl_collective.h"

namespace rlx::cuda {
namespace {

class AllReduceThunk final : public DeviceThunk {
 public:
  AllReduceThunk(const AllReduceParams& p, const DeviceResources& r) : p_(p), group_(r.collective), rank_(r.rank) {}
  void execute(const LaunchContext& ctx) const override {
    const void* in = ctx.arena + p_.x;
    void* out = ctx.arena + p_.out;
    if (group_) {
      group_->all_reduce(rank_, in, out, p_.n, p_.dtype, ctx.stream);
      return;
    }
    if (p_.out != p_.x)
      check(cudaMemcpyAsync(out, in, size_t(p_.n) * dtype_size(p_.dtype), cudaMemcpyDeviceToDevice, ctx.stream),
            ctx.label);
  }

 private:
  AllReduceParams p_;
  const NcclCollective* group_;
  int rank_;
};

}  // namespace

std::unique_ptr<DeviceThunk> make_all_reduce_thunk(const AllReduceParams& p, const DeviceResources& r) {
  return std::make_unique<AllReduceThunk>(p, r);
}

void register_cuda_all_reduce(CudaRegistry& r) {
  for (DType dt : {DType::F32, DType::F16, DType::BF16}) r.add_stateful<AllReduceParams>(dt);
}

}  // namespace rlx::cuda
