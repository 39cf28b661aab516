// The CPU backend's vectorized exp and erf-GELU against double precision,
// element by element, through the same dispatched (AVX-512 / AVX2 / plain)
// loops the kernels use; and which of those variants this processor runs.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include "backends/cpu/cpu_activation.h"
#include "backends/cpu/cpu_vec_math.h"

namespace rlx::cpu {
namespace {

RLX_CPU_CLONES void exp_loop(const float* x, float* out, int64_t n) {
  for (int64_t i = 0; i < n; ++i) out[i] = exp_approx(x[i]);
}

// A grid over [lo, hi] of an odd count plus uniform random points.
std::vector<float> points(float lo, float hi, int grid, int random, uint32_t seed) {
  std::vector<float> x;
  for (int i = 0; i < grid; ++i) x.push_back(lo + (hi - lo) * float(i) / float(grid - 1));
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> u(lo, hi);
  for (int i = 0; i < random; ++i) x.push_back(u(rng));
  return x;
}

std::vector<float> poisoned(size_t n) { return std::vector<float>(n, std::nanf("")); }

TEST(CpuVecMath, ExpWithinFourUlpWhereNormal) {
  auto x = points(-87.f, 88.f, 100003, 50001, 1);
  auto y = poisoned(x.size());
  exp_loop(x.data(), y.data(), int64_t(x.size()));
  double worst = 0;
  for (size_t i = 0; i < x.size(); ++i) {
    const double ref = std::exp(double(x[i]));
    ASSERT_TRUE(std::isfinite(y[i])) << "exp(" << x[i] << ") unwritten or not finite";
    worst = std::max(worst, std::fabs(y[i] - ref) / ref);
  }
  EXPECT_LE(worst, 4 * 0x1p-24) << "max relative error " << worst;
}

TEST(CpuVecMath, ExpUnderflowsToZeroAndMapsMinusInfinity) {
  std::vector<float> x{-87.5f, -100.f, -1e30f, -INFINITY, 0.f};
  auto y = poisoned(x.size());
  exp_loop(x.data(), y.data(), int64_t(x.size()));
  for (size_t i = 0; i + 1 < x.size(); ++i) EXPECT_EQ(y[i], 0.f) << "exp(" << x[i] << ")";
  EXPECT_EQ(y.back(), 1.f);
}

TEST(CpuVecMath, GeluErfMatchesDoubleIncludingTheNegativeTail) {
  auto x = points(-12.f, 12.f, 200001, 50001, 2);
  auto y = poisoned(x.size());
  activation_row(Activation::Gelu, x.data(), nullptr, y.data(), int64_t(x.size()));
  double worst_rel = 0;
  for (size_t i = 0; i < x.size(); ++i) {
    const double xd = x[i], ref = 0.5 * xd * std::erfc(-xd / std::sqrt(2.0));
    ASSERT_TRUE(std::isfinite(y[i])) << "gelu(" << x[i] << ") unwritten";
    // Relative everywhere: at x = -12 the value is ~1e-32, still a normal float.
    if (ref != 0) worst_rel = std::max(worst_rel, std::fabs(y[i] - ref) / std::fabs(ref));
  }
  EXPECT_LE(worst_rel, 1e-6) << "max relative error " << worst_rel;
}

TEST(CpuVecMath, GeluErfNearZeroAndLargeArguments) {
  std::vector<float> x{0.f, 1e-30f, -1e-30f, 1e-7f, -1e-7f, 3e-4f, -3e-4f, 30.f, 1e4f, -30.f, -1e4f};
  auto y = poisoned(x.size());
  activation_row(Activation::Gelu, x.data(), nullptr, y.data(), int64_t(x.size()));
  for (size_t i = 0; i < x.size(); ++i) {
    const double xd = x[i], ref = 0.5 * xd * std::erfc(-xd / std::sqrt(2.0));
    EXPECT_NEAR(y[i], ref, 2e-7 * std::fabs(ref) + 1e-38) << "gelu(" << x[i] << ")";
  }
}

TEST(CpuVecMath, BiasAndActivationRowOddLength) {
  for (Activation act : {Activation::None, Activation::Gelu, Activation::Silu, Activation::Relu}) {
    auto x = points(-6.f, 6.f, 0, 1003, 3), bias = points(-1.f, 1.f, 0, 1003, 4);
    auto y = poisoned(x.size());
    activation_row(act, x.data(), bias.data(), y.data(), int64_t(x.size()));
    for (size_t i = 0; i < x.size(); ++i) {
      const double v = double(x[i] + bias[i]);
      double ref = v;
      if (act == Activation::Gelu) ref = 0.5 * v * std::erfc(-v / std::sqrt(2.0));
      if (act == Activation::Silu) ref = v / (1 + std::exp(-v));
      if (act == Activation::Relu) ref = v > 0 ? v : 0;
      ASSERT_NEAR(y[i], ref, 1e-6 * std::max(1.0, std::fabs(ref))) << "activation " << int(act) << " at " << v;
    }
  }
}

TEST(CpuVecMath, RunsTheWidestVariantThisProcessorHas) {
  const std::string isa = cpu_vector_isa();
#if defined(__x86_64__) && defined(__GNUC__)
  if (__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
      __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512dq"))
    EXPECT_EQ(isa, "x86-64-v4");
  else if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma"))
    EXPECT_EQ(isa, "x86-64-v3");
  else
    EXPECT_EQ(isa, "default");
#else
  EXPECT_EQ(isa, "default");
#endif
}

}  // namespace
}  // namespace rlx::cpu
