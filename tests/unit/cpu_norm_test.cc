// CPU norm thunk (LayerNorm / RMSNorm, with and without residual and beta)
// vs a double-precision reference, in f32/f16/bf16.
#include <gtest/gtest.h>

#include "thunk_harness.h"

namespace rlx::test {
namespace {

class CpuNorm : public ::testing::TestWithParam<DType> {};

void run_norm(NormKind kind, bool residual, bool beta, int64_t rows, int64_t cols, DType dt, uint64_t seed) {
  const size_t n = size_t(rows * cols);
  // A mean far from zero: a one-pass variance would lose precision.
  auto x = quantize(random_floats(n, seed, 2.f, 4.f), dt);
  auto r = quantize(random_floats(n, seed + 1), dt);
  auto g = quantize(random_floats(size_t(cols), seed + 2, 0.5f, 1.5f), dt);
  auto bt = quantize(random_floats(size_t(cols), seed + 3), dt);
  const float eps = 1e-5f;

  ThunkHarness h;
  NormParams p{};
  p.x = h.input_f32("x", x, dt);
  p.residual = residual ? h.input_f32("residual", r, dt) : kNoBuffer;
  p.gamma = h.input_f32("gamma", g, dt);
  p.beta = beta ? h.input_f32("beta", bt, dt) : kNoBuffer;
  p.out = h.output("out", dt, n);
  p.sum_out = residual ? h.output("sum", dt, n) : kNoBuffer;
  p.rows = rows, p.cols = cols;
  p.eps = eps;
  p.dtype = dt;
  p.kind = kind;
  h.run(p, cpu_backend());

  std::vector<double> sum(n), ref(n);
  for (size_t i = 0; i < n; ++i) sum[i] = double(x[i]) + (residual ? double(r[i]) : 0.0);
  for (int64_t row = 0; row < rows; ++row) {
    const double* s = &sum[size_t(row * cols)];
    double mean = 0, var = 0;
    if (kind == NormKind::Layer) {
      for (int64_t c = 0; c < cols; ++c) mean += s[c];
      mean /= double(cols);
    }
    for (int64_t c = 0; c < cols; ++c) var += (s[c] - mean) * (s[c] - mean);
    const double inv = 1.0 / std::sqrt(var / double(cols) + eps);
    for (int64_t c = 0; c < cols; ++c)
      ref[size_t(row * cols + c)] = (s[c] - mean) * inv * g[size_t(c)] + (beta ? bt[size_t(c)] : 0.0);
  }
  const std::string what = std::string(kind == NormKind::Layer ? "layer" : "rms") + " norm residual " +
                           std::to_string(residual) + " beta " + std::to_string(beta) + " " +
                           std::to_string(rows) + "x" + std::to_string(cols);
  expect_close(h.result("out"), ref, tolerance(dt), what);
  if (residual) expect_close(h.result("sum"), sum, tolerance(dt), what + " sum_out");
}

TEST_P(CpuNorm, LayerNorm) {
  for (bool residual : {false, true})
    for (bool beta : {false, true})
      for (auto [rows, cols] : {std::pair{1, 7}, {7, 33}, {3, 129}})
        run_norm(NormKind::Layer, residual, beta, rows, cols, GetParam(), 600 + uint64_t(cols));
}

TEST_P(CpuNorm, RmsNorm) {
  for (bool residual : {false, true})
    for (auto [rows, cols] : {std::pair{1, 1}, {7, 33}, {3, 129}})
      run_norm(NormKind::Rms, residual, false, rows, cols, GetParam(), 700 + uint64_t(cols));
}

INSTANTIATE_TEST_SUITE_P(Dtypes, CpuNorm, ::testing::Values(DType::F32, DType::F16, DType::BF16),
                         [](const auto& info) { return std::string(dtype_name(info.param)); });

}  // namespace
}  // namespace rlx::test
