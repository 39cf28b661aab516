// OCP FP8 E4M3FN (the "fn" variant CUDA calls __NV_E4M3): 1 sign bit, 4
// exponent bits with bias 7, 3 mantissa bits; no infinities, 0x7F and 0xFF
// are NaN, the largest finite value is 448 and the smallest subnormal 2^-9.
// Defined once for the host quantizer, the CPU kernels, the tests and any
// device code that does not use cuda_fp8.h's conversions. The rounding is
// done on the bits, and the one float product (a subnormal code's value)
// is exact and normal, so neither depends on the floating-point mode
// (rounding, flush-to-zero).
#pragma once
#include <cstdint>
#include <cstring>

#if defined(__CUDACC__)
#define RLX_FP8_HD __host__ __device__
#else
#define RLX_FP8_HD
#endif

namespace rlx {

constexpr float kE4m3Max = 448.f;

RLX_FP8_HD inline float e4m3_bits_float(uint32_t u) {
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

// Every code's value, exactly (all 256 fit a float, and a half). Without
// branches, so that a loop over a block's codes vectorizes.
RLX_FP8_HD inline float e4m3_to_float(uint8_t b) {
  const uint32_t sign = uint32_t(b & 0x80) << 24, em = b & 0x7Fu;
  // Normal: rebias the exponent (7 -> 127) and move the 7 bits up to a
  // float's exponent/mantissa boundary. Subnormal: em * 2^-9, exact.
  const float sub = float(int(em)) * 0.001953125f;
  uint32_t sub_bits;
  std::memcpy(&sub_bits, &sub, 4);
  const uint32_t normal_bits = (em + (120u << 3)) << 20;
  // Masks rather than ?: (which compilers keep as branches).
  const uint32_t is_sub = 0u - uint32_t(em < 8), is_nan = 0u - uint32_t(em == 0x7F);
  const uint32_t mag = (sub_bits & is_sub) | (normal_bits & ~is_sub);
  return e4m3_bits_float(sign | (mag & ~is_nan) | (0x7FC00000u & is_nan));
}

// Round to nearest, ties to even; magnitudes past 448 (infinities too)
// saturate to +-448; NaN gives 0, so a quantized weight is never NaN. The
// sign is kept (-0 -> 0x80, a negative value that rounds to 0 too).
RLX_FP8_HD inline uint8_t float_to_e4m3(float x) {
  uint32_t u;
  std::memcpy(&u, &x, 4);
  const uint8_t sign = uint8_t((u >> 24) & 0x80);
  const uint32_t a = u & 0x7FFFFFFFu;
  if (a > 0x7F800000u) return 0;
  if (a >= 0x43E00000u) return sign | 0x7E;  // >= 448
  if (a >= 0x3C800000u) {
    // >= 2^-6, normal: drop 20 of the 23 mantissa bits, rounding half to
    // even; a carry moves into the exponent as it should. Below 448 the
    // result cannot pass 0x7E.
    const uint32_t r = a + 0x7FFFFu + ((a >> 20) & 1u);
    return sign | uint8_t((r >> 20) - (120u << 3));
  }
  if (a <= 0x3A800000u) return sign;  // <= 2^-10, half the smallest step: 0
  // Subnormal: a multiple of 2^-9; 8 (a carry to 2^-6) is the code of the
  // smallest normal, so the count is the code.
  const uint32_t mant = (a & 0x7FFFFFu) | 0x800000u;
  const int shift = 14 - (int(a >> 23) - 127);  // 21..24
  uint32_t q = mant >> shift;
  const uint32_t rest = mant & ((1u << shift) - 1), half = 1u << (shift - 1);
  if (rest > half || (rest == half && (q & 1u))) ++q;
  return sign | uint8_t(q);
}

}  // namespace rlx
