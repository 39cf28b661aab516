// The CPU backend's registry of kernel implementations, keyed by (thunk kind,
// dtype). Support claims are answered from it; nothing is listed by hand.
#pragma once
#include <array>
#include <cstdint>
#include <functional>
#include <vector>

#include "thunks/thunk.h"

namespace rlx::cpu {

class WeightPacks;
}  // namespace rlx::cpu
namespace rlx {
class HostCollective;
}
namespace rlx::cpu {

// Which GEMM runs a matmul: the packed kernel over weights packed once
// (cpu_gemm_packed.h) or the library (cpu_gemm.h).
// Packed: f32 kernel; PackedBf16: bf16 kernel on bf16 pairs; PackedInt8:
// int8 kernel on weights quantized per column; Library: BLAS.
enum class GemmPath : uint8_t { Packed, PackedBf16, PackedInt8, Library };

// What a kernel gets besides its params: the arena, grow-only scratch
// buffers owned by the executable (so steady-state runs do not allocate), and
// the packed weights of the matmuls whose B is a weight.
class CpuContext {
 public:
  explicit CpuContext(uint8_t* arena) : arena_(arena) {}
  uint8_t* arena() const { return arena_; }
  // f32 scratch of at least n elements; slots are independent buffers.
  float* scratch(int slot, size_t n);

  // The packed-weights set and the B offsets of the matmuls that take the
  // packed path, and of those that take it in int8 (sorted); set by the
  // executable at prepare.
  void set_packed_weights(WeightPacks* packs, std::vector<uint64_t> b_offsets, std::vector<uint64_t> int8_b = {});
  // The packed op(B) of p when p takes the packed path (not in int8), else null.
  const float* packed_weights(const MatMulParams& p);
  // p's B quantized and packed by pack_weights_int8 when p takes the int8
  // path, else null.
  const uint32_t* packed_int8(const MatMulParams& p);
  // The arena's packed-weights set (null in a context made without one).
  WeightPacks* weight_packs() const { return packs_; }
  // Matmul runs (batch entries) by path, for tests and the summary.
  void count(GemmPath path, uint64_t n) { runs_[size_t(path)] += n; }
  uint64_t runs(GemmPath path) const { return runs_[size_t(path)]; }
  // The tensor-parallel group this executable is a rank of (null: one rank).
  void set_collective(HostCollective* c, int rank) {
    collective_ = c;
    rank_ = rank;
  }
  HostCollective* collective() const { return collective_; }
  int rank() const { return rank_; }

 private:
  uint8_t* arena_;
  std::array<std::vector<float>, 4> scratch_;
  WeightPacks* packs_ = nullptr;
  std::vector<uint64_t> packed_b_, int8_b_;
  std::array<uint64_t, 4> runs_{};
  HostCollective* collective_ = nullptr;
  int rank_ = 0;
};

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
  std::array<std::array<Entry, kNumDTypes>, kNumThunkKinds> table_;
};

// One registration function per thunk kind, named after it in thunks.def
// (register_cpu_matmul, ...) and defined in that kind's kernel file.
#define X(e, n, P) void register_cpu_##n(CpuRegistry& r);
#include "thunks/thunks.def"
#undef X

}  // namespace rlx::cpu
