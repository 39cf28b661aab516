// matmul_q on the CPU. By default (cpu_quant_dot.h) x's rows are quantized
// to int8 per block and every product runs on the packed blocks with
// integer dot products, threads over W's rows, for any number of rows (from
// kQuantGemmRows on, tiled: cpu_quant_gemm.h): a row's result is the same
// in a prefill as in a decode step.
//
// With AVX512-VNNI, weights that no thunk writes are interleaved 16 rows at
// a time in place on their first product (cpu_quant_rows16.h); the other
// kernels put them back in the row layout first.
//
// FP8 weights always take the f32 kernel: e4m3 codes are no integers for
// the integer kernels, and they are never interleaved.
//
// The f32 kernel (RLX_CPU_QUANT_KERNEL=f32), the reference the other
// backends are held to: each weight row is dequantized a block at a time
// (f32) and dotted with up to kMatMulQVectorRows rows of x at once; a graph
// compiled for another device, whose larger products have a scratch output
// for W, dequantizes W there (in x's dtype) and runs the plain matrix
// product over it, as the CUDA backend does.
#include <algorithm>
#include <cstring>

#include "backends/cpu/cpu_matmul.h"
#include "backends/cpu/cpu_matvec_fusion.h"
#include "backends/cpu/cpu_parallel.h"
#include "backends/cpu/cpu_quant_dot.h"
#include "backends/cpu/cpu_quant_gemm.h"
#include "backends/cpu/cpu_quant_rows16.h"
#include "backends/cpu/cpu_registry.h"
#include "backends/cpu/cpu_storage.h"
#include "backends/cpu/cpu_weight_packs.h"
#include "rlx/fp8.h"
#include "rlx/graph.h"
#include "thunks/quant_math.h"

namespace rlx::cpu {
namespace {

// x's rows quantized per block, then one integer dot per (row of W, row of x).
// rows16: W interleaved (its first rows16_rows(n) rows).
template <class T> void matmul_q_int8(const MatMulQParams& p, CpuContext& ctx, QuantKernel kernel, bool rows16) {
  uint8_t* arena = ctx.arena();
  const uint8_t* quants = arena + p.quants;
  const uint16_t* scales = at<uint16_t>(arena, p.scales);
  const int64_t blocks = p.k / kQuantBlock, row_bytes = blocks * quant_block_bytes(p.quant);
  const int64_t row_scales = blocks * quant_scales_per_block(p.quant);
  const T* bias = p.bias == kNoBuffer ? nullptr : at<T>(arena, p.bias);
  const T* residual = p.fused.residual == kNoBuffer ? nullptr : at<const T>(arena, p.fused.residual);
  float* x = ctx.scratch(0, size_t(p.m * p.k));
  product_rows_f32(at<T>(arena, p.x), p.m, p.k, p.k, p.fused, arena, x);
  // Grow-only. The workers must read this thread's copy: a lambda does not
  // capture a thread_local (each thread would name its own), the reference does.
  thread_local Q8Activations mine;
  Q8Activations& a = mine;
  const int threads = p.m * p.n * p.k > 16384 ? run_threads() : 1;
  size_activations(p.m, p.k, p.quant, a);
  // A prompt's rows quantized on all threads (one thread's share of the
  // product's time otherwise).
  parallel_ranges(p.m, p.m >= kQuantGemmRows ? threads : 1,
                  [&](int64_t lo, int64_t hi, int) { quantize_activation_rows(x, lo, hi, a); });
  const QuantRows w{quants, scales, row_bytes, row_scales};
  float* y = ctx.scratch(1, size_t(p.m * p.n));
  T* out = at<T>(arena, p.out);
  // A fused glu gates the whole product once it is done.
  const bool glu = p.fused.glu != Activation::None;
  // Bias and residual added by the thread that computed the columns.
  // The branches out of the inner loop, so that it vectorizes (adding 0.f
  // for a missing term gives the same bits: y + 0 = y, and -0 + 0 = +0 as before).
  auto finish = [&](int64_t lo, int64_t hi) {
    for (int64_t i = 0; i < p.m; ++i) {
      const float* yi = y + i * p.n;
      T* oi = out + i * p.n;
      const T* ri = residual ? residual + i * p.n : nullptr;
      if (bias && ri) {
        for (int64_t r = lo; r < hi; ++r) oi[r] = from_f32<T>(yi[r] + to_f32(bias[r]) + to_f32(ri[r]));
      } else if (bias) {
        for (int64_t r = lo; r < hi; ++r) oi[r] = from_f32<T>(yi[r] + to_f32(bias[r]) + 0.f);
      } else if (ri) {
        for (int64_t r = lo; r < hi; ++r) oi[r] = from_f32<T>(yi[r] + 0.f + to_f32(ri[r]));
      } else {
        for (int64_t r = lo; r < hi; ++r) oi[r] = from_f32<T>(yi[r] + 0.f + 0.f);
      }
    }
  };
  if (rows16) {
    // 16-row groups, then the rows past them (row layout, one-row kernel:
    // its bits for any number of rows of x) as one more unit of work.
    count_rows16_call(p.m);
    const int64_t n16 = rows16_rows(p.n), groups = n16 / 16;
    const QuantProduct product = quant_product(p.quant, kernel);
    parallel_ranges(groups + (n16 < p.n ? 1 : 0), threads, [&](int64_t lo, int64_t hi, int) {
      const int64_t g1 = std::min(hi, groups);
      if (lo < g1) {
        product_rows16(p.quant, w, lo, g1, a, y, p.n);
        if (!glu) finish(lo * 16, g1 * 16);
      }
      if (hi > groups) {
        product(w, n16, p.n, a, y, p.n);
        if (!glu) finish(n16, p.n);
      }
    });
  } else if (kernel == QuantKernel::Avx512Vnni && p.m >= kQuantGemmRows) {
    // Many rows (a prompt): the tiled kernel, whose results are the one-row
    // kernel's bits (cpu_quant_gemm.h).
    count_quant_gemm_call();
    thread_local ActivationTiles tiles_mine;
    ActivationTiles& tiles = tiles_mine;
    pack_activation_tiles(a, tiles);
    const QuantGemm gemm = quant_gemm(p.quant);
    parallel_ranges(p.n, threads, [&](int64_t lo, int64_t hi, int) {
      gemm(w, lo, hi, tiles, y, p.n);
      if (!glu) finish(lo, hi);
    });
  } else {
    const QuantProduct product = quant_product(p.quant, kernel);
    parallel_ranges(p.n, threads, [&](int64_t lo, int64_t hi, int) {
      product(w, lo, hi, a, y, p.n);
      if (!glu) finish(lo, hi);
    });
  }
  if (glu) glu_rows(p.fused.glu, y, p.m, p.n, p.n, bias, out, p.n / 2);
}

// One block's dot as 8 partial sums in two 4-float vectors (FP8's
// products; the other formats keep the reference's one running sum, whose
// order the tests hold other kernels to). Vector types of GCC and Clang:
// an array of 8 sums stayed scalar and on the stack.
inline float dot_block_lanes(const float* w, const float* x) {
  typedef float F4 __attribute__((vector_size(16)));
  F4 s0{}, s1{};
  for (int64_t j = 0; j < kQuantBlock; j += 8) {
    F4 w0, w1, x0, x1;
    std::memcpy(&w0, w + j, 16);
    std::memcpy(&w1, w + j + 4, 16);
    std::memcpy(&x0, x + j, 16);
    std::memcpy(&x1, x + j + 4, 16);
    s0 += w0 * x0;
    s1 += w1 * x1;
  }
  const F4 s = s0 + s1;
  return (s[0] + s[2]) + (s[1] + s[3]);
}

template <class T> void matmul_q(const MatMulQParams& p, CpuContext& ctx) {
  const QuantKernel kernel = p.quant == QuantType::FP8 ? QuantKernel::F32 : quant_kernel();
  count_quant_kernel_call(kernel);
  uint8_t* arena = ctx.arena();
  WeightPacks* packs = ctx.weight_packs();
  const bool rows16 = packs && kernel == QuantKernel::Avx512Vnni && p.weights_constant && rows16_rows(p.n) > 0;
  if (rows16) packs->quant_rows16(p, arena);
  else if (packs) packs->quant_plain(p.quants, arena);
  if (kernel != QuantKernel::F32) return matmul_q_int8<T>(p, ctx, kernel, rows16);
  const uint8_t* quants = arena + p.quants;
  const uint16_t* scales = at<uint16_t>(arena, p.scales);
  const int64_t blocks = p.k / kQuantBlock, row_bytes = blocks * quant_block_bytes(p.quant);
  const int64_t per = quant_scales_per_block(p.quant);
  const T* bias = p.bias == kNoBuffer ? nullptr : at<T>(arena, p.bias);
  const bool threaded = p.n * p.k > 16384;
  if (p.dequantized != kNoBuffer) {
    T* w = at<T>(arena, p.dequantized);
    parallel_for(p.n, threaded, [&](int64_t r) {
      float block[kQuantBlock];
      for (int64_t c = 0; c < blocks; ++c) {
        dequantize_row(p.quant, quants + r * row_bytes + c * quant_block_bytes(p.quant), scales + (r * blocks + c) * per,
                       kQuantBlock, block);
        for (int64_t j = 0; j < kQuantBlock; ++j) w[r * p.k + c * kQuantBlock + j] = from_f32<T>(block[j]);
      }
    });
    run_matmul(dequantized_product(p), ctx);
    return;
  }
  float* x = ctx.scratch(0, size_t(p.m * p.k));
  product_rows_f32(at<T>(arena, p.x), p.m, p.k, p.k, p.fused, arena, x);
  const T* residual = p.fused.residual == kNoBuffer ? nullptr : at<const T>(arena, p.fused.residual);
  T* out = at<T>(arena, p.out);
  // A fused glu gates the whole product, taken into scratch first.
  const bool glu = p.fused.glu != Activation::None;
  float* y = glu ? ctx.scratch(1, size_t(p.m * p.n)) : nullptr;
  const bool lanes = p.quant == QuantType::FP8;
  // kMatMulQVectorRows rows of x at a time: each weight row is dequantized
  // once a chunk (a block at a time) and dotted with every row of the chunk.
  for (int64_t i0 = 0; i0 < p.m; i0 += kMatMulQVectorRows) {
    const int64_t rows = std::min<int64_t>(kMatMulQVectorRows, p.m - i0);
    parallel_for(p.n, threaded, [&](int64_t r) {
      float acc[kMatMulQVectorRows] = {};
      float block[kQuantBlock];
      for (int64_t c = 0; c < blocks; ++c) {
        if (lanes) {  // the codes decoded here (a vector loop), the scale applied to each block's dot
          const uint8_t* q = quants + r * row_bytes + c * kQuantBlock;
          for (int64_t j = 0; j < kQuantBlock; ++j) block[j] = e4m3_to_float(q[j]);
          const float d = half_to_float(scales[r * blocks + c]);
          for (int64_t i = 0; i < rows; ++i)
            acc[i] += d * dot_block_lanes(block, x + (i0 + i) * p.k + c * kQuantBlock);
          continue;
        }
        dequantize_row(p.quant, quants + r * row_bytes + c * quant_block_bytes(p.quant),
                       scales + (r * blocks + c) * per, kQuantBlock, block);
        for (int64_t i = 0; i < rows; ++i) {
          const float* xb = x + (i0 + i) * p.k + c * kQuantBlock;
          for (int64_t j = 0; j < kQuantBlock; ++j) acc[i] += block[j] * xb[j];
        }
      }
      for (int64_t i = i0; i < i0 + rows; ++i) {
        if (glu) y[i * p.n + r] = acc[i - i0];
        else
          out[i * p.n + r] = from_f32<T>(acc[i - i0] + (bias ? to_f32(bias[r]) : 0.f) +
                                         (residual ? to_f32(residual[i * p.n + r]) : 0.f));
      }
    });
  }
  if (glu) glu_rows(p.fused.glu, y, p.m, p.n, p.n, bias, out, p.n / 2);
}

}  // namespace

void register_cpu_matmul_q(CpuRegistry& r) {
  r.add<MatMulQParams>(DType::F32, matmul_q<float>);
  r.add<MatMulQParams>(DType::F16, matmul_q<Half>);
  r.add<MatMulQParams>(DType::BF16, matmul_q<BFloat>);
}

}  // namespace rlx::cpu
