// Random block-quantized weights for the matmul_q tests: the bytes of the
// quants and scales params (thunks/quant_math.h's rounding) and the values
// they dequantize to, which the references multiply in double.
#pragma once
#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

#include "rlx/graph.h"
#include "rlx/quant.h"
#include "test_util.h"
#include "thunks/quant_math.h"

namespace rlx::test {

struct QuantWeight {
  QuantType type = QuantType::Q8_0;
  int64_t n = 0, k = 0;
  std::vector<uint8_t> quants, scales;  // the params' bytes: i32 [n, k / per word], f16 [n, k / 32 * per block]
  std::vector<float> values;            // dequant(W) [n, k]

  Shape quants_shape() const { return {n, k / quant_elems_per_word(type)}; }
  Shape scales_shape() const { return {n, k / kQuantBlock * quant_scales_per_block(type)}; }
};

inline QuantWeight random_quant_weight(QuantType t, int64_t n, int64_t k, uint64_t seed) {
  QuantWeight w{t, n, k, {}, {}, {}};
  const std::vector<float> v = random_floats(size_t(n * k), seed);
  const int64_t row_bytes = k / kQuantBlock * quant_block_bytes(t);
  w.quants.resize(size_t(n * row_bytes));
  const int64_t row_scales = k / kQuantBlock * quant_scales_per_block(t);
  w.scales.resize(size_t(n * row_scales) * 2);
  w.values.resize(size_t(n * k));
  for (int64_t r = 0; r < n; ++r) {
    uint16_t* sc = reinterpret_cast<uint16_t*>(w.scales.data()) + r * row_scales;
    quantize_row(t, v.data() + r * k, k, w.quants.data() + r * row_bytes, sc);
    dequantize_row(t, w.quants.data() + r * row_bytes, sc, k, w.values.data() + r * k);
  }
  return w;
}

// The weight as two constants of graph g: {quants, scales}.
inline std::pair<ValueId, ValueId> quant_constants(Graph& g, const QuantWeight& w) {
  return {g.constant(w.quants_shape(), DType::I32, w.quants), g.constant(w.scales_shape(), DType::F16, w.scales)};
}

// out[i, j] = sum_k x[i, k] * W[j, k] (+ bias[j]) in double.
inline std::vector<double> quant_product_reference(const std::vector<float>& x, const QuantWeight& w, int64_t m,
                                                   const std::vector<float>* bias = nullptr) {
  std::vector<double> out(size_t(m * w.n));
  for (int64_t i = 0; i < m; ++i)
    for (int64_t j = 0; j < w.n; ++j) {
      double a = bias ? (*bias)[size_t(j)] : 0.0;
      for (int64_t c = 0; c < w.k; ++c) a += double(x[size_t(i * w.k + c)]) * w.values[size_t(j * w.k + c)];
      out[size_t(i * w.n + j)] = a;
    }
  return out;
}

// Row i of x [m, k] dotted with W's row r in double (`want`), and how far
// an integer kernel may be from it: x quantized per block of 32 to two int8
// digits is within dx / 256 of x (dx = the block's amax / 127), plus f32
// rounding.
template <class X>
double two_digit_bound(const std::vector<X>& x, const QuantWeight& w, int64_t i, int64_t r, double* want) {
  double acc = 0, err = 0, mag = 0;
  for (int64_t b = 0; b < w.k / kQuantBlock; ++b) {
    double amax = 0, wsum = 0;
    for (int64_t j = b * kQuantBlock; j < (b + 1) * kQuantBlock; ++j) {
      const double xv = x[size_t(i * w.k + j)], wv = w.values[size_t(r * w.k + j)];
      acc += xv * wv;
      amax = std::max(amax, std::fabs(xv));
      wsum += std::fabs(wv);
      mag += std::fabs(xv * wv);
    }
    err += amax / 127.0 / 256.0 * wsum;
  }
  *want = acc;
  return err * 1.01 + 1e-5 * (mag + std::fabs(acc)) + 1e-6;
}

}  // namespace rlx::test
