// Default pipelining (run at submit, hand results back at wait) and the
// CUDA stub for builds without nvcc.
#include "backends/backend.h"

#include <algorithm>

#include "rlx/error.h"

namespace rlx {

void BackendExecutable::export_output_rows(size_t, const std::vector<int32_t>&, int, bool, float*) {
  RLX_FAIL("outputs stay on the device only on a GPU backend; this executable runs on the host ("
           << summary() << ")");
}

// Runs at submit into a one-slot staging ring: a second submit before the
// first's wait parks the first's outputs, as on the GPU.
uint64_t BackendExecutable::submit(const std::vector<const void*>& inputs) {
  if (!ring_)
    ring_ = std::make_unique<StagingRing>(std::vector<uint64_t>{},
                                          std::vector<uint64_t>(output_bytes_.begin(), output_bytes_.end()), 1,
                                          [](size_t n) { return new uint8_t[n]; }, [](uint8_t* p) { delete[] p; });
  size_t slot = 0;
  const uint64_t ticket = ring_->begin([](size_t) {}, &slot);
  std::vector<void*> outs;
  for (size_t i = 0; i < output_bytes_.size(); ++i) outs.push_back(ring_->output(slot, i));
  run(inputs, outs);
  return ticket;
}

void BackendExecutable::wait(uint64_t ticket, const std::vector<void*>& outputs) {
  RLX_CHECK(ring_, "wait: run " << ticket << " is not in flight");
  ring_->collect(ticket, [](size_t) {}, outputs);
}

std::shared_ptr<Collective> Backend::make_collective(const std::vector<int>&) {
  RLX_FAIL("the " << name() << " backend has no tensor-parallel groups of devices");
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
    state_ = s.state_bindings;
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
  same = s.state_bindings.size() == state_.size();
  for (size_t i = 0; same && i < state_.size(); ++i) same = same_layout(s.state_bindings[i], state_[i]);
  RLX_CHECK(same, "arena share: this graph's state (KV cache) is laid out differently from the arena's first graph");
  *fresh = false;
  return base_;
}

bool ArenaShare::claim_constants(const void* owner) {
  if (constants_owner_ == owner) return false;
  constants_owner_ = owner;
  return true;
}

void require_support(const Backend& be, const Schedule& s, const Graph& g) {
  for (const Thunk& t : s.thunks) {
    auto node = [&] { return t.node >= 0 && size_t(t.node) < g.nodes().size() ? g.describe(t.node) : t.label; };
    DType dt = t.dtype();
    RLX_CHECK(be.supports(t.kind(), dt), "compile: backend '" << be.name() << "' has no " << thunk_name(t.kind())
                                                              << " kernel for " << dtype_name(dt) << " (needed by "
                                                              << node() << ")");
    if (const auto* c = std::get_if<CopyParams>(&t.params))
      RLX_CHECK(be.supports(ThunkKind::Copy, c->dst_dtype), "compile: backend '" << be.name() << "' cannot copy into "
                                                                                 << dtype_name(c->dst_dtype)
                                                                                 << " (needed by " << node() << ")");
  }
}


}  // namespace rlx
