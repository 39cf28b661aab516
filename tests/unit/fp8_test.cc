// The e4m3 conversions (rlx/fp8.h) against a decoder written from the OCP
// definition and a brute-force nearest-code encoder; the FP8 block
// quantizer (thunks/quant_math.h) on its edge cases.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <vector>

#include "rlx/dtype.h"
#include "rlx/fp8.h"
#include "test_util.h"
#include "thunks/quant_math.h"

namespace rlx {
namespace {

uint32_t bits_of(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  return u;
}

// E4M3FN from its definition: (-1)^s 2^(e-7) (1 + m/8), e = 0 subnormal
// 2^-6 (m/8); e = 15 with m = 7 NaN (no infinities).
double reference_value(uint8_t b) {
  const int s = b >> 7, e = (b >> 3) & 15, m = b & 7;
  if (e == 15 && m == 7) return std::numeric_limits<double>::quiet_NaN();
  const double mag = e == 0 ? std::ldexp(m / 8.0, -6) : std::ldexp(1 + m / 8.0, e - 7);
  return s ? -mag : mag;
}

// The nearest finite code by value (ties: the even code, the one whose
// last mantissa bit is 0), magnitudes past 448 saturating; the sign kept.
uint8_t reference_encode(float x) {
  if (std::isnan(x)) return 0;
  const double a = std::fabs(double(x));
  uint8_t best = 0;
  double best_err = INFINITY;
  for (int c = 0; c <= 0x7E; ++c) {
    const double err = std::fabs(a - reference_value(uint8_t(c)));
    if (err < best_err || (err == best_err && (c & 1) == 0)) {
      best = uint8_t(c);
      best_err = err;
    }
  }
  return uint8_t((std::signbit(x) ? 0x80 : 0) | best);
}

TEST(Fp8, EveryCodeDecodesToItsDefinedValue) {
  for (int c = 0; c < 256; ++c) {
    const float got = e4m3_to_float(uint8_t(c));
    const double want = reference_value(uint8_t(c));
    if (std::isnan(want)) {
      EXPECT_TRUE(std::isnan(got)) << c;
      continue;
    }
    EXPECT_EQ(double(got), want) << c;
    EXPECT_EQ(std::signbit(got), (c & 0x80) != 0) << c;  // 0x80 is -0
    // Every value is exact in a half (the CUDA kernels decode through one).
    EXPECT_EQ(half_to_float(float_to_half(got)), got) << c;
  }
  EXPECT_EQ(e4m3_to_float(0x7E), 448.f);
  EXPECT_EQ(e4m3_to_float(0x01), std::ldexp(1.f, -9));
  EXPECT_EQ(e4m3_to_float(0x08), std::ldexp(1.f, -6));
}

TEST(Fp8, EveryFiniteCodeEncodesBackToItself) {
  for (int c = 0; c < 256; ++c) {
    if ((c & 0x7F) == 0x7F) continue;
    EXPECT_EQ(float_to_e4m3(e4m3_to_float(uint8_t(c))), c) << c;
  }
}

TEST(Fp8, RoundsToTheNearestCodeTiesToEven) {
  std::vector<float> xs;
  // Each code's value, the midpoints to its neighbours and a float ulp
  // either side of each: every tie and both sides of it.
  for (int c = 0; c < 0x7E; ++c) {
    const float lo = e4m3_to_float(uint8_t(c)), hi = e4m3_to_float(uint8_t(c + 1));
    for (float v : {lo, 0.5f * (lo + hi)})
      for (float x : {v, std::nextafter(v, 0.f), std::nextafter(v, INFINITY)}) {
        xs.push_back(x);
        xs.push_back(-x);
      }
  }
  // A sweep over the float bit patterns, from subnormal floats past 448.
  for (uint32_t u = 0; u < 0x44000000u; u += 0x1003u) {
    float x;
    std::memcpy(&x, &u, 4);
    xs.push_back(x);
    xs.push_back(-x);
  }
  for (float x : xs) ASSERT_EQ(float_to_e4m3(x), reference_encode(x)) << x << " bits " << std::hex << bits_of(x);
}

TEST(Fp8, EdgeCases) {
  const float q = std::ldexp(1.f, -9);  // the smallest subnormal step
  EXPECT_EQ(float_to_e4m3(0.f), 0x00);
  EXPECT_EQ(float_to_e4m3(-0.f), 0x80);
  EXPECT_EQ(float_to_e4m3(-0.25f * q), 0x80);  // rounds to zero, keeps its sign
  EXPECT_EQ(float_to_e4m3(0.5f * q), 0x00);    // a tie: to the even 0
  EXPECT_EQ(float_to_e4m3(std::nextafter(0.5f * q, 1.f)), 0x01);
  EXPECT_EQ(float_to_e4m3(1.5f * q), 0x02);  // a tie: to the even 2
  EXPECT_EQ(float_to_e4m3(2.5f * q), 0x02);
  EXPECT_EQ(float_to_e4m3(7.5f * q), 0x08);  // subnormal 7.5 -> 8, the smallest normal
  EXPECT_EQ(float_to_e4m3(1.0625f), 0x38);   // 1 + 1/16: a tie, to 1.0 (even)
  EXPECT_EQ(float_to_e4m3(1.1875f), 0x3A);   // 1 + 3/16: a tie, to 1.25 (even)
  EXPECT_EQ(float_to_e4m3(15.5f), 0x58);     // a tie between 15 (odd) and 16: carries into the exponent
  EXPECT_EQ(float_to_e4m3(448.f), 0x7E);
  EXPECT_EQ(float_to_e4m3(463.f), 0x7E);
  EXPECT_EQ(float_to_e4m3(464.f), 0x7E);  // the tie with 480, which does not exist: saturates
  EXPECT_EQ(float_to_e4m3(1e9f), 0x7E);
  EXPECT_EQ(float_to_e4m3(-1e9f), 0xFE);
  EXPECT_EQ(float_to_e4m3(INFINITY), 0x7E);
  EXPECT_EQ(float_to_e4m3(-INFINITY), 0xFE);
  EXPECT_EQ(float_to_e4m3(std::numeric_limits<float>::quiet_NaN()), 0x00);
  EXPECT_EQ(float_to_e4m3(std::numeric_limits<float>::denorm_min()), 0x00);
}

// d = amax / 448 (in f16); each code the e4m3 of x / d; zero blocks zero.
TEST(Fp8, QuantizeRowScalesEachBlockToItsLargestMagnitude) {
  std::vector<float> x(64);
  for (int j = 0; j < 32; ++j) x[size_t(j)] = float(j - 16) * 0.37f;
  for (int j = 32; j < 64; ++j) x[size_t(j)] = 0.f;
  uint8_t q[64];
  uint16_t d[2] = {1, 1};
  quantize_row(QuantType::FP8, x.data(), 64, q, d);
  EXPECT_EQ(d[0], float_to_half(16 * 0.37f / 448.f));
  EXPECT_EQ(half_to_float(d[1]), 0.f);
  const float d0 = half_to_float(d[0]);
  for (int j = 0; j < 32; ++j) EXPECT_EQ(q[j], float_to_e4m3(x[size_t(j)] / d0)) << j;
  EXPECT_EQ(q[0] & 0x7F, 0x7E);  // the largest magnitude is the largest code
  EXPECT_EQ(q[16], 0x00);
  float back[64];
  dequantize_row(QuantType::FP8, q, d, 64, back);
  for (int j = 0; j < 32; ++j) {
    EXPECT_EQ(back[j], d0 * e4m3_to_float(q[j])) << j;
    // Within half a step: 2^-4 of the value (normal codes), d 2^-10 near 0.
    EXPECT_LE(std::fabs(back[j] - x[size_t(j)]), std::fabs(x[size_t(j)]) / 16 + d0 * 0.001 + 1e-6) << j;
  }
  for (int j = 32; j < 64; ++j) EXPECT_EQ(back[j], 0.f) << j;

  // Infinities and NaN in a block give no NaN code (saturation, 0).
  std::vector<float> bad(32, 1.f);
  bad[3] = INFINITY;
  bad[4] = -INFINITY;
  bad[5] = std::numeric_limits<float>::quiet_NaN();
  quantize_row(QuantType::FP8, bad.data(), 32, q, d);
  for (int j = 0; j < 32; ++j) EXPECT_NE(q[j] & 0x7F, 0x7F) << j;

  // Random rows: every element within half a step of its value.
  const std::vector<float> r = test::random_floats(32 * 40, 11);
  std::vector<uint8_t> rq(r.size());
  std::vector<uint16_t> rs(r.size() / 32);
  std::vector<float> rb(r.size());
  quantize_row(QuantType::FP8, r.data(), int64_t(r.size()), rq.data(), rs.data());
  dequantize_row(QuantType::FP8, rq.data(), rs.data(), int64_t(r.size()), rb.data());
  for (size_t i = 0; i < r.size(); ++i) {
    const float db = half_to_float(rs[i / 32]);
    EXPECT_LE(std::fabs(rb[i] - r[i]), std::max(std::fabs(r[i]) / 16, db * std::ldexp(1.f, -10)) * 1.001f + 1e-7f)
        << i;
  }
}

}  // namespace
}  // namespace rlx
