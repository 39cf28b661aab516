// Every configuration of the few-row GEMM (tile rows x split count), launched
// directly over a device buffer laid out like an arena, against a double
// reference: partial row tiles of 64 and 128, a partial column tile, split
// and unsplit K, bias and erf-GELU, f16 and bf16. The output is poisoned
// before each launch. (Through a compiled graph only the configuration that
// timed fastest would run.)
#include <gtest/gtest.h>
#include <cuda_runtime.h>

#include <cmath>
#include <random>
#include <set>
#include <utility>
#include <vector>

#include "backends/cuda/matmul_few_rows.h"
#include "rlx/dtype.h"
#include "rlx/session.h"

namespace rlx {
namespace {

TEST(FewRowGemm, EveryConfigurationMatchesTheReference) {
  if (!cuda_available()) GTEST_SKIP() << "no CUDA device present: GPU tests skipped";
  int device = 0, major = 0;
  ASSERT_EQ(cudaGetDevice(&device), cudaSuccess);
  ASSERT_EQ(cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, device), cudaSuccess);
  if (major < 9) GTEST_SKIP() << "the few-row GEMM needs compute capability 9.0";
  std::set<std::pair<int, int>> launches;  // (rows a block, splits) that ran
  for (DType dt : {DType::F16, DType::BF16}) {
    for (int64_t m : {77, 200}) {
      for (int64_t k : {64, 768}) {
        const int64_t n = 136;
        auto align = [](int64_t bytes) { return (bytes + 255) / 256 * 256; };
        MatMulParams p{};
        p.a = 0;
        p.b = uint64_t(align(m * k * 2));
        p.bias = p.b + uint64_t(align(n * k * 2));
        p.out = p.bias + uint64_t(align(n * 2));
        const size_t bytes = size_t(p.out) + size_t(m * n * 2);
        p.batch = 1, p.m = m, p.n = n, p.k = k, p.lda = k, p.ldb = k, p.ldc = n;
        p.dtype = dt, p.act = Activation::Gelu, p.trans_b = 1, p.b_constant = 1;
        p.fused.norm_gamma = p.fused.residual = kNoBuffer;

        std::mt19937 rng(unsigned(m * 31 + k));
        std::uniform_real_distribution<float> u(-1.f, 1.f);
        std::vector<uint8_t> host(bytes, 0);
        std::vector<double> a(static_cast<size_t>(m * k)), b(static_cast<size_t>(n * k)), bias(static_cast<size_t>(n));
        auto fill = [&](std::vector<double>& v, uint64_t offset) {
          for (size_t i = 0; i < v.size(); ++i) {
            store_from_float(host.data() + offset, dt, i, u(rng));
            v[i] = load_as_float(host.data() + offset, dt, i);  // the value as rounded to dt
          }
        };
        fill(a, p.a);
        fill(b, p.b);
        fill(bias, p.bias);

        uint8_t* arena = nullptr;
        ASSERT_EQ(cudaMalloc(&arena, bytes), cudaSuccess);
        ASSERT_EQ(cudaMemcpy(arena, host.data(), bytes, cudaMemcpyHostToDevice), cudaSuccess);
        ASSERT_TRUE(cuda::few_row_gemm_eligible(p, arena)) << "m=" << m << " k=" << k;
        for (int config = 0; config < cuda::FewRowGemm::kConfigs; ++config) {
          const std::string what = std::string(dtype_name(dt)) + " m=" + std::to_string(m) + " k=" +
                                   std::to_string(k) + " config " + std::to_string(config);
          ASSERT_EQ(cudaMemset(arena + p.out, 0xff, size_t(m * n * 2)), cudaSuccess);  // NaN in f16 and bf16
          cuda::FewRowGemm g(p, config, "few-row test");
          launches.insert({g.rows_per_block(), g.splits()});
          g.run(cuda::LaunchContext{arena, nullptr, "few-row test"});
          ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess) << what;
          std::vector<uint8_t> out(size_t(m * n * 2));
          ASSERT_EQ(cudaMemcpy(out.data(), arena + p.out, out.size(), cudaMemcpyDeviceToHost), cudaSuccess);
          int bad = 0, nonzero = 0;
          for (int64_t i = 0; i < m; ++i)
            for (int64_t j = 0; j < n; ++j) {
              double s = bias[size_t(j)], mag = std::fabs(s);
              for (int64_t q = 0; q < k; ++q) {
                s += a[size_t(i * k + q)] * b[size_t(j * k + q)];
                mag += std::fabs(a[size_t(i * k + q)] * b[size_t(j * k + q)]);
              }
              const double want = 0.5 * s * (1.0 + std::erf(s / std::sqrt(2.0)));
              const double got = load_as_float(out.data(), dt, size_t(i * n + j));
              const double tol = (dt == DType::BF16 ? 1.6e-2 : 2e-3) * (std::fabs(want) + 0.05 * mag + 1e-3);
              nonzero += got != 0.0;
              if (!(std::fabs(got - want) <= tol) && bad++ < 5)
                ADD_FAILURE() << what << ": out[" << i << ", " << j << "] = " << got << ", want " << want;
            }
          EXPECT_EQ(bad, 0) << what;
          EXPECT_GT(nonzero, m * n / 2) << what;  // an unwritten or zeroed output fails too
        }
        cudaFree(arena);
      }
    }
  }
  // Both tile heights ran, split and unsplit.
  int tall = 0, split = 0, whole = 0;
  for (const auto& [rows, splits] : launches) {
    tall += rows == 128;
    split += splits > 1;
    whole += splits == 1;
  }
  EXPECT_GE(tall, 2);
  EXPECT_GE(split, 2);
  EXPECT_GE(whole, 1);
}

}  // namespace
}  // namespace rlx
