#include "thunks/quant_math.h"

#include <algorithm>
#include <cmath>

#include "rlx/dtype.h"
#include "rlx/fp8.h"

namespace rlx {

void quantize_row(QuantType t, const float* x, int64_t k, uint8_t* quants, uint16_t* scales) {
  for (int64_t c = 0; c < k / kQuantBlock; ++c) {
    const float* b = x + c * kQuantBlock;
    uint8_t* q = quants + c * quant_block_bytes(t);
    if (t == QuantType::Q4_1) {
      float lo = b[0], hi = b[0];
      for (int j = 1; j < kQuantBlock; ++j) {
        lo = std::min(lo, b[j]);
        hi = std::max(hi, b[j]);
      }
      const float d = (hi - lo) / 15.f, id = d != 0.f ? 1.f / d : 0.f;
      scales[2 * c] = float_to_half(d);
      scales[2 * c + 1] = float_to_half(lo);
      auto code = [&](float v) { return uint8_t(std::min(15, int(int8_t((v - lo) * id + 0.5f)))); };
      for (int j = 0; j < kQuantBlock / 2; ++j) q[j] = uint8_t(code(b[j]) | code(b[j + kQuantBlock / 2]) << 4);
    } else if (t == QuantType::Q8_0) {
      float amax = 0.f;
      for (int j = 0; j < kQuantBlock; ++j) amax = std::max(amax, std::fabs(b[j]));
      const float d = amax / 127.f, id = d != 0.f ? 1.f / d : 0.f;
      scales[c] = float_to_half(d);
      for (int j = 0; j < kQuantBlock; ++j) q[j] = uint8_t(int8_t(std::round(b[j] * id)));
    } else if (t == QuantType::FP8) {
      float amax = 0.f;
      for (int j = 0; j < kQuantBlock; ++j) amax = std::max(amax, std::fabs(b[j]));
      scales[c] = float_to_half(amax / kE4m3Max);
      // A d that is 0 in f16 (an all-zero block, or one too small for f16)
      // gives codes 0.
      const float d = half_to_float(scales[c]);
      for (int j = 0; j < kQuantBlock; ++j) q[j] = d != 0.f ? float_to_e4m3(b[j] / d) : 0;
    } else {
      float amax = 0.f, m = 0.f;
      for (int j = 0; j < kQuantBlock; ++j)
        if (amax < std::fabs(b[j])) {
          amax = std::fabs(b[j]);
          m = b[j];
        }
      const float d = m / -8.f, id = d != 0.f ? 1.f / d : 0.f;
      scales[c] = float_to_half(d);
      auto code = [&](float v) { return uint8_t(std::min(15, int(int8_t(v * id + 8.5f)))); };
      for (int j = 0; j < kQuantBlock / 2; ++j) q[j] = uint8_t(code(b[j]) | code(b[j + kQuantBlock / 2]) << 4);
    }
  }
}

void dequantize_row(QuantType t, const uint8_t* quants, const uint16_t* scales, int64_t k, float* y) {
  for (int64_t c = 0; c < k / kQuantBlock; ++c) {
    const float d = half_to_float(scales[c * quant_scales_per_block(t)]);
    const uint8_t* q = quants + c * quant_block_bytes(t);
    float* out = y + c * kQuantBlock;
    if (t == QuantType::Q4_1) {
      const float m = half_to_float(scales[2 * c + 1]);
      for (int j = 0; j < kQuantBlock / 2; ++j) {
        out[j] = d * float(q[j] & 0x0f) + m;
        out[j + kQuantBlock / 2] = d * float(q[j] >> 4) + m;
      }
    } else if (t == QuantType::Q8_0) {
      for (int j = 0; j < kQuantBlock; ++j) out[j] = d * float(int8_t(q[j]));
    } else if (t == QuantType::FP8) {
      for (int j = 0; j < kQuantBlock; ++j) out[j] = d * e4m3_to_float(q[j]);
    } else {
      for (int j = 0; j < kQuantBlock / 2; ++j) {
        out[j] = d * float(int(q[j] & 0x0f) - 8);
        out[j + kQuantBlock / 2] = d * float(int(q[j] >> 4) - 8);
      }
    }
  }
}

MatMulParams dequantized_product(const MatMulQParams& p) {
  MatMulParams mp{};
  mp.a = p.x;
  mp.b = p.dequantized;
  mp.bias = p.bias;
  mp.out = p.out;
  mp.batch = 1;
  mp.m = p.m;
  mp.n = p.n;
  mp.k = p.k;
  mp.lda = mp.ldb = p.k;
  mp.ldc = p.n;
  mp.dtype = p.dtype;
  mp.act = Activation::None;
  mp.trans_b = 1;
  return mp;
}

}  // namespace rlx
