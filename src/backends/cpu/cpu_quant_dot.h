// Dot products of block-quantized weight rows (rlx/quant.h) with activation
// rows quantized to int8 per block of 32, as llama.cpp's vec_dot does:
// decode reads every weight once per token, so the product is bound by how
// fast the weights stream, and integer products on the packed blocks read
// 4-8x fewer bytes than weights expanded to f32.
//
// Each block of x is held as two int8 digits, x ~ u * (128 * qx + rx) with
// u = dx / 128, dx = amax / 127, qx = round(x / dx) and rx the rounded rest
// in steps of u (|rx| <= 64): an error of at most dx / 256 per value. One
// digit (llama.cpp's q8 activations, an error of dx / 2) moved SmolLM2-135M
// Q4_1's first chat logits by up to 1.5 and flipped its answer; the second
// costs one more integer product per weight load, off the weights' stream.
// Below, qx stands for 128 * qx + rx, dx for u and sx = u * sum(qx):
//   Q8_0: dw * dx * sum(qw * qx)
//   Q4_0: dw * dx * sum(uw * qx) - 8 * dw * sx  (uw = qw + 8, the nibble)
//   Q4_1: dw * dx * sum(uw * qx) + mw * sx
// summed in f32 over the row's blocks. The integer sums are exact, so every
// kernel gives the same per-block terms; they differ only in the order of
// the f32 sums (and Q8_0's in where a sum past 2^24 is rounded to f32).
//
// Kernels: AVX512-VNNI (VPDPBUSD), AVX2 (VPMADDUBSW), plain C++, and f32
// (each block dequantized and dotted with x unquantized: the reference the
// others are held to). The best the processor runs is used unless
// RLX_CPU_QUANT_KERNEL (avx512-vnni, avx2, scalar, f32) names another.
#pragma once
#include <cstdint>
#include <vector>

#include "rlx/quant.h"

namespace rlx::cpu {

enum class QuantKernel : uint8_t { F32, Scalar, Avx2, Avx512Vnni };

const char* quant_kernel_name(QuantKernel k);
// Whether this processor (and this build) runs k.
bool quant_kernel_runs(QuantKernel k);
// The kernel matmul_q uses: the one set, else RLX_CPU_QUANT_KERNEL's, else
// the fastest that runs. rlx::Error for a name unknown or a kernel this
// processor cannot run.
QuantKernel quant_kernel();
// matmul_q calls run by kernel k so far in this process (tests: which ran).
uint64_t quant_kernel_calls(QuantKernel k);
void count_quant_kernel_call(QuantKernel k);
// Makes matmul_q use k from now on (tests: each path in turn); rlx::Error if
// it cannot run here.
void set_quant_kernel(QuantKernel k);

// m rows of k floats quantized for the kernels of weights of type `weights`.
// Blocks come in groups of 4 (the last padded with zeros), each group 128
// bytes: for 4-bit weights the first 16 values of its 4 blocks, then the
// last 16 of each (the order a 64-byte load of 4 blocks' nibbles splits
// into); for Q8_0 the blocks in order.
struct Q8Activations {
  QuantType weights = QuantType::Q8_0;
  int64_t m = 0, blocks = 0, groups = 0;
  std::vector<int8_t> q;  // [m, groups * 128]: the first digit
  std::vector<int8_t> r;  // [m, groups * 128]: the second, same layout
  std::vector<float> d;   // [m, groups * 4]: u per block
  std::vector<float> s;   // [m, groups * 4]: sx per block
  // Per vector lane for the AVX-512 kernel: [m, groups * 32] u of each
  // int32 lane's block (4-bit: 16 lanes a group, lane l in block l / 4;
  // Q8_0: 32 lanes, lane l in block l / 8) and [m, groups * 16] sx / 4 of
  // lane l's block l / 4 (4 lanes of a block sum to sx).
  std::vector<float> dl, sl;
  // Q8_0 only, for the tiled path (cpu_quant_gemm.h): [m, groups * 32]
  // -(128 sum(q) + sum(r)) over each int32 lane's 4 values.
  std::vector<int32_t> zl;
  // [m, groups * 4]: 128 sum(q) + sum(r) per block, the block's integer sum
  // (the interleaved Q8_0 kernel's correction, cpu_quant_rows16.h).
  std::vector<int32_t> c;

  const int8_t* row_q(int64_t i) const { return q.data() + i * groups * 128; }
  const int8_t* row_r(int64_t i) const { return r.data() + i * groups * 128; }
  const float* row_d(int64_t i) const { return d.data() + i * groups * 4; }
  const float* row_s(int64_t i) const { return s.data() + i * groups * 4; }
  const float* row_dl(int64_t i) const { return dl.data() + i * groups * 32; }
  const float* row_sl(int64_t i) const { return sl.data() + i * groups * 16; }
  const int32_t* row_zl(int64_t i) const { return zl.data() + i * groups * 32; }
  const int32_t* row_c(int64_t i) const { return c.data() + i * groups * 4; }
};

void quantize_activations(const float* x, int64_t m, int64_t k, QuantType weights, Q8Activations& out);
// The same in two steps, so that threads can share the rows: out sized for
// m rows of k, then rows [i0, i1) of x (rows of k floats) quantized.
void size_activations(int64_t m, int64_t k, QuantType weights, Q8Activations& out);
void quantize_activation_rows(const float* x, int64_t i0, int64_t i1, Q8Activations& out);

// W's rows as matmul_q holds them: row r's quants at quants + r * row_bytes,
// its scales at scales + r * row_scales.
struct QuantRows {
  const uint8_t* quants;
  const uint16_t* scales;
  int64_t row_bytes, row_scales;
};

// y[i * ldy + r] = the dot of W's row r with row i of a, for r in [r0, r1)
// and every row i of a, by an integer kernel (not F32). A result does not
// depend on r0, r1 or how many rows a has.
using QuantProduct = void (*)(const QuantRows& w, int64_t r0, int64_t r1, const Q8Activations& a, float* y,
                              int64_t ldy);
QuantProduct quant_product(QuantType t, QuantKernel k);

}  // namespace rlx::cpu
