// CPU gather and copy thunks: embedding lookups with out-of-range ids, and
// strided copies as permute, narrow, concat and casts between every dtype.
#include <gtest/gtest.h>

#include <numeric>

#include "thunk_harness.h"

namespace rlx::test {
namespace {

class CpuGather : public ::testing::TestWithParam<DType> {};

TEST_P(CpuGather, RowsAndOutOfRangeIdsGiveZeroRows) {
  const DType dt = GetParam();
  const int64_t vocab = 33, row = 7, n_ids = 13;
  auto table = quantize(random_floats(size_t(vocab * row), 1000), dt);
  auto ids = random_ints(size_t(n_ids), 1001, 0, int32_t(vocab - 1));
  ids[0] = int32_t(vocab - 1);
  ids[3] = -1;
  ids[7] = int32_t(vocab);
  ids[12] = 1 << 30;
  ThunkHarness h;
  GatherParams p{};
  p.table = h.input_f32("table", table, dt);
  p.ids = h.input_i32("ids", ids);
  p.out = h.output("out", dt, size_t(n_ids * row));
  p.n_ids = n_ids, p.vocab = vocab, p.row = row;
  p.dtype = dt;
  h.run(p, cpu_backend());
  std::vector<double> ref(size_t(n_ids * row), 0.0);
  for (int64_t i = 0; i < n_ids; ++i)
    if (ids[size_t(i)] >= 0 && ids[size_t(i)] < vocab)
      for (int64_t c = 0; c < row; ++c) ref[size_t(i * row + c)] = table[size_t(ids[size_t(i)] * row + c)];
  expect_close(h.result("out"), ref, 0.0, "gather");  // a lookup is exact
}

INSTANTIATE_TEST_SUITE_P(Dtypes, CpuGather, ::testing::Values(DType::F32, DType::F16, DType::BF16),
                         [](const auto& info) { return std::string(dtype_name(info.param)); });

TEST(CpuGather, I32Table) {
  const int64_t vocab = 5, row = 3;
  std::vector<int32_t> table(size_t(vocab * row));
  std::iota(table.begin(), table.end(), 1 << 25);  // beyond f32's exact integers
  std::vector<int32_t> ids = {4, 0, 9, 2};
  ThunkHarness h;
  GatherParams p{};
  p.table = h.input_i32("table", table);
  p.ids = h.input_i32("ids", ids);
  p.out = h.output("out", DType::I32, ids.size() * size_t(row));
  p.n_ids = int64_t(ids.size()), p.vocab = vocab, p.row = row;
  p.dtype = DType::I32;
  h.run(p, cpu_backend());
  auto got = i32_from_bytes(h.bytes("out"));
  for (size_t i = 0; i < ids.size(); ++i)
    for (int64_t c = 0; c < row; ++c)
      EXPECT_EQ(got[i * size_t(row) + size_t(c)], ids[i] < vocab ? table[size_t(ids[i] * row + c)] : 0);
}

// A copy over `shape` with the given element strides; returns the params.
CopyParams copy_params(const std::vector<int64_t>& shape, const std::vector<int64_t>& src_stride,
                       const std::vector<int64_t>& dst_stride, DType src_dt, DType dst_dt) {
  CopyParams p{};
  p.rank = int32_t(shape.size());
  p.n = 1;
  for (size_t d = 0; d < shape.size(); ++d) {
    p.shape[d] = shape[d], p.src_stride[d] = src_stride[d], p.dst_stride[d] = dst_stride[d];
    p.n *= shape[d];
  }
  p.src_dtype = src_dt, p.dst_dtype = dst_dt;
  return p;
}

class CpuCopy : public ::testing::TestWithParam<DType> {};

TEST_P(CpuCopy, PermuteThreeAxes) {
  // x [3, 7, 33] -> out [33, 3, 7] (perm {2, 0, 1}); iterate over out's shape.
  const DType dt = GetParam();
  const int64_t A = 3, B = 7, C = 33;
  auto x = quantize(random_floats(size_t(A * B * C), 1100), dt);
  ThunkHarness h;
  CopyParams p = copy_params({C, A, B}, {1, B * C, C}, {A * B, B, 1}, dt, dt);
  p.src = h.input_f32("x", x, dt);
  p.dst = h.output("out", dt, x.size());
  h.run(p, cpu_backend());
  std::vector<double> ref;
  for (int64_t c = 0; c < C; ++c)
    for (int64_t a = 0; a < A; ++a)
      for (int64_t b = 0; b < B; ++b) ref.push_back(x[size_t((a * B + b) * C + c)]);
  expect_close(h.result("out"), ref, 0.0, "permute");
}

TEST_P(CpuCopy, LargePermuteSwapsOuterAxes) {
  // x [33, 65, 41] -> out [65, 33, 41]: enough elements to run threaded.
  const DType dt = GetParam();
  const int64_t A = 33, B = 65, C = 41;
  auto x = quantize(random_floats(size_t(A * B * C), 1105), dt);
  ThunkHarness h;
  CopyParams p = copy_params({B, A, C}, {C, B * C, 1}, {A * C, C, 1}, dt, dt);
  p.src = h.input_f32("x", x, dt);
  p.dst = h.output("out", dt, x.size());
  h.run(p, cpu_backend());
  std::vector<double> ref;
  for (int64_t b = 0; b < B; ++b)
    for (int64_t a = 0; a < A; ++a)
      for (int64_t c = 0; c < C; ++c) ref.push_back(x[size_t((a * B + b) * C + c)]);
  expect_close(h.result("out"), ref, 0.0, "large permute");
}

TEST_P(CpuCopy, NarrowLastAxis) {
  // x [7, 33] -> x[:, 5:18]
  const DType dt = GetParam();
  auto x = quantize(random_floats(7 * 33, 1110), dt);
  ThunkHarness h;
  CopyParams p = copy_params({7, 13}, {33, 1}, {13, 1}, dt, dt);
  const uint64_t base = h.input_f32("x", x, dt);
  p.src = base + 5 * dtype_size(dt);  // the narrow's start folds into the byte offset
  p.dst = h.output("out", dt, 7 * 13);
  h.run(p, cpu_backend());
  std::vector<double> ref;
  for (int r = 0; r < 7; ++r)
    for (int c = 5; c < 18; ++c) ref.push_back(x[size_t(r * 33 + c)]);
  expect_close(h.result("out"), ref, 0.0, "narrow");
}

TEST_P(CpuCopy, ScalarAndSingleElement) {
  const DType dt = GetParam();
  auto x = quantize(random_floats(1, 1120), dt);
  ThunkHarness h;
  CopyParams p = copy_params({}, {}, {}, dt, dt);
  p.src = h.input_f32("x", x, dt);
  p.dst = h.output("out", dt, 1);
  h.run(p, cpu_backend());
  expect_close(h.result("out"), std::vector<double>{x[0]}, 0.0, "rank-0 copy");
}

INSTANTIATE_TEST_SUITE_P(Dtypes, CpuCopy, ::testing::Values(DType::F32, DType::F16, DType::BF16),
                         [](const auto& info) { return std::string(dtype_name(info.param)); });

TEST(CpuCopy, CastsBetweenFloatTypes) {
  const DType types[] = {DType::F32, DType::F16, DType::BF16};
  for (DType from : types)
    for (DType to : types) {
      auto x = quantize(random_floats(129, 1200, -300.f, 300.f), from);
      ThunkHarness h;
      CopyParams p = copy_params({129}, {1}, {1}, from, to);
      p.src = h.input_f32("x", x, from);
      p.dst = h.output("out", to, 129);
      h.run(p, cpu_backend());
      // Exact: the result is the nearest value of `to`, same as the host conversion.
      expect_close(h.result("out"), to_double(quantize(x, to)), 0.0,
                   std::string("cast ") + std::string(dtype_name(from)) + " -> " + std::string(dtype_name(to)));
    }
}

TEST(CpuCopy, CastsToAndFromI32) {
  std::vector<float> values = {0.f, 1.f, -1.f, 2.75f, -2.75f, 100.5f, -7.f, 2048.f, 33.f};
  for (DType ft : {DType::F32, DType::F16, DType::BF16}) {
    SCOPED_TRACE(std::string(dtype_name(ft)));
    {  // float -> i32 truncates toward zero
      ThunkHarness h;
      CopyParams p = copy_params({int64_t(values.size())}, {1}, {1}, ft, DType::I32);
      p.src = h.input_f32("x", values, ft);
      p.dst = h.output("out", DType::I32, values.size());
      h.run(p, cpu_backend());
      auto got = i32_from_bytes(h.bytes("out"));
      auto stored = quantize(values, ft);
      for (size_t i = 0; i < values.size(); ++i) EXPECT_EQ(got[i], int32_t(std::trunc(stored[i]))) << "index " << i;
    }
    {  // i32 -> float rounds to nearest
      std::vector<int32_t> ints = {0, 1, -1, 7, -129, 1000, 4097, 65519};
      ThunkHarness h;
      CopyParams p = copy_params({int64_t(ints.size())}, {1}, {1}, DType::I32, ft);
      p.src = h.input_i32("x", ints);
      p.dst = h.output("out", ft, ints.size());
      h.run(p, cpu_backend());
      std::vector<float> as_float(ints.begin(), ints.end());
      expect_close(h.result("out"), to_double(quantize(as_float, ft)), 0.0, "cast i32 -> float");
    }
  }
}

TEST(CpuCopy, I32CopyIsBitExact) {
  // Permute of i32 values beyond 2^24 (a float round trip would change them).
  std::vector<int32_t> x(7 * 5);
  std::iota(x.begin(), x.end(), (1 << 24) + 1);
  ThunkHarness h;
  CopyParams p = copy_params({5, 7}, {1, 5}, {7, 1}, DType::I32, DType::I32);
  p.src = h.input_i32("x", x);
  p.dst = h.output("out", DType::I32, x.size());
  h.run(p, cpu_backend());
  auto got = i32_from_bytes(h.bytes("out"));
  for (int64_t a = 0; a < 5; ++a)
    for (int64_t b = 0; b < 7; ++b) EXPECT_EQ(got[size_t(a * 7 + b)], x[size_t(b * 5 + a)]);
}

TEST(CpuCopy, ConcatAsTwoCopiesIntoOneBuffer) {
  // out [7, 5 + 9] = concat(a [7, 5], b [7, 9], axis 1), cast f32 -> bf16 on the way.
  auto a = random_floats(7 * 5, 1300), b = random_floats(7 * 9, 1301);
  ThunkHarness h;
  const uint64_t a_off = h.input_f32("a", a, DType::F32), b_off = h.input_f32("b", b, DType::F32);
  const uint64_t out = h.output("out", DType::BF16, 7 * 14);
  // The harness runs one thunk, so run each half into the same output in turn
  // and check the half it wrote; the other half stays NaN-poisoned.
  CopyParams pa = copy_params({7, 5}, {5, 1}, {14, 1}, DType::F32, DType::BF16);
  pa.src = a_off, pa.dst = out;
  h.run(pa, cpu_backend());
  auto got = h.result("out");
  for (int r = 0; r < 7; ++r)
    for (int c = 0; c < 14; ++c) {
      if (c < 5) EXPECT_EQ(got[size_t(r * 14 + c)], bf16_to_float(float_to_bf16(a[size_t(r * 5 + c)])));
      else EXPECT_TRUE(std::isnan(got[size_t(r * 14 + c)])) << "wrote outside its half";
    }
  CopyParams pb = copy_params({7, 9}, {9, 1}, {14, 1}, DType::F32, DType::BF16);
  pb.src = b_off, pb.dst = out + 5 * 2;
  h.run(pb, cpu_backend());
  got = h.result("out");
  for (int r = 0; r < 7; ++r)
    for (int c = 5; c < 14; ++c) EXPECT_EQ(got[size_t(r * 14 + c)], bf16_to_float(float_to_bf16(b[size_t(r * 9 + c - 5)])));
}

}  // namespace
}  // namespace rlx::test
