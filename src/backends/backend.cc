// Default pipelining (run at submit, hand results back at wait) and the
// CUDA stub for builds without nvcc.
#include "backends/backend.h"

#include <algorithm>

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

std::shared_ptr<ArenaShare> make_arena_share(uint64_t reserve_bytes) {
  return std::make_shared<ArenaShare>(reserve_bytes);
}

ArenaShare::~ArenaShare() {
  if (base_ && release_) release_(base_);
}

namespace {

bool same_layout(const Binding& a, const Binding& b) {
  return a.name == b.name && a.shape == b.shape && a.dtype == b.dtype && a.offset == b.offset &&
         a.outer == b.outer && a.inner_bytes == b.inner_bytes && a.outer_stride_bytes == b.outer_stride_bytes;
}

}  // namespace

uint8_t* ArenaShare::acquire(const Schedule& s, const std::string& backend,
                             const std::function<uint8_t*(uint64_t)>& alloc, std::function<void(uint8_t*)> release,
                             bool* fresh) {
  if (!base_) {
    bytes_ = std::max<uint64_t>({s.arena_bytes, reserve_, 256});
    base_ = alloc(bytes_);
    RLX_CHECK(base_, backend << ": cannot allocate an arena of " << bytes_ << " bytes");
    release_ = std::move(release);
    backend_ = backend;
    params_ = s.param_bindings;
    *fresh = true;
    return base_;
  }
  RLX_CHECK(backend == backend_, "arena share: the arena is on " << backend_ << ", not " << backend);
  RLX_CHECK(s.arena_bytes <= bytes_, "arena share: this graph needs " << s.arena_bytes
                                         << " bytes but the shared arena has " << bytes_
                                         << "; compile the largest shape first");
  bool same = s.param_bindings.size() == params_.size();
  for (size_t i = 0; same && i < params_.size(); ++i) same = same_layout(s.param_bindings[i], params_[i]);
  RLX_CHECK(same, "arena share: this graph's params are laid out differently from the arena's first graph");
  *fresh = false;
  return base_;
}

bool ArenaShare::claim_constants(const void* owner) {
  if (constants_owner_ == owner) return false;
  constants_owner_ = owner;
  return true;
}

#ifndef RLX_HAVE_CUDA
Backend* cuda_backend() { return nullptr; }
#endif

}  // namespace rlx
