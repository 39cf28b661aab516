// The erf-GELU pass that follows a cuBLASLt product (cuBLASLt's GELU
// epilogue is the tanh form), launched directly over every finite f16 and
// bf16 value, the infinities and a NaN, and over an f32 sweep: each result
// against the exact GELU in double. The buffer is laid out once contiguous
// (the "flat" kernel, 16-byte chunks and a scalar tail) and once with a row
// gap (the "strided" kernel); the gap must come back untouched.
#include <gtest/gtest.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <string>
#include <vector>

#include "backends/cuda/matmul.h"
#include "rlx/dtype.h"
#include "rlx/session.h"

namespace rlx {
namespace {

double exact_gelu(double x) { return 0.5 * x * std::erfc(-x / std::sqrt(2.0)); }

// Every value of dt worth a GELU: all finite 16-bit patterns, or an f32 sweep.
std::vector<float> inputs(DType dt) {
  // The infinities and a NaN first, so that trimming to whole rows keeps them.
  std::vector<float> v = {std::numeric_limits<float>::infinity(), -std::numeric_limits<float>::infinity(),
                          std::numeric_limits<float>::quiet_NaN()};
  if (dt == DType::F32) {
    for (int i = -120000; i <= 120000; ++i) v.push_back(float(i) * 1e-4f);  // [-12, 12]
    for (float x : {-1e30f, -100.f, 100.f, 1e30f}) v.push_back(x);
  } else {
    std::vector<uint8_t> one(2);
    for (uint32_t bits = 0; bits < 65536; ++bits) {
      std::memcpy(one.data(), &bits, 2);
      const float x = load_as_float(one.data(), dt, 0);
      if (std::isfinite(x)) v.push_back(x);
    }
  }
  return v;
}

// Run the pass over v as rows of n values, ldc apart; returns the rows read back
// (gaps included).
std::vector<float> run_pass(DType dt, const std::vector<float>& v, int64_t n, int64_t ldc, const char* variant) {
  const size_t es = dtype_size(dt);
  const int64_t m = int64_t(v.size()) / n;
  MatMulParams p{};
  p.batch = 1, p.m = m, p.n = n, p.k = 8, p.ldc = ldc, p.out = 0;
  p.dtype = dt, p.act = Activation::Gelu;
  std::vector<uint8_t> host(size_t(m * ldc) * es);
  for (int64_t i = 0; i < m; ++i)
    for (int64_t j = 0; j < ldc; ++j)  // the gap holds 7.0: it must stay 7.0
      store_from_float(host.data(), dt, size_t(i * ldc + j), j < n ? v[size_t(i * n + j)] : 7.f);
  uint8_t* arena = nullptr;
  EXPECT_EQ(cudaMalloc(&arena, host.size()), cudaSuccess);
  EXPECT_EQ(cudaMemcpy(arena, host.data(), host.size(), cudaMemcpyHostToDevice), cudaSuccess);
  EXPECT_STREQ(cuda::activation_pass_variant(p, arena), variant);
  cuda::run_activation_pass(p, cuda::LaunchContext{arena, nullptr, "activation pass test"});
  EXPECT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  EXPECT_EQ(cudaMemcpy(host.data(), arena, host.size(), cudaMemcpyDeviceToHost), cudaSuccess);
  cudaFree(arena);
  std::vector<float> out(size_t(m * ldc));
  for (size_t i = 0; i < out.size(); ++i) out[i] = load_as_float(host.data(), dt, i);
  return out;
}

// The spacing of 16-bit dt's values at x (subnormals included).
double ulp(DType dt, double x) {
  const int bits = dt == DType::F16 ? 10 : 7;
  const int min_exp = dt == DType::F16 ? -14 : -126;
  int e = 0;
  std::frexp(std::fabs(x), &e);
  return std::ldexp(1.0, std::max(e - 1, min_exp) - bits);
}

double rounded_to(DType dt, double x) {
  uint8_t b[4];
  store_from_float(b, dt, 0, float(x));
  return load_as_float(b, dt, 0);
}

void check(DType dt, const std::vector<float>& v, const std::vector<float>& got, int64_t n, int64_t ldc,
           const std::string& what) {
  int bad = 0, inexact = 0, checked = 0;
  for (size_t idx = 0; idx < v.size(); ++idx) {
    const size_t at = size_t(int64_t(idx) / n * ldc + int64_t(idx) % n);
    const double x = v[idx], y = got[at];
    bool ok;
    if (std::isnan(x)) ok = std::isnan(y);
    else if (std::isinf(x)) ok = x > 0 ? y == x : y == 0.0;
    else {
      const double want = exact_gelu(x);
      // 16-bit: within one unit in the last place; f32: 1e-5 relative. Or,
      // in the far left tail where GELU is below 2e-7 |x|, within 2e-7 |x|.
      const double tol = dt == DType::F32 ? 1e-5 * std::fabs(want) : ulp(dt, want);
      ok = std::fabs(y - want) <= tol || std::fabs(y - want) <= 2e-7 * std::fabs(x);
      inexact += dt != DType::F32 && rounded_to(dt, want) != y;
      ++checked;
    }
    if (!ok && bad++ < 5) ADD_FAILURE() << what << ": gelu(" << x << ") = " << y << ", want " << exact_gelu(x);
  }
  EXPECT_EQ(bad, 0) << what;
  // Nearly all 16-bit results are the exactly rounded value.
  EXPECT_LE(inexact, checked / 100) << what;
  EXPECT_GT(checked, 60000) << what;
  for (int64_t i = 0; i < int64_t(v.size()) / n; ++i)
    for (int64_t j = n; j < ldc; ++j) ASSERT_EQ(got[size_t(i * ldc + j)], 7.f) << what << ": the row gap was written";
}

TEST(ActivationPass, GeluMatchesTheExactValueForEveryInput) {
  if (!cuda_available()) GTEST_SKIP() << "no CUDA device present: GPU tests skipped";
  for (DType dt : {DType::F16, DType::BF16, DType::F32}) {
    std::vector<float> v = inputs(dt);
    // One row of an odd length: 16-byte chunks and a scalar tail.
    const std::string name(dtype_name(dt));
    check(dt, v, run_pass(dt, v, int64_t(v.size()), int64_t(v.size()), "flat"), int64_t(v.size()),
          int64_t(v.size()), name + " flat");
    // Rows of 5 values, 8 apart: the strided kernel.
    v.resize(v.size() / 5 * 5);
    check(dt, v, run_pass(dt, v, 5, 8, "strided"), 5, 8, name + " strided");
  }
}

}  // namespace
}  // namespace rlx
