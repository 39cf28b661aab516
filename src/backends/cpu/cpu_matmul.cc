// Matrix products through the CPU GEMM (cpu_gemm.h). f16/bf16 operands are widened to f32
// scratch first; bias and activation run as an epilogue over the output.
#include <algorithm>

#include "backends/cpu/cpu_activation.h"
#include "backends/cpu/cpu_gemm.h"
#include "backends/cpu/cpu_parallel.h"
#include "backends/cpu/cpu_registry.h"
#include "backends/cpu/cpu_storage.h"

namespace rlx::cpu {
namespace {

// Widens a rows x cols matrix with row length ld into a dense f32 buffer.
template <class T> void widen(const T* src, int64_t rows, int64_t cols, int64_t ld, float* dst) {
  parallel_for(rows, rows * cols > 16384, [&](int64_t r) {
    for (int64_t c = 0; c < cols; ++c) dst[r * cols + c] = to_f32(src[r * ld + c]);
  });
}

// out = act(c + bias) for an m x n f32 result c (row length ldc_in).
template <class T>
void epilogue(const MatMulParams& p, const float* c, int64_t ldc_in, const T* bias, T* out) {
  parallel_for(p.m, p.m * p.n > 16384, [&](int64_t i) {
    for (int64_t j = 0; j < p.n; ++j) {
      float v = c[i * ldc_in + j];
      if (bias) v += to_f32(bias[j]);
      out[i * p.ldc + j] = from_f32<T>(apply_activation(p.act, v));
    }
  });
}

// C (+ bias, activation) = op(A) @ op(B) for one batch entry, split over the
// backend's thread pool into slices of C: each slice is one single-threaded
// library call, then its bias and activation while the slice is still in
// cache. The library never starts threads of its own, so nothing competes
// with the pool for the cores. Columns are split when B is the larger operand
// (weights: n >= m), so each thread packs only its part of B; splitting rows
// would have every thread pack all of B (that packing was 40% of matmul time
// at M = 64 per thread). Slices are a few per thread, handed out dynamically.
void product_f32(const MatMulParams& p, const float* a, int64_t lda, const float* b, int64_t ldb, float* c,
                 int64_t ldc, const float* bias) {
  const bool epilogue = bias || p.act != Activation::None;
  auto finish = [&](int64_t r0, int64_t rows, int64_t c0, int64_t cols) {
    if (p.k == 0)  // empty inner product: the library would leave c untouched
      for (int64_t i = r0; i < r0 + rows; ++i)
        for (int64_t j = c0; j < c0 + cols; ++j) c[i * ldc + j] = 0.f;
    if (epilogue)
      for (int64_t i = r0; i < r0 + rows; ++i)
        activation_row(p.act, c + i * ldc + c0, bias ? bias + c0 : nullptr, c + i * ldc + c0, cols);
  };
  const int64_t work = p.m * p.n * std::max<int64_t>(p.k, 1);
  const int threads = work < (int64_t(1) << 17) ? 1 : run_threads();
  const bool split_cols = p.n >= p.m;
  // Two slices per thread (one when alone): every slice re-packs the other
  // operand. Column slices are whole 64-byte lines of C (16 floats) so threads
  // never share one.
  const int64_t extent = split_cols ? p.n : p.m, align = split_cols ? 16 : 1;
  const int64_t slices = threads > 1 ? 2 * threads : 1;
  const int64_t grain = std::max(align, (extent + slices - 1) / slices + align - 1) / align * align;
  const int64_t units = (extent + grain - 1) / grain;
  parallel_ranges(units, threads, [&](int64_t u0, int64_t u1, int) {
    const int64_t lo = std::min(extent, u0 * grain), len = std::min(extent, u1 * grain) - lo;
    if (len <= 0) return;
    if (split_cols) {  // columns lo.. of op(B) and C
      const float* bs = p.trans_b ? b + lo * ldb : b + lo;
      if (p.k > 0) gemm_f32(p.trans_a, p.trans_b, p.m, len, p.k, a, lda, bs, ldb, c + lo, ldc, 1);
      finish(0, p.m, lo, len);
    } else {  // rows lo.. of op(A) and C
      const float* as = p.trans_a ? a + lo : a + lo * lda;
      if (p.k > 0) gemm_f32(p.trans_a, p.trans_b, len, p.n, p.k, as, lda, b, ldb, c + lo * ldc, ldc, 1);
      finish(lo, len, 0, p.n);
    }
  });
}

void matmul_f32(const MatMulParams& p, CpuContext& ctx) {
  uint8_t* arena = ctx.arena();
  const float* bias = p.bias == kNoBuffer ? nullptr : at<float>(arena, p.bias);
  for (int64_t bi = 0; bi < p.batch; ++bi)
    product_f32(p, at<float>(arena, p.a) + bi * p.stride_a, p.lda, at<float>(arena, p.b) + bi * p.stride_b, p.ldb,
                at<float>(arena, p.out) + bi * p.stride_out, p.ldc, bias);
}

template <class T> void matmul_widened(const MatMulParams& p, CpuContext& ctx) {
  uint8_t* arena = ctx.arena();
  const T* bias = p.bias == kNoBuffer ? nullptr : at<T>(arena, p.bias);
  // Stored shapes of the operands (before the transpose flag applies).
  int64_t a_rows = p.trans_a ? p.k : p.m, a_cols = p.trans_a ? p.m : p.k;
  int64_t b_rows = p.trans_b ? p.n : p.k, b_cols = p.trans_b ? p.k : p.n;
  float* a32 = ctx.scratch(0, size_t(a_rows * a_cols));
  float* b32 = ctx.scratch(1, size_t(b_rows * b_cols));
  float* c32 = ctx.scratch(2, size_t(p.m * p.n));
  for (int64_t bi = 0; bi < p.batch; ++bi) {
    // A batch stride of 0 broadcasts: widen that operand once.
    if (bi == 0 || p.stride_a != 0) widen(at<T>(arena, p.a) + bi * p.stride_a, a_rows, a_cols, p.lda, a32);
    if (bi == 0 || p.stride_b != 0) widen(at<T>(arena, p.b) + bi * p.stride_b, b_rows, b_cols, p.ldb, b32);
    MatMulParams plain = p;  // the product alone; bias and activation apply while narrowing
    plain.act = Activation::None;
    product_f32(plain, a32, a_cols, b32, b_cols, c32, p.n, nullptr);
    epilogue(p, c32, p.n, bias, at<T>(arena, p.out) + bi * p.stride_out);
  }
}

}  // namespace

void register_cpu_matmul(CpuRegistry& r) {
  r.add<MatMulParams>(DType::F32, matmul_f32);
  r.add<MatMulParams>(DType::F16, matmul_widened<Half>);
  r.add<MatMulParams>(DType::BF16, matmul_widened<BFloat>);
}

}  // namespace rlx::cpu
