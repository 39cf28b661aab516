// Mixture-of-experts products over block-quantized experts
// (MoeMatMulQParams), the experts' blocks read where they are: a Mixtral or
// Qwen3-MoE GGUF's experts stay the size of the file. Work is split over
// (row, block of output columns) as in moe_matmul (cpu_moe_units.h); each
// unit takes its x row once per choice and runs matmul_q's row kernel
// (cpu_quant_dot.h) over the chosen expert's rows of that block: the integer
// kernel on x quantized per block, or the f32 reference
// (RLX_CPU_QUANT_KERNEL=f32) on blocks dequantized one at a time.
#include <algorithm>

#include "backends/cpu/cpu_moe_units.h"
#include "backends/cpu/cpu_quant_dot.h"
#include "backends/cpu/cpu_registry.h"
#include "backends/cpu/cpu_storage.h"
#include "thunks/quant_math.h"

namespace rlx::cpu {
namespace {

// The f32 reference: W's rows [r0, r1) dequantized a block at a time and
// dotted with x, into y[r - r0].
void dot_rows_f32(const QuantRows& w, QuantType t, int64_t r0, int64_t r1, const float* x, int64_t k, float* y) {
  const int64_t blocks = k / kQuantBlock, per = quant_scales_per_block(t);
  float block[kQuantBlock];
  for (int64_t r = r0; r < r1; ++r) {
    float acc = 0.f;
    for (int64_t c = 0; c < blocks; ++c) {
      dequantize_row(t, w.quants + r * w.row_bytes + c * quant_block_bytes(t), w.scales + r * w.row_scales + c * per,
                     kQuantBlock, block);
      for (int64_t j = 0; j < kQuantBlock; ++j) acc += block[j] * x[c * kQuantBlock + j];
    }
    y[r - r0] = acc;
  }
}

template <class T> void moe_matmul_q(const MoeMatMulQParams& p, CpuContext& ctx) {
  uint8_t* arena = ctx.arena();
  const int64_t K = p.k, N = p.n, kb = K / kQuantBlock;
  const QuantRows w{arena + p.quants, at<const uint16_t>(arena, p.scales), kb * quant_block_bytes(p.quant),
                    kb * quant_scales_per_block(p.quant)};
  // FP8 has no integer kernel (cpu_matmul_q.cc): the f32 one reads it.
  const QuantKernel kernel = p.quant == QuantType::FP8 ? QuantKernel::F32 : quant_kernel();
  count_quant_kernel_call(kernel);
  const QuantProduct product = kernel == QuantKernel::F32 ? nullptr : quant_product(p.quant, kernel);
  const int threads = p.rows * p.top_k * N * K > (int64_t(1) << 16) ? run_threads() : 1;
  // The row kernel writes y at the weight row's index: a worker's y spans
  // every expert's rows.
  float* ys = ctx.scratch(1, size_t(threads * p.experts * N));
  auto activations = [](int worker) -> Q8Activations& {  // grow-only, one per worker thread
    thread_local Q8Activations mine;
    (void)worker;
    return mine;
  };
  auto on_x = [&](int worker, const float* xr) {
    if (product) quantize_activations(xr, 1, K, p.quant, activations(worker));
  };
  run_moe_units<T>(
      p, ctx, threads, on_x,
      [&](int worker, int32_t e, int64_t c0, int64_t c1, const float* xr, float* y) {
        const int64_t r0 = int64_t(e) * N + c0, r1 = r0 + (c1 - c0);
        float* yw = ys + worker * p.experts * N;
        if (product) product(w, r0, r1, activations(worker), yw, 0);
        else dot_rows_f32(w, p.quant, r0, r1, xr, K, yw + r0);
        std::copy(yw + r0, yw + r1, y);
      });
}

}  // namespace

void register_cpu_moe_matmul_q(CpuRegistry& r) {
  r.add<MoeMatMulQParams>(DType::F32, moe_matmul_q<float>);
  r.add<MoeMatMulQParams>(DType::F16, moe_matmul_q<Half>);
  r.add<MoeMatMulQParams>(DType::BF16, moe_matmul_q<BFloat>);
}

}  // namespace rlx::cpu
