// The CUDA backend's registry of kernel implementations, keyed by (thunk
// kind, dtype). Each kernel file registers what its dispatch really covers
// (register_cuda_<name>, named in thunks.def); supports() answers from here,
// so an unsupported thunk fails at compile(), not at launch. Host code, kept
// free of the graph headers so .cu files can include it.
#pragma once
#include <array>

#include "backends/cuda/launch_context.h"
#include "thunks/params.h"

namespace rlx::cuda {

class CudaRegistry {
 public:
  template <class P> using Run = void (*)(const P&, const LaunchContext&);

  // A family launched by a plain function of its params.
  template <class P> void add(DType dt, Run<P> run) {
    Entry& e = slot(kind_of<P>(), dt);
    e.present = true;
    e.run = reinterpret_cast<void (*)()>(run);  // read back only as Run<P>, by run<P>()
  }
  // A family with per-thunk state made at initialize (matrix products).
  template <class P> void add_stateful(DType dt) { slot(kind_of<P>(), dt).present = true; }

  bool has(ThunkKind k, DType dt) const { return slot(k, dt).present; }
  // What add<P> registered for dt; nullptr for stateful or absent entries.
  template <class P> Run<P> run(DType dt) const { return reinterpret_cast<Run<P>>(slot(kind_of<P>(), dt).run); }

 private:
  struct Entry {
    bool present = false;
    void (*run)() = nullptr;
  };
  Entry& slot(ThunkKind k, DType dt) { return table_[size_t(k)][size_t(dt)]; }
  const Entry& slot(ThunkKind k, DType dt) const { return table_[size_t(k)][size_t(dt)]; }
  std::array<std::array<Entry, kNumDTypes>, kNumThunkKinds> table_{};
};

// The registry, filled once from thunks.def.
const CudaRegistry& cuda_registry();

#define X(e, n, P) void register_cuda_##n(CudaRegistry& r);
#include "thunks/thunks.def"
#undef X

}  // namespace rlx::cuda
