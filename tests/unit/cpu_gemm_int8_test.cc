// The packed GEMM's int8 path: activations quantized per row, asymmetric
// (cpu_int8_rows.h), and weights per column, symmetric (pack_weights_int8), at sizes
// that are not multiples of the tile, the vector or the k block. The
// quantized bytes must be exactly the scalar rule's; the product must be the
// dequantized product (a double reference over the test's own quantization:
// integer sums are exact, so only f32 rounding of the scale and epilogue is
// left); and the dequantized product must be within the bound that the two
// quantization steps give of the unquantized one.
#include <gtest/gtest.h>
#include <omp.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <vector>

#include "backends/cpu/cpu_gemm_packed.h"
#include "backends/cpu/cpu_int8_rows.h"
#include "reference_ops.h"
#include "test_util.h"

namespace rlx::test {
namespace {

constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();

// The weights' rule: scale = max |v| / 127, q = nearbyint(v * 127 / max).
struct Quantized {
  std::vector<int32_t> q;  // the value's code minus its zero point
  double scale = 0;
};
Quantized quantize_weights_ref(const std::vector<float>& v) {
  float top = 0.f;
  for (float x : v) top = std::max(top, std::fabs(x));
  const float inv = top > 0.f ? 127.f / top : 0.f;
  Quantized r;
  r.scale = double(top / 127.f);
  for (float x : v) r.q.push_back(int32_t(std::clamp(std::nearbyint(x * inv), -127.f, 127.f)));
  return r;
}
// The activations' rule, written out again: [min(0, min), max(0, max)] in
// 255 steps, the zero point the code of 0.
struct QuantizedRow {
  std::vector<int32_t> u8;
  double scale = 0;
  int32_t zero = 0;
};
QuantizedRow quantize_row_ref(const std::vector<float>& v) {
  float lo = 0.f, hi = 0.f;
  for (float x : v) lo = std::min(lo, x), hi = std::max(hi, x);
  QuantizedRow r;
  r.scale = double((hi - lo) / 255.f);
  const float inv = hi > lo ? 255.f / (hi - lo) : 0.f;
  r.zero = int32_t(std::clamp(std::nearbyint(-lo * inv), 0.f, 255.f));
  for (float x : v) r.u8.push_back(std::clamp(int32_t(std::nearbyint(x * inv)) + r.zero, 0, 255));
  return r;
}

struct Case {
  int64_t m, n, k;
  bool bias;
  Activation act;
};

// A's rows in dt (f32 or bf16); B [n, k] (trans_b) in f32.
void check_case(const Case& c, DType dt, uint64_t seed) {
  SCOPED_TRACE(testing::Message() << "m " << c.m << " n " << c.n << " k " << c.k << " bias " << c.bias << " act "
                                  << int(c.act) << " " << dtype_name(dt));
  const int64_t lda = c.k + 3, ldb = c.k + 2, ldc = c.n + 1, ldq = cpu::int8_row_bytes(c.k);
  auto a = quantize(random_floats(size_t(c.m * lda), seed, -3.f, 3.f), dt);
  const auto b = random_floats(size_t(c.n * ldb), seed + 1);
  const auto bias = random_floats(size_t(c.n), seed + 2, -2.f, 2.f);
  if (c.m > 2)  // an all-zero row: scale 0, a zero product
    for (int64_t kk = 0; kk < c.k; ++kk) a[size_t(2 * lda + kk)] = 0.f;
  if (c.m > 3)  // a row of one sign, as a GELU's output: its zero point at the end of the range
    for (int64_t kk = 0; kk < c.k; ++kk) a[size_t(3 * lda + kk)] = std::fabs(a[size_t(3 * lda + kk)]);
  if (c.m > 4)  // and of the other sign: the zero point 255
    for (int64_t kk = 0; kk < c.k; ++kk) a[size_t(4 * lda + kk)] = -std::fabs(a[size_t(4 * lda + kk)]);

  // The kernel's quantization of A, bytes past k included.
  const std::vector<uint8_t> a_bytes = to_bytes(a, dt);
  std::vector<uint8_t> q(size_t(c.m * ldq), 0);
  std::vector<float> scales(size_t(c.m), kNaN);
  std::vector<int32_t> zeros(size_t(c.m), -1);
  cpu::with_float_type(dt, [&](auto t) {
    using T = decltype(t);
    cpu::quantize_rows_int8(reinterpret_cast<const T*>(a_bytes.data()), c.m, c.k, lda, q.data(), scales.data(),
                            zeros.data(), 2);
  });
  std::vector<QuantizedRow> qa;
  std::vector<Quantized> qb;
  for (int64_t i = 0; i < c.m; ++i) {
    qa.push_back(quantize_row_ref(std::vector<float>(a.begin() + i * lda, a.begin() + i * lda + c.k)));
    ASSERT_EQ(double(scales[size_t(i)]), qa.back().scale) << "row " << i << "'s scale";
    ASSERT_EQ(zeros[size_t(i)], qa.back().zero) << "row " << i << "'s zero point";
    for (int64_t kk = 0; kk < ldq; ++kk)
      ASSERT_EQ(int(q[size_t(i * ldq + kk)]), kk < c.k ? qa.back().u8[size_t(kk)] : qa.back().zero)
          << "row " << i << ", k " << kk;
  }
  for (int64_t j = 0; j < c.n; ++j)
    qb.push_back(quantize_weights_ref(std::vector<float>(b.begin() + j * ldb, b.begin() + j * ldb + c.k)));

  std::vector<uint32_t> packed(size_t(cpu::packed_int8_words(c.n, c.k)) + 16, 0xdeadbeefu);
  uint32_t* dst = reinterpret_cast<uint32_t*>((reinterpret_cast<uintptr_t>(packed.data()) + 63) / 64 * 64);
  cpu::pack_weights_int8(b.data(), c.n, c.k, ldb, true, dst);
  const cpu::PackedInt8 parts = cpu::packed_int8_parts(dst, c.n, c.k);
  for (int64_t j = 0; j < c.n; ++j) ASSERT_EQ(double(parts.scales[j]), qb[size_t(j)].scale) << "column " << j;

  std::vector<float> out(size_t(c.m * ldc), kNaN);
  const int saved = omp_get_max_threads();
  omp_set_num_threads(2);
  cpu::gemm_packed_int8(c.m, c.n, c.k, cpu::Int8Rows{q.data(), ldq, scales.data(), zeros.data()}, dst, out.data(), ldc,
                        c.bias ? bias.data() : nullptr, c.act, 2);
  omp_set_num_threads(saved);

  std::vector<float> got;
  std::vector<double> dequantized, exact;
  double bound = 0, linear_max = 0;
  for (int64_t i = 0; i < c.m; ++i) {
    EXPECT_TRUE(std::isnan(out[size_t(i * ldc + c.n)])) << "wrote row " << i << "'s padding";
    for (int64_t j = 0; j < c.n; ++j) {
      const QuantizedRow& x = qa[size_t(i)];
      const Quantized& w = qb[size_t(j)];
      double sum = 0, real = 0, err = 0, magnitude = 0;
      for (int64_t kk = 0; kk < c.k; ++kk) {
        const double av = a[size_t(i * lda + kk)], bv = b[size_t(j * ldb + kk)];
        sum += double(x.u8[size_t(kk)] - x.zero) * double(w.q[size_t(kk)]);
        real += av * bv;
        magnitude += std::fabs(av * bv);
        // |a - sa qa| <= sa / 2 and |b - sb qb| <= sb / 2 per term.
        err += std::fabs(av) * w.scale / 2 + std::fabs(bv) * x.scale / 2 + x.scale * w.scale / 4;
      }
      err += 1e-6 * magnitude;  // the f32 rounding of 127 / max and of v * (127 / max)
      const double lin = x.scale * w.scale * sum;
      EXPECT_LE(std::fabs(lin - real), err * (1 + 1e-9) + 1e-12) << "row " << i << " column " << j;
      bound = std::max(bound, err);
      linear_max = std::max(linear_max, std::fabs(lin));
      const double b0 = c.bias ? double(bias[size_t(j)]) : 0.0;
      dequantized.push_back(ref_activation(c.act, lin + b0));
      exact.push_back(ref_activation(c.act, real + b0));
      got.push_back(out[size_t(i * ldc + j)]);
    }
  }
  // f32 rounding of the scales' product and the epilogue: a few ulps.
  expect_close(got, dequantized, 1e-5, "int8 gemm vs the dequantized product");
  // And the bound the quantization steps give (GELU's slope is at most ~1.13).
  double ref_max = 0;
  for (double v : exact) ref_max = std::max(ref_max, std::fabs(v));
  expect_close(got, exact, (1.13 * bound + 1e-5 * linear_max) / std::max(ref_max, 1e-30) + 1e-6,
               "int8 gemm vs the unquantized product");
}

TEST(CpuInt8Gemm, MatchesDequantizedReferenceOnOddSizes) {
  if (!cpu::packed_int8_available()) GTEST_SKIP() << "no AVX512-VNNI";
  uint64_t seed = 300;
  // m: one row, a partial tile, tiles plus a remainder, more than one row
  // block (144); n: under a vector, a panel plus a part; k: 1, not a
  // multiple of 4 or 16, and past one k block (1536) to a partial second.
  const Case cases[] = {{1, 1, 1, true, Activation::None},      {5, 33, 7, false, Activation::None},
                        {13, 70, 130, true, Activation::Gelu},  {150, 65, 389, true, Activation::Relu},
                        {12, 17, 1601, false, Activation::None}, {29, 96, 3079, true, Activation::Gelu}};
  for (DType dt : {DType::F32, DType::BF16})
    for (const Case& c : cases) check_case(c, dt, seed += 10);
}

// The bf16 narrowing inside the product (with a residual) gives what the
// f32 result narrowed afterwards gives, bit for bit.
TEST(CpuInt8Gemm, NarrowsToBf16WithResidualAsTheF32ResultWould) {
  if (!cpu::packed_int8_available()) GTEST_SKIP() << "no AVX512-VNNI";
  const int64_t m = 19, n = 45, k = 77, ldq = cpu::int8_row_bytes(k);
  const auto a = random_floats(size_t(m * k), 400), b = random_floats(size_t(n * k), 401);
  const auto residual = quantize(random_floats(size_t(m * n), 402), DType::BF16);
  std::vector<uint8_t> q(size_t(m * ldq));
  std::vector<float> scales(static_cast<size_t>(m));
  std::vector<int32_t> zeros(static_cast<size_t>(m));
  cpu::quantize_rows_int8(a.data(), m, k, k, q.data(), scales.data(), zeros.data(), 1);
  std::vector<uint32_t> packed(size_t(cpu::packed_int8_words(n, k)) + 16);
  uint32_t* dst = reinterpret_cast<uint32_t*>((reinterpret_cast<uintptr_t>(packed.data()) + 63) / 64 * 64);
  cpu::pack_weights_int8(b.data(), n, k, k, true, dst);
  const cpu::Int8Rows rows{q.data(), ldq, scales.data(), zeros.data()};
  std::vector<float> c32(size_t(m * n), kNaN), plain(size_t(m * n), kNaN);
  const std::vector<uint8_t> res_bytes = to_bytes(residual, DType::BF16);
  std::vector<uint8_t> out_bytes = nan_bytes(size_t(m * n), DType::BF16);
  cpu::Bf16Output o{reinterpret_cast<cpu::BFloat*>(out_bytes.data()),
                    reinterpret_cast<const cpu::BFloat*>(res_bytes.data()), n};
  cpu::gemm_packed_int8(m, n, k, rows, dst, c32.data(), n, nullptr, Activation::Gelu, 1, o);
  cpu::gemm_packed_int8(m, n, k, rows, dst, plain.data(), n, nullptr, Activation::Gelu, 1);
  const std::vector<float> got = from_bytes(out_bytes, DType::BF16);
  for (int64_t i = 0; i < m * n; ++i) {
    const float want = quantize({plain[size_t(i)] + residual[size_t(i)]}, DType::BF16)[0];
    ASSERT_EQ(got[size_t(i)], want) << "element " << i;
  }
}

}  // namespace
}  // namespace rlx::test
