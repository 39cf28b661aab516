// Default pipelining (run at submit, hand results back at wait) and the
// CUDA stub for builds without nvcc.
#include "backends/backend.h"

namespace rlx {

uint64_t BackendExecutable::submit(const std::vector<const void*>& inputs) {
  std::vector<std::vector<uint8_t>> outs(output_bytes_.size());
  std::vector<void*> ptrs;
  for (size_t i = 0; i < outs.size(); ++i) {
    outs[i].resize(output_bytes_[i]);
    ptrs.push_back(outs[i].data());
  }
  run(inputs, ptrs);
  uint64_t t = next_ticket_++;
  done_[t] = std::move(outs);
  return t;
}

void BackendExecutable::wait(uint64_t ticket, const std::vector<void*>& outputs) {
  auto it = done_.find(ticket);
  RLX_CHECK(it != done_.end(), "wait: unknown or already collected ticket " << ticket);
  for (size_t i = 0; i < outputs.size() && i < it->second.size(); ++i)
    std::memcpy(outputs[i], it->second[i].data(), it->second[i].size());
  done_.erase(it);
}

#ifndef RLX_HAVE_CUDA
Backend* cuda_backend() { return nullptr; }
#endif

}  // namespace rlx
