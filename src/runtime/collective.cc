#include "runtime/collective.h"

#include <cstring>

#include "backends/backend.h"
#include "rlx/error.h"

namespace rlx {

Collective::Collective(int ranks) : ranks_(ranks) {
  RLX_CHECK(ranks >= 1 && ranks <= 64, "tensor parallelism: " << ranks << " ranks (1 to 64)");
}

HostCollective::HostCollective(int ranks) : Collective(ranks), in_(size_t(ranks), nullptr) {}

void HostCollective::abort(const std::string& why) {
  std::lock_guard<std::mutex> lock(mu_);
  if (aborted_.empty()) aborted_ = why.empty() ? "a rank failed" : why;
  cv_.notify_all();
}

void HostCollective::meet(std::unique_lock<std::mutex>& lock) {
  RLX_CHECK(aborted_.empty(), "all_reduce: the tensor-parallel group stopped: " << aborted_);
  const uint64_t generation = generation_;
  if (++arrived_ == ranks()) {
    arrived_ = 0;
    ++generation_;
    cv_.notify_all();
    return;
  }
  cv_.wait(lock, [&] { return generation_ != generation || !aborted_.empty(); });
  RLX_CHECK(generation_ != generation, "all_reduce: the tensor-parallel group stopped: " << aborted_);
}

void HostCollective::all_reduce(int rank, const void* in, void* out, int64_t n, DType dt) {
  RLX_CHECK(rank >= 0 && rank < ranks(), "all_reduce: rank " << rank << " of " << ranks());
  {
    std::unique_lock<std::mutex> lock(mu_);
    in_[size_t(rank)] = in;
    meet(lock);  // every rank's input is published
  }
  // Rank order and one rounding: the same bits on every rank.
  for (int64_t i = 0; i < n; ++i) {
    float sum = 0.f;
    for (const void* r : in_) sum += load_as_float(r, dt, size_t(i));
    store_from_float(out, dt, size_t(i), sum);
  }
  std::unique_lock<std::mutex> lock(mu_);
  meet(lock);  // nobody writes its input again before every rank has read it
  if (rank == 0) ++calls_;
}

void HostCollective::all_gather(int rank, const void* in, void* out, int64_t n, DType dt) {
  RLX_CHECK(rank >= 0 && rank < ranks(), "all_gather: rank " << rank << " of " << ranks());
  {
    std::unique_lock<std::mutex> lock(mu_);
    in_[size_t(rank)] = in;
    meet(lock);
  }
  const size_t bytes = size_t(n) * dtype_size(dt);
  for (size_t r = 0; r < in_.size(); ++r) std::memcpy(static_cast<uint8_t*>(out) + r * bytes, in_[r], bytes);
  std::unique_lock<std::mutex> lock(mu_);
  meet(lock);
}

std::shared_ptr<Collective> make_collective(Device device, int ranks, std::vector<int> devices) {
  if (device == Device::Cpu) {
    RLX_CHECK(devices.empty(), "tensor parallelism on the CPU takes no device list");
    return std::make_shared<HostCollective>(ranks);
  }
  RLX_CHECK(device == Device::Cuda, "tensor parallelism: choose the CPU or CUDA");
  if (devices.empty())
    for (int r = 0; r < ranks; ++r) devices.push_back(r);
  RLX_CHECK(int(devices.size()) == ranks, "tensor parallelism: " << ranks << " ranks on " << devices.size() << " GPUs");
  Backend* be = cuda_backend();
  RLX_CHECK(be, "tensor parallelism on CUDA: " << cuda_unavailable_reason());
  return be->make_collective(devices);
}

}  // namespace rlx
