// CPU binary, unary, softmax, reduce and softmax cross-entropy thunks vs
// double-precision references, in f32/f16/bf16.
#include <gtest/gtest.h>

#include <limits>

#include "reference_ops.h"
#include "thunk_harness.h"

namespace rlx::test {
namespace {

class CpuElementwise : public ::testing::TestWithParam<DType> {};

// Row-major contiguous strides of a shape, with 0 where `broadcast` has a 1.
std::vector<int64_t> strides_of(const std::vector<int64_t>& shape, const std::vector<bool>& broadcast) {
  std::vector<int64_t> s(shape.size());
  int64_t acc = 1;
  for (size_t d = shape.size(); d-- > 0;) {
    s[d] = broadcast[d] ? 0 : acc;
    if (!broadcast[d]) acc *= shape[d];
  }
  return s;
}

void run_binary(BinaryOp op, const std::vector<int64_t>& shape, const std::vector<bool>& bcast_a,
                const std::vector<bool>& bcast_b, DType dt, uint64_t seed) {
  const int rank = int(shape.size());
  auto sa = strides_of(shape, bcast_a), sb = strides_of(shape, bcast_b);
  int64_t n = 1, na = 1, nb = 1;
  for (int d = 0; d < rank; ++d) {
    n *= shape[size_t(d)];
    na *= bcast_a[size_t(d)] ? 1 : shape[size_t(d)];
    nb *= bcast_b[size_t(d)] ? 1 : shape[size_t(d)];
  }
  auto a = quantize(random_floats(size_t(na), seed), dt);
  // Divisors kept away from zero so Div is well conditioned.
  auto b = quantize(random_floats(size_t(nb), seed + 1, 0.5f, 2.f), dt);
  for (size_t i = 0; i < b.size(); i += 2) b[i] = -b[i];

  ThunkHarness h;
  BinaryParams p{};
  p.a = h.input_f32("a", a, dt);
  p.b = h.input_f32("b", b, dt);
  p.out = h.output("out", dt, size_t(n));
  p.n = n;
  p.rank = rank;
  for (int d = 0; d < rank; ++d) p.shape[d] = shape[size_t(d)], p.stride_a[d] = sa[size_t(d)], p.stride_b[d] = sb[size_t(d)];
  p.dtype = dt;
  p.op = op;
  h.run(p, cpu_backend());

  std::vector<double> ref(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) {
    int64_t rest = i, oa = 0, ob = 0;
    for (int d = rank - 1; d >= 0; --d) {
      int64_t idx = rest % shape[size_t(d)];
      rest /= shape[size_t(d)];
      oa += idx * sa[size_t(d)];
      ob += idx * sb[size_t(d)];
    }
    double x = a[size_t(oa)], y = b[size_t(ob)];
    ref[size_t(i)] = op == BinaryOp::Add ? x + y : op == BinaryOp::Sub ? x - y : op == BinaryOp::Mul ? x * y : x / y;
  }
  expect_close(h.result("out"), ref, tolerance(dt), "binary op " + std::to_string(int(op)));
}

TEST_P(CpuElementwise, BinaryEachOpSameShape) {
  for (BinaryOp op : {BinaryOp::Add, BinaryOp::Sub, BinaryOp::Mul, BinaryOp::Div})
    run_binary(op, {7, 33}, {false, false}, {false, false}, GetParam(), 100 + int(op));
}

TEST_P(CpuElementwise, BinaryBroadcasting) {
  const DType dt = GetParam();
  run_binary(BinaryOp::Add, {3, 7, 33}, {false, false, false}, {false, true, false}, dt, 110);  // [3,1,33]
  run_binary(BinaryOp::Mul, {3, 7, 33}, {false, false, false}, {true, true, false}, dt, 111);   // bias row
  run_binary(BinaryOp::Sub, {5, 9}, {true, false}, {false, true}, dt, 112);                    // outer product
  run_binary(BinaryOp::Div, {2, 3, 5, 7}, {false, true, false, true}, {true, false, true, false}, dt, 113);
  run_binary(BinaryOp::Add, {1}, {false}, {false}, dt, 114);
  run_binary(BinaryOp::Add, {129}, {false}, {true}, dt, 115);  // scalar broadcast on the inner axis
}

TEST_P(CpuElementwise, UnaryEachActivation) {
  const DType dt = GetParam();
  for (Activation act : {Activation::None, Activation::Gelu, Activation::GeluTanh, Activation::Silu,
                         Activation::Relu, Activation::Tanh}) {
    for (int64_t n : {1, 7, 1029}) {
      auto x = quantize(random_floats(size_t(n), 200 + uint64_t(n), -4.f, 4.f), dt);
      ThunkHarness h;
      UnaryParams p{};
      p.x = h.input_f32("x", x, dt);
      p.out = h.output("out", dt, size_t(n));
      p.n = n;
      p.dtype = dt;
      p.act = act;
      h.run(p, cpu_backend());
      std::vector<double> ref;
      for (float v : x) ref.push_back(ref_activation(act, v));
      expect_close(h.result("out"), ref, tolerance(dt), "unary act " + std::to_string(int(act)) + " n " + std::to_string(n));
    }
  }
}

TEST_P(CpuElementwise, SoftmaxRows) {
  const DType dt = GetParam();
  for (auto [rows, cols] : {std::pair{1, 1}, {7, 33}, {3, 129}}) {
    // Large offsets: an unstable softmax would overflow.
    auto x = quantize(random_floats(size_t(rows * cols), 300 + uint64_t(cols), 60.f, 80.f), dt);
    ThunkHarness h;
    SoftmaxParams p{};
    p.x = h.input_f32("x", x, dt);
    p.out = h.output("out", dt, size_t(rows * cols));
    p.rows = rows, p.cols = cols;
    p.dtype = dt;
    h.run(p, cpu_backend());
    std::vector<double> ref(x.size());
    for (int r = 0; r < rows; ++r) {
      double mx = -1e300, sum = 0;
      for (int c = 0; c < cols; ++c) mx = std::max(mx, double(x[size_t(r * cols + c)]));
      for (int c = 0; c < cols; ++c) sum += std::exp(x[size_t(r * cols + c)] - mx);
      for (int c = 0; c < cols; ++c) ref[size_t(r * cols + c)] = std::exp(x[size_t(r * cols + c)] - mx) / sum;
    }
    expect_close(h.result("out"), ref, tolerance(dt), "softmax " + std::to_string(rows) + "x" + std::to_string(cols));
  }
}

TEST_P(CpuElementwise, ReduceSumMeanMax) {
  const DType dt = GetParam();
  for (ReduceKind kind : {ReduceKind::Sum, ReduceKind::Mean, ReduceKind::Max})
    for (auto [outer, len, inner] : {std::tuple{1, 1, 1}, {3, 7, 33}, {1, 129, 1}, {7, 33, 1}, {1, 5, 129}}) {
      auto x = quantize(random_floats(size_t(outer * len * inner), 400 + uint64_t(len * inner)), dt);
      ThunkHarness h;
      ReduceParams p{};
      p.x = h.input_f32("x", x, dt);
      p.out = h.output("out", dt, size_t(outer * inner));
      p.outer = outer, p.len = len, p.inner = inner;
      p.kind = kind;
      p.dtype = dt;
      h.run(p, cpu_backend());
      std::vector<double> ref(size_t(outer * inner));
      for (int o = 0; o < outer; ++o)
        for (int i = 0; i < inner; ++i) {
          double s = kind == ReduceKind::Max ? -1e300 : 0.0;
          for (int l = 0; l < len; ++l) {
            double v = x[size_t((o * len + l) * inner + i)];
            s = kind == ReduceKind::Max ? std::max(s, v) : s + v;
          }
          ref[size_t(o * inner + i)] = kind == ReduceKind::Mean ? s / len : s;
        }
      expect_close(h.result("out"), ref, tolerance(dt),
                   "reduce kind " + std::to_string(int(kind)) + " [" + std::to_string(outer) + "," +
                       std::to_string(len) + "," + std::to_string(inner) + "]");
    }
}

TEST_P(CpuElementwise, SoftmaxCrossEntropyWithBadLabels) {
  const DType dt = GetParam();
  const int64_t rows = 9, classes = 129;
  auto logits = quantize(random_floats(size_t(rows * classes), 500, -8.f, 8.f), dt);
  auto labels = random_ints(size_t(rows), 501, 0, int32_t(classes - 1));
  labels[2] = -1;
  labels[5] = int32_t(classes);
  ThunkHarness h;
  SoftmaxCEParams p{};
  p.logits = h.input_f32("logits", logits, dt);
  p.labels = h.input_i32("labels", labels);
  p.out = h.output("out", dt, size_t(rows));
  p.rows = rows, p.classes = classes;
  p.dtype = dt;
  h.run(p, cpu_backend());
  std::vector<double> ref(static_cast<size_t>(rows));
  for (int64_t r = 0; r < rows; ++r) {
    if (labels[size_t(r)] < 0 || labels[size_t(r)] >= classes) {
      ref[size_t(r)] = std::numeric_limits<double>::quiet_NaN();
      continue;
    }
    double mx = -1e300, sum = 0;
    for (int64_t c = 0; c < classes; ++c) mx = std::max(mx, double(logits[size_t(r * classes + c)]));
    for (int64_t c = 0; c < classes; ++c) sum += std::exp(logits[size_t(r * classes + c)] - mx);
    ref[size_t(r)] = mx + std::log(sum) - logits[size_t(r * classes + labels[size_t(r)])];
  }
  // expect_close requires NaN exactly where the reference has NaN.
  expect_close(h.result("out"), ref, tolerance(dt), "softmax_xent");
}

INSTANTIATE_TEST_SUITE_P(Dtypes, CpuElementwise, ::testing::Values(DType::F32, DType::F16, DType::BF16),
                         [](const auto& info) { return std::string(dtype_name(info.param)); });

}  // namespace
}  // namespace rlx::test
