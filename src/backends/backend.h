// What a backend provides. Support claims come from each backend's registry
// of implementations (one entry per thunk kind x dtype), never a list by hand.
#pragma once
#include <cstdint>
#include <cstring>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include "backends/staging_ring.h"
#include "rlx/options.h"
#include "thunks/thunk.h"

namespace rlx {

// A prepared schedule on one backend: the arena lives here.
class BackendExecutable {
 public:
  virtual ~BackendExecutable() = default;
  // Host -> arena at a binding (strided for grouped params).
  virtual void write_binding(const Binding& b, const void* src) = 0;
  // One forward pass: inputs/outputs in the schedule's binding order, host memory.
  virtual void run(const std::vector<const void*>& inputs, const std::vector<void*>& outputs) = 0;
  // Pipelined form; the default runs synchronously at submit.
  virtual uint64_t submit(const std::vector<const void*>& inputs);
  virtual void wait(uint64_t ticket, const std::vector<void*>& outputs);
  // How it ran, from the backend itself rather than from what was asked.
  virtual std::string summary() const { return "host execution"; }
  // Device time of the last finished run in microseconds, when the backend
  // measures it (CUDA under RLX_TRACE=decode); < 0 otherwise.
  virtual double last_device_us() const { return -1; }
  // Device time of `runs` forwards of the kernels alone (see
  // Executable::time_device_forwards); empty where not measured (host).
  virtual std::vector<double> time_device_forwards(int runs) {
    (void)runs;
    return {};
  }
  // Embeddings that stay on the device (handed to torch through DLPack):
  // `count` floats of device memory the caller owns, NaN-poisoned so rows
  // nothing wrote show; nullptr where the backend runs on the host.
  virtual std::shared_ptr<float> device_floats(size_t count) {
    (void)count;
    return nullptr;
  }
  // After a run, on the device: row i of output `output` ([rows, cols] of
  // f32, f16 or bf16) becomes row dst_rows[i] of dst ([*, dim] f32): its
  // first dim values, L2-normalised when asked (the norm clamped at 1e-12,
  // as sentence-transformers clamps it). Throws on a host backend.
  virtual void export_output_rows(size_t output, const std::vector<int32_t>& dst_rows, int dim, bool normalize,
                                  float* dst);
  // The device the arena lives on; -1 on the host.
  virtual int device_index() const { return -1; }
  // Byte size of each output, in binding order (set by the Executable).
  void set_output_bytes(std::vector<size_t> b) { output_bytes_ = std::move(b); }

 protected:
  std::vector<size_t> output_bytes_;

 private:
  std::unique_ptr<StagingRing> ring_;  // the default pipelining's outputs, made at first submit
};

// One arena and who uses it. Every executable gets its arena through one
// (a private one when CompileOptions::arena_share is empty).
class ArenaShare {
 public:
  explicit ArenaShare(uint64_t reserve_bytes = 0) : reserve_(reserve_bytes) {}
  ArenaShare(const ArenaShare&) = delete;
  ArenaShare& operator=(const ArenaShare&) = delete;
  ~ArenaShare();

  // The arena for schedule s on `backend`: the existing one when s fits it
  // (else rlx::Error saying why), or a new one of s.arena_bytes from `alloc`.
  // *fresh tells whether it was just allocated.
  uint8_t* acquire(const Schedule& s, const std::string& backend, const std::function<uint8_t*(uint64_t)>& alloc,
                   std::function<void(uint8_t*)> release, bool* fresh);
  // True when the constants in the arena are not `owner`'s; marks them `owner`'s.
  bool claim_constants(const void* owner);
  // True the first time it is called: the state region is then zeroed once
  // for every executable sharing the arena, not again by each compile.
  bool claim_state_zeroing() { return !std::exchange(state_zeroed_, true); }
  uint64_t bytes() const { return bytes_; }
  // Held by every run of an executable on this arena: runs must not overlap.
  std::mutex& run_mutex() { return run_mutex_; }
  // Data the arena's backend derives from its bytes and shares as it shares
  // them (the CPU backend's packed weights); the backend sets it at prepare.
  std::shared_ptr<void>& derived() { return derived_; }

 private:
  std::mutex run_mutex_;
  uint8_t* base_ = nullptr;
  uint64_t bytes_ = 0, reserve_ = 0;
  std::string backend_;
  std::vector<Binding> params_, state_;
  bool state_zeroed_ = false;
  std::function<void(uint8_t*)> release_;
  const void* constants_owner_ = nullptr;
  std::shared_ptr<void> derived_;
};

class Backend {
 public:
  virtual ~Backend() = default;
  virtual std::string name() const = 0;
  virtual bool supports(ThunkKind k, DType dt) const = 0;
  virtual std::unique_ptr<BackendExecutable> prepare(const Schedule& s, const CompileOptions& o) = 0;
  // A tensor-parallel group of one rank per device (CUDA: over NCCL).
  virtual std::shared_ptr<Collective> make_collective(const std::vector<int>& devices);
};

// Throws, naming the graph node, unless `be` has a kernel for every thunk of
// s (and every copy's destination dtype). compile() calls it before prepare.
void require_support(const Backend& be, const Schedule& s, const Graph& g);

Backend& cpu_backend();
// nullptr when librlx_cuda.so was not built or cannot load, or no device is
// present (cuda_unavailable_reason says which). Loads it on first call.
Backend* cuda_backend();
std::string cuda_unavailable_reason();

}  // namespace rlx
