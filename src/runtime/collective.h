// A tensor-parallel group: ranks that sum tensors together at the graph's
// all_reduce nodes. Each rank's executable is compiled with the group and
// its rank (CompileOptions::collective, ::rank); every rank runs a graph
// built alike, so the ranks meet at the same all_reduce in the same order.
//
// Two kinds: HostCollective for ranks that are threads of one process
// running on the CPU (each rank's arena is host memory), and the CUDA
// backend's, one GPU a rank, over NCCL (make_collective(Device::Cuda, ...)).
#pragma once
#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "rlx/dtype.h"
#include "rlx/options.h"

namespace rlx {

class Collective {
 public:
  explicit Collective(int ranks);
  virtual ~Collective() = default;
  Collective(const Collective&) = delete;
  Collective& operator=(const Collective&) = delete;
  int ranks() const { return ranks_; }
  virtual Device device() const = 0;
  // The GPU of each rank (empty on the host).
  virtual std::vector<int> devices() const { return {}; }
  // A rank whose run failed calls this, so that the others, waiting for it
  // at an all_reduce, fail too instead of waiting forever. Lasting: the
  // group cannot meet again.
  virtual void abort(const std::string& why) = 0;

 private:
  int ranks_;
};

// Ranks on threads of this process, tensors in host memory. all_reduce
// blocks until every rank has called it; each rank then sums all ranks'
// `in` into its own `out` in rank order (in f32, rounded once to dt), so
// every rank holds the same bits.
class HostCollective final : public Collective {
 public:
  explicit HostCollective(int ranks);
  Device device() const override { return Device::Cpu; }
  void abort(const std::string& why) override;
  // out may not be any rank's in.
  void all_reduce(int rank, const void* in, void* out, int64_t n, DType dt);
  // Every rank's n elements of in, in rank order, into each rank's out.
  void all_gather(int rank, const void* in, void* out, int64_t n, DType dt);
  uint64_t all_reduces() const { return calls_; }  // completed on rank 0, for tests

 private:
  // All ranks meet; throws once the group is aborted. Takes the held lock.
  void meet(std::unique_lock<std::mutex>& lock);

  std::mutex mu_;
  std::condition_variable cv_;
  std::vector<const void*> in_;
  int arrived_ = 0;
  uint64_t generation_ = 0, calls_ = 0;
  std::string aborted_;
};

// make_collective (rlx/options.h) makes one of either kind.

}  // namespace rlx
