// Mixture-of-experts products over block-quantized experts
// (MoeMatMulQParams), the experts' blocks read where they are: a Mixtral or
// Qwen3-MoE GGUF's experts stay the size of the file. Work is split over
// (row, block of output columns) as in moe_matmul; each unit takes its x row
// once per choice and runs matmul_q's row kernel (cpu_quant_dot.h) over the
// chosen expert's rows of that block: the integer kernel on x quantized per
// block, or the f32 reference (RLX_CPU_QUANT_KERNEL=f32) on blocks
// dequantized one at a time.
#include <algorithm>

#include "backends/cpu/cpu_parallel.h"
#include "backends/cpu/cpu_quant_dot.h"
#include "backends/cpu/cpu_registry.h"
#include "backends/cpu/cpu_storage.h"
#include "thunks/quant_math.h"

namespace rlx::cpu {
namespace {

constexpr int64_t kColumnBlock = 32;

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
  const T* x = at<const T>(arena, p.x);
  const int32_t* ids = at<const int32_t>(arena, p.ids);
  const T* weights = p.weights == kNoBuffer ? nullptr : at<const T>(arena, p.weights);
  T* out = at<T>(arena, p.out);
  const int64_t K = p.k, N = p.n, blocks = (N + kColumnBlock - 1) / kColumnBlock;
  const int64_t kb = K / kQuantBlock;
  const QuantRows w{arena + p.quants, at<const uint16_t>(arena, p.scales), kb * quant_block_bytes(p.quant),
                    kb * quant_scales_per_block(p.quant)};
  const QuantKernel kernel = quant_kernel();
  count_quant_kernel_call(kernel);
  const QuantProduct product = kernel == QuantKernel::F32 ? nullptr : quant_product(p.quant, kernel);
  const int threads = p.rows * p.top_k * N * K > (int64_t(1) << 16) ? run_threads() : 1;
  float* xs = ctx.scratch(0, size_t(threads * K));
  // The row kernel writes y at the weight row's index: a worker's y spans
  // every expert's rows.
  float* ys = ctx.scratch(1, size_t(threads * p.experts * N));
  float* acc = ctx.scratch(2, size_t(threads * kColumnBlock));
  parallel_ranges(p.rows * blocks, threads, [&](int64_t lo, int64_t hi, int worker) {
    thread_local Q8Activations mine;  // grow-only, one per worker thread
    Q8Activations& a = mine;
    float* xr = xs + worker * K;
    float* y = ys + worker * p.experts * N;
    float* sum = acc + worker * kColumnBlock;
    for (int64_t u = lo; u < hi; ++u) {
      const int64_t r = u / blocks, c0 = (u % blocks) * kColumnBlock, c1 = std::min(N, c0 + kColumnBlock);
      std::fill(sum, sum + kColumnBlock, 0.f);
      for (int64_t j = 0; j < p.top_k; ++j) {
        const int32_t e = ids[r * p.top_k + j];
        const bool valid = e >= 0 && e < p.experts;
        if (j == 0 || p.x_choice_stride != 0) {
          const T* xrow = x + r * p.x_row_stride + j * p.x_choice_stride;
          for (int64_t i = 0; i < K; ++i) xr[i] = to_f32(xrow[i]);
          if (product) quantize_activations(xr, 1, K, p.quant, a);
        }
        const int64_t r0 = int64_t(valid ? e : 0) * N + c0, r1 = r0 + (c1 - c0);
        if (valid && product) product(w, r0, r1, a, y, 0);
        else if (valid) dot_rows_f32(w, p.quant, r0, r1, xr, K, y + r0);
        const float scale = weights ? to_f32(weights[r * p.top_k + j]) : 1.f;
        for (int64_t c = c0; c < c1; ++c) {
          const float v = valid ? y[r0 + (c - c0)] : 0.f;
          if (weights) sum[c - c0] += scale * v;
          else out[(r * p.top_k + j) * N + c] = from_f32<T>(v);
        }
      }
      if (weights)
        for (int64_t c = c0; c < c1; ++c) out[r * N + c] = from_f32<T>(sum[c - c0]);
    }
  });
}

}  // namespace

void register_cpu_moe_matmul_q(CpuRegistry& r) {
  r.add<MoeMatMulQParams>(DType::F32, moe_matmul_q<float>);
  r.add<MoeMatMulQParams>(DType::F16, moe_matmul_q<Half>);
  r.add<MoeMatMulQParams>(DType::BF16, moe_matmul_q<BFloat>);
}

}  // namespace rlx::cpu
