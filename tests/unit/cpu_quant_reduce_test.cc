// The lane sums of cpu_quant_reduce.h: N vectors reduced at once give each
// vector's reduce_lanes bits, and those are GCC's _mm512_reduce_add_ps
// (the one-row kernel's sum before the tiled path shared it), over values
// whose sum depends on the order.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>

#include "backends/cpu/cpu_quant_dot.h"
#include "backends/cpu/cpu_quant_reduce.h"

#if defined(__x86_64__) && defined(__GNUC__)
namespace rlx::cpu {
namespace {

template <int N>
RLX_TARGET_AVX512 __attribute__((noinline)) int mismatches(const float* lanes) {
  __m512 v[N];
  for (int j = 0; j < N; ++j) v[j] = _mm512_loadu_ps(lanes + 16 * j);
  float all[N];
  reduce_lanes_n<N>(v, all);
  int bad = 0;
  for (int j = 0; j < N; ++j) {
    const float one = reduce_lanes(v[j]);
    bad += std::memcmp(&one, &all[j], sizeof(float)) != 0;
#if !defined(__clang__)
    const float gcc = _mm512_reduce_add_ps(v[j]);
    bad += std::memcmp(&one, &gcc, sizeof(float)) != 0;
#endif
  }
  return bad;
}

template <int N> void check(std::mt19937& rng) {
  std::uniform_real_distribution<float> u(-1.f, 1.f);
  std::uniform_int_distribution<int> e(-30, 30);
  float lanes[16 * 16];
  for (int rep = 0; rep < 200; ++rep) {
    // Magnitudes 2^-30..2^30: every order of summation rounds differently.
    for (float& f : lanes) f = std::ldexp(u(rng), e(rng));
    EXPECT_EQ(mismatches<N>(lanes), 0) << N << " vectors";
  }
}

TEST(CpuQuantReduce, ManyVectorsAtOnceGiveEachVectorsOwnSum) {
  if (!quant_kernel_runs(QuantKernel::Avx512Vnni)) GTEST_SKIP() << "no AVX-512 here";
  std::mt19937 rng(3600);
  check<1>(rng);
  check<2>(rng);
  check<3>(rng);
  check<4>(rng);
  check<5>(rng);
  check<8>(rng);
  check<12>(rng);
  check<16>(rng);
}

}  // namespace
}  // namespace rlx::cpu
#endif
