// CPU matmul thunk vs a double-precision reference: transposes, padded rows,
// broadcast batches, bias and every activation, in f32/f16/bf16.
#include <gtest/gtest.h>

#include "reference_ops.h"
#include "thunk_harness.h"

namespace rlx::test {
namespace {

struct MatMulCase {
  int64_t batch, m, n, k;
  bool trans_a, trans_b, broadcast_a, broadcast_b, bias;
  Activation act;
  int64_t pad;  // extra elements per stored row (lda/ldb/ldc beyond the dense width)
};

void run_matmul_case(const MatMulCase& c, DType dt, uint64_t seed) {
  const int64_t a_rows = c.trans_a ? c.k : c.m, a_cols = c.trans_a ? c.m : c.k;
  const int64_t b_rows = c.trans_b ? c.n : c.k, b_cols = c.trans_b ? c.k : c.n;
  const int64_t lda = a_cols + c.pad, ldb = b_cols + c.pad, ldc = c.n + c.pad;
  const int64_t stride_a = c.broadcast_a ? 0 : a_rows * lda, stride_b = c.broadcast_b ? 0 : b_rows * ldb;
  const int64_t stride_out = c.m * ldc;
  const int64_t a_batches = c.broadcast_a ? 1 : c.batch, b_batches = c.broadcast_b ? 1 : c.batch;

  auto a = quantize(random_floats(size_t(a_batches * a_rows * lda), seed), dt);
  auto b = quantize(random_floats(size_t(b_batches * b_rows * ldb), seed + 1), dt);
  auto bias = quantize(random_floats(size_t(c.n), seed + 2, -2.f, 2.f), dt);

  ThunkHarness h;
  MatMulParams p{};
  p.a = h.input_f32("a", a, dt);
  p.b = h.input_f32("b", b, dt);
  p.bias = c.bias ? h.input_f32("bias", bias, dt) : kNoBuffer;
  p.out = h.output("out", dt, size_t(c.batch * stride_out));
  p.batch = c.batch, p.m = c.m, p.n = c.n, p.k = c.k;
  p.lda = lda, p.ldb = ldb, p.ldc = ldc;
  p.stride_a = stride_a, p.stride_b = stride_b, p.stride_out = stride_out;
  p.dtype = dt;
  p.act = c.act;
  p.trans_a = c.trans_a, p.trans_b = c.trans_b;
  h.run(p, cpu_backend());

  // Compare only the written m x n block of each batch; the row padding of
  // out must keep its poison (the kernel may not write past n).
  auto got_all = h.result("out");
  std::vector<float> got;
  std::vector<double> ref;
  for (int64_t bi = 0; bi < c.batch; ++bi)
    for (int64_t i = 0; i < c.m; ++i)
      for (int64_t j = 0; j < c.n; ++j) {
        double s = c.bias ? bias[size_t(j)] : 0.0;
        for (int64_t kk = 0; kk < c.k; ++kk) {
          double av = c.trans_a ? a[size_t(bi * stride_a + kk * lda + i)] : a[size_t(bi * stride_a + i * lda + kk)];
          double bv = c.trans_b ? b[size_t(bi * stride_b + j * ldb + kk)] : b[size_t(bi * stride_b + kk * ldb + j)];
          s += av * bv;
        }
        ref.push_back(ref_activation(c.act, s));
        got.push_back(got_all[size_t(bi * stride_out + i * ldc + j)]);
      }
  expect_close(got, ref, tolerance(dt), "matmul " + std::string(dtype_name(dt)));
  for (int64_t bi = 0; bi < c.batch; ++bi)
    for (int64_t i = 0; i < c.m; ++i)
      for (int64_t j = c.n; j < ldc; ++j)
        EXPECT_TRUE(std::isnan(got_all[size_t(bi * stride_out + i * ldc + j)])) << "wrote row padding";
}

class CpuMatMul : public ::testing::TestWithParam<DType> {};

TEST_P(CpuMatMul, PlainOddSizes) {
  for (auto [m, n, k] : {std::tuple{1, 1, 1}, {7, 33, 129}, {33, 7, 1}, {129, 1, 7}})
    run_matmul_case({1, m, n, k, false, false, false, false, false, Activation::None, 0}, GetParam(), 10 + m);
}

TEST_P(CpuMatMul, TransposeFlags) {
  for (bool ta : {false, true})
    for (bool tb : {false, true}) {
      SCOPED_TRACE(testing::Message() << "trans_a " << ta << " trans_b " << tb);
      run_matmul_case({1, 7, 33, 129, ta, tb, false, false, false, Activation::None, 0}, GetParam(), 20);
      run_matmul_case({2, 33, 7, 9, ta, tb, false, false, false, Activation::None, 3}, GetParam(), 21);
    }
}

TEST_P(CpuMatMul, BatchBroadcast) {
  run_matmul_case({3, 7, 9, 33, false, true, false, true, false, Activation::None, 0}, GetParam(), 30);
  run_matmul_case({3, 7, 9, 33, true, false, true, false, false, Activation::None, 1}, GetParam(), 31);
}

TEST_P(CpuMatMul, BiasAndEachActivation) {
  for (Activation act : {Activation::None, Activation::Gelu, Activation::GeluTanh, Activation::Silu,
                         Activation::Relu, Activation::Tanh}) {
    SCOPED_TRACE(testing::Message() << "activation " << int(act));
    run_matmul_case({2, 7, 33, 17, false, true, false, true, true, act, 0}, GetParam(), 40 + int(act));
  }
}

TEST_P(CpuMatMul, ActivationWithoutBias) {
  run_matmul_case({1, 9, 5, 7, false, false, false, false, false, Activation::Silu, 2}, GetParam(), 50);
}

INSTANTIATE_TEST_SUITE_P(Dtypes, CpuMatMul, ::testing::Values(DType::F32, DType::F16, DType::BF16),
                         [](const auto& info) { return std::string(dtype_name(info.param)); });

}  // namespace
}  // namespace rlx::test
