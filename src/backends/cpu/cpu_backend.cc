#include "backends/cpu/cpu_backend.h"
#include "backends/cpu/cpu_gemm.h"
#include "backends/cpu/cpu_gemm_packed.h"
#include "backends/cpu/cpu_threads.h"
#include "backends/cpu/cpu_weight_packs.h"
#include "runtime/collective.h"

#include <omp.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <unistd.h>

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

// [offset, end) of a binding's bytes, gaps between its rows included.
std::pair<uint64_t, uint64_t> span(const Binding& b) {
  return {b.offset, b.outer <= 0 ? b.offset : b.offset + uint64_t(b.outer - 1) * b.outer_stride_bytes + b.inner_bytes};
}

// RLX_CPU_GEMM=library|packed forces one path wherever it can run (for
// measurements); unset, the packed kernel runs where it measured faster.
enum class GemmChoice { Auto, Library, Packed };
GemmChoice gemm_choice() {
  const char* v = std::getenv("RLX_CPU_GEMM");
  if (v && std::strcmp(v, "library") == 0) return GemmChoice::Library;
  if (v && std::strcmp(v, "packed") == 0) return GemmChoice::Packed;
  RLX_CHECK(!v || !*v || std::strcmp(v, "auto") == 0, "RLX_CPU_GEMM: expected auto, library or packed, got '" << v << "'");
  return GemmChoice::Auto;
}

// The machine's physical memory: the most an arena can be.
uint64_t physical_memory_bytes() {
  const long pages = ::sysconf(_SC_PHYS_PAGES), size = ::sysconf(_SC_PAGESIZE);
  return pages > 0 && size > 0 ? uint64_t(pages) * uint64_t(size) : UINT64_MAX;
}

class CpuExecutable final : public BackendExecutable {
 public:
  CpuExecutable(const Schedule& s, const CpuRegistry& registry, const CompileOptions& o)
      : registry_(registry), threads_(o.threads > 0 ? o.threads : default_threads()),
        share_(o.arena_share ? o.arena_share : make_arena_share()), int8_products_(o.int8_products),
        rank_(o.rank) {
    const bool int8_products = o.int8_products;
    if (o.collective) {
      RLX_CHECK(o.collective->device() == Device::Cpu,
                "cpu: a tensor-parallel group of GPUs cannot sum the CPU's tensors");
      collective_ = std::static_pointer_cast<HostCollective>(o.collective);
      RLX_CHECK(o.rank >= 0 && o.rank < collective_->ranks(),
                "cpu: rank " << o.rank << " of a group of " << collective_->ranks());
    }
    RLX_CHECK(!int8_products || packed_int8_available(),
              "cpu: int8 products (--quantize int8) need AVX512-VNNI, which this processor lacks");
    arena_bytes_ = s.arena_bytes;
    bool fresh = false;
    auto alloc = [](uint64_t bytes) {
      // Sizes come from model files and flags: refuse what the machine cannot
      // hold before the allocator commits (and the memset touches) it.
      const uint64_t have = physical_memory_bytes();
      RLX_CHECK(bytes <= have, "cpu: the graph asks for an arena of " << bytes << " bytes (" << (bytes >> 20)
                                   << " MiB); this machine has " << have << " bytes (" << (have >> 20)
                                   << " MiB) of memory (a smaller context or batch needs less)");
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
    choose_gemm_paths(s);
  }

  void write_binding(const Binding& b, const void* src) override {
    check_binding(b);
    const auto [lo, hi] = span(b);
    packs_->invalidate(lo, hi - lo);
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
      for (const auto& [offset, data] : constants_) {
        std::memcpy(arena_ + offset, data->data(), data->size());
        packs_->invalidate(offset, data->size());
      }
    for (size_t i = 0; i < inputs.size(); ++i) write_binding(inputs_[i], inputs[i]);
    CpuContext& ctx = context();
    for (const auto& t : thunks_) registry_.run(t.kind, t.dtype, t.params, ctx);
    for (size_t i = 0; i < outputs.size(); ++i) read_binding(outputs_[i], outputs[i]);
  }

  struct Prepared {
    ThunkKind kind;
    DType dtype;
    ThunkParams params;
  };

  std::string summary() const override {
    if (!ctx_) return "host execution";
    return "host execution; matmul runs: " + std::to_string(ctx_->runs(GemmPath::Packed)) + " on packed weights, " +
           std::to_string(ctx_->runs(GemmPath::PackedBf16)) + " on packed bf16 pairs, " +
           std::to_string(ctx_->runs(GemmPath::PackedInt8)) + " in int8, " +
           std::to_string(ctx_->runs(GemmPath::Library)) + " through " + gemm_library() + "; packed weights " +
           std::to_string(packs_->bytes()) + " bytes";
  }

  const CpuContext* context_if_any() const { return ctx_.get(); }
  const WeightPacks& packs() const { return *packs_; }

 private:
  // Which matmuls run the packed kernel: those whose B lies inside the params
  // and constants (never written by a thunk), one B for the whole batch, where
  // the packed kernel measured faster than the library (packed_gemm_wins;
  // bf16 weights on the bf16 kernel at every shape).
  void choose_gemm_paths(const Schedule& s) {
    if (!share_->derived()) share_->derived() = std::make_shared<WeightPacks>();
    packs_ = std::static_pointer_cast<WeightPacks>(share_->derived());
    std::vector<std::pair<uint64_t, uint64_t>> fixed, written;
    for (const Binding& b : s.param_bindings) fixed.push_back(span(b));
    for (const auto& [offset, data] : s.constants) fixed.push_back({offset, offset + data->size()});
    std::sort(fixed.begin(), fixed.end());
    std::vector<std::pair<uint64_t, uint64_t>> merged;  // touching spans joined
    for (const auto& f : fixed)
      if (!merged.empty() && f.first <= merged.back().second)
        merged.back().second = std::max(merged.back().second, f.second);
      else
        merged.push_back(f);
    for (const Thunk& t : s.thunks)
      for (const std::vector<BufferUse>& uses : {t.uses, declared_uses(t.params)})
        for (const BufferUse& u : uses)
          if (u.write) written.push_back({u.offset, u.offset + u.size});
    const GemmChoice choice = gemm_choice();
    const bool trace = [] {
      const char* v = std::getenv("RLX_TRACE");
      return v && std::strcmp(v, "matmul") == 0;
    }();
    std::vector<uint64_t> packed, int8;
    for (size_t i = 0; i < s.thunks.size(); ++i) {
      const auto* p = std::get_if<MatMulParams>(&s.thunks[i].params);
      if (!p) continue;
      uint64_t lo = 0, hi = 0;
      weight_span(*p, &lo, &hi);
      const bool inside = std::any_of(merged.begin(), merged.end(), [&](auto f) { return f.first <= lo && hi <= f.second; });
      const bool overwritten = std::any_of(written.begin(), written.end(), [&](auto w) { return w.first < hi && lo < w.second; });
      const char* why = nullptr;
      if (!inside || overwritten || (p->batch > 1 && p->stride_b != 0))
        why = "B is not a weight";
      else if (!packed_gemm_available())
        why = "no AVX-512 for the packed kernel";
      else if (choice == GemmChoice::Library)
        why = "RLX_CPU_GEMM=library";
      bool shape_only = false;  // the packed kernel runs here, the library measured faster
      if (!why && choice == GemmChoice::Auto && !packs_bf16_pairs(p->dtype) && !packed_gemm_wins(p->m, p->n, p->k))
        why = "the library measured faster at this shape", shape_only = true;
      // Asked for int8: every product over a weight, whatever its shape (the
      // int8 kernel reads a quarter of f32's weight bytes, half of bf16's).
      const bool in_int8 = int8_products_ && (!why || shape_only);
      if (in_int8) int8.push_back(p->b), why = nullptr;
      else if (!why) packed.push_back(p->b);
      if (trace)
        std::fprintf(stderr, "rlx cpu: %s m=%lld n=%lld k=%lld: %s%s\n", describe(s.thunks[i], i).c_str(),
                     (long long)p->m, (long long)p->n, (long long)p->k,
                     why ? "library, " : in_int8 ? "packed int8" : packs_bf16_pairs(p->dtype) ? "packed bf16 pairs" : "packed weights",
                     why ? why : "");
    }
    for (auto* v : {&packed, &int8}) {
      std::sort(v->begin(), v->end());
      v->erase(std::unique(v->begin(), v->end()), v->end());
    }
    context().set_packed_weights(packs_.get(), std::move(packed), std::move(int8));
  }

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
    if (!ctx_) {
      ctx_ = std::make_unique<CpuContext>(arena_);
      ctx_->set_collective(collective_.get(), rank_);
    }
    return *ctx_;
  }

  const CpuRegistry& registry_;
  int threads_;
  std::shared_ptr<ArenaShare> share_;
  std::shared_ptr<WeightPacks> packs_;
  bool int8_products_ = false;
  std::shared_ptr<HostCollective> collective_;
  int rank_ = 0;
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

void CpuContext::set_packed_weights(WeightPacks* packs, std::vector<uint64_t> b_offsets, std::vector<uint64_t> int8_b) {
  packs_ = packs;
  packed_b_ = std::move(b_offsets);
  int8_b_ = std::move(int8_b);
}

const float* CpuContext::packed_weights(const MatMulParams& p) {
  if (!packs_ || !std::binary_search(packed_b_.begin(), packed_b_.end(), p.b)) return nullptr;
  return packs_->get(p, arena_);
}

const uint32_t* CpuContext::packed_int8(const MatMulParams& p) {
  if (!packs_ || !std::binary_search(int8_b_.begin(), int8_b_.end(), p.b)) return nullptr;
  return reinterpret_cast<const uint32_t*>(packs_->get(p, arena_, true));
}

CpuMatmulRuns matmul_runs(const BackendExecutable& exe) {
  const auto* cpu = dynamic_cast<const CpuExecutable*>(&exe);
  RLX_CHECK(cpu, "matmul_runs: not a CPU executable");
  const CpuContext* ctx = cpu->context_if_any();
  CpuMatmulRuns r{ctx ? ctx->runs(GemmPath::Packed) : 0, ctx ? ctx->runs(GemmPath::Library) : 0,
                  cpu->packs().packs_made()};
  r.packed_bf16 = ctx ? ctx->runs(GemmPath::PackedBf16) : 0;
  r.packed_int8 = ctx ? ctx->runs(GemmPath::PackedInt8) : 0;
  return r;
}

CpuBackend::CpuBackend() {
#define X(e, n, P) register_cpu_##n(registry_);
#include "thunks/thunks.def"
#undef X
}

std::unique_ptr<BackendExecutable> CpuBackend::prepare(const Schedule& s, const CompileOptions& o) {
  return std::make_unique<CpuExecutable>(s, registry_, o);
}

}  // namespace cpu

Backend& cpu_backend() {
  static cpu::CpuBackend backend;
  return backend;
}

}  // namespace rlx
