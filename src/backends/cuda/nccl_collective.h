// A tensor-parallel group of one GPU a rank in this process, over NCCL:
// one communicator per rank, made together (ncclCommInitAll). NCCL is loaded
// when the first group is made (libnccl.so.2, or $RLX_NCCL_LIBRARY), so a
// process that never asks for one never maps it. NVLink multicast (NVLS)
// stays off unless the environment says otherwise.
#pragma once
#include <cuda_runtime.h>

#include <mutex>
#include <string>
#include <vector>

#include "runtime/collective.h"

namespace rlx::cuda {

class NcclCollective final : public Collective {
 public:
  explicit NcclCollective(std::vector<int> devices);
  ~NcclCollective() override;
  Device device() const override { return Device::Cuda; }
  std::vector<int> devices() const override { return devices_; }
  void abort(const std::string& why) override;
  // The rank's communicator (an ncclComm_t).
  void* comm(int rank) const;
  // Enqueues the sum of n elements of dt (f32, f16, bf16) over the ranks
  // into out on the rank's stream (capturable: a recorded graph holds it).
  void all_reduce(int rank, const void* in, void* out, int64_t n, DType dt, cudaStream_t stream) const;
  // Every rank's n elements in rank order into out (ranks * n), the same way.
  void all_gather(int rank, const void* in, void* out, int64_t n, DType dt, cudaStream_t stream) const;

 private:
  void warm_up();

  std::vector<int> devices_;
  std::vector<void*> comms_;
  // Set by the rank that failed, read by every rank's thread.
  mutable std::mutex abort_mu_;
  std::string aborted_;
  void check_running(const char* what) const;
};

}  // namespace rlx::cuda
