#include "backends/cpu/cpu_backend.h"
#include "backends/cpu/cpu_threads.h"

#include <omp.h>

#include <cstdlib>
#include <cstring>

#include "thunks/buffer_uses.h"

namespace rlx {
namespace cpu {
namespace {

std::string describe(const Thunk& t, size_t index) {
  std::string s = "thunk " + std::to_string(index) + " (" + thunk_name(t.kind());
  if (!t.label.empty()) s += " '" + t.label + "'";
  return s + ")";
}

constexpr uint64_t kArenaAlign = 256;

class CpuExecutable final : public BackendExecutable {
 public:
  CpuExecutable(const Schedule& s, const CpuRegistry& registry, int threads, std::shared_ptr<ArenaShare> share)
      : registry_(registry), threads_(threads > 0 ? threads : default_threads()), share_(share ? std::move(share) : make_arena_share()) {
    arena_bytes_ = s.arena_bytes;
    bool fresh = false;
    auto alloc = [](uint64_t bytes) {
      uint64_t n = (bytes + kArenaAlign - 1) / kArenaAlign * kArenaAlign;
      auto* p = static_cast<uint8_t*>(std::aligned_alloc(kArenaAlign, n));
      if (p) std::memset(p, 0, n);
      return p;
    };
    arena_ = share_->acquire(s, "cpu", alloc, [](uint8_t* p) { std::free(p); }, &fresh);
    for (const auto& [offset, data] : s.constants)
      RLX_CHECK(data && offset + data->size() <= arena_bytes_,
                "cpu: constant at offset " + std::to_string(offset) + " lies outside the arena");
    constants_ = s.constants;
    for (size_t i = 0; i < s.thunks.size(); ++i) {
      const Thunk& t = s.thunks[i];
      DType dt = t.dtype();
      RLX_CHECK(registry_.has(t.kind(), dt), "cpu: " + describe(t, i) + " is not supported for dtype " +
                                               std::string(dtype_name(dt)));
      for (const std::vector<BufferUse>& uses : {t.uses, declared_uses(t.params)})
        for (const BufferUse& u : uses)
          RLX_CHECK(u.offset + u.size <= arena_bytes_, "cpu: " + describe(t, i) + " uses bytes outside the arena");
      thunks_.push_back({t.kind(), dt, t.params});
    }
    inputs_ = s.input_bindings;
    outputs_ = s.output_bindings;
    for (const auto& b : inputs_) check_binding(b);
    for (const auto& b : outputs_) check_binding(b);
    for (const auto& b : s.param_bindings) check_binding(b);
  }

  void write_binding(const Binding& b, const void* src) override {
    check_binding(b);
    const auto* from = static_cast<const uint8_t*>(src);
    for (int64_t r = 0; r < b.outer; ++r)
      std::memcpy(arena_ + b.offset + uint64_t(r) * b.outer_stride_bytes,
                  from + uint64_t(r) * b.inner_bytes, b.inner_bytes);
  }

  void run(const std::vector<const void*>& inputs, const std::vector<void*>& outputs) override {
    RLX_CHECK(inputs.size() == inputs_.size(), "cpu: run got " + std::to_string(inputs.size()) +
                                                   " inputs, the schedule has " +
                                                   std::to_string(inputs_.size()));
    RLX_CHECK(outputs.size() == outputs_.size(), "cpu: run got " + std::to_string(outputs.size()) +
                                                     " outputs, the schedule has " +
                                                     std::to_string(outputs_.size()));
    // The OpenMP thread count is process-wide: set it for this run only.
    struct ThreadCount {
      int saved = omp_get_max_threads();
      explicit ThreadCount(int n) {
        if (n > 0) omp_set_num_threads(n);
      }
      ~ThreadCount() { omp_set_num_threads(saved); }
    } thread_count(threads_);
    // Another executable sharing the arena may have put its constants there.
    if (share_->claim_constants(this))
      for (const auto& [offset, data] : constants_) std::memcpy(arena_ + offset, data->data(), data->size());
    for (size_t i = 0; i < inputs.size(); ++i) write_binding(inputs_[i], inputs[i]);
    CpuContext& ctx = context();
    for (const auto& t : thunks_) registry_.run(t.kind, t.dtype, t.params, ctx);
    for (size_t i = 0; i < outputs.size(); ++i) read_binding(outputs_[i], outputs[i]);
  }

 private:
  struct Prepared {
    ThunkKind kind;
    DType dtype;
    ThunkParams params;
  };

  void check_binding(const Binding& b) const {
    uint64_t end = b.outer <= 0 ? b.offset
                                : b.offset + uint64_t(b.outer - 1) * b.outer_stride_bytes + b.inner_bytes;
    RLX_CHECK(b.outer >= 1 && end <= arena_bytes_,
              "cpu: binding '" + b.name + "' lies outside the arena");
  }

  void read_binding(const Binding& b, void* dst) const {
    auto* to = static_cast<uint8_t*>(dst);
    for (int64_t r = 0; r < b.outer; ++r)
      std::memcpy(to + uint64_t(r) * b.inner_bytes,
                  arena_ + b.offset + uint64_t(r) * b.outer_stride_bytes, b.inner_bytes);
  }

  CpuContext& context() {
    if (!ctx_) ctx_ = std::make_unique<CpuContext>(arena_);
    return *ctx_;
  }

  const CpuRegistry& registry_;
  int threads_;
  std::shared_ptr<ArenaShare> share_;
  uint64_t arena_bytes_ = 0;
  uint8_t* arena_ = nullptr;
  std::vector<std::pair<uint64_t, std::shared_ptr<const std::vector<uint8_t>>>> constants_;
  std::unique_ptr<CpuContext> ctx_;
  std::vector<Prepared> thunks_;
  std::vector<Binding> inputs_, outputs_;
};

}  // namespace

float* CpuContext::scratch(int slot, size_t n) {
  auto& buf = scratch_.at(size_t(slot));
  if (buf.size() < n) buf.resize(n);
  return buf.data();
}

CpuBackend::CpuBackend() {
#define X(e, n, P) register_cpu_##n(registry_);
#include "thunks/thunks.def"
#undef X
}

std::unique_ptr<BackendExecutable> CpuBackend::prepare(const Schedule& s, const CompileOptions& o) {
  return std::make_unique<CpuExecutable>(s, registry_, o.threads, o.arena_share);
}

}  // namespace cpu

Backend& cpu_backend() {
  static cpu::CpuBackend backend;
  return backend;
}

}  // namespace rlx
