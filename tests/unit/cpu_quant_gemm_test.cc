// matmul_q's tiled many-row path on AVX512-VNNI (cpu_quant_gemm.h), through
// the matmul_q thunk: which path ran (its call counter), every format at
// odd sizes (rows of x past the tile, weight rows past the tile, k of 1, 3,
// 5, 7, 8 and 18 blocks: every tail of a group of 4), NaN-poisoned outputs,
// held to the dequantized product within the two-digit activations' bound;
// and each row's result the same bits as that row alone gives (the one-row
// kernel), on the thunk and on the kernels directly.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <string>

#include "backends/cpu/cpu_quant_dot.h"
#include "backends/cpu/cpu_quant_gemm.h"
#include "cpu_quant_kernel_scope.h"
#include "quant_weights.h"
#include "thunk_harness.h"

namespace rlx::cpu {
namespace {

using test::QuantWeight;

// The product on the CPU in f32 (bias and residual fused when given), and
// whether the tiled path ran for it.
std::vector<float> run_product(QuantType t, int64_t m, int64_t n, int64_t k, const QuantWeight& w,
                               const std::vector<float>& x, const std::vector<float>& bias,
                               const std::vector<float>& residual, bool* tiled) {
  test::ThunkHarness h;
  MatMulQParams p{};
  p.x = h.input_f32("x", x, DType::F32);
  p.quants = h.input("quants", DType::I32, w.quants);
  p.scales = h.input("scales", DType::F16, w.scales);
  p.bias = bias.empty() ? kNoBuffer : h.input_f32("bias", bias, DType::F32);
  if (!residual.empty()) p.fused.residual = h.input_f32("residual", residual, DType::F32);
  p.out = h.output("out", DType::F32, size_t(m * n));  // NaN-poisoned
  p.dequantized = kNoBuffer;                           // as the CPU compiles it
  p.m = m, p.n = n, p.k = k;
  p.dtype = DType::F32;
  p.quant = t;
  const uint64_t before = quant_gemm_calls(), kernel_before = quant_kernel_calls(QuantKernel::Avx512Vnni);
  h.run(p, cpu_backend());
  EXPECT_EQ(quant_kernel_calls(QuantKernel::Avx512Vnni), kernel_before + 1);
  *tiled = quant_gemm_calls() == before + 1;
  return h.result("out");
}

#define SKIP_WITHOUT_VNNI() \
  if (!quant_kernel_runs(QuantKernel::Avx512Vnni)) GTEST_SKIP() << "no AVX512-VNNI here"

TEST(CpuQuantGemm, TiledPathAgainstTheDequantizedProductAtOddSizes) {
  SKIP_WITHOUT_VNNI();
  const test::QuantKernelScope scope(QuantKernel::Avx512Vnni);
  uint64_t seed = 3100;
  for (QuantType t : {QuantType::Q8_0, QuantType::Q4_0, QuantType::Q4_1})
    for (int64_t blocks : {1, 3, 5, 7, 8, 18})
      for (int64_t m : {kQuantGemmRows, int64_t(21), int64_t(35)})
        for (int64_t n : {int64_t(1), int64_t(3), int64_t(37)}) {
          const int64_t k = blocks * kQuantBlock;
          const std::string what = std::string(quant_type_name(t)) + " m=" + std::to_string(m) +
                                   " n=" + std::to_string(n) + " k=" + std::to_string(k);
          const QuantWeight w = test::random_quant_weight(t, n, k, seed += 10);
          const std::vector<float> x = test::random_floats(size_t(m * k), seed + 1, -2.f, 2.f);
          const std::vector<float> bias = test::random_floats(size_t(n), seed + 2);
          const std::vector<float> residual = test::random_floats(size_t(m * n), seed + 3);
          const bool fused = n == 37;  // bias and residual on some cases
          bool tiled = false;
          const std::vector<float> got =
              run_product(t, m, n, k, w, x, fused ? bias : std::vector<float>{},
                          fused ? residual : std::vector<float>{}, &tiled);
          EXPECT_TRUE(tiled) << what << ": the tiled path did not run";
          ASSERT_EQ(got.size(), size_t(m * n)) << what;
          size_t bad = 0;
          for (int64_t i = 0; i < m; ++i)
            for (int64_t r = 0; r < n; ++r) {
              // Per block of x, |x - x'| <= dx / 256 (two int8 digits).
              double want = 0;
              double bound = test::two_digit_bound(x, w, i, r, &want);
              const double acc = want + (fused ? double(bias[size_t(r)]) + residual[size_t(i * n + r)] : 0.0);
              bound += 1e-5 * (std::fabs(acc) - std::fabs(want));  // the f32 part on the sum with bias and residual
              const float v = got[size_t(i * n + r)];
              if (!(std::fabs(v - acc) <= bound) && bad++ == 0)
                ADD_FAILURE() << what << ": row " << i << " col " << r << " got " << v << " want " << acc
                              << " within " << bound;
            }
          EXPECT_EQ(bad, 0u) << what;
        }
}

TEST(CpuQuantGemm, FewerRowsThanTheThresholdTakeTheOneRowKernel) {
  SKIP_WITHOUT_VNNI();
  const test::QuantKernelScope scope(QuantKernel::Avx512Vnni);
  const QuantWeight w = test::random_quant_weight(QuantType::Q4_0, 5, 64, 3200);
  bool tiled = true;
  run_product(QuantType::Q4_0, kQuantGemmRows - 1, 5, 64, w,
              test::random_floats(size_t((kQuantGemmRows - 1) * 64), 3201), {}, {}, &tiled);
  EXPECT_FALSE(tiled);
}

// Each row of a many-row product is the same bits as that row alone (m = 1:
// the one-row kernel): a sequence gets the same result in a prompt or a big
// batch as in a decode step of its own.
TEST(CpuQuantGemm, EachRowOfABatchIsTheBitsOfThatRowAlone) {
  SKIP_WITHOUT_VNNI();
  const test::QuantKernelScope scope(QuantKernel::Avx512Vnni);
  for (QuantType t : {QuantType::Q8_0, QuantType::Q4_0, QuantType::Q4_1})
    for (int64_t blocks : {3, 18}) {
      const int64_t m = 29, n = 45, k = blocks * kQuantBlock;
      const QuantWeight w = test::random_quant_weight(t, n, k, 3300 + uint64_t(blocks));
      std::vector<float> x = test::random_floats(size_t(m * k), 3301, -3.f, 3.f);
      for (int64_t j = 0; j < k; ++j) x[size_t(5 * k + j)] *= 1e3f;  // rows of other magnitudes
      for (int64_t j = 0; j < k; ++j) x[size_t(6 * k + j)] *= 1e-3f;
      bool tiled = false;
      const std::vector<float> all = run_product(t, m, n, k, w, x, {}, {}, &tiled);
      ASSERT_TRUE(tiled);
      for (int64_t i = 0; i < m; ++i) {
        const std::vector<float> row(x.begin() + i * k, x.begin() + (i + 1) * k);
        bool alone_tiled = true;
        const std::vector<float> alone = run_product(t, 1, n, k, w, row, {}, {}, &alone_tiled);
        ASSERT_FALSE(alone_tiled);
        EXPECT_EQ(std::memcmp(alone.data(), all.data() + i * n, size_t(n) * sizeof(float)), 0)
            << quant_type_name(t) << " k=" << k << ": row " << i << " differs from itself alone";
      }
    }
}

// The kernels side by side on one range of weight rows that is not a whole
// number of tiles: the tiled product writes the one-row kernel's bits, and
// nothing outside the range.
TEST(CpuQuantGemm, TiledKernelGivesTheOneRowKernelsBitsOnAnyRange) {
  SKIP_WITHOUT_VNNI();
  for (QuantType t : {QuantType::Q8_0, QuantType::Q4_0, QuantType::Q4_1}) {
    const int64_t m = 19, n = 23, k = 7 * kQuantBlock, r0 = 3, r1 = 20;
    const QuantWeight w = test::random_quant_weight(t, n, k, 3400);
    const std::vector<float> x = test::random_floats(size_t(m * k), 3401, -2.f, 2.f);
    Q8Activations a;
    quantize_activations(x.data(), m, k, t, a);
    ActivationTiles tiles;
    pack_activation_tiles(a, tiles);
    const int64_t blocks = k / kQuantBlock;
    const QuantRows rows{w.quants.data(), reinterpret_cast<const uint16_t*>(w.scales.data()),
                         blocks * quant_block_bytes(t), blocks * quant_scales_per_block(t)};
    std::vector<float> one(size_t(m * n), NAN), tiled(size_t(m * n), NAN);
    quant_product(t, QuantKernel::Avx512Vnni)(rows, r0, r1, a, one.data(), n);
    quant_gemm(t)(rows, r0, r1, tiles, tiled.data(), n);
    for (int64_t i = 0; i < m; ++i)
      for (int64_t r = 0; r < n; ++r) {
        const float u = one[size_t(i * n + r)], v = tiled[size_t(i * n + r)];
        if (r < r0 || r >= r1) {
          EXPECT_TRUE(std::isnan(v)) << quant_type_name(t) << " wrote outside its range at " << i << ", " << r;
        } else {
          EXPECT_EQ(std::memcmp(&u, &v, sizeof(float)), 0)
              << quant_type_name(t) << " row " << i << " col " << r << ": " << u << " vs " << v;
        }
      }
  }
}

// A NaN in one row of x poisons exactly that row's outputs on the tiled path.
TEST(CpuQuantGemm, NanInARowOfXReachesThatRowOnly) {
  SKIP_WITHOUT_VNNI();
  const test::QuantKernelScope scope(QuantKernel::Avx512Vnni);
  for (QuantType t : {QuantType::Q8_0, QuantType::Q4_0, QuantType::Q4_1}) {
    const int64_t m = 18, n = 21, k = 5 * kQuantBlock;
    const QuantWeight w = test::random_quant_weight(t, n, k, 3500);
    std::vector<float> x = test::random_floats(size_t(m * k), 3501);
    x[size_t(9 * k + 70)] = NAN;
    bool tiled = false;
    const std::vector<float> got = run_product(t, m, n, k, w, x, {}, {}, &tiled);
    ASSERT_TRUE(tiled);
    for (int64_t i = 0; i < m; ++i)
      for (int64_t r = 0; r < n; ++r)
        EXPECT_EQ(std::isnan(got[size_t(i * n + r)]), i == 9) << quant_type_name(t) << " row " << i << " col " << r;
  }
}

}  // namespace
}  // namespace rlx::cpu
