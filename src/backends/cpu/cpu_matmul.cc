// Matrix products: the packed kernel over weights packed once
// (cpu_gemm_packed.h) where the executable chose it, else the library
// (cpu_gemm.h). f16/bf16 activations are widened to f32 scratch first (their
// packed weights are f32 already), except bf16 on packed bf16 weights where
// the processor has AVX512-BF16: those products read their bf16 rows in place
// (matmul_bf16_pairs). Products compiled with int8_products run on weights
// quantized per column and activations quantized per row (matmul_int8).
// Bias and activation run as an epilogue.
#include <algorithm>
#include <type_traits>

#include "backends/cpu/cpu_activation.h"
#include "backends/cpu/cpu_gemm.h"
#include "backends/cpu/cpu_matmul.h"
#include "backends/cpu/cpu_gemm_packed.h"
#include "backends/cpu/cpu_int8_rows.h"
#include "backends/cpu/cpu_matvec_fusion.h"
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

// out = act(c + bias) + residual for an m x n f32 result c (row length
// ldc_in, overwritten by act(c + bias)); bias32 is the bias in f32 (or
// null), residual (or null) is laid out like out. The activation runs
// vectorized on f32 rows (activation_row), then each row narrows.
template <class T>
void epilogue(const MatMulParams& p, float* c, int64_t ldc_in, const float* bias32, Activation act, const T* residual,
              T* out) {
  parallel_for(p.m, p.m * p.n > 16384, [&](int64_t i) {
    float* row = c + i * ldc_in;
    if (bias32 || act != Activation::None) activation_row(act, row, bias32, row, p.n);
    T* o = out + i * p.ldc;
    if (residual)
      for (int64_t j = 0; j < p.n; ++j) o[j] = from_f32<T>(row[j] + to_f32(residual[i * p.ldc + j]));
    else
      for (int64_t j = 0; j < p.n; ++j) o[j] = from_f32<T>(row[j]);
  });
}

template <class T> const T* residual_of(const MatMulParams& p, uint8_t* arena) {
  return p.fused.residual == kNoBuffer ? nullptr : at<const T>(arena, p.fused.residual);
}

int threads_for(const MatMulParams& p) {
  const int64_t work = p.m * p.n * std::max<int64_t>(p.k, 1);
  return work < (int64_t(1) << 17) ? 1 : run_threads();
}

template <class T> void matmul_int8(const MatMulParams& p, CpuContext& ctx, const uint32_t* packed);

void matmul_f32(const MatMulParams& p, CpuContext& ctx) {
  if (const uint32_t* q8 = ctx.packed_int8(p)) return matmul_int8<float>(p, ctx, q8);
  uint8_t* arena = ctx.arena();
  const float* bias = p.bias == kNoBuffer ? nullptr : at<float>(arena, p.bias);
  const float* packed = ctx.packed_weights(p);
  ctx.count(packed ? GemmPath::Packed : GemmPath::Library, uint64_t(p.batch));
  const float* residual = residual_of<float>(p, arena);
  for (int64_t bi = 0; bi < p.batch; ++bi) {
    const float* a = at<float>(arena, p.a) + bi * p.stride_a;
    int64_t lda = p.lda;
    if (p.fused.norm_gamma != kNoBuffer) {  // a few rows, normalized into scratch (fuse_matvec: batch 1)
      float* normed = ctx.scratch(0, size_t(p.m * p.k));
      product_rows_f32(a, p.m, p.k, p.lda, p.fused, arena, normed);
      a = normed;
      lda = p.k;
    }
    // A fused glu (tests of the GPU's fusion: CPU graphs do not fuse it)
    // takes the whole product into scratch first, its bias after.
    const bool glu = p.fused.glu != Activation::None;
    float* c = glu ? ctx.scratch(1, size_t(p.m * p.n)) : at<float>(arena, p.out) + bi * p.stride_out;
    const int64_t ldc = glu ? p.n : p.ldc;
    const float* c_bias = glu ? nullptr : bias;
    if (packed)
      gemm_packed(p.trans_a, p.m, p.n, p.k, a, lda, packed, c, ldc, c_bias, p.act, threads_for(p));
    else
      gemm_f32_sliced(p.trans_a, p.trans_b, p.m, p.n, p.k, a, lda, at<float>(arena, p.b) + bi * p.stride_b, p.ldb,
                      c, ldc, c_bias, p.act, threads_for(p));
    if (glu) glu_rows(p.fused.glu, c, p.m, p.n, p.n, bias, at<float>(arena, p.out) + bi * p.stride_out, p.ldc);
    if (residual)
      for (int64_t i = 0; i < p.m; ++i)
        for (int64_t j = 0; j < p.n; ++j) c[i * p.ldc + j] += residual[bi * p.stride_out + i * p.ldc + j];
  }
}

// The f32 result c32 (m x n, dense) into p's output: its glu, or its bias,
// activation and residual, narrowed to T. bias32: p's bias in f32, or null
// (also when the product applied bias and activation itself).
template <class T>
void narrow_result(const MatMulParams& p, uint8_t* arena, float* c32, const float* bias32, Activation act,
                   int64_t bi) {
  const T* bias = p.bias == kNoBuffer ? nullptr : at<T>(arena, p.bias);
  const T* residual = residual_of<T>(p, arena);
  if (p.fused.glu != Activation::None)
    glu_rows(p.fused.glu, c32, p.m, p.n, p.n, bias, at<T>(arena, p.out) + bi * p.stride_out, p.ldc);
  else
    epilogue(p, c32, p.n, bias32, act, residual ? residual + bi * p.stride_out : nullptr,
             at<T>(arena, p.out) + bi * p.stride_out);
}

// p's bias widened to f32 into scratch slot 3, or null when it has none.
template <class T> const float* bias_f32(const MatMulParams& p, CpuContext& ctx) {
  if (p.bias == kNoBuffer) return nullptr;
  const T* b = at<T>(ctx.arena(), p.bias);
  float* out = ctx.scratch(3, size_t(p.n));
  for (int64_t j = 0; j < p.n; ++j) out[j] = to_f32(b[j]);
  return out;
}

// bf16 A against weights packed as bf16 pairs: no widening, twice the f32
// kernel's rate. A fused norm's rows are normalized in f32, then narrowed.
void matmul_bf16_pairs(const MatMulParams& p, CpuContext& ctx, const uint32_t* packed) {
  uint8_t* arena = ctx.arena();
  ctx.count(GemmPath::PackedBf16, uint64_t(p.batch));
  float* c32 = ctx.scratch(2, size_t(p.m * p.n));
  const float* bias32 = bias_f32<BFloat>(p, ctx);
  for (int64_t bi = 0; bi < p.batch; ++bi) {
    const BFloat* a = at<BFloat>(arena, p.a) + bi * p.stride_a;
    int64_t lda = p.lda;
    if (p.fused.norm_gamma != kNoBuffer) {  // a few rows (fuse_matvec: batch 1)
      float* a32 = ctx.scratch(0, size_t(p.m * p.k));
      product_rows_f32(a, p.m, p.k, p.lda, p.fused, arena, a32);
      auto* a16 = reinterpret_cast<BFloat*>(ctx.scratch(1, size_t(p.m * p.k + 1) / 2));
      for (int64_t i = 0; i < p.m * p.k; ++i) a16[i] = from_f32<BFloat>(a32[i]);
      a = a16, lda = p.k;
    }
    // Bias, activation, residual and the narrowing inside the product, on
    // each tile while in cache; a glu pairs columns, so it runs after.
    if (p.fused.glu != Activation::None) {
      gemm_packed_bf16(p.trans_a, p.m, p.n, p.k, a, lda, packed, c32, p.n, nullptr, Activation::None,
                       threads_for(p));
      narrow_result<BFloat>(p, arena, c32, nullptr, Activation::None, bi);
      continue;
    }
    const BFloat* residual = residual_of<BFloat>(p, arena);
    Bf16Output out;
    out.out = at<BFloat>(arena, p.out) + bi * p.stride_out;
    out.residual = residual ? residual + bi * p.stride_out : nullptr;
    out.ld = p.ldc;
    gemm_packed_bf16(p.trans_a, p.m, p.n, p.k, a, lda, packed, c32, p.n, bias32, p.act, threads_for(p), out);
  }
}

// A's rows quantized to int8 per row, against B quantized per column at its
// packing (cpu_gemm_packed.h gemm_packed_int8). A fused norm's rows, and a
// transposed A, are made dense f32 rows first. f32 out takes bias and
// activation in the product, then its residual; bf16 out also its residual
// and narrowing; f16 (and a glu) the widened path's epilogue.
template <class T> void matmul_int8(const MatMulParams& p, CpuContext& ctx, const uint32_t* packed) {
  uint8_t* arena = ctx.arena();
  ctx.count(GemmPath::PackedInt8, uint64_t(p.batch));
  const int64_t ld = int8_row_bytes(p.k);
  // Scratch slot 1: the rows' scales, zero points, then their u8 values.
  const int64_t m16 = (p.m + 15) / 16 * 16;
  float* scales = ctx.scratch(1, size_t(2 * m16 + p.m * ld / 4));
  auto* zeros = reinterpret_cast<int32_t*>(scales + m16);
  auto* q = reinterpret_cast<uint8_t*>(scales + 2 * m16);
  const bool glu = p.fused.glu != Activation::None;
  // Where the product's f32 result goes: the output itself (f32, no glu), else scratch.
  const bool direct = std::is_same_v<T, float> && !glu;
  const bool narrow_inside = std::is_same_v<T, BFloat> && !glu;
  float* c32 = direct ? nullptr : ctx.scratch(2, size_t(p.m * p.n));
  const float* bias32 = bias_f32<T>(p, ctx);
  const T* residual = residual_of<T>(p, arena);
  const int threads = threads_for(p);
  for (int64_t bi = 0; bi < p.batch; ++bi) {
    const T* a = at<T>(arena, p.a) + bi * p.stride_a;
    if (p.fused.norm_gamma != kNoBuffer || p.trans_a) {
      float* a32 = ctx.scratch(0, size_t(p.m * p.k));
      if (p.fused.norm_gamma != kNoBuffer)  // a few rows (fuse_matvec: batch 1)
        product_rows_f32(a, p.m, p.k, p.lda, p.fused, arena, a32);
      else
        for (int64_t i = 0; i < p.m; ++i)
          for (int64_t kk = 0; kk < p.k; ++kk) a32[i * p.k + kk] = to_f32(a[kk * p.lda + i]);
      quantize_rows_int8(a32, p.m, p.k, p.k, q, scales, zeros, threads);
    } else {
      quantize_rows_int8(a, p.m, p.k, p.lda, q, scales, zeros, threads);
    }
    const Int8Rows rows{q, ld, scales, zeros};
    if (direct) {
      float* c = at<float>(arena, p.out) + bi * p.stride_out;
      gemm_packed_int8(p.m, p.n, p.k, rows, packed, c, p.ldc, bias32, p.act, threads);
      if (residual)
        for (int64_t i = 0; i < p.m; ++i)
          for (int64_t j = 0; j < p.n; ++j) c[i * p.ldc + j] += to_f32(residual[bi * p.stride_out + i * p.ldc + j]);
    } else if (narrow_inside) {
      Bf16Output out;
      out.out = reinterpret_cast<BFloat*>(at<T>(arena, p.out) + bi * p.stride_out);
      out.residual = residual ? reinterpret_cast<const BFloat*>(residual + bi * p.stride_out) : nullptr;
      out.ld = p.ldc;
      gemm_packed_int8(p.m, p.n, p.k, rows, packed, c32, p.n, bias32, p.act, threads, out);
    } else {
      gemm_packed_int8(p.m, p.n, p.k, rows, packed, c32, p.n, nullptr, Activation::None, threads);
      narrow_result<T>(p, arena, c32, bias32, p.act, bi);
    }
  }
}

template <class T> void matmul_widened(const MatMulParams& p, CpuContext& ctx) {
  uint8_t* arena = ctx.arena();
  if (const uint32_t* q8 = ctx.packed_int8(p)) return matmul_int8<T>(p, ctx, q8);
  const float* packed = ctx.packed_weights(p);
  if (packed && packs_bf16_pairs(p.dtype)) return matmul_bf16_pairs(p, ctx, reinterpret_cast<const uint32_t*>(packed));
  ctx.count(packed ? GemmPath::Packed : GemmPath::Library, uint64_t(p.batch));
  // Stored shapes of the operands (before the transpose flag applies).
  int64_t a_rows = p.trans_a ? p.k : p.m, a_cols = p.trans_a ? p.m : p.k;
  int64_t b_rows = p.trans_b ? p.n : p.k, b_cols = p.trans_b ? p.k : p.n;
  float* a32 = ctx.scratch(0, size_t(a_rows * a_cols));
  float* b32 = packed ? nullptr : ctx.scratch(1, size_t(b_rows * b_cols));
  float* c32 = ctx.scratch(2, size_t(p.m * p.n));
  const float* bias32 = bias_f32<T>(p, ctx);
  for (int64_t bi = 0; bi < p.batch; ++bi) {
    // A batch stride of 0 broadcasts: widen that operand once.
    if (p.fused.norm_gamma != kNoBuffer)  // a few rows, normalized as they widen (fuse_matvec: batch 1)
      product_rows_f32(at<T>(arena, p.a), p.m, p.k, p.lda, p.fused, arena, a32);
    else if (bi == 0 || p.stride_a != 0)
      widen(at<T>(arena, p.a) + bi * p.stride_a, a_rows, a_cols, p.lda, a32);
    // The product alone; bias and activation apply while narrowing.
    if (packed) {
      gemm_packed(p.trans_a, p.m, p.n, p.k, a32, a_cols, packed, c32, p.n, nullptr, Activation::None, threads_for(p));
    } else {
      if (bi == 0 || p.stride_b != 0) widen(at<T>(arena, p.b) + bi * p.stride_b, b_rows, b_cols, p.ldb, b32);
      gemm_f32_sliced(p.trans_a, p.trans_b, p.m, p.n, p.k, a32, a_cols, b32, b_cols, c32, p.n, nullptr,
                      Activation::None, threads_for(p));
    }
    narrow_result<T>(p, arena, c32, bias32, p.act, bi);
  }
}

}  // namespace

void run_matmul(const MatMulParams& p, CpuContext& ctx) {
  switch (p.dtype) {
    case DType::F16: return matmul_widened<Half>(p, ctx);
    case DType::BF16: return matmul_widened<BFloat>(p, ctx);
    default: return matmul_f32(p, ctx);
  }
}

void register_cpu_matmul(CpuRegistry& r) {
  r.add<MatMulParams>(DType::F32, matmul_f32);
  r.add<MatMulParams>(DType::F16, matmul_widened<Half>);
  r.add<MatMulParams>(DType::BF16, matmul_widened<BFloat>);
}

}  // namespace rlx::cpu
