// The CPU's quantized matrix products (cpu_quant_dot.h), each kernel this
// processor runs forced in turn and asserted to be the one that ran: every
// format, odd sizes (n odd, k of 1, 3, 5, 7, 8 and 18 blocks: groups of 4
// blocks with every tail, 1..17 rows of x, up to 8 also with the fused
// RMSNorm and residual), NaN-poisoned outputs. The f32 kernel is held to the
// dequantized product within f32 rounding; the integer kernels to the bound
// their two-digit int8 activations allow (per block of x, |x - x'| <= dx /
// 256 with dx = amax / 127, so |error| <= sum over blocks of dx / 256 *
// sum |w|: 128 times tighter than one digit's dx / 2) and to each other within
// f32 summation order. A NaN in x reaches exactly the outputs it feeds.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <string>

#include "backends/cpu/cpu_quant_dot.h"
#include "quant_weights.h"
#include "rlx/error.h"
#include "thunk_harness.h"

namespace rlx::cpu {
namespace {

using test::QuantWeight;

std::vector<QuantKernel> kernels_here() {
  std::vector<QuantKernel> ks;
  for (QuantKernel k : {QuantKernel::F32, QuantKernel::Scalar, QuantKernel::Avx2, QuantKernel::Avx512Vnni})
    if (quant_kernel_runs(k)) ks.push_back(k);
  return ks;
}

// Restores the kernel in use when a test ends.
struct KernelScope {
  QuantKernel saved = quant_kernel();
  ~KernelScope() { set_quant_kernel(saved); }
};

struct Case {
  QuantType type;
  int64_t m, n, k;
  bool bias, norm, residual;
};

// The product on the CPU with kernel `kernel` (asserted to have run), in f32.
std::vector<float> run_product(const Case& c, const QuantWeight& w, const std::vector<float>& x,
                               const std::vector<float>& bias, const std::vector<float>& gamma,
                               const std::vector<float>& residual, QuantKernel kernel) {
  set_quant_kernel(kernel);
  test::ThunkHarness h;
  MatMulQParams p{};
  p.x = h.input_f32("x", x, DType::F32);
  p.quants = h.input("quants", DType::I32, w.quants);
  p.scales = h.input("scales", DType::F16, w.scales);
  p.bias = c.bias ? h.input_f32("bias", bias, DType::F32) : kNoBuffer;
  if (c.norm) {
    p.fused.norm_gamma = h.input_f32("gamma", gamma, DType::F32);
    p.fused.norm_eps = 1e-5f;
  }
  if (c.residual) p.fused.residual = h.input_f32("residual", residual, DType::F32);
  p.out = h.output("out", DType::F32, size_t(c.m * c.n));
  // 9 rows with W's dequantized scratch (as a graph for CUDA has it), 17
  // without (as the CPU compiles it: keep_products_quantized).
  p.dequantized = c.m > kMatMulQVectorRows && c.m < 17 ? h.output("dequantized", DType::F32, size_t(c.n * c.k))
                                                       : kNoBuffer;
  p.m = c.m, p.n = c.n, p.k = c.k;
  p.dtype = DType::F32;
  p.quant = c.type;
  const uint64_t before = quant_kernel_calls(kernel);
  h.run(p, cpu_backend());
  EXPECT_EQ(quant_kernel_calls(kernel), before + 1) << quant_kernel_name(kernel) << " did not run";
  return h.result("out");
}

// x's rows as the product sees them: RMS-normalized with gamma when fused.
std::vector<double> product_input(const Case& c, const std::vector<float>& x, const std::vector<float>& gamma) {
  std::vector<double> v(x.begin(), x.end());
  if (!c.norm) return v;
  for (int64_t i = 0; i < c.m; ++i) {
    double ss = 0;
    for (int64_t j = 0; j < c.k; ++j) ss += double(x[size_t(i * c.k + j)]) * x[size_t(i * c.k + j)];
    const double s = 1.0 / std::sqrt(ss / double(c.k) + 1e-5);
    for (int64_t j = 0; j < c.k; ++j) v[size_t(i * c.k + j)] *= s * gamma[size_t(j)];
  }
  return v;
}

TEST(CpuQuantDot, EveryKernelAgainstTheDequantizedProductAtOddSizes) {
  KernelScope scope;
  const std::vector<QuantKernel> ks = kernels_here();
  ASSERT_GE(ks.size(), 2u);  // f32 and plain C++ run everywhere
  uint64_t seed = 900;
  std::vector<Case> cases;
  for (QuantType t : {QuantType::Q8_0, QuantType::Q4_0, QuantType::Q4_1})
    for (int64_t blocks : {1, 3, 5, 7, 8, 18})
      for (int64_t m : {1, 3, 9, 17})
        // The fusions come with few rows only (fuse_matvec), as in a graph.
        cases.push_back({t, m, blocks % 2 ? 37 : 19, blocks * kQuantBlock, m % 2 == 1, m == 3, m == 1 || m == 3});
  for (const Case& c : cases) {
    const QuantWeight w = test::random_quant_weight(c.type, c.n, c.k, seed += 10);
    const std::vector<float> x = test::random_floats(size_t(c.m * c.k), seed + 1, -2.f, 2.f);
    const std::vector<float> bias = test::random_floats(size_t(c.n), seed + 2);
    const std::vector<float> gamma = test::random_floats(size_t(c.k), seed + 3, 0.5f, 1.5f);
    const std::vector<float> residual = test::random_floats(size_t(c.m * c.n), seed + 4);
    const std::vector<double> xin = product_input(c, x, gamma);
    // The exact product, and the bound int8 activations allow per output.
    std::vector<double> ref(size_t(c.m * c.n)), bound(ref.size());
    for (int64_t i = 0; i < c.m; ++i)
      for (int64_t r = 0; r < c.n; ++r) {
        double want = 0;
        const double b = test::two_digit_bound(xin, w, i, r, &want);
        const double acc =
            want + (c.bias ? bias[size_t(r)] : 0.0) + (c.residual ? residual[size_t(i * c.n + r)] : 0.0);
        ref[size_t(i * c.n + r)] = acc;
        // The f32 part on the sum with bias and residual.
        bound[size_t(i * c.n + r)] = b + 1e-5 * (std::fabs(acc) - std::fabs(want));
      }
    const std::string what = std::string(quant_type_name(c.type)) + " m=" + std::to_string(c.m) + " n=" +
                             std::to_string(c.n) + " k=" + std::to_string(c.k) + (c.norm ? " norm" : "") +
                             (c.residual ? " residual" : "");
    std::vector<float> first_int;
    for (QuantKernel kernel : ks) {
      const std::string kw = what + " " + quant_kernel_name(kernel);
      const std::vector<float> got = run_product(c, w, x, bias, gamma, residual, kernel);
      ASSERT_EQ(got.size(), ref.size()) << kw;
      if (kernel == QuantKernel::F32) {
        test::expect_close(test::to_double(got), ref, test::tol_for(DType::F32, 4), kw);
        continue;
      }
      size_t bad = 0, exact = 0;
      for (size_t e = 0; e < got.size(); ++e) {
        if (!(std::fabs(got[e] - ref[e]) <= bound[e]) && bad++ == 0)
          ADD_FAILURE() << kw << ": element " << e << " got " << got[e] << " want " << ref[e] << " within "
                        << bound[e];
        exact += std::fabs(got[e] - ref[e]) < 1e-7;
      }
      EXPECT_EQ(bad, 0u) << kw;
      EXPECT_LT(exact, got.size()) << kw << ": no int8 rounding at all (the f32 path ran?)";
      // The integer kernels share every block's exact integer sum.
      if (first_int.empty()) {
        first_int = got;
      } else {
        for (size_t e = 0; e < got.size(); ++e)
          ASSERT_NEAR(got[e], first_int[e], 1e-5 * (1 + std::fabs(ref[e])) + 1e-3 * bound[e]) << kw << " " << e;
      }
    }
  }
}

// A NaN in one row of x poisons exactly that row's outputs, on every kernel.
TEST(CpuQuantDot, NanInARowOfXReachesThatRowOnly) {
  KernelScope scope;
  for (QuantType t : {QuantType::Q8_0, QuantType::Q4_0, QuantType::Q4_1})
    for (QuantKernel kernel : kernels_here()) {
      const Case c{t, 3, 21, 5 * kQuantBlock, false, false, false};
      const QuantWeight w = test::random_quant_weight(t, c.n, c.k, 77);
      std::vector<float> x = test::random_floats(size_t(c.m * c.k), 78);
      x[size_t(1 * c.k + 70)] = NAN;
      const std::vector<float> got = run_product(c, w, x, {}, {}, {}, kernel);
      for (int64_t i = 0; i < c.m; ++i)
        for (int64_t r = 0; r < c.n; ++r)
          EXPECT_EQ(std::isnan(got[size_t(i * c.n + r)]), i == 1)
              << quant_type_name(t) << " " << quant_kernel_name(kernel) << " row " << i << " col " << r;
    }
}

TEST(CpuQuantDot, KernelsAreNamedAndTheBestIntegerOneIsTheDefault) {
  KernelScope scope;
  EXPECT_TRUE(quant_kernel_runs(QuantKernel::F32));
  EXPECT_TRUE(quant_kernel_runs(QuantKernel::Scalar));
  // Unless RLX_CPU_QUANT_KERNEL picks one, the fastest integer kernel here.
  QuantKernel best = QuantKernel::Scalar;
  if (quant_kernel_runs(QuantKernel::Avx2)) best = QuantKernel::Avx2;
  if (quant_kernel_runs(QuantKernel::Avx512Vnni)) best = QuantKernel::Avx512Vnni;
  const char* env = std::getenv("RLX_CPU_QUANT_KERNEL");
  if (!env || std::string(env) == "auto") EXPECT_EQ(scope.saved, best) << quant_kernel_name(scope.saved);
  for (QuantKernel k : {QuantKernel::Avx2, QuantKernel::Avx512Vnni})
    if (!quant_kernel_runs(k)) EXPECT_THROW(set_quant_kernel(k), Error) << quant_kernel_name(k);
}

}  // namespace
}  // namespace rlx::cpu
