#include "backends/cuda/device_thunk.h"

#include <string>
#include <type_traits>
#include <variant>

#include "backends/cuda/attention_cudnn.h"
#include "backends/cuda/collective_thunks.h"
#include "backends/cuda/cuda_registry.h"
#include "backends/cuda/matmul.h"
#include "backends/cuda/matmul_quant.h"
#include "backends/cuda/matvec_chain.h"

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
  ChainableProduct chainable_product() const override {
    ChainableProduct c;
    if (plan_.uses_gemv() && matvec_chain_accepts(plan_.params())) c.dense = &plan_.params();
    return c;
  }

 private:
  MatMulPlan plan_;
};

}  // namespace

const CudaRegistry& cuda_registry() {
  static const CudaRegistry registry = [] {
    CudaRegistry r;
#define X(e, n, P) register_cuda_##n(r);
#include "thunks/thunks.def"
#undef X
    return r;
  }();
  return registry;
}

std::unique_ptr<DeviceThunk> make_device_thunk(const Thunk& t, const DeviceResources& r) {
  const CudaRegistry& reg = cuda_registry();
  RLX_CHECK(reg.has(t.kind(), t.dtype()), "CUDA backend has no kernel for " + t.label + " (" +
                                              thunk_name(t.kind()) + ", " + std::string(dtype_name(t.dtype())) + ")");
  if (const auto* c = std::get_if<CopyParams>(&t.params))
    RLX_CHECK(reg.has(ThunkKind::Copy, c->dst_dtype),
              "CUDA backend cannot copy into " + std::string(dtype_name(c->dst_dtype)) + " for " + t.label);
  return std::visit(
      [&](const auto& p) -> std::unique_ptr<DeviceThunk> {
        using P = std::decay_t<decltype(p)>;
        if constexpr (std::is_same_v<P, MatMulParams>) {
          return std::make_unique<MatMulThunk>(p, r, t.label);
        } else if constexpr (std::is_same_v<P, AllReduceParams>) {
          return make_all_reduce_thunk(p, r);
        } else if constexpr (std::is_same_v<P, AllGatherParams>) {
          return make_all_gather_thunk(p, r);
        } else if constexpr (std::is_same_v<P, MatMulQParams>) {
          return make_matmul_q_thunk(p, r, t.label);
        } else if constexpr (std::is_same_v<P, AttentionParams>) {
          // cuDNN's fused attention where it takes the problem; rlx's kernels otherwise.
          if (auto fused = make_cudnn_attention(p, r, t.label)) return fused;
          count_own_attention();
          return std::make_unique<KernelThunk<P>>(p, reg.run<P>(dtype_of(p)));
        } else {
          return std::make_unique<KernelThunk<P>>(p, reg.run<P>(dtype_of(p)));
        }
      },
      t.params);
}

}  // namespace rlx::cuda
