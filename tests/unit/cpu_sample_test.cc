// The CPU sample kernel against the host Sampler: the same token for every
// row, over odd vocabulary sizes, seeds, positions, temperatures, top-k and
// top-p, in f32, f16 and bf16 (the Sampler given the rounded logits).
#include <gtest/gtest.h>

#include <set>

#include "models/sampling.h"
#include "sample_check.h"

namespace rlx {
namespace {

TEST(CpuSample, EqualsTheHostSampler) {
  struct Size {
    int64_t vocab, rows;
  };
  const Size sizes[] = {{1, 3}, {7, 40}, {1000, 24}, {32003, 4}};
  int compared = 0;
  std::set<int32_t> seen_big;
  uint64_t seed = 1;
  for (const Size& sz : sizes)
    for (float temp : {0.3f, 1.f, 2.f})
      for (int top_k : {0, 1, 5, 50})
        for (float top_p : {1.f, 0.9f, 0.5f}) {
          ++seed;
          const DType dt = seed % 3 == 0 ? DType::F16 : seed % 3 == 1 ? DType::BF16 : DType::F32;
          const std::vector<float> x = test::normal_logits(size_t(sz.vocab * sz.rows), seed, 2.f, dt);
          const std::vector<int32_t> pos = test::random_ints(size_t(sz.rows), seed + 1000, 0, 1 << 20);
          const SampleAttrs a{temp, top_k, top_p, seed * 7919};
          const std::vector<int32_t> got = test::run_sample_op(Device::Cpu, dt, x, sz.vocab, pos, a);
          const Sampler host({temp, top_k, top_p, a.seed});
          for (int64_t r = 0; r < sz.rows; ++r) {
            const std::vector<float> row(x.begin() + r * sz.vocab, x.begin() + (r + 1) * sz.vocab);
            ASSERT_EQ(got[size_t(r)], host.next(row, pos[size_t(r)]))
                << "vocab " << sz.vocab << " row " << r << " T " << temp << " top-k " << top_k << " top-p " << top_p
                << " " << dtype_name(dt);
            ++compared;
            if (sz.vocab == 32003 && top_k == 0 && top_p == 1.f) seen_big.insert(got[size_t(r)]);
          }
        }
  EXPECT_EQ(compared, 36 * (3 + 40 + 24 + 4));
  EXPECT_GT(seen_big.size(), 6u) << "untruncated draws over a wide vocabulary should differ";
}

// Rows of one graph draw independently: their positions differ, so their
// uniforms do; a row's token depends only on its logits and position.
TEST(CpuSample, RowsDrawByTheirOwnPosition) {
  const int64_t vocab = 5, rows = 64;
  std::vector<float> x;
  for (int64_t r = 0; r < rows; ++r) x.insert(x.end(), {0.f, 0.f, 0.f, 0.f, 0.f});
  std::vector<int32_t> pos(rows);
  for (int64_t r = 0; r < rows; ++r) pos[size_t(r)] = int32_t(r * 3);
  const SampleAttrs a{1.f, 0, 1.f, 11};
  const std::vector<int32_t> got = test::run_sample_op(Device::Cpu, DType::F32, x, vocab, pos, a);
  std::set<int32_t> distinct(got.begin(), got.end());
  EXPECT_EQ(distinct.size(), 5u);
  std::vector<int32_t> same_pos(rows, 9);
  const std::vector<int32_t> one = test::run_sample_op(Device::Cpu, DType::F32, x, vocab, same_pos, a);
  EXPECT_EQ(std::set<int32_t>(one.begin(), one.end()).size(), 1u);
}

TEST(CpuSample, ShapeInferenceChecksTheOptions) {
  Graph g;
  ValueId x = g.input("x", {2, 9}, DType::F32);
  ValueId p = g.input("p", {2}, DType::I32);
  EXPECT_NE(test::error_of([&] { g.sample(x, p, {0.f, 0, 1.f, 0}); }).find("temperature"), std::string::npos);
  EXPECT_NE(test::error_of([&] { g.sample(x, p, {1.f, -2, 1.f, 0}); }).find("top-k"), std::string::npos);
  EXPECT_NE(test::error_of([&] { g.sample(x, p, {1.f, 0, 0.f, 0}); }).find("top-p"), std::string::npos);
  ValueId bad = g.input("bad", {3}, DType::I32);
  EXPECT_NE(test::error_of([&] { g.sample(x, bad, {1.f, 0, 1.f, 0}); }).find("positions"), std::string::npos);
}

}  // namespace
}  // namespace rlx
