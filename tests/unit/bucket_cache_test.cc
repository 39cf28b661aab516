// The bucket helper: bucket shapes, executables compiled on first use at
// several (batch, seq) buckets on one arena sized for the largest, params
// loaded once and seen by every bucket, and the arena grown on demand.
#include "models/bucket_cache.h"

#include <gtest/gtest.h>

#include <cmath>

#include "backends/backend.h"
#include "test_util.h"
#include "thunks/thunk.h"

namespace rlx {
namespace {

constexpr int64_t kIn = 7, kOut = 5;

// y = x @ w^T + b + 0.25 * position: a params region shared by every bucket
// and a constant (the positions) that differs per bucket.
Graph bucket_graph(const Bucket& bk) {
  Graph g;
  ValueId x = g.input("x", {bk.batch, bk.seq, kIn}, DType::F32);
  std::vector<float> pos(size_t(bk.seq));
  for (int64_t i = 0; i < bk.seq; ++i) pos[size_t(i)] = 0.25f * float(i);
  ValueId ramp = g.reshape(g.constant_f32({bk.seq}, DType::F32, pos, "positions"), {bk.seq, 1});
  ValueId y = g.matmul(x, g.param("w", {kOut, kIn}, DType::F32), false, true);
  g.output("y", g.add(g.add(y, g.param("b", {kOut}, DType::F32)), ramp));
  return g;
}

std::vector<double> reference(const std::vector<float>& x, const std::vector<float>& w, const std::vector<float>& b,
                              const Bucket& bk) {
  std::vector<double> y;
  for (int64_t r = 0; r < bk.batch * bk.seq; ++r)
    for (int64_t j = 0; j < kOut; ++j) {
      double acc = b[size_t(j)] + 0.25 * double(r % bk.seq);
      for (int64_t k = 0; k < kIn; ++k) acc += double(x[size_t(r * kIn + k)]) * w[size_t(j * kIn + k)];
      y.push_back(acc);
    }
  return y;
}

// One run of bucket bk against the host reference, output poisoned first.
void check_run(Executable& exe, const Bucket& bk, const std::vector<float>& w, const std::vector<float>& b,
               uint64_t seed) {
  for (const Binding& o : exe.schedule().output_bindings) {
    auto nan = test::nan_bytes(size_t(numel(o.shape)), o.dtype);
    exe.backend().write_binding(o, nan.data());
  }
  auto x = test::random_floats(size_t(bk.batch * bk.seq * kIn), seed);
  auto out = exe.run({{"x", HostTensor::from_f32({bk.batch, bk.seq, kIn}, x)}});
  std::vector<float> got = out.at("y").to_f32();
  ASSERT_EQ(got.size(), size_t(bk.batch * bk.seq * kOut));
  EXPECT_FALSE(std::all_of(got.begin(), got.end(), [](float v) { return v == 0; }));
  test::expect_close(got, reference(x, w, b, bk), 1e-5,
                     "bucket " + std::to_string(bk.batch) + "x" + std::to_string(bk.seq));
}

TEST(BucketFor, BatchesInPowersOfTwoSequencesInEighthsOfADoubling) {
  EXPECT_EQ(bucket_for(1, 1, 512, 32), (Bucket{1, 16}));     // seq at least 16
  EXPECT_EQ(bucket_for(3, 17, 256, 32), (Bucket{4, 32}));
  EXPECT_EQ(bucket_for(5, 64, 256, 32), (Bucket{8, 64}));    // exact steps stay
  EXPECT_EQ(bucket_for(5, 33, 256, 32), (Bucket{8, 48}));    // multiples of 16 up to 128
  EXPECT_EQ(bucket_for(5, 113, 256, 32), (Bucket{8, 128}));
  EXPECT_EQ(bucket_for(33, 129, 256, 32), (Bucket{32, 160}));  // batch capped at max_batch; steps of 32 past 128
  EXPECT_EQ(bucket_for(2, 257, 1024, 32), (Bucket{2, 320}));   // steps of 64 past 256
  EXPECT_EQ(bucket_for(7, 300, 310, 1024), (Bucket{8, 310}));  // seq capped at the limit
  EXPECT_EQ(bucket_for(1, 9, 12, 8), (Bucket{1, 12}));         // a limit below 16 wins
  // Every length lands in a bucket at least as long and less than one step
  // (16, or an eighth of the power of two above it: under a quarter of the
  // length) longer.
  for (int64_t n = 1; n <= 2048; ++n) {
    const int64_t seq = bucket_for(1, n, 4096, 1).seq;
    ASSERT_GE(seq, n);
    ASSERT_EQ(seq % 16, 0) << n;
    ASSERT_LT(seq - n, std::max<int64_t>(16, n / 4)) << n;
  }
  EXPECT_NE(test::error_of([] { bucket_for(1, 400, 384, 32); }).find("400 tokens exceed the limit 384"),
            std::string::npos);
  EXPECT_NE(test::error_of([] { bucket_for(0, 3, 384, 32); }).find("empty bucket request"), std::string::npos);
}

TEST(BucketCache, BucketsShareOneArenaAndOneCopyOfTheParams) {
  const auto w = test::random_floats(size_t(kOut * kIn), 1), b = test::random_floats(size_t(kOut), 2);
  int loads = 0;
  std::vector<Bucket> built;
  CompileOptions co;
  co.device = Device::Cpu;
  BucketCache cache(
      "test",
      [&](const Bucket& bk) {
        built.push_back(bk);
        return bucket_graph(bk);
      },
      [&](Executable& exe, const Graph&) {
        ++loads;
        exe.set_param_f32("w", w.data(), w.size());
        exe.set_param_f32("b", b.data(), b.size());
      },
      co);
  EXPECT_EQ(cache.arena_bytes(), 0u);
  EXPECT_NE(test::error_of([&] { cache.get({1, 16}); }).find("test: bucket 1x16 is larger than the arena's"),
            std::string::npos);

  const Bucket largest{4, 32}, little{1, 16}, mid{2, 32};
  cache.reserve(largest);
  EXPECT_EQ(cache.arena_for(), largest);
  ASSERT_EQ(built.size(), 1u);  // the largest bucket was built to plan the arena, not compiled
  EXPECT_EQ(built[0], largest);
  EXPECT_EQ(cache.compiled(), 0u);

  Executable& a = cache.get(little);
  Executable& m = cache.get(mid);
  EXPECT_EQ(&cache.get(little), &a) << "a bucket is compiled once";
  EXPECT_EQ(cache.compiled(), 2u);
  EXPECT_EQ(cache.used(), (std::vector<Bucket>{little, mid, little}));
  EXPECT_EQ(loads, 1) << "the params are loaded once, into the shared arena";
  EXPECT_EQ(cache.params_loaded(), 1);
  // One arena, sized for the largest bucket, not for the first one compiled.
  EXPECT_EQ(cache.arena_bytes(), planned_arena_bytes(bucket_graph(largest), co));
  EXPECT_GT(cache.arena_bytes(), planned_arena_bytes(bucket_graph(little), co));
  EXPECT_EQ(a.schedule().arena_bytes, planned_arena_bytes(bucket_graph(little), co));
  // Interleaved runs: the mid bucket reads the params the first one loaded,
  // and each bucket puts its own positions back.
  for (int round = 0; round < 2; ++round) {
    check_run(m, mid, w, b, 10 + uint64_t(round));
    check_run(a, little, w, b, 20 + uint64_t(round));
  }
  // A bucket inside the reserved one does not grow the arena.
  cache.reserve({2, 16});
  EXPECT_EQ(cache.compiled(), 2u);
  EXPECT_EQ(cache.arena_for(), largest);
  EXPECT_EQ(loads, 1);
}

TEST(BucketCache, GrowingTheArenaRecompilesAndReloadsTheParams) {
  const auto w = test::random_floats(size_t(kOut * kIn), 3), b = test::random_floats(size_t(kOut), 4);
  int loads = 0;
  CompileOptions co;
  co.device = Device::Cpu;
  BucketCache cache(
      "test", bucket_graph,
      [&](Executable& exe, const Graph&) {
        ++loads;
        exe.set_param_f32("w", w.data(), w.size());
        exe.set_param_f32("b", b.data(), b.size());
      },
      co);
  cache.reserve({1, 16});
  check_run(cache.get({1, 16}), {1, 16}, w, b, 30);
  const uint64_t small_arena = cache.arena_bytes();
  EXPECT_NE(test::error_of([&] { cache.get({8, 16}); }).find("test: bucket 8x16 is larger than the arena's (1x16)"),
            std::string::npos);
  // Growing in batch keeps the seq already reserved: the arena covers both.
  cache.reserve({8, 16});
  cache.reserve({2, 64});
  EXPECT_EQ(cache.arena_for(), (Bucket{8, 64}));
  EXPECT_EQ(cache.compiled(), 0u) << "the executables on the old arena are dropped";
  check_run(cache.get({8, 64}), {8, 64}, w, b, 31);
  check_run(cache.get({1, 16}), {1, 16}, w, b, 32);
  EXPECT_EQ(loads, 2) << "the params are loaded once per arena";
  EXPECT_GT(cache.arena_bytes(), small_arena);
  EXPECT_EQ(cache.arena_bytes(), planned_arena_bytes(bucket_graph({8, 64}), co));
}

}  // namespace
}  // namespace rlx
