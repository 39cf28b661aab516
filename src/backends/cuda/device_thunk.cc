#include "backends/cuda/device_thunk.h"

#include <string>
#include <type_traits>
#include <variant>

#include "backends/cuda/attention_cudnn.h"
#include "backends/cuda/kernels.h"
#include "backends/cuda/matmul.h"

namespace rlx::cuda {
namespace {

// A thunk served by one kernel family. The family's entry point takes exactly
// this params type: KernelThunk<P> cannot be built from another's.
template <class P>
class KernelThunk final : public DeviceThunk {
 public:
  using Run = void (*)(const P&, const LaunchContext&);
  KernelThunk(const P& p, Run run) : p_(p), run_(run) {}
  void execute(const LaunchContext& ctx) const override { run_(p_, ctx); }

 private:
  P p_;
  Run run_;
};

class MatMulThunk final : public DeviceThunk {
 public:
  MatMulThunk(const MatMulParams& p, const DeviceResources& r, const std::string& label)
      : plan_(r.lt, p, r.arena, r.workspace, r.workspace_bytes, label, r.allow_tf32) {}
  void execute(const LaunchContext& ctx) const override { plan_.execute(ctx); }

 private:
  MatMulPlan plan_;
};

auto family(const BinaryParams&) { return &run_binary; }
auto family(const UnaryParams&) { return &run_unary; }
auto family(const CopyParams&) { return &run_copy; }
auto family(const NormParams&) { return &run_norm; }
auto family(const SoftmaxParams&) { return &run_softmax; }
auto family(const SoftmaxCEParams&) { return &run_softmax_xent; }
auto family(const AttentionParams&) { return &run_attention; }
auto family(const RopeParams&) { return &run_rope; }
auto family(const GatherParams&) { return &run_gather; }
auto family(const ReduceParams&) { return &run_reduce; }

constexpr DType kFloatTypes[] = {DType::F32, DType::F16, DType::BF16};

}  // namespace

std::unique_ptr<DeviceThunk> make_device_thunk(const Thunk& t, const DeviceResources& r) {
  if (const auto* c = std::get_if<CopyParams>(&t.params))
    RLX_CHECK(kernel_supports(ThunkKind::Copy, c->dst_dtype),
              "CUDA backend cannot copy into " + std::string(dtype_name(c->dst_dtype)) + " for " + t.label);
  RLX_CHECK(kernel_supports(t.kind, compute_dtype(t)),
            "CUDA backend has no kernel for " + t.label + " (" + thunk_name(t.kind) + ", " +
                std::string(dtype_name(compute_dtype(t))) + ")");
  return std::visit(
      [&](const auto& p) -> std::unique_ptr<DeviceThunk> {
        using P = std::decay_t<decltype(p)>;
        if constexpr (std::is_same_v<P, std::monostate>) {
          throw Error("thunk " + t.label + " has no params");
        } else if constexpr (std::is_same_v<P, MatMulParams>) {
          return std::make_unique<MatMulThunk>(p, r, t.label);
        } else if constexpr (std::is_same_v<P, AttentionParams>) {
          if (auto fused = make_cudnn_attention(p, r, t.label)) return fused;
          count_own_attention();
          return std::make_unique<KernelThunk<P>>(p, family(p));
        } else {
          return std::make_unique<KernelThunk<P>>(p, family(p));
        }
      },
      t.params);
}

// Every family computes in f32/f16/bf16; copy also moves i32 (ids, masks,
// positions) and converts between any two of the four.
const std::vector<std::pair<ThunkKind, DType>>& kernel_registry() {
  static const std::vector<std::pair<ThunkKind, DType>> entries = [] {
    std::vector<std::pair<ThunkKind, DType>> v;
#define X(e, n, P) \
  for (DType dt : kFloatTypes) v.emplace_back(ThunkKind::e, dt);
#include "thunks/thunks.def"
#undef X
    v.emplace_back(ThunkKind::Copy, DType::I32);
    return v;
  }();
  return entries;
}

bool kernel_supports(ThunkKind k, DType dt) {
  for (const auto& [kind, dtype] : kernel_registry())
    if (kind == k && dtype == dt) return true;
  return false;
}

DType compute_dtype(const Thunk& t) {
  return std::visit(
      [&](const auto& p) -> DType {
        using P = std::decay_t<decltype(p)>;
        if constexpr (std::is_same_v<P, std::monostate>) {
          return DType::F32;
        } else if constexpr (std::is_same_v<P, CopyParams>) {
          return p.src_dtype;
        } else {
          return p.dtype;
        }
      },
      t.params);
}

}  // namespace rlx::cuda
