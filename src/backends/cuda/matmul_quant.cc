#include "backends/cuda/matmul_quant.h"

#include <atomic>

#include "backends/cuda/cuda_registry.h"
#include "backends/cuda/dispatch.h"
#include "backends/cuda/gemv_quant.h"
#include "backends/cuda/matmul.h"
#include "backends/cuda/matvec_chain.h"
#include "rlx/error.h"
#include "thunks/quant_math.h"

namespace rlx::cuda {
namespace {

std::atomic<int> g_gemv{0}, g_dequantize{0};

class MatMulQThunk final : public DeviceThunk {
 public:
  MatMulQThunk(const MatMulQParams& p, const DeviceResources& r, const std::string& label) : p_(p) {
    if (p.dequantized != kNoBuffer) {
      plan_ = std::make_unique<MatMulPlan>(r.lt, dequantized_product(p), r.arena, r.workspace, r.workspace_bytes,
                                           label, r.allow_tf32);
      g_dequantize.fetch_add(1);
    } else {
      RLX_CHECK(gemv_quant_eligible(p, r.arena),
                "matmul_q: " << label << " (m=" << p.m << " n=" << p.n << " k=" << p.k
                             << ") fits no quantized kernel: quants must start 16-byte aligned");
      g_gemv.fetch_add(1);
    }
  }
  ChainableProduct chainable_product() const override {
    ChainableProduct c;
    if (!plan_ && matvec_chain_accepts(p_)) c.quantized = &p_;
    return c;
  }
  void execute(const LaunchContext& ctx) const override {
    if (plan_) {
      run_dequantize(p_, ctx);
      plan_->execute(ctx);
    } else {
      run_gemv_quant(p_, ctx);
    }
  }

 private:
  MatMulQParams p_;
  std::unique_ptr<MatMulPlan> plan_;
};

}  // namespace

std::unique_ptr<DeviceThunk> make_matmul_q_thunk(const MatMulQParams& p, const DeviceResources& r,
                                                 const std::string& label) {
  RLX_CHECK(p.quant == QuantType::Q8_0 || p.quant == QuantType::Q4_0 || p.quant == QuantType::FP8,
            label << ": matmul_q of " << quant_type_name(p.quant) << " weights has no CUDA kernel (CPU only)");
  return std::make_unique<MatMulQThunk>(p, r, label);
}

MatMulQPathCounts matmul_q_path_counts() { return {g_gemv.load(), g_dequantize.load()}; }

// Stateful like matmul: the plan is made at initialize.
void register_cuda_matmul_q(CudaRegistry& r) {
  for (DType dt : kFloatDTypes) r.add_stateful<MatMulQParams>(dt);
}

}  // namespace rlx::cuda
