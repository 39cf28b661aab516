// Matrix products through cblas_sgemm. f16/bf16 operands are widened to f32
// scratch first; bias and activation run as an epilogue over the output.
#include <cblas.h>

#include "backends/cpu/cpu_activation.h"
#include "backends/cpu/cpu_registry.h"
#include "backends/cpu/cpu_storage.h"

namespace rlx::cpu {
namespace {

// Widens a rows x cols matrix with row length ld into a dense f32 buffer.
template <class T> void widen(const T* src, int64_t rows, int64_t cols, int64_t ld, float* dst) {
#pragma omp parallel for if (rows * cols > 16384)
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t c = 0; c < cols; ++c) dst[r * cols + c] = to_f32(src[r * ld + c]);
}

// out = act(c + bias) for an m x n f32 result c (row length ldc_in).
template <class T>
void epilogue(const MatMulParams& p, const float* c, int64_t ldc_in, const T* bias, T* out) {
#pragma omp parallel for if (p.m * p.n > 16384)
  for (int64_t i = 0; i < p.m; ++i)
    for (int64_t j = 0; j < p.n; ++j) {
      float v = c[i * ldc_in + j];
      if (bias) v += to_f32(bias[j]);
      out[i * p.ldc + j] = from_f32<T>(apply_activation(p.act, v));
    }
}

void sgemm(const MatMulParams& p, const float* a, int64_t lda, const float* b, int64_t ldb, float* c,
           int64_t ldc) {
  cblas_sgemm(CblasRowMajor, p.trans_a ? CblasTrans : CblasNoTrans, p.trans_b ? CblasTrans : CblasNoTrans,
              int(p.m), int(p.n), int(p.k), 1.f, a, int(lda), b, int(ldb), 0.f, c, int(ldc));
}

void matmul_f32(const MatMulParams& p, CpuContext& ctx) {
  uint8_t* arena = ctx.arena();
  const float* bias = p.bias == kNoBuffer ? nullptr : at<float>(arena, p.bias);
  for (int64_t bi = 0; bi < p.batch; ++bi) {
    const float* a = at<float>(arena, p.a) + bi * p.stride_a;
    const float* b = at<float>(arena, p.b) + bi * p.stride_b;
    float* out = at<float>(arena, p.out) + bi * p.stride_out;
    if (p.k == 0) {  // empty inner product: BLAS leaves c untouched
      for (int64_t i = 0; i < p.m; ++i)
        for (int64_t j = 0; j < p.n; ++j) out[i * p.ldc + j] = 0.f;
    } else {
      sgemm(p, a, p.lda, b, p.ldb, out, p.ldc);
    }
    if (bias || p.act != Activation::None) epilogue(p, out, p.ldc, bias, out);
  }
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
    if (p.k == 0) {
      for (int64_t i = 0; i < p.m * p.n; ++i) c32[i] = 0.f;
    } else {
      sgemm(p, a32, a_cols, b32, b_cols, c32, p.n);
    }
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
