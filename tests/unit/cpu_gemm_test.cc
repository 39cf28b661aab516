// The CPU GEMM's two paths (our unpacked kernel for few rows against
// transposed weights, the library otherwise) against a double-precision
// reference on odd sizes, and which path each shape takes.
#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <vector>

#include "backends/cpu/cpu_gemm.h"
#include "backends/cpu/cpu_gemm_nt.h"

namespace rlx::cpu {
namespace {

struct Case {
  int64_t m, n, k;
};

std::vector<float> random(size_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> u(-1.f, 1.f);
  std::vector<float> v(n);
  for (auto& x : v) x = u(rng);
  return v;
}

// C = A B^T with A m x k (row length lda >= k), B n x k (ldb), C m x n (ldc):
// strides wider than the rows, so a kernel that assumes dense rows fails.
void check(const Case& c, bool unpacked_kernel) {
  const int64_t lda = c.k + 3, ldb = c.k + 5, ldc = c.n + 2;
  auto a = random(size_t(c.m * lda), 1), b = random(size_t(c.n * ldb), 2);
  std::vector<float> out(size_t(c.m * ldc), std::nanf(""));
  if (unpacked_kernel) gemm_nt_unpacked(c.m, c.n, c.k, a.data(), lda, b.data(), ldb, out.data(), ldc);
  else gemm_f32(false, true, c.m, c.n, c.k, a.data(), lda, b.data(), ldb, out.data(), ldc, 1);
  double worst = 0, ref_max = 0;
  for (int64_t i = 0; i < c.m; ++i)
    for (int64_t j = 0; j < c.n; ++j) {
      double ref = 0;
      for (int64_t x = 0; x < c.k; ++x) ref += double(a[size_t(i * lda + x)]) * b[size_t(j * ldb + x)];
      const float got = out[size_t(i * ldc + j)];
      ASSERT_TRUE(std::isfinite(got)) << "C[" << i << "][" << j << "] unwritten, " << c.m << "x" << c.n << "x" << c.k;
      worst = std::max(worst, std::fabs(got - ref));
      ref_max = std::max(ref_max, std::fabs(ref));
    }
  ASSERT_GT(ref_max, 1e-3) << "all-zero reference";
  EXPECT_LE(worst, 1e-5 * ref_max * std::sqrt(double(c.k))) << c.m << "x" << c.n << "x" << c.k;
  // The padding between rows of C stays untouched.
  for (int64_t i = 0; i < c.m; ++i)
    for (int64_t j = c.n; j < ldc; ++j) ASSERT_TRUE(std::isnan(out[size_t(i * ldc + j)]));
}

TEST(CpuGemm, UnpackedKernelOddSizes) {
  for (Case c : {Case{1, 1, 1}, Case{1, 7, 16}, Case{4, 4, 32}, Case{5, 9, 17}, Case{37, 23, 45},
                 Case{64, 131, 384}, Case{3, 5, 1537}, Case{13, 4, 15}})
    check(c, true);
}

TEST(CpuGemm, EachPathThroughGemmF32) {
  for (Case c : {Case{37, 23, 45}, Case{64, 67, 129}, Case{65, 67, 129}, Case{131, 97, 67}}) check(c, false);
}

TEST(CpuGemm, FewRowsAgainstTransposedWeightsRunUnpacked) {
  EXPECT_EQ(gemm_path(false, true, 1), GemmPath::Unpacked);
  EXPECT_EQ(gemm_path(false, true, 64), GemmPath::Unpacked);
  EXPECT_EQ(gemm_path(false, true, 65), GemmPath::Library);
  EXPECT_EQ(gemm_path(false, false, 8), GemmPath::Library);
  EXPECT_EQ(gemm_path(true, true, 8), GemmPath::Library);
}

}  // namespace
}  // namespace rlx::cpu
