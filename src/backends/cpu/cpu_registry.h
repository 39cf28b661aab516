// The CPU backend's registry of kernel implementations, keyed by (thunk kind,
// dtype). Support claims are answered from it; nothing is listed by hand.
#pragma once
#include <array>
#include <cstdint>
#include <functional>
#include <vector>

#include "thunks/thunk.h"

namespace rlx::cpu {

// What a kernel gets besides its params: the arena and grow-only scratch
// buffers owned by the executable, so steady-state runs do not allocate.
class CpuContext {
 public:
  explicit CpuContext(uint8_t* arena) : arena_(arena) {}
  uint8_t* arena() const { return arena_; }
  // f32 scratch of at least n elements; slots are independent buffers.
  float* scratch(int slot, size_t n);

 private:
  uint8_t* arena_;
  std::array<std::vector<float>, 4> scratch_;
};

// The thunk kind whose params struct is P (the variant lists them in kind order).
template <class P> constexpr ThunkKind kind_of() {
  return ThunkKind(ThunkParams(std::in_place_type<P>).index());
}

class CpuRegistry {
 public:
  template <class P> using Kernel = void (*)(const P&, CpuContext&);

  // Registers kernel k for P's thunk kind at storage dtype dt.
  template <class P> void add(DType dt, Kernel<P> k) {
    slot(kind_of<P>(), dt) = [k](const ThunkParams& p, CpuContext& ctx) { k(std::get<P>(p), ctx); };
  }
  bool has(ThunkKind kind, DType dt) const { return bool(slot(kind, dt)); }
  // Runs a thunk; its implementation must be registered (checked at prepare).
  void run(ThunkKind kind, DType dt, const ThunkParams& p, CpuContext& ctx) const {
    slot(kind, dt)(p, ctx);
  }

 private:
  using Entry = std::function<void(const ThunkParams&, CpuContext&)>;
  Entry& slot(ThunkKind k, DType dt) { return table_[size_t(k)][size_t(dt)]; }
  const Entry& slot(ThunkKind k, DType dt) const { return table_[size_t(k)][size_t(dt)]; }
  std::array<std::array<Entry, 4>, kNumThunkKinds> table_;
};

// The dtype a thunk's kernel is keyed by (copies: the source dtype).
DType registry_dtype(const ThunkParams& p);

// One registration function per kernel family, all called by cpu_backend.cc.
void register_cpu_matmul(CpuRegistry& r);
void register_cpu_binary(CpuRegistry& r);
void register_cpu_unary(CpuRegistry& r);
void register_cpu_norm(CpuRegistry& r);
void register_cpu_softmax(CpuRegistry& r);
void register_cpu_attention(CpuRegistry& r);
void register_cpu_rope(CpuRegistry& r);
void register_cpu_gather(CpuRegistry& r);
void register_cpu_copy(CpuRegistry& r);
void register_cpu_reduce(CpuRegistry& r);
void register_cpu_softmax_xent(CpuRegistry& r);

}  // namespace rlx::cpu
